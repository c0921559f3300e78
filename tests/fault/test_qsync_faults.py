"""Synchronous replication under crashes (real Spindle processes, kill -9): the
replica is restarted (cleanly and with kill -9) while the master commits a stream
of synchronous writes: every write that returned is everywhere, every one that
failed is nowhere.
The master dying before its CONFIRM, beside Tarantool 2.6.0, is
test_qsync_limbo_owner.py; the long randomized history is test_qsync_history.py.
"""
from __future__ import annotations

from ..integration.cluster import Cluster, same_vclocks, wait_for
from .qsync_support import (
    start_master, start_replica, synchro_queue_len, wait_downstream, wait_follow,
)


def test_replica_restarts_during_a_stream_of_sync_writes(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=0.5)
        replica = start_replica(cluster, "spindle", master)
        wait_downstream(master)
        master.eval("""
            history = {}
            writer_stop = false
            local fiber = require('fiber')
            writer = fiber.new(function()
                local key = 0
                while not writer_stop do
                    key = key + 1
                    local ok = pcall(box.space.sync.insert, box.space.sync, {key})
                    history[key] = ok
                    if key % 20 == 0 then fiber.sleep(0.01) end
                end
            end)
            writer:set_joinable(true)
        """)

        def committed():
            return master.eval("local n = 0 for _, ok in pairs(history) do "
                               "if ok then n = n + 1 end end return n")

        for stop in (replica.stop, replica.kill, replica.stop):
            before = committed()
            wait_for(lambda: committed() > before + 50, 20, "writes going on")
            stop()
            replica.start()
            wait_follow(replica)
        before = committed()
        wait_for(lambda: committed() > before + 50, 20, "writes after the last restart")
        master.eval("writer_stop = true writer:join()")
        wait_for(lambda: same_vclocks(master, replica), 30, "the replica to catch up")
        check_history(master.eval("return history"), master, replica)


def check_history(history, *nodes) -> None:
    """Every acknowledged key is on every node, every failed key on none."""
    if isinstance(history, dict):
        outcome = {int(k): v for k, v in history.items()}
    else:
        outcome = {i + 1: v for i, v in enumerate(history)}
    acked = {k for k, ok in outcome.items() if ok}
    failed = {k for k, ok in outcome.items() if not ok}
    assert acked, "nothing was committed"
    for node in nodes:
        keys = {row[0] for row in node.select("sync")}
        assert acked <= keys, f"{node.name} lost {sorted(acked - keys)[:10]}"
        assert not failed & keys, f"{node.name} shows failed {sorted(failed & keys)[:10]}"
        assert synchro_queue_len(node) == 0

