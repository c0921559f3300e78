"""The limbo's owner and its own pending transactions, on Tarantool 2.6.0 and on
Spindle side by side (each scenario runs on both and the observations must match).

* box.ctl.clear_synchro_queue() on the owner, its replica paused (SIGSTOP: no ACK),
  a synchronous insert pending: the call returns nothing at once and decides
  nothing — no CONFIRM/ROLLBACK is written; the transaction keeps waiting and is
  rolled back by its own timeout (ER_SYNC_QUORUM_TIMEOUT, one ROLLBACK) or
  confirmed when the replica's ACK brings the quorum.
* The owner killed (or stopped) with such a transaction pending and started
  again: the restart writes neither CONFIRM nor ROLLBACK, not even with quorum 1;
  the row is visible (memtx has no isolation) and the transaction stays pending
  (box.snapshot() waits for it and fails with ER_SYNC_QUORUM_TIMEOUT). The own
  write does not count as an ACK after the restart, so the replica coming back
  with the row (one ACK of quorum 2) does not confirm it, and
  clear_synchro_queue() on the owner still does nothing.

Past that point 2.6.0 has nothing to compare with: a new synchronous write whose
own ACK completes the recovered transaction's quorum makes 2.6.0 crash (SIGSEGV in
fiber_wakeup from txn_limbo_ack: the recovered entry has no committer fiber).
Spindle confirms both there, which the Spindle half of those tests checks.
"""
from __future__ import annotations

import pytest

from ..integration.cluster import Cluster, same_vclocks, wait_for
from .qsync_support import (
    pause, resume, start_master, start_replica, synchro_queue_len, synchro_rows,
    wait_downstream, wait_follow,
)

KINDS = ("tarantool", "spindle")
TIMEOUT_ERROR = [216, "Quorum collection for a synchronous transaction is timed out"]

PENDING_INSERT = """result = nil
    local key = ...
    require('fiber').create(function()
        local ok, err = pcall(box.space.sync.insert, box.space.sync, {key})
        result = ok and 'ok' or {err.code, err.message}
    end)"""
# select('#', ...) counts what the call returned (2.6.0: nothing); `result` and the
# select are read in the same request, right after it returns
CLEAR = """local returned = select('#', box.ctl.clear_synchro_queue())
    return {returned, result == nil, box.space.sync:select()}"""
# Pending or not, seen the same way on both: box.snapshot() waits for the limbo's
# newest transaction (for replication_synchro_timeout, shortened for it) and fails
# with ER_SYNC_QUORUM_TIMEOUT when nothing decides it meanwhile.
SNAPSHOT = """local timeout = box.cfg.replication_synchro_timeout
    box.cfg{replication_synchro_timeout = 0.5}
    local ok, err = pcall(box.snapshot)
    box.cfg{replication_synchro_timeout = timeout}
    return ok and 'ok' or {err.code, err.message}"""


def rows_from(node, lsn: int) -> list:
    """The node's CONFIRM/ROLLBACK rows with LSNs relative to the pending insert's
    `lsn`: (kind, header replica id, header lsn - lsn, owner, body lsn - lsn)."""
    return [[kind, header_id, header_lsn - lsn, owner, body_lsn - lsn]
            for kind, header_id, header_lsn, owner, body_lsn in synchro_rows(node)]


def insert_pending(master, key) -> int:
    """Start a synchronous insert in a fiber and wait until it is in the WAL; its LSN."""
    lsn = master.vclock()[1] + 1
    master.eval(PENDING_INSERT, key)
    wait_for(lambda: master.vclock().get(1, 0) >= lsn, 10, f"LSN {lsn} in the WAL")
    return lsn


def wait_acked(master, replica, lsn: int) -> None:
    """The replica is back, has everything, and the master has its ACK of `lsn`."""
    wait_follow(replica)
    wait_for(lambda: same_vclocks(master, replica), 30, "the replica to catch up")
    wait_for(lambda: (master.eval("local r = box.info.replication[2] return r and "
                                  "r.downstream and r.downstream.vclock and "
                                  "r.downstream.vclock[1]") or 0) >= lsn,
             30, "the replica's ACK on the master")


def stop_all(*nodes) -> None:
    """One kind's scenario is over: its processes make room for the other's."""
    for node in nodes:
        node.stop()


def pair(cluster, kind, quorum=2, timeout=60):
    master = start_master(cluster, kind, name=f"{kind}-master", quorum=quorum,
                          timeout=timeout)
    replica = start_replica(cluster, kind, master, name=f"{kind}-replica")
    wait_downstream(master)
    return master, replica


# ------------------------------------------- clear_synchro_queue on the owner

def clear_on_the_owner(cluster, kind: str, fate: str) -> dict:
    seen = {}
    master, replica = pair(cluster, kind)
    pause(replica)
    try:
        lsn = insert_pending(master, 1)
        seen["clear"] = master.eval(CLEAR)
        seen["rows after clear"] = rows_from(master, lsn)
        if fate == "timeout":
            # the timeout shortened now: the waiting insert re-reads it and times out
            master.eval("box.cfg{replication_synchro_timeout = 0.5}")
            wait_for(lambda: master.eval("return result"), 30, "the insert's outcome")
            resume(replica)
        else:
            resume(replica)
            wait_for(lambda: master.eval("return result"), 30, "the insert's outcome")
    finally:
        resume(replica)
    seen["result"] = master.eval("return result")
    wait_follow(replica)
    wait_for(lambda: same_vclocks(master, replica), 30, "the replica to catch up")
    seen["data"] = [master.select("sync"), replica.select("sync")]
    seen["rows"] = [rows_from(master, lsn), rows_from(replica, lsn)]
    stop_all(master, replica)
    return seen


@pytest.mark.parametrize("fate", ["timeout", "quorum"])
def test_clear_synchro_queue_on_the_owner_decides_nothing(fate, tmp_path):
    with Cluster(tmp_path) as cluster:
        seen = {kind: clear_on_the_owner(cluster, kind, fate) for kind in KINDS}
    assert seen["spindle"] == seen["tarantool"]
    ours = seen["spindle"]
    assert ours["clear"] == [0, True, [[1]]]        # no value, still pending, visible
    assert ours["rows after clear"] == []
    if fate == "timeout":
        assert ours["result"] == TIMEOUT_ERROR
        assert ours["data"] == [[], []]
        assert ours["rows"] == [[["ROLLBACK", 1, 1, 1, 0]]] * 2
    else:
        assert ours["result"] == "ok"
        assert ours["data"] == [[[1]], [[1]]]
        assert ours["rows"] == [[["CONFIRM", 1, 1, 1, 0]]] * 2


# ------------------------------------------------------ the owner restarted

def restart_with_a_replica(cluster, kind: str, how: str) -> tuple[dict, tuple]:
    seen = {}
    master, replica = pair(cluster, kind)
    master.eval("box.schema.space.create('plain'):create_index('pk')")
    pause(replica)
    try:
        lsn = insert_pending(master, 1)
        master.kill() if how == "kill" else master.stop()
        master.start()
        seen["restarted"] = [master.select("sync"), rows_from(master, lsn)]
        seen["snapshot"] = master.eval(SNAPSHOT)
    finally:
        resume(replica)
    wait_acked(master, replica, lsn)
    seen["replica back"] = [replica.select("sync"), rows_from(master, lsn),
                            rows_from(replica, lsn), master.eval(SNAPSHOT)]
    seen["clear"] = master.eval(CLEAR)
    seen["after clear"] = [rows_from(master, lsn), master.eval(SNAPSHOT)]
    return seen, (master, replica, lsn)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_restarted_owner_keeps_its_unconfirmed_transaction_pending(how, tmp_path):
    with Cluster(tmp_path) as cluster:
        seen, nodes = {}, {}
        for kind in KINDS:
            seen[kind], nodes[kind] = restart_with_a_replica(cluster, kind, how)
            if kind == "tarantool":
                stop_all(*nodes[kind][:2])
        assert seen["spindle"] == seen["tarantool"]
        ours = seen["spindle"]
        assert ours["restarted"] == [[[1]], []]     # visible, nothing written for it
        assert ours["snapshot"] == TIMEOUT_ERROR      # and pending
        # the replica has the row and ACKed it: one ACK of quorum 2 after the restart
        assert ours["replica back"] == [[[1]], [], [], TIMEOUT_ERROR]
        assert ours["clear"] == [0, True, [[1]]]
        assert ours["after clear"] == [[], TIMEOUT_ERROR]

        # Spindle only (2.6.0 crashes here): an asynchronous write waits behind it,
        # a new synchronous one is an ACK of both; with the replica's they commit.
        master, replica, lsn = nodes["spindle"]
        assert synchro_queue_len(master) == 1
        master.eval("""plain_result = nil
            require('fiber').create(function()
                local ok, err = pcall(box.space.plain.insert, box.space.plain, {1})
                plain_result = ok and 'ok' or err.code
            end)""")
        assert master.eval("local ok, err = pcall(box.space.sync.insert, box.space.sync, {2}) "
                           "return ok or err.code") is True
        wait_for(lambda: master.eval("return plain_result") == "ok", 10, "the plain insert")
        wait_for(lambda: same_vclocks(master, replica), 30, "the replica")
        assert master.select("sync") == replica.select("sync") == [[1], [2]]
        assert master.select("plain") == replica.select("plain") == [[1]]
        confirmed = [row[4] for row in rows_from(master, lsn)]
        assert confirmed[0] == 0 and all(row[0] == "CONFIRM" for row in rows_from(master, lsn))
        wait_for(lambda: synchro_queue_len(replica) == 0, 10, "the replica's limbo")
        assert synchro_queue_len(master) == 0


def restart_alone_with_quorum_1(cluster, kind: str) -> tuple[dict, tuple]:
    seen = {}
    master = start_master(cluster, kind, name=f"{kind}-lone", quorum=2, timeout=60)
    lsn = insert_pending(master, 1)
    master.kill()
    master.cfg["replication_synchro_quorum"] = 1
    master.start()
    seen["restarted"] = [master.select("sync"), rows_from(master, lsn),
                         master.eval(SNAPSHOT)]
    master.eval("box.cfg{replication_synchro_quorum = 2} "
                "box.cfg{replication_synchro_quorum = 1}")
    seen["quorum 1 again"] = [rows_from(master, lsn), master.eval(SNAPSHOT)]
    seen["clear"] = master.eval(CLEAR)
    seen["after clear"] = [rows_from(master, lsn), master.eval(SNAPSHOT)]
    master.restart()
    seen["clean restart"] = [master.select("sync"), rows_from(master, lsn),
                             master.eval(SNAPSHOT)]
    return seen, (master, lsn)


def test_restart_with_quorum_1_confirms_nothing(tmp_path):
    """The transaction never had its quorum of 2; the restart with quorum 1 does
    not confirm it (2.6.0 counts no ACK for it, the own write included)."""
    with Cluster(tmp_path) as cluster:
        seen, nodes = {}, {}
        for kind in KINDS:
            seen[kind], nodes[kind] = restart_alone_with_quorum_1(cluster, kind)
            if kind == "tarantool":
                stop_all(nodes[kind][0])
        assert seen["spindle"] == seen["tarantool"]
        ours = seen["spindle"]
        assert ours["restarted"] == [[[1]], [], TIMEOUT_ERROR]
        assert ours["quorum 1 again"] == [[], TIMEOUT_ERROR]
        assert ours["clear"] == [0, True, [[1]]]
        assert ours["after clear"] == [[], TIMEOUT_ERROR]
        assert ours["clean restart"] == [[[1]], [], TIMEOUT_ERROR]

        # Spindle only (2.6.0 crashes here): the next write's own ACK is a quorum
        # of 1 for both, one CONFIRM covers both.
        master, lsn = nodes["spindle"]
        assert master.eval("return box.space.sync:insert{2}") == [2]
        assert master.select("sync") == [[1], [2]] and synchro_queue_len(master) == 0
        rows = rows_from(master, lsn)
        assert [row[0] for row in rows] == ["CONFIRM"] and rows[0][3:] == [1, rows[0][2] - 1]
