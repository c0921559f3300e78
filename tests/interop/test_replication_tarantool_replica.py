"""Real Tarantool 2.6.0 replicas of a Spindle master: JOIN of a master that has data,
the stream of single- and multi-statement transactions, restart and catch-up across
xlog rotations, and an anonymous replica that fetches a snapshot, follows, and then
registers. Data, vclocks and `follow` states must be equal on both ends."""
from __future__ import annotations

import pytest

from ..integration.cluster import Cluster, same_vclocks, wait_for

FAST = {"replication_timeout": 0.1}
DATA = """
local s = box.schema.space.create('test', {format = {{'id', 'unsigned'}, {'name', 'string'},
                                                     {'n', 'unsigned'}}})
s:create_index('pk')
s:create_index('by_name', {parts = {2, 'string'}})
s:create_index('by_n', {parts = {3, 'unsigned'}, unique = false, type = 'tree'})
box.schema.space.create('loc', {is_local = true}):create_index('pk')
box.schema.space.create('tmp', {temporary = true}):create_index('pk')
for i = 1, 50 do s:insert{i, 'name' .. i, i % 7} end
for i = 1, 5 do box.space.loc:insert{i} box.space.tmp:insert{i} end
"""

WRITES = """
local s = box.space.test
s:insert{100, 'single', 1}
s:replace{1, 'replaced', 2}
s:update({2}, {{'=', 2, 'updated'}, {'+', 3, 10}})
s:upsert({3, 'x', 3}, {{'+', 3, 1}})
s:upsert({101, 'upserted', 4}, {{'+', 3, 1}})
s:delete{4}
box.begin()
s:insert{102, 'txn-a', 5}
box.space.loc:insert{100}
s:insert{103, 'txn-b', 6}
s:update({5}, {{'=', 2, 'txn-c'}})
box.commit()
box.begin() s:insert{104, 'local-last', 1} box.space.loc:insert{101} box.commit()
"""


def master_node(cluster):
    master = cluster.add("spindle", "master", dict(FAST))
    master.start()
    master.eval(DATA)
    return master


def downstream(master, replica_id: int) -> dict:
    return master.eval("local r = box.info.replication[...] "
                       "return r and r.downstream or {}", replica_id) or {}


def in_sync(master, replica) -> bool:
    return same_vclocks(master, replica) and replica.select("test") == master.select("test")


def test_tarantool_replica_joins_follows_and_catches_up_after_restart(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = master_node(cluster)
        replica = cluster.add("tarantool", "replica",
                              {**FAST, "replication": [master.rep_uri], "read_only": True})
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 20, "the replica to follow")
        assert replica.info("id") == 2
        wait_for(lambda: in_sync(master, replica), 10, "the joined data")
        # indexes came with the schema: the replica can use them
        assert replica.eval("return box.space.test.index.by_name:get{'name7'}") == \
            [7, "name7", 0]
        assert len(replica.eval("return box.space.test.index.by_n:select{3}")) == 7
        # a local space's rows and a temporary space's rows stay on the master
        assert replica.select("loc") == [] and replica.select("tmp") == []
        assert len(master.select("loc")) == 5

        master.eval(WRITES)
        wait_for(lambda: in_sync(master, replica), 10, "the stream")
        assert replica.eval("return box.space.test:get{2}") == [2, "updated", 12]
        assert replica.select("loc") == []
        uuid = replica.info("uuid")
        consumers = master.eval("return box.info.gc().consumers")
        assert [c["name"] for c in consumers] == [f"replica {uuid}"]
        assert replica.upstream_status(1) == "follow"
        # the master's side of the link, as box.info.replication shows it
        wait_for(lambda: downstream(master, 2).get("vclock") == replica.vclock(), 10,
                 "the downstream vclock")
        assert downstream(master, 2)["status"] == "follow"

        # Down while the master writes and rotates its xlogs twice.
        replica.stop()
        wait_for(lambda: downstream(master, 2)["status"] == "stopped", 10, "stopped")
        gone = downstream(master, 2)
        # the replica's close reaches the relay as an EOF, or as a reset (a read
        # error) when it closed with bytes of ours unread: which one is timing
        reset = gone["message"].startswith("read(")
        assert reset or gone["message"].startswith(
            "unexpected EOF when reading from socket, called on fd ")
        assert f"aka 127.0.0.1:{master.port}, peer of 127.0.0.1:" in gone["message"]
        if not reset:
            assert gone["system_message"] == "Broken pipe"      # as 2.6.0 shows it
        master.eval("for i = 200, 260 do box.space.test:insert{i, 'down' .. i, i} end")
        master.eval("box.snapshot()")
        master.eval("box.begin() for i = 300, 320 do box.space.test:insert{i, 'b' .. i, 0} "
                    "end box.commit()")
        master.eval("box.snapshot()")
        master.eval("box.space.test:delete{200}")
        # the consumer held the files the replica needs
        assert master.eval("return box.info.gc().consumers[1].signature") <= \
            master.eval("return box.info.signature") - 80
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 20, "follow again")
        wait_for(lambda: in_sync(master, replica), 10, "the catch-up")
        master.eval("box.space.test:insert{400, 'after', 4}")
        wait_for(lambda: in_sync(master, replica), 10, "rows after the catch-up")
        # the replica ACKed past the rotations: its consumer moved on
        wait_for(lambda: master.eval("return box.info.gc().consumers[1].signature")
                 > master.eval("return box.info.gc().checkpoints[1].signature") - 1,
                 10, "the consumer to advance")

        # Both down; the master comes back first (nothing in memory: the replica's
        # rows come from the xlog files, across a rotation), then the replica.
        replica.stop()
        master.eval("for i = 600, 700 do box.space.test:insert{i, 'x' .. i, i} end")
        master.eval("box.snapshot()")
        master.eval("box.space.test:update({600}, {{'=', 2, 'y'}})")
        master.restart()
        master.eval("box.space.test:insert{701, 'after-restart', 1}")
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 20, "follow a restarted master")
        wait_for(lambda: in_sync(master, replica), 10, "the catch-up from files")


def test_tarantool_replica_while_the_master_writes(tmp_path):
    """JOIN while writes go on: the read view, the final stage and the stream fit."""
    with Cluster(tmp_path) as cluster:
        master = master_node(cluster)
        master.eval("""
            fiber = require('fiber')
            writer = fiber.create(function()
                for i = 1000, 1400 do
                    box.space.test:insert{i, 'w' .. i, i}
                    if i % 10 == 0 then fiber.sleep(0.001) end
                end
            end)""")
        replica = cluster.add("tarantool", "replica",
                              {**FAST, "replication": [master.rep_uri], "read_only": True})
        replica.start()
        wait_for(lambda: master.eval("return box.space.test:get{1400} ~= nil"), 20, "writes")
        wait_for(lambda: in_sync(master, replica), 20, "the replica to converge")
        assert replica.upstream_status(1) == "follow"


def test_anonymous_tarantool_replica_fetches_follows_and_registers(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = master_node(cluster)
        anon = cluster.add("tarantool", "anon",
                           {**FAST, "replication": [master.rep_uri],
                            "replication_anon": True, "read_only": True})
        anon.start()
        wait_for(lambda: anon.upstream_status(1) == "follow", 20, "the anonymous replica")
        assert anon.info("id") == 0
        wait_for(lambda: in_sync(master, anon), 10, "the snapshot")
        master.eval(WRITES)
        wait_for(lambda: in_sync(master, anon), 10, "the stream")
        uuid = anon.info("uuid")
        assert master.eval("return box.space._cluster.index.uuid:get{...}", uuid) is None
        assert master.eval("return #box.info.gc().consumers") == 0
        listed = master.eval("return box.info.replication_anon()")
        assert list(listed) == [uuid] and listed[uuid]["id"] == 0
        assert listed[uuid]["downstream"]["status"] == "follow"
        assert master.eval("return box.info.replication_anon.count") == 1

        anon.eval("box.cfg{replication_anon = false}")
        wait_for(lambda: anon.info("id") == 2, 10, "the registration")
        assert master.eval("return box.space._cluster.index.uuid:get{...}", uuid) == [2, uuid]
        wait_for(lambda: anon.upstream_status(1) == "follow", 20, "follow after REGISTER")
        master.eval("box.space.test:insert{500, 'registered', 5}")
        wait_for(lambda: in_sync(master, anon), 10, "the stream after REGISTER")
        consumers = master.eval("return box.info.gc().consumers")
        assert [c["name"] for c in consumers] == [f"replica {uuid}"]
        assert downstream(master, 2)["status"] == "follow"
        wait_for(lambda: master.eval("return box.info.replication_anon.count") == 0, 10,
                 "the anonymous downstream to go")


@pytest.mark.parametrize("kind", ["spindle", "tarantool"])
def test_two_replicas_of_one_master(tmp_path, kind):
    """A Spindle master serves two downstreams at once, as Tarantool does."""
    with Cluster(tmp_path) as cluster:
        master = cluster.add(kind, "master", dict(FAST))
        master.start()
        master.eval(DATA)
        replicas = [cluster.add("tarantool", f"r{i}",
                                {**FAST, "replication": [master.rep_uri], "read_only": True})
                    for i in (1, 2)]
        for replica in replicas:
            replica.start()
        master.eval(WRITES)
        for replica in replicas:
            wait_for(lambda replica=replica: in_sync(master, replica), 20, replica.name)
        assert sorted(r.info("id") for r in replicas) == [2, 3]
