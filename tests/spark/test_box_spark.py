"""box.spark inside a running instance: a Spindle master (with a Spindle replica
following it, replication_timeout 0.2) whose box.spark runs on local Spark.

One master process, one JVM in it, for the whole module (tests run in file
order and build on each other's data; the last one stops the master and
checks its JVM ended). Streaming runs in the tests' own session (conftest).
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest

from ..integration.cluster import Cluster, process_gone, wait_caught_up, wait_for
from . import transcripts as tr
from .server import LongEval, StandaloneSpark, children, command_line

# A replica is dropped after 4 x replication_timeout of silence. 1 s: a Spark call
# held on tx would hold the loop for the whole job (seconds to minutes) and is still
# caught, while a busy machine descheduling either process for a second is not a
# disconnect (0.2 s was, on a loaded 2-core CI box, even before any SQL ran).
FAST = {"replication_timeout": 1.0, "replication_connect_timeout": 10}
SETUP = """
box.schema.space.create('test', {format = {{'id', 'unsigned'}, {'name', 'string'},
                                           {'score', 'number', is_nullable = true}}})
box.space.test:create_index('pk')
for i = 1, 50 do box.space.test:insert{i, 'n' .. i, i * 0.5} end
box.space.test:insert{51, 'extra', 1.25, {a = 1}}
box.space.test:update(1, {{'=', 2, 'one'}})
box.space.test:delete(2)
box.schema.space.create('sync', {is_sync = true})
box.space.sync:create_index('pk')
for i = 1, 5 do box.space.sync:insert{i} end
"""
SLOW_JOB = """
def run(spark, ctx):
    from pyspark.sql import functions as F
    return spark.range(0, 10**12, 1, 8).select(F.sum(F.col("id") % 3)).collect()[0][0]
"""
ARGS_JOB = """
def run(spark, ctx):
    rows = ctx.xlog().where("space_id >= 512").count()
    names = [r[0] for r in ctx.space("test").orderBy("id").limit(2).collect()]
    return {"rows": rows, "args": ctx.args, "first": names}
"""


def lua_pcall(call: str) -> str:
    return f"local ok, err = pcall(function() return {call} end) return {{ok, tostring(err)}}"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    work = tmp_path_factory.mktemp("box_spark")
    with Cluster(work) as cluster:
        master = cluster.add("spindle", "master", {**FAST, "replication_synchro_quorum": 2,
                                                   "replication_synchro_timeout": 10}).start()
        replica = cluster.add("spindle", "replica", {**FAST, "replication": [master.rep_uri],
                                                     "read_only": True}).start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "the replica to follow")
        master.eval(SETUP)
        long_eval = LongEval(master)
        try:
            yield SimpleNamespace(master=master, replica=replica, eval=long_eval, work=work)
        finally:
            long_eval.close()


def test_counts_equal_tarantoolctl_of_the_instance_files(nodes):
    rows = nodes.eval("return box.spark.sql([[SELECT space_name, type, count(*) AS n "
                      "FROM xlog GROUP BY 1, 2]])")
    got = {(r[0], r[1]): r[2] for r in rows}
    assert got == dict(tr.data_dir_counts(nodes.master.workdir))
    assert got[("test", "INSERT")] == 51 and got[("sync", "INSERT")] == 5
    # one view scanned twice with different filters (Spark would reuse one
    # scan's pushed filters for both: box.spark then reads without pushdown)
    both = nodes.eval("return box.spark.sql([[SELECT (SELECT count(*) FROM xlog "
                      "WHERE space_id = 512), (SELECT count(*) FROM xlog)]])[1]")
    assert both == [sum(n for (name, _), n in got.items() if name == "test"),
                    sum(got.values())]
    # field access by column name, as rows are tuples with the columns' names
    assert nodes.eval("local r = box.spark.sql([[SELECT 7 AS seven, 'x' AS ex]])[1] "
                      "return {r.seven, r.ex, r[1]}") == [7, "x", 7]


def test_snap_view_is_the_newest_snapshot(nodes):
    snaps = sorted(nodes.master.workdir.glob("*.snap"))
    expected = tr.counts_by_id(tr.run_cat(snaps[-1]))
    rows = nodes.eval("return box.spark.sql([[SELECT space_id, type, count(*) FROM snap "
                      "GROUP BY 1, 2]])")
    assert {(r[0], r[1]): r[2] for r in rows} == dict(expected)


def test_space_view_equals_select(nodes):
    selected = nodes.master.select("test")
    rows = nodes.eval("return box.spark.sql([[SELECT * FROM space_test ORDER BY id]])")
    columns = nodes.eval("local r = box.spark.sql([[SELECT * FROM space_test LIMIT 1]])[1] "
                         "return {r.id ~= nil, r.name ~= nil, r.score ~= nil}")
    assert columns == [True, True, True]
    # the field beyond the format is a JSON text column; missing ones are nulls
    decoded = [[json.loads(v) if i == 3 and v is not None else v for i, v in enumerate(row)]
               for row in rows]
    assert [row[:len(t)] for row, t in zip(decoded, selected)] == selected
    assert all(v is None for row, t in zip(decoded, selected) for v in row[len(t):])
    assert nodes.eval("return box.spark.sql([[SELECT count(*) FROM space_test t "
                      "JOIN space_sync s ON t.id = s.f1]])[1][1]") == 4


def test_bad_sql_is_a_lua_error_and_large_results_are_refused(nodes, tmp_path):
    ok, err = nodes.eval(lua_pcall("box.spark.sql('SELECT nope FROM xlog')"))
    assert ok is False and "UNRESOLVED_COLUMN" in err and "`nope`" in err
    assert "\tat org.apache" not in err and "Project" not in err
    ok, err = nodes.eval(lua_pcall("box.spark.sql('SELEC 1')"))
    assert ok is False and "PARSE_SYNTAX_ERROR" in err and "(line 1, pos 0)" in err
    assert "\n" not in err and "SQLSTATE" not in err           # one line, as box errors are
    # the instance carries on
    nodes.master.eval("box.space.test:replace{100, 'after'}")
    assert nodes.eval("return box.spark.sql('SELECT 1 + 1')[1][1]") == 2
    ok, err = nodes.eval(lua_pcall("box.spark.sql('SELECT id FROM range(20000)')"))
    assert ok is False and "result has more than 10000 rows" in err and "Parquet" in err
    target = tmp_path / "out.parquet"
    written = nodes.eval("return box.spark.sql('SELECT id FROM range(20000)', {parquet = ...})",
                         str(target))
    assert written == {"parquet": str(target), "rows": 20000}
    assert nodes.eval("return #box.spark.sql('SELECT id FROM range(20000)', "
                      "{max_rows = 20000})") == 20000


def test_run_job_file_and_builtin_jobs(nodes, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(ARGS_JOB)
    job_id = nodes.eval("return box.spark.run(...)", str(job))
    nodes.eval(f"box.spark.run('{job}', {{answer = 42}})")
    result = nodes.eval("return box.spark.wait(..., 120)", job_id + 1)
    assert result["args"] == {"answer": 42} and result["first"] == [1, 3]
    assert result["rows"] == nodes.eval("return box.spark.sql([[SELECT count(*) FROM xlog "
                                        "WHERE space_id >= 512]])[1][1]")
    latency = nodes.eval("return box.spark.wait(box.spark.run('sync_latency'), 120)")
    assert [(r[0], r[1], r[2]) for r in latency] == [("sync", "confirmed", 5)]
    assert all(r[3] >= 0 for r in latency)
    sizes = nodes.eval("return box.spark.wait(box.spark.run('txn_sizes', "
                       "{space = 'test'}), 120)")
    assert sum(r[0] * r[1] for r in sizes) == sum(
        n for (name, kind), n in tr.data_dir_counts(nodes.master.workdir).items()
        if name == "test")
    ok, err = nodes.eval(lua_pcall("box.spark.run('no_such_job')"))
    assert ok is False and "hot_keys" in err      # the message lists the built-ins
    status = nodes.eval("return box.spark.status(...)", job_id)
    assert status["state"] == "done" and status["tasks_done"] == status["tasks"]


def test_jobs_status_wait_and_cancel(nodes, tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW_JOB)
    job_id = nodes.eval("return box.spark.run(...)", str(slow))
    wait_for(lambda: (nodes.eval("return box.spark.status(...)", job_id) or {}).get(
        "tasks_done") is not None, 60, "the slow job to run tasks")
    ok, err = nodes.eval(lua_pcall(f"box.spark.wait({job_id}, 0.5)"))
    assert ok is False and "has not finished" in err
    assert nodes.eval("return box.spark.cancel(...)", job_id) is True
    ok, err = nodes.eval(lua_pcall(f"box.spark.wait({job_id}, 60)"))
    assert ok is False and err == f"job {job_id} was cancelled"
    status = nodes.eval("return box.spark.status(...)", job_id)
    assert status["state"] == "cancelled"
    assert status["tasks_done"] < status["tasks"]       # stopped before its work was done
    # and its clock stopped with it (a finished job's elapsed no longer grows)
    assert nodes.eval("return box.spark.status(...)", job_id)["elapsed"] == status["elapsed"]
    assert nodes.eval("return box.spark.cancel(...)", job_id) is False
    states = {j["id"]: j["state"] for j in nodes.eval("return box.spark.jobs()")}
    assert states[job_id] == "cancelled" and "done" in states.values()


def test_no_replica_disconnects_during_heavy_sql(nodes):
    master, replica = nodes.master, nodes.replica
    log_mark = {node.name: len(node.output()) for node in (master, replica)}
    master.eval("""
        box.schema.space.create('big', {format = {{'id', 'unsigned'}, {'v', 'string'}}})
        box.space.big:create_index('pk')""")
    for k in range(100):      # a transaction per request: each well within its deadline
        master.eval("""local k = ...
            box.begin()
            for i = k * 1000 + 1, (k + 1) * 1000 do box.space.big:insert{i, 'v' .. i} end
            box.commit()""", k)
    master.eval("""
        writer_stop = false
        writes = 0
        require('fiber').create(function()
            local i = 1
            while not writer_stop do
                box.space.test:replace{1000 + i % 100, 'w' .. i}
                i = i + 1
                writes = i
                require('fiber').sleep(0.005)
            end
        end)""")
    try:
        heavy_sql_with_a_writer(nodes, master, replica, log_mark)
    finally:
        master.eval("writer_stop = true")     # later tests count the rows of `test`


def heavy_sql_with_a_writer(nodes, master, replica, log_mark: dict) -> None:
    wait_caught_up(replica, master, 30, "the replica to have `big`")
    outcome = {}

    def heavy():
        try:
            outcome["rows"] = nodes.eval(
                "local a = box.spark.sql([[SELECT v, id FROM space_big WHERE id <= 9500]]) "
                "local b = box.spark.sql([[SELECT id % 10, count(*), sum(length(tuple_json)) "
                "FROM xlog CROSS JOIN range(200) GROUP BY 1]]) "
                "return {#a, #b}")
        except Exception as exc:   # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc
    thread = threading.Thread(target=heavy)
    thread.start()
    statuses = Counter()
    writes_seen = []
    while thread.is_alive():
        statuses[replica.upstream_status(1)] += 1
        writes_seen.append(master.eval("return writes"))
        time.sleep(0.05)
    thread.join()
    assert outcome.get("rows") == [9500, 10], outcome
    assert set(statuses) == {"follow"}, statuses
    wait_caught_up(replica, master, 30, "the replica to catch up")
    for node in (master, replica):
        log = node.output()[log_mark[node.name]:]        # this test's part of it
        assert not re.search(r"disconnected|timed out", log, re.IGNORECASE), (node.name, log)
    # while the job ran the master's loop went on serving its fibers: it answered
    # every look and the writer kept writing between them (counted in writes, not
    # in milliseconds of stalls, which a loaded machine makes up)
    assert len(set(writes_seen)) > 1, writes_seen


def test_streaming_source_across_rotations(spark, nodes):
    master = nodes.master
    master.eval("box.schema.space.create('events') box.space.events:create_index('pk')")
    query = (spark.readStream.format("xlog").load(str(master.workdir))
             .where("space_name = 'events'").select("lsn", "file", "tuple_json")
             .writeStream.format("memory").queryName("wal_events").start())
    try:
        query.processAllAvailable()
        keys = iter(range(1, 10_000))
        for rotations in (0, 1, 2):
            for _ in range(rotations):
                master.eval("box.snapshot()")
            master.eval("for i = 1, 7 do box.space.test:replace{200 + i, 'filler'} end")
            for _ in range(20):
                master.eval("box.space.events:insert{...}", next(keys))
            query.processAllAvailable()
        rows = spark.sql("SELECT lsn, file, tuple_json FROM wal_events").collect()
    finally:
        query.stop()
    got = [json.loads(r.tuple_json)[0] for r in sorted(rows, key=lambda r: r.lsn)]
    assert got == list(range(1, 61))                 # once each, in order: no gap, no duplicate
    assert len({r.file for r in rows}) >= 3          # the rows span rotated xlogs


def test_compact_then_queries_read_the_mirror(nodes):
    result = nodes.eval("return box.spark.compact()")
    assert result["converted"] >= 1 and result["rows"] > 0, result   # rotated above
    assert sorted(p.name for p in (nodes.master.workdir / "spark" / "mirror").iterdir()) \
        == sorted(["manifest.json"] + [f"{x.name}.parquet" for x in
                                       sorted(nodes.master.workdir.glob("*.xlog"))[:-1]])
    rows = nodes.eval("return box.spark.sql([[SELECT space_name, type, count(*) "
                      "FROM xlog GROUP BY 1, 2]])")
    assert {(r[0], r[1]): r[2] for r in rows} == dict(
        tr.data_dir_counts(nodes.master.workdir))
    assert nodes.eval("return box.spark.compact()")["converted"] == 0


def test_standalone_master_and_worker_run_box_spark_sql(nodes):
    cluster = StandaloneSpark(nodes.work / "standalone")
    try:
        cluster.start()
        settings = nodes.eval("return box.spark.cfg{master = ...}", cluster.url)
        assert settings["master"] == cluster.url
        rows = nodes.eval("return box.spark.sql([[SELECT space_name, type, count(*) "
                          "FROM xlog GROUP BY 1, 2]])")
        assert {(r[0], r[1]): r[2] for r in rows} == dict(
            tr.data_dir_counts(nodes.master.workdir))
        # the tasks ran in the worker's executor, not in a local driver
        assert "Launching executor" in cluster.output("worker") or \
            "Asked to launch executor" in cluster.output("worker")
    finally:
        cluster.stop()
    assert all(process_gone(p.pid) for p in cluster.procs)
    assert not (cluster.workdir / "worker").exists()


def test_the_jvm_ends_with_the_instance(nodes):
    master = nodes.master
    jvms = [pid for pid in children(master.proc.pid) if "java" in command_line(pid)
            or "spark" in command_line(pid)]
    assert jvms, "box.spark's JVM is a child of the instance"
    nodes.eval.close()
    master.stop()
    assert master.proc.returncode == 0, master.output()[-2000:]
    wait_for(lambda: all(process_gone(pid) for pid in jvms), 30, "the JVM to exit")
