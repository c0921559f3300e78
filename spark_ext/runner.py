"""Spark jobs inside a running instance: the session, job threads, cancel, progress.

No Lua and no box state here: lua/box/spark.py is the glue. What this module
guarantees is the threading rule of the server (DESIGN §1): no py4j call, no
pyspark import, no row conversion ever runs on the tx thread.

Threads:
* the control thread owns the SparkSession: it starts it (pyspark is imported
  there, on first use), stops it, cancels job groups, polls stage progress
  every PROGRESS_PERIOD while jobs run, and shuts the JVM down;
* one daemon thread per job runs `work(spark, job)`, inside its own Spark job
  group (setJobGroup binds the group to the calling thread, which is why jobs
  get threads of their own and cancelJobGroup is sent from the control thread),
  with a SparkSession of its own (newSession: same SparkContext, own temp
  views and SQL settings), so concurrent jobs cannot swap each other's views.

Job records (`Job`) belong to the tx thread: worker threads never change them,
they `post` updates (Scheduler.call_soon_threadsafe), and `on_change(job)` runs
in tx after each, so the glue can wake the fibers that wait. A job's
`cancel_event` is the one thing shared across threads (a threading.Event).
"""
from __future__ import annotations

import itertools
import os
import queue
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

QUEUED, STARTING, RUNNING, DONE, FAILED, CANCELLED = (
    "queued", "starting", "running", "done", "failed", "cancelled")
FINAL_STATES = frozenset((DONE, FAILED, CANCELLED))
PROGRESS_PERIOD = 0.3
KEEP_FINISHED = 100          # finished jobs kept for status()/jobs()


class JobCancelled(Exception):
    plain_message = True      # error_text() shows the message as it is

    def __init__(self, job_id: int):
        super().__init__(f"job {job_id} was cancelled")


class SparkStartError(RuntimeError):
    plain_message = True


@dataclass
class Job:
    id: int
    kind: str                       # 'sql', 'run'
    title: str                      # the query, or the job file and its args
    group: str                      # the Spark job group
    state: str = QUEUED
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    result: Any = None
    error: str | None = None
    stages: dict = field(default_factory=dict)   # stage id -> StageProgress
    cancel_event: threading.Event = field(default_factory=threading.Event)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def info(self) -> dict:
        """Plain data for box.spark.jobs() / status()."""
        end = self.finished or time.time()
        info = {"id": self.id, "kind": self.kind, "title": self.title, "state": self.state,
                "created": self.created,
                "elapsed": round(end - (self.started or self.created), 3)}
        if self.error is not None:
            info["error"] = self.error
        if self.stages:
            info["tasks"] = sum(s.tasks for s in self.stages.values())
            info["tasks_done"] = sum(s.done for s in self.stages.values())
            info["stages"] = len(self.stages)
        return info


@dataclass(frozen=True)
class StageProgress:
    stage_id: int
    name: str
    tasks: int
    done: int
    active: int
    failed: int


@dataclass(frozen=True)
class JobProgress:
    """What a progress hook gets for one running job."""
    job_id: int
    title: str
    elapsed: float
    stages: tuple[StageProgress, ...]


def error_text(exc: BaseException) -> str:
    """An exception as a message for Lua. Spark's errors carry the JVM stack
    (and analysis errors the query plan) after their message; a console user
    wants the message, plus the query with its caret for parse errors. Python
    errors of a job file keep their type name."""
    if not type(exc).__module__.startswith(("pyspark", "py4j")):
        if getattr(exc, "plain_message", False):
            return str(exc)
        detail = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return f"{type(exc).__name__}: {detail}"
    text = str(exc).strip() or type(exc).__name__
    text = text.split("\n\tat ")[0].split("\nJVM stacktrace:")[0].strip()
    first, _, rest = text.partition("\n")
    if "== SQL ==" in rest:
        return first + "\n" + rest[rest.index("== SQL =="):].rstrip()
    return first if first.startswith("[") else text


def job_session(base):
    """A session of the job's own over the shared SparkContext, active in the
    calling thread (data sources are looked up in the active session)."""
    session = base.newSession()
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)
    from .sources import register
    register(session)
    return session


class SparkRunner:
    """Session and jobs of one instance. Methods without a thread named in
    their doc are for the tx thread and never block."""

    def __init__(self, post: Callable[..., None], *, master: str, conf: dict[str, str],
                 app_name: str = "spindle", on_change: Callable[[Job], None] | None = None,
                 progress_hooks: list | None = None):
        self.post = post
        self.master, self.conf = master, dict(conf)
        self.app_name = app_name
        self.on_change = on_change or (lambda job: None)
        self.progress_hooks = progress_hooks if progress_hooks is not None else []
        self.jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._group_prefix = f"spindle-{os.getpid()}-{id(self):x}"
        self._lock = threading.Lock()        # guards the fields below (all threads)
        self._spark = None
        self._session_future: Future | None = None
        self._running: dict[int, tuple[str, str, float, threading.Event]] = {}
        self._watched: set[int] = set()      # jobs a fiber waits for (drawn by hooks)
        self._drawn: list[JobProgress] = []   # what the hooks were last given
        self._commands: queue.Queue = queue.Queue()
        self._closed = False
        self._control = threading.Thread(target=self._control_main, name="spark-control",
                                         daemon=True)
        self._control.start()

    # ------------------------------------------------------------------ tx

    def submit(self, kind: str, title: str, work: Callable[[Any, Job], Any]) -> Job:
        """Start `work(spark, job)` in a job thread; its return value (plain
        data) becomes job.result."""
        if self._closed:
            raise RuntimeError("box.spark is shut down")
        job_id = next(self._ids)
        job = Job(job_id, kind, title, f"{self._group_prefix}-{job_id}")
        self.jobs[job_id] = job
        self._forget_old()
        threading.Thread(target=self._job_main, args=(job, work), daemon=True,
                         name=f"spark-job-{job_id}").start()
        return job

    def cancel(self, job_id: int) -> bool:
        """Ask a job to stop; False if it has already ended. Its state becomes
        'cancelled' when its thread gives up."""
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return False
        job.cancel_event.set()
        self._commands.put(("cancel", job.group))
        return True

    def watch(self, job_id: int, watched: bool) -> None:
        """A fiber waits for this job (its progress is drawn) or stopped waiting."""
        with self._lock:
            (self._watched.add if watched else self._watched.discard)(job_id)

    def active(self) -> list[Job]:
        return [job for job in self.jobs.values() if not job.final]

    def control(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None],
                                                               None]) -> None:
        """Run `fn()` on the control thread (where the session lives); `done(result,
        error)` then runs on tx."""
        self._commands.put(("call", fn, done))

    def reconfigure(self, master: str, conf: dict[str, str]) -> bool:
        """New settings for the next session; True if a running session must be
        stopped for them (the caller then does it with `control(stop_session)`)."""
        changed = (master, conf) != (self.master, self.conf)
        self.master, self.conf = master, dict(conf)
        with self._lock:
            return changed and self._spark is not None

    def _forget_old(self) -> None:
        finished = [job_id for job_id, job in self.jobs.items() if job.final]
        for job_id in finished[:-KEEP_FINISHED]:
            del self.jobs[job_id]

    # tx-side handlers of what worker threads post
    def _set_state(self, job_id: int, state: str, started: float | None = None) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return
        job.state = state
        if started is not None:
            job.started = started
        self.on_change(job)

    def _finish(self, job_id: int, state: str, result: Any, error: str | None) -> None:
        job = self.jobs.get(job_id)
        if job is None:
            return
        job.state, job.result, job.error, job.finished = state, result, error, time.time()
        self.on_change(job)

    def _set_stages(self, job_id: int, stages: dict) -> None:
        job = self.jobs.get(job_id)
        if job is not None and not job.final:
            job.stages = stages

    # ---------------------------------------------------------- job threads

    def session(self, cancel: threading.Event | None = None):
        """The SparkSession, started on the control thread if needed. Job threads
        only; gives up when `cancel` is set."""
        with self._lock:
            if self._spark is not None:
                return self._spark
            future = self._session_future
            if future is None:
                future = self._session_future = Future()
                self._commands.put(("start", future))
        while True:
            try:
                return future.result(timeout=0.2)
            except TimeoutError:
                if cancel is not None and cancel.is_set():
                    raise JobCancelled(-1) from None
                if self._closed:
                    raise RuntimeError("box.spark is shut down") from None

    def call_in_tx(self, fn: Callable[[], Any], cancel: threading.Event | None = None) -> Any:
        """Run `fn()` on the tx thread (it must not block: a read-view capture)
        and return its result. Job threads only."""
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                outcome["result"] = fn()
            except BaseException as exc:   # noqa: BLE001 - handed back to the job
                outcome["error"] = exc
            done.set()
        self.post(run)
        while not done.wait(0.2):
            if cancel is not None and cancel.is_set():
                raise JobCancelled(-1)
            if self._closed:
                raise RuntimeError("box.spark is shut down")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    def _job_main(self, job: Job, work: Callable) -> None:
        cancel = job.cancel_event
        try:
            self.post(self._set_state, job.id, STARTING)
            spark = job_session(self.session(cancel))
            if cancel.is_set():
                raise JobCancelled(job.id)
            spark.sparkContext.setJobGroup(job.group, job.title[:200], interruptOnCancel=True)
            with self._lock:
                self._running[job.id] = (job.group, job.title, time.monotonic(), cancel)
            self._commands.put(("wake",))       # the control thread starts polling
            self.post(self._set_state, job.id, RUNNING, time.time())
            result = work(spark, job)
            if cancel.is_set():
                raise JobCancelled(job.id)
            self._end(job, DONE, result, None)
        except BaseException as exc:   # noqa: BLE001 - every outcome goes back to tx
            if cancel.is_set():
                self._end(job, CANCELLED, None, f"job {job.id} was cancelled")
            else:
                self._end(job, FAILED, None, error_text(exc))

    def _end(self, job: Job, state: str, result: Any, error: str | None) -> None:
        # The job's bars go before tx hears of the end: the console prints the
        # result right after, and a bar drawn over it would garble it.
        with self._lock:
            self._running.pop(job.id, None)
            drawn = [p for p in self._drawn if p.job_id != job.id]
            changed = len(drawn) != len(self._drawn)
        if changed:
            self._report(drawn)
        self.post(self._finish, job.id, state, result, error)

    # ------------------------------------------------------- control thread

    def _control_main(self) -> None:
        next_poll = 0.0
        while True:
            with self._lock:
                busy = bool(self._running)
            timeout = max(0.0, next_poll - time.monotonic()) if busy else None
            try:
                command = self._commands.get(timeout=timeout)
            except queue.Empty:
                command = None
            if busy and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + PROGRESS_PERIOD
                try:
                    self._poll_progress()
                except Exception:   # noqa: BLE001 - e.g. the session stopped meanwhile
                    pass
            if command is None:
                continue
            kind = command[0]
            if kind == "stop":
                try:
                    self._stop_session(jvm=True)
                finally:
                    command[1].set()
                return
            try:
                if kind == "start":
                    self._start(command[1])
                elif kind == "cancel":
                    self._cancel_group(command[1])
                elif kind == "call":
                    self._call(command[1], command[2])
            except Exception:   # noqa: BLE001 - the control thread must live on
                pass

    def _start(self, future: Future) -> None:
        if future.done():
            return
        try:
            from .session import start_session      # imports pyspark: here, once
            spark = start_session(self.master, self.conf, app_name=self.app_name)
        except BaseException as exc:   # noqa: BLE001 - the waiting jobs get it
            with self._lock:
                self._session_future = None
            future.set_exception(SparkStartError(f"Spark did not start: {error_text(exc)}"))
            return
        with self._lock:
            self._spark = spark
        future.set_result(spark)

    def _cancel_group(self, group: str) -> None:
        with self._lock:
            spark = self._spark
        if spark is not None:
            spark.sparkContext.cancelJobGroup(group)

    def _call(self, fn: Callable, done: Callable) -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:   # noqa: BLE001 - handed to tx
            result, error = None, exc
        self.post(done, result, error)

    def stop_session(self, jvm: bool = False) -> None:
        """Stop the SparkSession (control thread: pass it to `control`). The JVM
        stays for the next session unless `jvm` (driver settings changed)."""
        self._stop_session(jvm)

    def _stop_session(self, jvm: bool) -> None:
        with self._lock:
            spark, self._spark = self._spark, None
            self._session_future = None
        if spark is None and (not jvm or "pyspark" not in sys.modules):
            return                   # never started: nothing to import or stop
        from .session import stop_session
        stop_session(spark, jvm=jvm)

    def _poll_progress(self) -> None:
        with self._lock:
            spark = self._spark
            running = dict(self._running)
            watched = set(self._watched)
        if spark is None:
            return
        tracker = spark.sparkContext.statusTracker()
        snapshot = []
        now = time.monotonic()
        for job_id, (group, title, since, cancel) in running.items():
            if cancel.is_set():
                # A cancelled job's later actions start in the same group:
                # cancel them as they come.
                spark.sparkContext.cancelJobGroup(group)
                continue
            stages = {}
            for spark_job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(spark_job)
                if info is None:
                    continue
                for stage_id in info.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None and stage.numTasks:
                        stages[stage_id] = StageProgress(
                            stage_id, stage.name, stage.numTasks, stage.numCompletedTasks,
                            stage.numActiveTasks, stage.numFailedTasks)
            self.post(self._set_stages, job_id, stages)
            if job_id in watched:
                snapshot.append(JobProgress(job_id, title, now - since,
                                            tuple(sorted(stages.values(),
                                                         key=lambda s: s.stage_id))))
        self._report(snapshot)

    def _report(self, snapshot: list[JobProgress]) -> None:
        with self._lock:
            # A job that ended while this snapshot was taken is not drawn again.
            snapshot = [p for p in snapshot if p.job_id in self._running]
            if not snapshot and not self._drawn:
                return
            self._drawn = snapshot
        for hook in list(self.progress_hooks):
            try:
                hook(snapshot)
            except Exception:   # noqa: BLE001 - a drawing error must not stop jobs
                pass

    # ------------------------------------------------------------- shutdown

    def close(self, timeout: float = 30.0) -> None:
        """Cancel every job, stop Spark and end the JVM. Any thread but tx (the
        launcher calls it after the loop has ended); waits up to `timeout`."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            running = list(self._running.values())
        for group, _, _, cancel in running:
            cancel.set()
            self._commands.put(("cancel", group))
        stopped = threading.Event()
        self._commands.put(("stop", stopped))
        stopped.wait(timeout)
        self._report([])
