"""Bad input through replication, with real Tarantool 2.6.0 on the other end.

* a 2.6.0 master stores strings that are not UTF-8 (from IPROTO and from Lua:
  uuid:bin(), '\\xff') and extensions it cannot read; a Spindle replica follows it
  and holds the same bytes, before and after a restart;
* the same the other way round: a Spindle master, a 2.6.0 replica;
* a replicated transaction holding a value no index of the Spindle replica can order
  (a decimal 2.6.0 cannot read, under an index only the replica has: a 2.6.0 replica
  would crash) gives 2.6.0's later error, applies nothing of the transaction, and the
  applier goes on trying instead of stopping for good: once the index is gone the
  replica catches up.
"""
from __future__ import annotations

from ..integration.cluster import Cluster, same_vclocks, wait_for
from .test_bad_input_oracle import (
    BAD, HALF, INSERT, ODD_DECIMALS, REPLACE, SPACES_LUA, UNREADABLE, UPDATE, UPSERT, UUID_STR,
    Client, lua, put, select_all,
)

FAST = {"replication_timeout": 0.2, "replication_connect_timeout": 15}
SCHEMA = SPACES_LUA + """
space('stage', nil, {1, 'unsigned'})
"""
SPACE_NAMES = ("str", "strk", "scal", "anyf", "nofmt", "dec", "deck", "uuidf", "uuidk")


def writes() -> list:
    """What the master is asked to store (each request's outcome is compared too)."""
    steps = [put("str", [1, BAD]), put("str", [2, UUID_STR]), put("str", [3, HALF]),
             put("strk", [BAD]), put("strk", [HALF]), put("scal", [1, BAD]),
             put("anyf", [1, UUID_STR]),
             (UPDATE, {0x10: 512, 0x20: [3], 0x21: [[":", 1, 1, 0, "\udce2"]]}),
             (UPSERT, {0x10: 512, 0x21: [4, BAD], 0x28: [["=", 1, "\udc80"]]}),
             (UPSERT, {0x10: 512, 0x21: [4, BAD], 0x28: [["=", 1, "\udc80"]]}),
             (5, {0x10: 513, 0x11: 0, 0x20: [HALF]}),          # DELETE by a bad key
             lua("local u = require('uuid') box.begin() box.space.str:replace{10, "
                 "u.fromstr('6ba7b810-9dad-11d1-80b4-00c04fd430c8'):bin()} "
                 "box.space.strk:replace{'\\xff\\xfe\\xfd'} "
                 "box.space.str:replace{11, '\\xc3('} box.commit()")]
    ident = 100
    for value in [*UNREADABLE.values(), *ODD_DECIMALS.values()]:
        for space in ("dec", "scal", "anyf", "nofmt", "uuidf"):
            ident += 1
            steps.append(put(space, [ident, value], INSERT))
        steps.append(put("nofmt", [ident + 1000, [value], {"k": value}, BAD]))
        steps.append((UPDATE, {0x10: 516, 0x20: [ident + 1000], 0x21: [["=", 1, value]]}))
    for value in ODD_DECIMALS.values():
        steps.append(put("deck", [value], REPLACE))
    steps.append(put("uuidk", [UNREADABLE["uuid of a reserved variant"]]))
    # a transaction of raw values: copies of stored tuples keep their bytes in 2.6.0
    steps.append(lua("box.begin() for _, t in box.space.nofmt:pairs() do "
                     "if t[1] < 1000 then box.space.nofmt:replace(t:update{{'=', 1, t[1] + 5000}}) "
                     "end end box.commit()"))
    return steps


def caught_up(master, replica) -> bool:
    """The replica has the master's rows (its own vclock part aside: its own DDL)."""
    return replica.vclock().get(1) == master.vclock().get(1)


def snapshot(port: int) -> list:
    client = Client(port)
    try:
        return [client.request(*select_all(space)) for space in SPACE_NAMES]
    finally:
        client.close()


def write(port: int) -> list:
    client = Client(port)
    try:
        return [client.request(*step) for step in writes()]
    finally:
        client.close()


def test_tarantool_master_spindle_replica(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("tarantool", "master", FAST).start()
        master.eval(SCHEMA)
        replica = cluster.add("spindle", "replica", {**FAST, "replication": [master.rep_uri]})
        replica.start()
        outcomes = write(master.port)
        assert ("ok",) == outcomes[0][:1] and all(o[0] == "ok" for o in outcomes[:12])
        wait_for(lambda: same_vclocks(master, replica), 30, "the replica to catch up")
        stored = snapshot(master.port)
        assert all(reply[0] == "ok" for reply in stored)
        assert sum(len(reply[1]) for reply in stored) > 1500       # the values are there
        assert snapshot(replica.port) == stored
        assert replica.upstream_status(1) == "follow"
        replica.restart()
        assert snapshot(replica.port) == snapshot(master.port)
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "following again")
        # a replica joining now gets the values in the initial JOIN
        late = cluster.add("spindle", "late", {**FAST, "replication": [master.rep_uri]})
        late.start()
        wait_for(lambda: same_vclocks(master, late), 30, "the late replica")
        assert snapshot(late.port) == snapshot(master.port)


def test_spindle_master_tarantool_replica(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("spindle", "master", FAST).start()
        master.eval(SCHEMA)
        replica = cluster.add("tarantool", "replica", {**FAST, "replication": [master.rep_uri]})
        replica.start()
        write(master.port)
        wait_for(lambda: same_vclocks(master, replica), 30, "the replica to catch up")
        assert snapshot(replica.port) == snapshot(master.port)
        assert replica.upstream_status(1) == "follow"
        downstream = master.eval("return box.info.replication[2].downstream.status")
        assert downstream == "follow"
        master.eval("box.snapshot()")
        late = cluster.add("tarantool", "late", {**FAST, "replication": [master.rep_uri]})
        late.start()
        wait_for(lambda: same_vclocks(master, late), 30, "the late replica")
        assert snapshot(late.port) == snapshot(master.port)


def test_a_row_no_index_of_the_replica_can_order(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("tarantool", "master", FAST).start()
        master.eval(SCHEMA)
        replica = cluster.add("spindle", "replica", {**FAST, "replication": [master.rep_uri]})
        replica.start()
        client = Client(master.port)
        # staged where no index reads it: replicated as it is
        staged = client.request(3, {0x10: 522, 0x21: [1, UNREADABLE["decimal without BCD"]]})
        assert staged[0] == "ok"
        wait_for(lambda: caught_up(master, replica), 30, "the staged row")
        replica.eval("box.space.nofmt:create_index('n', {parts = {2, 'number'}, "
                     "unique = false})")
        client.request(*lua("box.begin() box.space.nofmt:insert{10, 1} "
                            "box.space.nofmt:insert(box.space.stage:get{1}:update{{'=', 1, 11}}) "
                            "box.commit()"))
        client.close()

        def refused():
            upstream = replica.eval("return box.info.replication[1].upstream")
            return upstream if upstream.get("message") else None
        upstream = wait_for(refused, 30, "the replica to refuse the row")
        assert upstream["message"] == "Invalid MsgPack - packet body"
        assert upstream["status"] != "stopped"
        assert replica.eval("return box.space.nofmt:get{10}") is None     # nothing of it
        replica.eval("box.space.nofmt.index.n:drop()")
        wait_for(lambda: caught_up(master, replica), 30, "the replica to catch up")
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "following again")
        assert snapshot(replica.port) == snapshot(master.port)
