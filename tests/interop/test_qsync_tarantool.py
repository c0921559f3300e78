"""Synchronous replication with real Tarantool 2.6.0 on the other end.

* A Tarantool master with quorum 2 whose only possible second ACK is a Spindle replica:
  its commits succeed, so Spindle's ACKs count; a Spindle master with a Tarantool
  replica likewise.
* The replica paused (SIGSTOP: it holds the row but cannot ACK): the master's commit
  fails with Tarantool's own ER_SYNC_QUORUM_TIMEOUT, the ROLLBACK is in both WALs and
  the row is nowhere, whichever of the two is Spindle.
* The fixtures' CONFIRM/ROLLBACK rows (written by 2.6.0) recover as 2.6.0 recovers
  them, including a WAL cut right after an unconfirmed transaction.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from spindle.core.instance.box import Box
from spindle.core.box.cfg import defaults
from spindle.core.fiber import Scheduler
from spindle.core.xlog.files import XlogReader

from ..fault.qsync_support import (
    insert_error, pause, resume, start_master, start_replica, synchro_rows, wait_downstream,
    wait_follow,
)
from ..integration.cluster import Cluster, same_vclocks, wait_for
from .oracle import both, tarantool_binary

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
PAIRS = [("tarantool", "spindle"), ("spindle", "tarantool")]


def confirms(node) -> list:
    return [row for row in synchro_rows(node) if row[0] == "CONFIRM"]


@pytest.mark.parametrize("master_kind, replica_kind", PAIRS)
def test_commits_need_and_get_the_other_kinds_ack(master_kind, replica_kind, tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, master_kind, quorum=2, timeout=10)
        replica = start_replica(cluster, replica_kind, master)
        wait_downstream(master)
        for key in range(1, 21):
            assert insert_error(master, "sync", key) is None
        master.eval("box.begin() for i = 21, 30 do box.space.sync:insert{i} end box.commit()")
        wait_for(lambda: same_vclocks(master, replica), 10, "the replica")
        assert replica.select("sync") == [[i] for i in range(1, 31)]
        # each commit was confirmed by a CONFIRM the replica logged too
        assert confirms(master) and confirms(replica) == confirms(master)
        assert confirms(master)[-1][3:] == (1, master.vclock()[1] - 1)
        spindle = master if master_kind == "spindle" else replica
        assert spindle.eval("return box.info.synchro.queue.len") == 0


@pytest.mark.parametrize("master_kind, replica_kind", PAIRS)
def test_timeout_rolls_back_everywhere(master_kind, replica_kind, tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, master_kind, quorum=2, timeout=1.0)
        replica = start_replica(cluster, replica_kind, master)
        wait_downstream(master)
        assert insert_error(master, "sync", 1) is None
        wait_for(lambda: replica.select("sync") == [[1]], 10, "the first row")
        pause(replica)
        try:
            error = insert_error(master, "sync", 2)
        finally:
            resume(replica)
        assert error == [216, "Quorum collection for a synchronous transaction is timed out"]
        assert master.select("sync") == [[1]]
        wait_follow(replica)
        wait_for(lambda: same_vclocks(master, replica), 30, "the ROLLBACK on the replica")
        assert replica.select("sync") == [[1]]
        rollbacks = [row for row in synchro_rows(master) if row[0] == "ROLLBACK"]
        assert len(rollbacks) == 1
        kind, header_id, lsn, owner, first_lsn = rollbacks[0]
        assert (owner, first_lsn) == (1, lsn - 1)      # the row just before it
        assert rollbacks[0] in synchro_rows(replica)
        assert insert_error(master, "sync", 3) is None
        wait_for(lambda: replica.select("sync") == [[1], [3]], 10, "the pair going on")


def test_same_timeout_error_as_tarantool(tmp_path):
    """A lone master with quorum 2: the same error object from both."""
    errors = {}
    with Cluster(tmp_path) as cluster:
        for kind in ("tarantool", "spindle"):
            master = start_master(cluster, kind, name=f"{kind}-lone", quorum=2, timeout=0.2)
            errors[kind] = master.eval(
                "local ok, err = pcall(box.space.sync.insert, box.space.sync, {1}) "
                "local e = err:unpack() return {e.code, e.message, e.type, "
                "box.space.sync:get{1} == nil}")
    assert errors["spindle"] == errors["tarantool"]
    assert errors["spindle"][0] == 216 and errors["spindle"][3] is True


def test_tarantool_replica_joins_a_spindle_master_with_a_pending_transaction(tmp_path):
    """JOIN waits for the pending transaction; when it is rolled back the JOIN fails
    with ER_SYNC_ROLLBACK, which a 2.6.0 replica retries."""
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=2.0)
        master.eval("""require('fiber').create(function()
            pcall(box.space.sync.insert, box.space.sync, {1}) end)""")
        wait_for(lambda: master.eval("return box.info.synchro.queue.len") == 1, 5,
                 "a pending transaction")
        replica = start_replica(cluster, "tarantool", master)
        assert "A rollback for a synchronous transaction is received" in replica.output()
        wait_for(lambda: same_vclocks(master, replica), 10, "the replica")
        assert replica.select("sync") == [] and master.select("sync") == []


# ------------------------------------------------------------------ fixtures

def recover_with_spindle(work_dir: Path, **cfg) -> dict:
    """Recover a data dir in-process; the sync space and the limbo after it."""
    sched = Scheduler()
    cwd = os.getcwd()

    def main():
        box = Box(sched)
        config = defaults()
        config.update(work_dir=str(work_dir), **cfg)
        box.start(config)
        try:
            return {"sync": [list(t) for t in box.engine.space("sync").select()],
                    "test": [list(t) for t in box.engine.space("test").select()],
                    "queue": box.limbo.info(), "vclock": box.vclock.to_dict()}
        finally:
            box.stop()

    try:
        return sched.run(main)
    finally:
        os.chdir(cwd)
        sched.shutdown()
        sched.close()


def recover_with_tarantool(work_dir: Path) -> dict:
    script = (f"box.cfg{{work_dir = '{work_dir}', log_level = 1}} "
              "local json = require('json') "
              "local function rows(s) local t = {} for _, x in s:pairs() do "
              "table.insert(t, x:totable()) end return t end "
              "print(json.encode({sync = rows(box.space.sync), test = rows(box.space.test)})) "
              "os.exit(0)")
    proc = subprocess.run([tarantool_binary(), "-e", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fixture_without_last_snapshot(tmp_path: Path, name: str) -> Path:
    """The fixture master's dir without its 25.snap: recovery replays the xlog with
    LSN 22 (sync), 23 CONFIRM, 24 (sync), 25 ROLLBACK."""
    work = tmp_path / name
    shutil.copytree(FIXTURES / "master", work)
    for extra in list(work.glob("*.txt")) + list(work.glob("*25.snap")):
        extra.unlink()
    return work


def test_fixture_confirm_and_rollback_rows_recover(tmp_path):
    ours = recover_with_spindle(fixture_without_last_snapshot(tmp_path, "ours"))
    theirs = recover_with_tarantool(fixture_without_last_snapshot(tmp_path, "theirs"))
    assert ours["sync"] == theirs["sync"] == [[1, "confirmed"]]
    assert ours["test"] == theirs["test"]
    assert ours["queue"] == {"owner": 1, "len": 0}
    assert ours["vclock"] == {1: 26}


def test_fixture_replica_dir_recovers_the_confirm(tmp_path):
    work = tmp_path / "replica"
    shutil.copytree(FIXTURES / "replica", work)
    for extra in work.glob("*.txt"):
        extra.unlink()
    ours = recover_with_spindle(work)
    assert ours["sync"] == [[1, "confirmed"]]
    assert ours["queue"]["len"] == 0


def cut_after_lsn(path: Path, lsn: int) -> None:
    """Truncate an xlog right after the block holding `lsn` (a crash after that
    write: no later rows, no EOF marker)."""
    with XlogReader(str(path), force_recovery=True) as reader:
        for block in reader.blocks():
            if any(row.lsn == lsn for row in block.rows):
                end = reader.position
                break
        else:
            raise AssertionError(f"no LSN {lsn} in {path}")
    os.truncate(path, end)


def crashed_before_rollback(tmp_path: Path, name: str) -> Path:
    work = fixture_without_last_snapshot(tmp_path, name)
    for later in ("00000000000000000025.xlog", "00000000000000000026.xlog"):
        (work / later).unlink()
    cut_after_lsn(work / "00000000000000000000.xlog", 24)
    return work


def test_unconfirmed_transaction_stays_in_the_limbo_after_a_crash(tmp_path):
    ours = recover_with_spindle(crashed_before_rollback(tmp_path, "ours"),
                                replication_synchro_quorum=2)
    theirs = recover_with_tarantool(crashed_before_rollback(tmp_path, "theirs"))
    # 2.6.0 shows the unconfirmed row too (memtx has no isolation)
    assert ours["sync"] == theirs["sync"] == [[1, "confirmed"], [2, "rolledback"]]
    assert ours["queue"] == {"owner": 1, "len": 1}
    assert ours["vclock"] == {1: 24}


@pytest.mark.parametrize("kind", ["tarantool", "spindle"])
def test_foreign_sync_transactions_refuse_local_writes(kind, tmp_path):
    """A writable replica holding its master's unconfirmed transaction refuses its
    own writes, synchronous or not (ER_UNCOMMITTED_FOREIGN_SYNC_TXNS)."""
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, kind, quorum=3, timeout=60)
        master.eval("box.schema.space.create('plain'):create_index('pk')")
        replica = start_replica(cluster, kind, master)
        wait_downstream(master)
        master.eval("""require('fiber').create(function()
            pcall(box.space.sync.insert, box.space.sync, {1}) end)""")
        wait_for(lambda: replica.select("sync") == [[1]], 10, "the row on the replica")
        replica.eval("box.cfg{read_only = false}")
        expected = [214, "Found uncommitted sync transactions from other instance with id 1"]
        assert insert_error(replica, "plain", 5) == expected
        assert insert_error(replica, "sync", 5) == expected
        assert replica.select("plain") == [] and replica.select("sync") == [[1]]


LUA_TRANSACTIONS = """
box.cfg{replication_synchro_quorum = 2, replication_synchro_timeout = 0.2, log_level = 1}
local s = box.schema.space.create('sync', {is_sync = true})
s:create_index('pk')
box.schema.space.create('plain'):create_index('pk')
box.begin() s:insert{1} box.space.plain:insert{1}
print(pcall(box.commit))
print(#s:select(), #box.space.plain:select())
print(pcall(box.atomic, function() s:insert{2} end))
box.begin() s:insert{3}
box.on_commit(function() print('on_commit') end)
box.on_rollback(function() print('on_rollback') end)
print(pcall(box.commit))
local ok, err = pcall(s.insert, s, {4})
print(ok, err.code, err.type, err.message)
box.cfg{replication_synchro_quorum = 1}
box.begin() s:insert{5} box.space.plain:insert{5}
box.on_commit(function() print('on_commit 5') end)
print(pcall(box.commit))
print(require('json').encode(s:select()), require('json').encode(box.space.plain:select()))
os.exit(0)
"""


def test_lua_transactions_with_a_sync_space_like_tarantool(tmp_path):
    """A lone instance with quorum 2: explicit transactions, box.atomic, triggers,
    the error object, then quorum 1 — the same output from both."""
    real, ours = both(LUA_TRANSACTIONS, tmp_path)
    assert real.returncode == 0 and ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    assert "on_commit 5" in ours.stdout


SNAPSHOT_WAITS = """
box.cfg{replication_synchro_quorum = 2, replication_synchro_timeout = 1, log_level = 1}
local fiber = require('fiber')
box.schema.space.create('sync', {is_sync = true}):create_index('pk')
local lsn = box.info.lsn
fiber.create(function() print('insert', pcall(box.space.sync.insert, box.space.sync, {1})) end)
-- The snapshot starts 0.1 s after the transaction, written, began to wait for its
-- quorum, so the transaction's timeout comes first (a slow machine only widens the
-- gap; a second of delay would close it) and the snapshot, still waiting, sees the
-- rollback.
local deadline = fiber.clock() + 30
while box.info.lsn == lsn and fiber.clock() < deadline do fiber.sleep(0.01) end
fiber.sleep(0.1)
print('pending', box.space.sync:get{1} ~= nil)
print('snapshot', pcall(box.snapshot))
print('snapshot', pcall(box.snapshot))
box.cfg{replication_synchro_quorum = 1}
box.space.sync:insert{2}
print('snapshot', pcall(box.snapshot))
print(#box.space.sync:select())
os.exit(0)
"""


def test_snapshot_waits_for_pending_sync_transactions_like_tarantool(tmp_path):
    """box.snapshot() waits for the pending transaction and fails with
    ER_SYNC_ROLLBACK when it is rolled back (which only a snapshot that waited can
    see), then works."""
    real, ours = both(SNAPSHOT_WAITS, tmp_path)
    assert real.returncode == 0 and ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    assert "A rollback for a synchronous transaction is received" in ours.stdout
