"""Synchronous replication between Spindle processes: quorum commits, timeouts that
leave no trace on either end, asynchronous writes waiting behind synchronous ones,
JOIN waiting for pending transactions, the formula quorum, and a replica taking over
the limbo with box.ctl.clear_synchro_queue()."""
from __future__ import annotations

from ..fault.qsync_support import (
    SYNC_SPACE, insert_error, pause, resume, start_master, start_replica, synchro_queue_len,
    synchro_rows, wait_downstream, wait_follow,
)
from .cluster import Cluster, same_vclocks, wait_for

TIMEOUT_ERROR = [216, "Quorum collection for a synchronous transaction is timed out"]
ROLLBACK_ERROR = [217, "A rollback for a synchronous transaction is received"]


def test_quorum_commits_confirm_on_both_ends(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2)
        replica = start_replica(cluster, "spindle", master)
        wait_downstream(master)
        master.eval("for i = 1, 50 do box.space.sync:insert{i} end")
        assert master.eval("return box.space.sync:count()") == 50
        wait_for(lambda: same_vclocks(master, replica), 10, "the replica")
        assert replica.select("sync") == master.select("sync")
        assert master.eval("return box.info.synchro") == \
            {"queue": {"owner": 1, "len": 0}, "quorum": 2}
        assert synchro_queue_len(replica) == 0
        confirms = [row for row in synchro_rows(master) if row[0] == "CONFIRM"]
        assert confirms and confirms[-1][3:] == (1, master.vclock()[1] - 1)
        # the replica logged the master's CONFIRM rows as they came
        assert [r for r in synchro_rows(replica) if r[0] == "CONFIRM"] == confirms


def test_timeout_rolls_back_on_both_ends(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=1.0)
        replica = start_replica(cluster, "spindle", master)
        wait_downstream(master)
        master.eval("box.space.sync:insert{1}")
        wait_for(lambda: replica.select("sync") == [[1]], 10, "the first row")
        pause(replica)                     # gets the row, cannot ACK it
        try:
            assert insert_error(master, "sync", 2) == TIMEOUT_ERROR
        finally:
            resume(replica)
        assert master.select("sync") == [[1]]
        wait_follow(replica)
        wait_for(lambda: same_vclocks(master, replica), 20, "the ROLLBACK on the replica")
        assert replica.select("sync") == [[1]]
        rollback = [row for row in synchro_rows(master) if row[0] == "ROLLBACK"]
        assert len(rollback) == 1 and rollback[0][3:] == (1, rollback[0][2] - 1)
        assert rollback[0] in synchro_rows(replica)
        assert synchro_queue_len(master) == 0 and synchro_queue_len(replica) == 0
        # and the pair goes on committing
        master.eval("box.space.sync:insert{3}")
        wait_for(lambda: replica.select("sync") == [[1], [3]], 10, "the next row")


def test_async_writes_wait_behind_and_share_the_rollback(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=1.5)
        master.eval("box.schema.space.create('plain'):create_index('pk')")
        outcome = master.eval("""
            local fiber = require('fiber')
            local results = {}
            local sync = fiber.new(function()
                local ok, err = pcall(box.space.sync.insert, box.space.sync, {1})
                results.sync = ok and 'ok' or err.code
            end)
            sync:set_joinable(true)
            local deadline = fiber.clock() + 30
            while box.info.synchro.queue.len == 0 and fiber.clock() < deadline do
                fiber.sleep(0.01)
            end
            results.queued_before = box.info.synchro.queue.len
            local ok, err = pcall(box.space.plain.insert, box.space.plain, {1})
            results.plain = ok and 'ok' or err.code
            sync:join()
            return results
        """)
        # it waited behind the synchronous one (in the limbo when it was written)
        # and shared its rollback: 217, not the 'ok' of a write that did not wait
        assert outcome["queued_before"] == 1
        assert outcome["sync"] == 216 and outcome["plain"] == 217
        assert master.select("plain") == [] and master.select("sync") == []
        # with the limbo empty an asynchronous write does not wait: it commits
        # although no replica could ever confirm it (one that waited would time out)
        master.eval("box.space.plain:insert{2}")
        assert master.select("plain") == [[2]]


def test_join_waits_for_pending_sync_transactions(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=3.0)
        master.eval("""require('fiber').create(function()
            pcall(box.space.sync.insert, box.space.sync, {1}) end)""")
        wait_for(lambda: synchro_queue_len(master) == 1, 5, "a pending transaction")
        replica = cluster.add("spindle", "replica", {
            "replication_timeout": 0.1, "replication": [master.rep_uri], "read_only": True})
        replica.start(wait=False)
        replica.wait_ready(60)
        wait_follow(replica)
        # the JOIN was refused with ER_SYNC_ROLLBACK when the transaction timed out,
        # then retried: the joined data never had the rolled-back row
        assert "A rollback for a synchronous transaction is received" in replica.output()
        assert replica.select("sync") == [] and master.select("sync") == []
        wait_for(lambda: same_vclocks(master, replica), 10, "the replica")


def test_formula_quorum_follows_the_replica_count(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum="N/2+1", timeout=1.0)
        assert master.eval("return box.info.synchro.quorum") == 1
        master.eval("box.space.sync:insert{1}")          # alone: N = 1, quorum 1
        replica = start_replica(cluster, "spindle", master)
        wait_downstream(master)
        assert master.eval("return box.info.synchro.quorum") == 2   # N = 2
        master.eval("box.space.sync:insert{2}")
        pause(replica)
        try:
            assert insert_error(master, "sync", 3) == TIMEOUT_ERROR
        finally:
            resume(replica)
        wait_follow(replica)
        wait_for(lambda: same_vclocks(master, replica), 20, "the replica")
        assert replica.select("sync") == [[1], [2]]


def test_lower_quorum_confirms_a_pending_transaction(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=30)
        master.eval("""require('fiber').create(function()
            box.space.sync:insert{1} end)""")
        wait_for(lambda: synchro_queue_len(master) == 1, 5, "a pending transaction")
        master.eval("box.cfg{replication_synchro_quorum = 1}")
        wait_for(lambda: synchro_queue_len(master) == 0, 5, "the CONFIRM")
        assert master.select("sync") == [[1]]
        assert [row[0] for row in synchro_rows(master)] == ["CONFIRM"]


def test_replica_takes_over_the_limbo_with_clear_synchro_queue(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=3, timeout=60)
        replica = start_replica(cluster, "spindle", master,
                                replication_synchro_quorum=1, replication_synchro_timeout=0.5)
        wait_downstream(master)
        master.eval("""require('fiber').create(function()
            pcall(box.space.sync.insert, box.space.sync, {1}) end)""")
        wait_for(lambda: replica.select("sync") == [[1]], 10, "the row on the replica")
        assert replica.eval("return box.info.synchro.queue") == {"owner": 1, "len": 1}
        master.kill()
        replica.eval("box.cfg{read_only = false} box.ctl.clear_synchro_queue()")
        assert replica.eval("return box.info.synchro.queue.len") == 0
        assert replica.select("sync") == [[1]]
        # the new master confirmed the old one's transaction in its own name
        kind, header_id, _, owner, lsn = synchro_rows(replica)[-1]
        assert (kind, header_id, owner) == ("CONFIRM", 2, 1)
        # and its own synchronous writes work (quorum 1 there)
        replica.eval("box.space.sync:insert{2}")
        assert replica.select("sync") == [[1], [2]]


def test_space_is_sync_alter_and_schema(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("spindle", "master", {"replication_synchro_quorum": 2,
                                                    "replication_synchro_timeout": 0.3}).start()
        master.eval(SYNC_SPACE)
        assert master.eval("return box.space.sync.is_sync") is True
        assert insert_error(master, "sync", 1) == TIMEOUT_ERROR
        # (no space:alter in Spindle yet: the same change as DML on _space)
        master.eval("box.space._space:update(box.space.sync.id, {{'=', 6, {is_sync = false}}})")
        assert master.eval("return box.space.sync.is_sync") is False
        master.eval("box.space.sync:insert{1}")              # no quorum needed now
        assert master.select("sync") == [[1]]


def test_snapshot_waits_for_the_limbo(tmp_path):
    """A snapshot holds no limbo, so it is taken only once the pending transactions
    are decided (a rolled-back one fails box.snapshot() as in 2.6.0: see
    test_qsync_tarantool.py); a rolled-back row never comes back from it."""
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=1.0)
        master.eval("""require('fiber').create(function()
            pcall(box.space.sync.insert, box.space.sync, {1}) end)""")
        wait_for(lambda: synchro_queue_len(master) == 1, 5, "a pending transaction")
        # refused: rolled back (217), or not decided within the snapshot's own wait
        # of replication_synchro_timeout (216) — a race between two equal timeouts;
        # either way it waited for the outcome of what was pending when it began
        pending, code = master.eval("local pending = box.info.synchro.queue.len "
                                    "local ok, err = pcall(box.snapshot) "
                                    "return {pending, err.code}")
        assert pending == 1 and code in (216, 217)
        wait_for(lambda: synchro_queue_len(master) == 0, 5, "the ROLLBACK")
        assert master.eval("return box.snapshot()") == "ok"
        master.restart()
        assert master.select("sync") == [] and synchro_queue_len(master) == 0


STREAM = """
    writers_stop = false
    written = 0
    local fiber = require('fiber')
    for f = 1, 10 do
        fiber.create(function()
            local key = f * 1000000
            while not writers_stop do
                key = key + 1
                box.space.sync:insert{key}
                written = written + 1
            end
        end)
    end
"""


def test_snapshots_under_a_stream_of_sync_writes(tmp_path):
    """The checkpoint gate drains the limbo for a moment: box.snapshot() and the
    checkpoint daemon succeed while synchronous writes never stop, and the data
    after a restart is the data before it."""
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=1, timeout=5.0)
        master.eval(STREAM)
        wait_for(lambda: master.eval("return written") > 500, 10, "writes")
        for _ in range(3):
            # taken within the snapshot's own wait for the limbo (else 216), and
            # the writes went on around it
            before = master.eval("return written")
            assert master.eval("return box.snapshot()") == "ok"
            wait_for(lambda: master.eval("return written") > before, 10, "more writes")
        def snapshots_written():
            return master.output().count("snapshot/101/main I> done")

        written = snapshots_written()
        master.eval("box.cfg{checkpoint_interval = 0.2}")
        wait_for(lambda: snapshots_written() >= written + 2, 20, "the daemon's checkpoints")
        assert "checkpoint after draining the limbo failed" not in master.output()
        master.eval("writers_stop = true require('fiber').sleep(0.2)")
        count = master.eval("return box.space.sync:count()")
        master.restart()
        assert master.eval("return box.space.sync:count()") == count
