"""A progress bar for long recoveries, drawn on a terminal's stderr.

Recovery runs on the tx thread before anything else is served, so the bar is simply
updated from the recovery callback; rich redraws it. Short recoveries (under
MIN_BYTES of files) draw nothing, so ordinary starts stay quiet.
"""
from __future__ import annotations

import sys

MIN_BYTES = 64 * 1024 * 1024


class RecoveryBar:
    def __init__(self, stream=None, min_bytes: int = MIN_BYTES):
        self.stream = stream or sys.stderr
        self.min_bytes = min_bytes
        self._progress = None
        self._task = None

    def __call__(self, progress) -> None:
        """The Box.on_recovery_progress hook."""
        if progress.bytes_total < self.min_bytes or not self.stream.isatty():
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
            self._progress = Progress(TextColumn("recovering"), BarColumn(),
                                      TextColumn("{task.fields[rows]:,} rows"),
                                      TimeRemainingColumn(),
                                      console=Console(file=self.stream), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("recovery", total=progress.bytes_total,
                                                 rows=0)
        self._progress.update(self._task, completed=progress.bytes_done, rows=progress.rows)
        if progress.bytes_done >= progress.bytes_total:
            self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
