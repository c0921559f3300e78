"""Sequences across replication (issue 23 item 2): a Spindle replica of a Tarantool
2.6.0 master whose spaces auto-increment, and a Tarantool 2.6.0 replica of a Spindle
master. The JOIN brings every sequence's value (the values a checkpoint writes, not
the `_sequence_data` rows: auto-increment writes none), the stream moves the
replica's sequences with the values its rows carry, and after a failover the former
replica goes on numbering where the master stopped."""
from __future__ import annotations

import pytest

from ..integration.cluster import Cluster, same_vclocks, wait_for

FAST = {"replication_timeout": 0.1}

BEFORE_JOIN = """
local s = box.schema.sequence.create('s', {start = 10})
box.sequence.s:next() box.sequence.s:next()
local t = box.schema.space.create('t')
t:create_index('pk', {sequence = true})
for i = 1, 5 do t:insert{box.NULL, 'joined' .. i} end
local u = box.schema.space.create('u', {format = {{'a', 'string'}, {'b', 'unsigned'}}})
u:create_index('pk', {parts = {'a', 'b'}, sequence = {id = 's', field = 'b'}})
u:insert{'k', box.NULL} u:insert{'k', box.NULL}
local d = box.schema.sequence.create('down', {step = -3, min = -100, max = 0, start = 0,
                                              cycle = true})
for _ = 1, 40 do d:next() end
"""

AFTER_JOIN = """
local t, u = box.space.t, box.space.u
t:insert{box.NULL, 'streamed'}
t:insert{100, 'explicit'}
t:replace{box.NULL, 'after the explicit one'}
box.begin() t:insert{box.NULL, 'txn'} u:insert{'m', box.NULL} box.commit()
box.sequence.s:set(50)
box.sequence.s:next()
box.schema.sequence.create('late', {start = 7}):next()
local v = box.schema.space.create('v')
v:create_index('pk', {sequence = 'late'})
v:insert{box.NULL} v:insert{box.NULL}
box.sequence.down:reset()
"""

VALUES = """
local out = {}
for _, name in ipairs({'s', 't_seq', 'late', 'down'}) do
    local seq = box.sequence[name]
    if seq == nil then
        out[name] = 'none'
    else
        local ok, value = pcall(seq.current, seq)
        out[name] = ok and tonumber(value) or value.message
    end
end
return out
"""


def _in_sync(master, replica) -> bool:
    return same_vclocks(master, replica) and all(
        replica.select(space) == master.select(space) for space in ("t", "u"))


@pytest.mark.parametrize("master_kind, replica_kind", [("tarantool", "spindle"),
                                                       ("spindle", "tarantool")])
def test_sequences_replicate_and_survive_a_failover(master_kind, replica_kind, tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add(master_kind, "master", dict(FAST)).start()
        master.eval(BEFORE_JOIN)
        replica = cluster.add(replica_kind, "replica",
                              {**FAST, "replication": [master.rep_uri], "read_only": True})
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "the replica to follow")
        wait_for(lambda: _in_sync(master, replica), 15, "the joined data")
        joined = {"s": 13, "t_seq": 5, "late": "none", "down": -15}
        assert master.eval(VALUES) == joined
        assert replica.eval(VALUES) == joined
        assert replica.eval("return box.space.t.index.pk.sequence_id") == \
            master.eval("return box.space.t.index.pk.sequence_id")

        master.eval(AFTER_JOIN)
        wait_for(lambda: _in_sync(master, replica) and replica.select("v") == master.select("v"),
                 15, "the stream")
        streamed = master.eval(VALUES)
        assert streamed == {"s": 51, "t_seq": 102, "late": 9,
                            "down": "Sequence 'down' is not started"}
        assert replica.eval(VALUES) == streamed

        # failover: the former replica numbers on from the master's values
        master.eval("box.cfg{read_only = true}")
        replica.eval("box.cfg{read_only = false}")
        assert replica.eval("return box.space.t:insert{box.NULL, 'promoted'}") == \
            [103, "promoted"]
        assert replica.eval("return box.space.u:insert{'m', box.NULL}") == ["m", 52]
        assert replica.eval("return box.space.v:insert{box.NULL}") == [10]
        assert replica.eval("return box.sequence.down:next()") == 0

        # and a restart of the former replica (its own snapshot and WAL) keeps them
        replica.eval("box.snapshot()")
        replica.eval("box.space.t:insert{box.NULL, 'before the restart'}")
        replica.cfg["read_only"] = False
        replica.restart()
        # read-only (orphan) until it has synced with its upstream again
        wait_for(lambda: replica.eval("return box.info.ro") is False, 60,
                 "the restarted replica to be writable")
        assert replica.eval("return box.space.t:insert{box.NULL, 'restarted'}") == \
            [105, "restarted"]
        assert replica.eval(VALUES)["s"] == 52
