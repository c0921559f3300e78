"""box.spark's parts that need no JVM: WAL tailing offsets, space export,
result values, error texts, the runner's threads (with a fake session), the
progress bar, and the import-time rule."""
from __future__ import annotations

import io
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from spindle.core.iproto.constants import IprotoType as T
from spindle.core.xlog.format import EOF_MARKER_BYTES, XlogError
from spindle.shell.spark_progress import SparkProgressBar
from spindle.spark_ext import context, runner as runner_module, session as session_module
from spindle.spark_ext.runner import (
    Job, JobProgress, SparkRunner, StageProgress, error_text, job_stages,
)
from spindle.spark_ext.scan import scan
from spindle.spark_ext.spaces import space_table
from spindle.spark_ext.stream import WalTail, segments, tail_position

from ..integration.cluster import wait_for
from .datadirs import dml, space_row, write_xlog


def rows_of(tasks) -> list[tuple]:
    out = []
    for task in tasks:
        for batch in scan(task):
            out += [(r["lsn"], r["space_name"]) for r in batch.to_pylist()]
    return out


# ----------------------------------------------------------------- streaming

def test_tail_position_stops_before_an_unfinished_transaction(tmp_path):
    path = write_xlog(tmp_path, {1: 0}, [
        [space_row(1, 512, "s")], [dml(T.INSERT, 512, 2, tuple=[1])],
        [dml(T.INSERT, 512, 3, tsn=3, commit=False, tuple=[2])]], close=False)
    size = path.stat().st_size
    pos, sealed = tail_position(str(path))
    assert 0 < pos < size and not sealed
    assert tail_position(str(path), pos) == (pos, False)    # nothing whole after it


def test_segments_of_a_batch():
    names = ["00000000000000000000.xlog", "00000000000000000005.xlog",
             "00000000000000000009.xlog"]
    start = {"file": names[0], "pos": 100}
    end = {"file": names[2], "pos": 300}
    assert [(s.name, s.start, s.end) for s in segments(names, start, end)] == [
        (names[0], 100, None), (names[1], 0, None), (names[2], 0, 300)]
    assert segments(names, end, end) == []
    assert segments(names, {"file": "", "pos": 0}, {"file": names[0], "pos": 50})[0].end == 50
    with pytest.raises(XlogError, match="removed before the stream read it"):
        segments(names[1:], start, end)


def test_wal_tail_reads_every_row_once_across_a_rotation(tmp_path):
    first = write_xlog(tmp_path, {1: 0}, [[space_row(1, 512, "s")],
                                          [dml(T.INSERT, 512, 2, tuple=[1])]], close=False)
    tail = WalTail(str(tmp_path), "earliest")
    start = tail.initial()
    assert start == {"file": first.name, "pos": 0}
    end = tail.latest()
    got = rows_of(tail.tasks(start, end))
    assert got == [(1, "_space"), (2, "s")]
    # The writer seals the file (EOF marker) and opens the next one: the rest
    # of the old file and the new rows each come once.
    with open(first, "ab") as f:
        f.write(EOF_MARKER_BYTES)
    write_xlog(tmp_path, {1: 2}, [[dml(T.INSERT, 512, 3, tuple=[2])],
                                  [dml(T.REPLACE, 512, 4, tuple=[2, "x"])]], close=False)
    assert tail.latest() != end
    later = tail.latest()
    assert rows_of(tail.tasks(end, later)) == [(3, "s"), (4, "s")]
    assert tail.tasks(later, tail.latest()) == []
    # a new stream planned from the middle finds the names in force there
    fresh = WalTail(str(tmp_path), "latest")
    assert rows_of(fresh.tasks(end, later)) == [(3, "s"), (4, "s")]


# ------------------------------------------------------------------ spaces

def test_space_table_columns_follow_format_then_values():
    table = space_table([{"name": "id", "type": "unsigned"}, {"name": "v", "type": "any"}],
                        [[1, "a"], [2, 5, {"k": [1]}], [3, None, True, 2 ** 64 - 1]])
    assert table.column_names == ["id", "v", "f3", "f4"]
    assert table.schema.field("id").type == pa.int64()
    assert table.column("v").to_pylist() == ['"a"', "5", None]     # mixed: JSON text
    assert table.column("f3").to_pylist() == [None, '{"k":[1]}', "true"]
    assert table.column("f4").to_pylist() == [None, None, "18446744073709551615"]
    empty = space_table([{"name": "id", "type": "unsigned"}], [])
    assert empty.column_names == ["id"] and empty.num_rows == 0


# ------------------------------------------------------------ results, errors

def test_plain_values_and_space_refs():
    import datetime
    import decimal
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc)
    assert context.plain(stamp) == "2026-01-02 03:04:05.000006"
    assert context.plain(decimal.Decimal("1.50")) == 1.5
    assert context.plain(decimal.Decimal("12")) == 12
    assert context.plain(bytearray(b"\x01")) == b"\x01"
    assert context.plain([datetime.date(2026, 1, 2)]) == ["2026-01-02"]
    assert context.space_refs("SELECT * FROM space_a JOIN `space_b-c` ON space_a.x = 1") == [
        "a", "b-c"]
    assert "write it to Parquet" in context.too_large_message(10)
    assert set(context.builtin_jobs()) == {"hot_keys", "ops_per_space", "replication_lag",
                                           "rollbacks", "sync_latency", "txn_sizes"}
    assert context.builtin_job("../etc") is None


def test_error_text_keeps_sparks_message_only():
    spark_error = type("AnalysisException", (Exception,), {"__module__": "pyspark.errors"})
    # one line: Spark's message with its suggestion and the position, no plan
    assert error_text(spark_error(
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] no `nme`. Did you mean one of the following? "
        "[`name`]. SQLSTATE: 42703; line 1 pos 7;\n'Project ['nme]\n+- SubqueryAlias xlog\n")) \
        == ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] no `nme`. Did you mean one of the following? "
            "[`name`]. (line 1, pos 7)")
    assert error_text(spark_error(
        "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1, pos 0)"
        "\n\n== SQL ==\nSELEC 1\n^^^^^\n\nJVM stacktrace:\nx")) \
        == "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. (line 1, pos 0)"
    # a data source's error in a Python worker: the cause, not the traceback
    worker = ("[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read "
              "partitions: Traceback (most recent call last):\n  File \"plan.py\", line 86, "
              "in discover\n    raise FileNotFoundError(f\"{path}: no such file\")\n"
              "FileNotFoundError: /nonexistent: no such file or directory\n SQLSTATE: 38000")
    assert error_text(spark_error(worker)) == "/nonexistent: no such file or directory"
    assert error_text(spark_error(worker.replace("FileNotFoundError: /nonexistent",
                                                 "ValueError: bad"))) == \
        "ValueError: bad: no such file or directory"
    assert error_text(ZeroDivisionError("division by zero")) == \
        "ZeroDivisionError: division by zero"
    assert error_text(context.ResultTooLarge("too big")) == "too big"


# ------------------------------------------------------------------ runner

class FakeContext:
    def __init__(self):
        self.groups, self.cancelled = [], []

    def setJobGroup(self, group, description, interruptOnCancel=False):   # noqa: N802
        self.groups.append(group)

    def cancelJobGroup(self, group):   # noqa: N802
        self.cancelled.append(group)

    def statusTracker(self):   # noqa: N802
        return self

    def getJobIdsForGroup(self, group):   # noqa: N802
        return []


class FakeSpark:
    def __init__(self):
        self.sparkContext = FakeContext()
        self.stopped = False

    def stop(self):
        self.stopped = True


def test_runner_threads_cancel_and_close(monkeypatch):
    fake = FakeSpark()
    monkeypatch.setattr(session_module, "start_session", lambda *a, **k: fake)
    monkeypatch.setattr(session_module, "stop_session", lambda spark, *a, **k: spark.stop())
    monkeypatch.setattr(runner_module, "job_session", lambda base: base)
    posted: queue.Queue = queue.Queue()
    changes = []
    runner = SparkRunner(lambda fn, *args: posted.put((fn, args)), master="local[1]", conf={},
                         on_change=lambda job: changes.append((job.id, job.state)))
    threads = {}

    def serve_until(condition, timeout=10.0):
        """Play the tx thread: run what the worker threads post."""
        deadline = time.monotonic() + timeout
        while not condition():
            fn, args = posted.get(timeout=max(0.01, deadline - time.monotonic()))
            fn(*args)

    def work(spark, job):
        threads[job.id] = threading.current_thread().name
        return {"answer": 42}
    done = runner.submit("run", "answer", work)
    serve_until(lambda: done.final)
    assert (done.state, done.result) == ("done", {"answer": 42})
    assert threads[done.id] != threading.current_thread().name
    assert fake.sparkContext.groups == [done.group]

    def forever(spark, job):
        while not job.cancel_event.wait(0.01):
            pass
        raise RuntimeError("stopped")
    slow = runner.submit("run", "forever", forever)
    serve_until(lambda: slow.state == "running")
    assert runner.cancel(slow.id) is True
    serve_until(lambda: slow.final)
    assert (slow.state, slow.error) == ("cancelled", f"job {slow.id} was cancelled")
    wait_for(lambda: slow.group in fake.sparkContext.cancelled, 60, "the group's cancel")
    assert slow.group in fake.sparkContext.cancelled    # sent from the control thread
    assert runner.cancel(slow.id) is False
    assert [s for _, s in changes if _ == slow.id][-1] == "cancelled"
    runner.close(5)
    assert fake.stopped


# ---------------------------------------------------------------- progress

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_stages_and_goes_away():
    out = Terminal()
    bar = SparkProgressBar(out, min_seconds=0.0)
    stage = StageProgress(3, "collect", tasks=8, done=2, active=2, failed=0)
    bar([JobProgress(7, "SELECT count(*) FROM xlog", 1.0, (stage,))])
    bar([JobProgress(7, "SELECT count(*) FROM xlog", 1.5, (stage,))])
    bar([])
    text = out.getvalue()
    assert "job 7 stage 3: SELECT count(*) FROM xlog" in text and "2/8" in text
    assert bar._progress is None
    quiet = io.StringIO()
    SparkProgressBar(quiet, min_seconds=0.0)([JobProgress(1, "q", 1.0, (stage,))])
    assert quiet.getvalue() == ""          # not a terminal: nothing drawn


def test_progress_shows_what_a_job_waits_for_before_its_stages():
    out = Terminal()
    bar = SparkProgressBar(out, min_seconds=0.0)
    bar([JobProgress(4, "SELECT 1", 0.7, (), "starting Spark: starting the JVM")])
    bar([JobProgress(4, "SELECT 1", 9.0, (), "starting Spark: creating the SparkSession")])
    bar([])
    text = out.getvalue()
    assert "job 4: SELECT 1 — starting Spark: starting the JVM" in text
    assert "job 4: SELECT 1 — starting Spark: creating the SparkSession" in text
    assert bar._progress is None


class FakeTracker:
    """statusTracker() of a group with one finished Spark job whose first stage
    was skipped (its shuffle output reused) and one running job."""
    Info = type("Info", (), {})

    def getJobIdsForGroup(self, group):   # noqa: N802
        return [1, 2]

    def getJobInfo(self, job_id):   # noqa: N802
        info = self.Info()
        info.status, info.stageIds = {1: ("SUCCEEDED", [10, 11]), 2: ("RUNNING", [12])}[job_id]
        return info

    def getStageInfo(self, stage_id):   # noqa: N802
        done = {10: 0, 11: 1, 12: 0}[stage_id]
        tasks = {10: 4, 11: 1, 12: 3}[stage_id]
        return type("Stage", (), dict(numTasks=tasks, numCompletedTasks=done, name="s",
                                      numActiveTasks=0, numFailedTasks=0))()


def test_job_counters_leave_out_skipped_stages_and_created_is_local_time():
    context_ = type("Ctx", (), {"statusTracker": lambda self: FakeTracker()})()
    stages = job_stages(context_, "g")
    assert sorted(stages) == [11, 12]          # 10 was skipped; 12 has not run yet
    job = Job(1, "sql", "q", "g", created=time.mktime((2026, 12, 5, 11, 50, 23, 0, 0, -1))
              + 0.273)
    job.stages = {11: stages[11]}
    info = job.info()
    assert info["created"] == "2026-12-05 11:50:23.273"
    assert info["tasks"] == info["tasks_done"] == 1


def test_a_bar_no_one_waits_for_goes_before_the_prompt(monkeypatch):
    fake = FakeSpark()
    monkeypatch.setattr(session_module, "start_session", lambda *a, **k: fake)
    monkeypatch.setattr(session_module, "stop_session", lambda spark, *a, **k: spark.stop())
    monkeypatch.setattr(runner_module, "job_session", lambda base: base)
    snapshots: list = []
    runner = SparkRunner(lambda fn, *args: fn(*args), master="local[1]", conf={},
                         progress_hooks=[snapshots.append])

    def forever(spark, job):
        while not job.cancel_event.wait(0.01):
            pass
    job = runner.submit("sql", "SELECT forever", forever)
    runner.watch(job.id, True)
    wait_for(lambda: any(p.phase == "planning" for snap in snapshots for p in snap), 60,
             "the planning phase on the bar")
    runner.watch(job.id, False)          # Ctrl-C: the fiber stops waiting
    assert snapshots[-1] == []           # erased by the call itself, not a later poll
    runner.cancel(job.id)
    runner.close(5)


def test_jvm_output_goes_to_the_log_never_to_the_terminal(monkeypatch):
    import logging
    import types

    from spindle.core import log
    from spindle.lua.box.spark import SparkApi
    # the pipe the JVM writes to: each line to the sink, until every writer closed it
    lines: list[str] = []
    read_end, write_end = os.pipe()
    pump = threading.Thread(target=session_module._pump, args=(read_end, lines.append))
    pump.start()
    os.write(write_end, b"WARNING: Using incubator modules\n\nTraceback (most recent")
    os.close(write_end)
    pump.join(10)
    assert lines == ["WARNING: Using incubator modules", "Traceback (most recent"]
    # py4j's and pyspark's loggers write there too, not on stderr
    loggers = [logging.getLogger(name) for name in ("py4j", "pyspark")]
    saved = [(lg.handlers[:], lg.propagate) for lg in loggers]
    try:
        session_module._route_python_loggers(lines.append)
        logging.getLogger("py4j.clientserver").error("Error while sending\nsecond line")
    finally:
        for lg, (handlers, propagate) in zip(loggers, saved):
            lg.handlers[:], lg.propagate = handlers, propagate
    assert lines[-2:] == ["py4j.clientserver: Error while sending", "second line"]
    # the instance log: INFO in a log file, VERBOSE (hidden by default) when the
    # log is the terminal the console draws on
    said: list = []
    monkeypatch.setattr(log, "say", lambda level, text, *args: said.append((level, text % args)))
    SparkApi._jvm_output(types.SimpleNamespace(storage=types.SimpleNamespace(_log_file=None)),
                         "chatter")
    SparkApi._jvm_output(types.SimpleNamespace(storage=types.SimpleNamespace(_log_file=1)),
                         "chatter")
    assert said == [(log.VERBOSE, "spark: chatter"), (log.INFO, "spark: chatter")]


# ------------------------------------------------------------- import time

def test_pyspark_is_not_imported_until_box_spark_is_used(tmp_path):
    spindle = str(Path(sys.executable).with_name("spindle"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    result = subprocess.run(
        [sys.executable, "-X", "importtime", spindle, "-e",
         "box.cfg{log = 'i.log'} assert(box.spark ~= nil) os.exit(0)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")]
    assert "spindle.lua.box.spark" in imported
    heavy = [m for m in imported if m.split(".")[0] in ("pyspark", "pyarrow", "py4j")
             or m.startswith("spindle.spark_ext")]
    assert heavy == []


def test_worker_heap_is_frozen_in_spark_workers_only(monkeypatch):
    import types

    from spindle.spark_ext import sources
    # The collector calls are recorded, not made: a forced collection or a frozen
    # heap in the test process disturbs what other tests left to the collector
    # (see collector_paused in tests/conftest.py).
    calls: list[str] = []
    monkeypatch.setattr(sources, "gc", types.SimpleNamespace(
        collect=lambda: calls.append("collect"), freeze=lambda: calls.append("freeze")))
    monkeypatch.setattr(sources, "_worker_heap_frozen", False)
    assert not sources.in_spark_worker()
    assert list(sources._worker_batches(iter([1, 2]))) == [1, 2]
    assert calls == [] and not sources._worker_heap_frozen

    worker_main = types.ModuleType("__main__")
    worker_main.__spec__ = types.SimpleNamespace(name="pyspark.daemon")
    monkeypatch.setitem(sys.modules, "__main__", worker_main)
    assert sources.in_spark_worker()
    assert list(sources._worker_batches(iter([3]))) == [3]
    assert sources._worker_heap_frozen and calls == ["collect", "freeze"]
    list(sources._worker_batches(iter([4])))
    assert calls == ["collect", "freeze"]          # once per worker


def test_local_sessions_use_the_throughput_collector():
    local = session_module.default_conf("local[2]")["spark.driver.extraJavaOptions"]
    remote = session_module.default_conf("spark://host:7077")["spark.driver.extraJavaOptions"]
    assert "-XX:+UseParallelGC" in local.split() and "-Dlog4j2.configurationFile=" in local
    assert "-XX:+UseParallelGC" not in remote.split()
