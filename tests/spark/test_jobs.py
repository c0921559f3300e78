"""Built-in box.spark jobs over Tarantool 2.6.0's own files (the fixtures: a
master with a confirmed and a rolled-back synchronous transaction, and its
replica), run in the tests' shared session the way the server runs them."""
from __future__ import annotations

import threading
from collections import Counter
from types import SimpleNamespace

import pytest

from spindle.spark_ext.context import JobContext, Sources, builtin_job, run_job_file
from spindle.spark_ext.runner import job_session

from . import transcripts as tr

MASTER, REPLICA = tr.FIXTURES / "master", tr.FIXTURES / "replica"


@pytest.fixture(scope="module")
def job_spark(spark):
    return job_session(spark)


def run_builtin(spark, name: str, args: dict | None = None, wal_dir=MASTER):
    job = SimpleNamespace(id=1, cancel_event=threading.Event())
    ctx = JobContext(spark, job, Sources(str(wal_dir), str(wal_dir), "/nonexistent"),
                     capture=lambda names: {}, call_in_tx=lambda fn, cancel=None: fn(),
                     args=args or {})
    ctx.register_views()
    result = run_job_file(builtin_job(name), spark, ctx)
    return [dict(zip(result.columns, row)) for row in result.rows]


def test_rollbacks_and_sync_latency(job_spark):
    rollbacks = run_builtin(job_spark, "rollbacks")
    assert [(r["rollback_lsn"], r["origin"], r["first_lsn"], r["rows"], r["spaces"])
            for r in rollbacks] == [(25, 1, 24, 1, ["sync"])]
    per_txn = run_builtin(job_spark, "sync_latency", {"per_txn": True})
    assert [(r["lsn"], r["outcome"]) for r in per_txn] == [(22, "confirmed"),
                                                          (24, "rolled back")]
    assert 0 <= per_txn[0]["latency_ms"] < 1000


def test_hot_keys_txn_sizes_and_ops(job_spark):
    hot = run_builtin(job_spark, "hot_keys", {"top": 2})
    assert [(r["space_name"], r["key"], r["writes"]) for r in hot] == [
        ("sync", "1", 1), ("sync", "2", 1), ("test", "1", 3), ("test", "2", 3)]
    sizes = run_builtin(job_spark, "txn_sizes")
    assert [(r["rows"], r["transactions"], r["first_lsn"]) for r in sizes] == [
        (1, 21, 1), (3, 1, 19)]
    ops = run_builtin(job_spark, "ops_per_space", {"interval": "1 day"})
    expected = {key: n for key, n in tr.data_dir_counts(MASTER, cat=tr.fixture_cat).items()
                if key[0] in ("test", "sync")}
    got = Counter()
    for r in ops:
        got[(r["space_name"], r["type"])] += r["ops"]
    assert dict(got) == expected


def test_replication_lag_from_two_instances_wals(job_spark):
    lag = run_builtin(job_spark, "replication_lag", {"dirs": [str(MASTER), str(REPLICA)]})
    # The replica applied the master's LSN 15-23 (its timestamps are its own
    # write times); the master's own copies are the reference, not lagging.
    assert [(r["instance"], r["instance_id"], r["origin"], r["rows"], r["last_lsn"])
            for r in lag] == [(str(REPLICA), 2, 1, 9, 23)]
    assert 0 <= lag[0]["avg_ms"] <= lag[0]["max_ms"] < 1000
