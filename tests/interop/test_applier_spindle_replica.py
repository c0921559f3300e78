"""Spindle replica of a Tarantool master: JOIN, stream, restart and resubscribe — the
whole path, `box.cfg{replication = ...}` in a Spindle process against a real
Tarantool 2.6.0 master. Data, vclocks and `follow` states must agree; the master
must see our ACKs; a restart of either side must not lose or repeat a row.

These tests fail, never skip, when tarantool is not installed.
"""
from __future__ import annotations

from ..integration.cluster import Cluster, same_vclocks, wait_for

FAST = {"replication_timeout": 0.1}
DATA = """
local s = box.schema.space.create('test', {format = {{'id', 'unsigned'}, {'name', 'string'}}})
s:create_index('pk')
s:create_index('by_name', {parts = {2, 'string'}})
box.schema.space.create('loc', {is_local = true}):create_index('pk')
for i = 1, 200 do s:insert{i, 'name' .. i} end
box.space.loc:insert{1}
"""
WRITES = """
local s = box.space.test
s:replace{1, 'replaced'}
s:update({2}, {{'=', 2, 'updated'}})
s:upsert({3, 'x'}, {{'=', 2, 'upserted'}})
s:delete{4}
box.begin()
s:insert{1001, 'txn-a'}
box.space.loc:insert{2}
s:insert{1002, 'txn-b'}
box.commit()
"""


def in_sync(master, replica) -> bool:
    return same_vclocks(master, replica) and replica.select("test") == master.select("test")


def test_spindle_replica_of_a_tarantool_master(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("tarantool", "master", dict(FAST)).start()
        master.eval(DATA)
        replica = cluster.add("spindle", "replica", {**FAST, "replication": [master.rep_uri]})
        replica.start()
        # JOIN: the snapshot and the final rows, then SUBSCRIBE
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "replica to follow")
        assert replica.info("id") == 2
        assert replica.info("cluster")["uuid"] == master.info("cluster")["uuid"]
        wait_for(lambda: in_sync(master, replica), 20, "the joined data")
        assert replica.eval("return box.space.loc:count()") == 0      # local: not replicated
        assert replica.eval("return box.space.test.index.by_name:get{'name7'}") == [7, "name7"]

        # the stream: every kind of DML and a multi-statement transaction
        master.eval(WRITES)
        wait_for(lambda: in_sync(master, replica), 20, "the stream")
        # the master sees our ACKs
        wait_for(lambda: {int(k): v for k, v in (master.eval(
            "return box.info.replication[2].downstream.vclock") or {}).items()}
            == master.vclock(), 20, "the master to see our ACK")
        upstream = replica.eval("return box.info.replication[1].upstream")
        assert upstream["status"] == "follow" and upstream["peer"] == master.rep_uri.replace(
            ":pw@", "@")

        # the replica restarts: local recovery, SUBSCRIBE from its vclock, catch-up
        replica.stop()
        master.eval("for i = 2001, 2100 do box.space.test:insert{i, 'down' .. i} end")
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "follow after restart")
        wait_for(lambda: in_sync(master, replica), 20, "catch-up after the replica's restart")

        # the master restarts: the applier reconnects and resubscribes
        master.restart()
        # (2.6.0 reports status 'running' a moment before its box.cfg clears ro)
        wait_for(lambda: master.eval("return box.info.ro") is False, 30, "the master writable")
        master.eval("box.space.test:replace{1, 'after master restart'}")
        wait_for(lambda: in_sync(master, replica), 30, "catch-up after the master's restart")
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "follow again")
        assert replica.eval("return box.info.ro") is False or \
            replica.eval("return box.info.status") == "running"
