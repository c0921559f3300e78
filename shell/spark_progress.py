"""Progress of box.spark jobs, drawn on a terminal's stderr.

The launcher puts a SparkProgressBar on the box.spark progress hooks; the
runner's control thread calls it every ~0.3 s with the jobs that a fiber is
waiting for (box.spark.sql, box.spark.wait) — so a console statement waiting
for Spark shows, with a spinner, what it waits for: the start of Spark (the
JVM, then the SparkSession: 10-20 s on first use), the planning of the query,
then a bar per running stage with its tasks. Background jobs draw nothing over
the prompt. The lines are transient: they disappear when the job ends or the
statement is interrupted, before the console prints the result. Jobs shorter
than MIN_SECONDS draw nothing. Like the recovery bar, nothing is drawn when
stderr is not a terminal.
"""
from __future__ import annotations

import sys
import threading

MIN_SECONDS = 0.5


def short_title(title: str, width: int = 40) -> str:
    title = " ".join(title.split())
    return title if len(title) <= width else title[:width - 1] + "…"


def stage_label(job_id: int, title: str, stage) -> str:
    return f"job {job_id} stage {stage.stage_id}: {short_title(title)}"


def phase_label(job_id: int, title: str, phase: str) -> str:
    return f"job {job_id}: {short_title(title)} — {phase}"


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class SparkProgressBar:
    def __init__(self, stream=None, min_seconds: float = MIN_SECONDS):
        self.stream = stream or sys.stderr
        self.min_seconds = min_seconds
        self._progress = None
        self._tasks: dict[tuple[int, int | None], int] = {}   # (job, stage) -> rich task
        self._lock = threading.Lock()

    def __call__(self, snapshot) -> None:
        """The box.spark progress hook: `snapshot` lists JobProgress records."""
        with self._lock:
            shown = [job for job in snapshot if job.elapsed >= self.min_seconds
                     and (job.stages or getattr(job, "phase", None))]
            if not shown:
                self._close()
                return
            if not self.stream.isatty():
                return
            self._draw(shown)

    def _draw(self, jobs) -> None:
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                      BarColumn(), TextColumn("{task.fields[counts]}"),
                                      TextColumn("{task.fields[clock]}"),
                                      console=Console(file=self.stream), transient=True,
                                      redirect_stdout=False, redirect_stderr=False)
            self._progress.start()
        live = set()
        for job in jobs:
            elapsed = clock(job.elapsed)
            if not job.stages:
                # Before its first stage: one line saying what the job waits for,
                # with a pulsing bar (no total).
                key = (job.job_id, None)
                live.add(key)
                label = phase_label(job.job_id, job.title, job.phase)
                task = self._tasks.get(key)
                if task is None:
                    task = self._tasks[key] = self._progress.add_task(
                        label, total=None, counts="", clock=elapsed)
                self._progress.update(task, description=label, clock=elapsed)
                continue
            for stage in job.stages:
                key = (job.job_id, stage.stage_id)
                live.add(key)
                counts = f"{stage.done}/{stage.tasks} tasks, {stage.active} running"
                task = self._tasks.get(key)
                if task is None:
                    task = self._tasks[key] = self._progress.add_task(
                        stage_label(job.job_id, job.title, stage), total=stage.tasks,
                        counts=counts, clock=elapsed)
                self._progress.update(task, total=stage.tasks, completed=stage.done,
                                      counts=counts, clock=elapsed)
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
