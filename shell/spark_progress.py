"""Progress of box.spark jobs (stages and tasks), drawn on a terminal's stderr.

The launcher puts a SparkProgressBar on the box.spark progress hooks; the
runner's control thread calls it every ~0.3 s with the jobs that a fiber is
waiting for (box.spark.sql, box.spark.wait) — so a console statement waiting
for Spark shows a bar per running stage, and background jobs draw nothing
over the prompt. The bar is transient: it disappears when the job ends, before
the console prints the result. Jobs shorter than MIN_SECONDS draw nothing.
Like the recovery bar, nothing is drawn when stderr is not a terminal.
"""
from __future__ import annotations

import sys
import threading

MIN_SECONDS = 0.5


def stage_label(job_id: int, title: str, stage) -> str:
    title = " ".join(title.split())
    if len(title) > 40:
        title = title[:39] + "…"
    return f"job {job_id} stage {stage.stage_id}: {title}"


class SparkProgressBar:
    def __init__(self, stream=None, min_seconds: float = MIN_SECONDS):
        self.stream = stream or sys.stderr
        self.min_seconds = min_seconds
        self._progress = None
        self._tasks: dict[tuple[int, int], int] = {}   # (job, stage) -> rich task id
        self._lock = threading.Lock()

    def __call__(self, snapshot) -> None:
        """The box.spark progress hook: `snapshot` lists JobProgress records."""
        with self._lock:
            shown = [job for job in snapshot if job.elapsed >= self.min_seconds and job.stages]
            if not shown:
                self._close()
                return
            if not self.stream.isatty():
                return
            self._draw(shown)

    def _draw(self, jobs) -> None:
        if self._progress is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
            )
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TextColumn("tasks"),
                                      TextColumn("{task.fields[active]} running"),
                                      TimeElapsedColumn(),
                                      console=Console(file=self.stream), transient=True)
            self._progress.start()
        live = set()
        for job in jobs:
            for stage in job.stages:
                key = (job.job_id, stage.stage_id)
                live.add(key)
                task = self._tasks.get(key)
                if task is None:
                    task = self._tasks[key] = self._progress.add_task(
                        stage_label(job.job_id, job.title, stage), total=stage.tasks,
                        active=0)
                self._progress.update(task, total=stage.tasks, completed=stage.done,
                                      active=stage.active)
        for key in [k for k in self._tasks if k not in live]:
            self._progress.remove_task(self._tasks.pop(key))

    def _close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self._tasks.clear()

    def close(self) -> None:
        with self._lock:
            self._close()
