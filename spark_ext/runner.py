"""Spark jobs inside a running instance: the session, job threads, cancel, progress.

No Lua and no box state here: lua/box/spark.py is the glue. What this module
guarantees is the threading rule of the server (DESIGN §1): no py4j call, no
pyspark import, no row conversion ever runs on the tx thread.

Threads:
* the control thread owns the SparkSession: it has it started (pyspark is
  imported then, on first use) by a start thread of its own, stops it, cancels
  job groups, polls progress every PROGRESS_PERIOD while jobs live — the
  start's phase while a job waits for Spark (the JVM takes 10-20 s to come
  up: the console shows what it is doing from the first second), stages and
  tasks once it runs — and shuts the JVM down;
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
import re
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
SETTLE_SECONDS = 5.0         # how long a finished job waits for Spark's status store
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
        """Plain data for box.spark.jobs() / status(); `created` is local time
        as the log prints it ("2026-12-05 11:50:23.273")."""
        end = self.finished or time.time()
        info = {"id": self.id, "kind": self.kind, "title": self.title, "state": self.state,
                "created": local_time(self.created),
                "elapsed": round(end - (self.started or self.created), 3)}
        if self.error is not None:
            info["error"] = self.error
        if self.stages:
            info["tasks"] = sum(s.tasks for s in self.stages.values())
            info["tasks_done"] = sum(s.done for s in self.stages.values())
            info["stages"] = len(self.stages)
        return info


def local_time(stamp: float) -> str:
    millis = int(stamp % 1 * 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) + f".{millis:03d}"


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
    """What a progress hook gets for one job a fiber waits for: its stages, or
    what it is doing before it has any ("starting Spark: starting the JVM")."""
    job_id: int
    title: str
    elapsed: float
    stages: tuple[StageProgress, ...]
    phase: str | None = None


@dataclass
class _Live:
    """A job from submit to end, as the control thread sees it."""
    title: str
    since: float                  # time.monotonic() at submit
    cancel: threading.Event
    group: str | None = None      # set once the job runs in its Spark job group


_SQLSTATE = re.compile(r"\s*SQLSTATE: [0-9A-Z]+;?")
_POSITION = re.compile(r";?\s*line (\d+) pos (\d+);?\s*$")
_TRACEBACK = "Traceback (most recent call last):"
_PLAIN_PYTHON_ERRORS = ("FileNotFoundError", "NotADirectoryError", "PermissionError",
                        "IsADirectoryError", "XlogError")


def error_text(exc: BaseException) -> str:
    """An exception as a one-line message for Lua, as Tarantool's are. Spark's
    errors carry the JVM stack (analysis errors the query plan, parse errors
    the query with a caret) after their message: the first line is kept, with
    Spark's own hint ("Did you mean one of the following? ...") and the
    position, without SQLSTATE. An error raised in a Python worker (a data
    source's) comes as its whole traceback: its last line is the cause. Python
    errors of a job file keep their type name."""
    if not type(exc).__module__.startswith(("pyspark", "py4j")):
        if getattr(exc, "plain_message", False):
            return str(exc)
        detail = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return f"{type(exc).__name__}: {detail}"
    text = str(exc).strip() or type(exc).__name__
    text = text.split("\n\tat ")[0].split("\nJVM stacktrace:")[0].strip()
    if _TRACEBACK in text:
        return _python_cause(text.split(_TRACEBACK, 1)[1])
    first = text.partition("\n")[0]
    first = _SQLSTATE.sub("", first).rstrip()
    return _POSITION.sub(lambda m: f" (line {m[1]}, pos {m[2]})", first)


def _python_cause(traceback: str) -> str:
    """'Type: message' from the end of a Python traceback (errors about files
    read as their message only: '/x: no such file or directory')."""
    lines = [line for line in traceback.splitlines()
             if line.strip() and not line.startswith(" ")]
    last = _SQLSTATE.sub("", lines[-1]).strip() if lines else "Python error"
    kind, sep, message = last.partition(": ")
    if sep and kind.rsplit(".", 1)[-1] in _PLAIN_PYTHON_ERRORS:
        return message
    return last


def job_session(base):
    """A session of the job's own over the shared SparkContext, active in the
    calling thread (data sources are looked up in the active session)."""
    session = base.newSession()
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)
    from .sources import register
    register(session)
    return session


def job_stages(context, group: str) -> dict[int, StageProgress]:
    """Stages of the Spark jobs of a job group, by stage id. A stage of a
    finished Spark job that has not run all its tasks was skipped (its shuffle
    output was there already): it is left out, so that a finished job counts
    as many tasks done as it has."""
    tracker = context.statusTracker()
    stages = {}
    for spark_job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(spark_job)
        if info is None:
            continue
        succeeded = str(info.status) == "SUCCEEDED"
        for stage_id in info.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None or not stage.numTasks:
                continue
            if succeeded and stage.numCompletedTasks < stage.numTasks:
                continue
            stages[stage_id] = StageProgress(
                stage_id, stage.name, stage.numTasks, stage.numCompletedTasks,
                stage.numActiveTasks, stage.numFailedTasks)
    return stages


def final_stages(context, group: str, *, settle: bool,
                 timeout: float = SETTLE_SECONDS) -> dict[int, StageProgress]:
    """The stages of a job group once it has ended. Spark's status store is fed
    by its listener bus, which may lag behind the job's end: with `settle`
    (the job succeeded) its Spark jobs are waited for, up to `timeout`, to read
    as ended, so that their counters are final."""
    deadline = time.monotonic() + timeout
    tracker = context.statusTracker()
    while settle and time.monotonic() < deadline:
        infos = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        if all(info is None or str(info.status) in ("SUCCEEDED", "FAILED") for info in infos):
            break
        time.sleep(0.02)
    return job_stages(context, group)


class SparkRunner:
    """Session and jobs of one instance. Methods without a thread named in
    their doc are for the tx thread and never block."""

    def __init__(self, post: Callable[..., None], *, master: str, conf: dict[str, str],
                 app_name: str = "spindle", on_change: Callable[[Job], None] | None = None,
                 progress_hooks: list | None = None,
                 output: Callable[[str], None] | None = None):
        self.post = post
        self.output = output      # the JVM's output lines (session.start_session)
        self.master, self.conf = master, dict(conf)
        self.app_name = app_name
        self.on_change = on_change or (lambda job: None)
        self.progress_hooks = progress_hooks if progress_hooks is not None else []
        self.jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._group_prefix = f"spindle-{os.getpid()}-{id(self):x}"
        self._report_lock = threading.Lock()  # one progress report at a time
        self._lock = threading.Lock()        # guards the fields below (all threads)
        self._spark = None
        self._session_future: Future | None = None
        self._starter: threading.Thread | None = None
        self._start_phase = ""               # what the start thread is doing
        self._live: dict[int, _Live] = {}    # jobs from submit to end
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
        with self._lock:
            self._live[job_id] = _Live(title, time.monotonic(), job.cancel_event)
        self._commands.put(("wake",))       # the control thread starts polling
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
        """A fiber waits for this job (its progress is drawn) or stopped waiting.
        A bar of a job no one waits for any more (Ctrl-C) is taken away now,
        before the console draws its prompt, not at the next poll."""
        with self._lock:
            (self._watched.add if watched else self._watched.discard)(job_id)
            drawn = [p for p in self._drawn if p.job_id != job_id]
            changed = len(drawn) != len(self._drawn)
        if changed:
            self._report(drawn)

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

    def _finish(self, job_id: int, state: str, result: Any, error: str | None,
                stages: dict | None = None) -> None:
        job = self.jobs.get(job_id)
        if job is None:
            return
        job.state, job.result, job.error, job.finished = state, result, error, time.time()
        if stages is not None:
            job.stages = stages     # polls posted earlier are older: they came first
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
        spark = None
        try:
            self.post(self._set_state, job.id, STARTING)
            spark = job_session(self.session(cancel))
            if cancel.is_set():
                raise JobCancelled(job.id)
            spark.sparkContext.setJobGroup(job.group, job.title[:200], interruptOnCancel=True)
            with self._lock:
                live = self._live.get(job.id)
                if live is not None:
                    live.group = job.group
            self.post(self._set_state, job.id, RUNNING, time.time())
            result = work(spark, job)
            if cancel.is_set():
                raise JobCancelled(job.id)
            self._end(job, DONE, result, None, spark)
        except BaseException as exc:   # noqa: BLE001 - every outcome goes back to tx
            if cancel.is_set():
                self._end(job, CANCELLED, None, f"job {job.id} was cancelled", spark)
            else:
                self._end(job, FAILED, None, error_text(exc), spark)

    def _end(self, job: Job, state: str, result: Any, error: str | None, spark=None) -> None:
        # The stages as they ended (the last poll may be 0.3 s old), so that a
        # finished job's counters add up.
        stages = None
        if spark is not None:
            try:
                stages = final_stages(spark.sparkContext, job.group, settle=state == DONE)
            except Exception:   # noqa: BLE001 - the counters stay as last polled
                pass
        # The job's bars go before tx hears of the end: the console prints the
        # result right after, and a bar drawn over it would garble it.
        with self._lock:
            self._live.pop(job.id, None)
            drawn = [p for p in self._drawn if p.job_id != job.id]
            changed = len(drawn) != len(self._drawn)
        if changed:
            self._report(drawn)
        self.post(self._finish, job.id, state, result, error, stages)

    # ------------------------------------------------------- control thread

    def _control_main(self) -> None:
        next_poll = 0.0
        while True:
            with self._lock:
                busy = bool(self._live)
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
        """Start the session in a thread of its own: the JVM takes seconds to
        come up, and meanwhile this thread goes on polling (the progress of the
        start) and taking commands."""
        if future.done() or (self._starter is not None and self._starter.is_alive()):
            return
        self._starter = threading.Thread(target=self._start_main, args=(future,),
                                         name="spark-start", daemon=True)
        self._starter.start()

    def _start_main(self, future: Future) -> None:
        def phase(text: str) -> None:
            with self._lock:
                self._start_phase = text
        try:
            from .session import start_session      # imports pyspark: here, once
            spark = start_session(self.master, self.conf, app_name=self.app_name,
                                  output=self.output, phase=phase)
        except BaseException as exc:   # noqa: BLE001 - the waiting jobs get it
            with self._lock:
                self._session_future = None
                self._start_phase = ""
            future.set_exception(SparkStartError(f"Spark did not start: {error_text(exc)}"))
            return
        with self._lock:
            self._spark = spark
            self._start_phase = ""
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
        starter = self._starter
        if starter is not None:
            starter.join()           # a session being started is stopped once it is up
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
            live = dict(self._live)
            watched = set(self._watched)
            start_phase = self._start_phase
        context = spark.sparkContext if spark is not None else None
        snapshot = []
        now = time.monotonic()
        for job_id, job in live.items():
            if job.cancel.is_set():
                # A cancelled job's later actions start in the same group:
                # cancel them as they come.
                if context is not None and job.group is not None:
                    context.cancelJobGroup(job.group)
                continue
            stages, phase = {}, None
            if job.group is None:
                phase = f"starting Spark: {start_phase}" if start_phase else "starting Spark"
            elif context is not None:
                stages = job_stages(context, job.group)
                self.post(self._set_stages, job_id, stages)
                phase = None if stages else "planning"
            if job_id in watched:
                snapshot.append(JobProgress(job_id, job.title, now - job.since,
                                            tuple(sorted(stages.values(),
                                                         key=lambda s: s.stage_id)), phase))
        self._report(snapshot)

    def _report(self, snapshot: list[JobProgress]) -> None:
        # One report at a time, filtered and drawn as a whole: a poll that read
        # a job's stages just before its end or its Ctrl-C cannot draw them
        # after the erase that the end or the Ctrl-C made.
        with self._report_lock:
            with self._lock:
                # A job that ended, or that no one waits for any more, while
                # this snapshot was taken is not drawn again.
                snapshot = [p for p in snapshot if p.job_id in self._live
                            and p.job_id in self._watched]
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
            live = list(self._live.values())
        for job in live:
            job.cancel.set()
            if job.group is not None:
                self._commands.put(("cancel", job.group))
        stopped = threading.Event()
        self._commands.put(("stop", stopped))
        stopped.wait(timeout)
        self._report([])
