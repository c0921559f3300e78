"""Index kinds across replication (issue 23 item 4): a Spindle replica of a Tarantool
2.6.0 master, and a 2.6.0 replica of a Spindle master, whose spaces have JSON-path, nullable, collated, BITSET, RTREE, multikey
and functional indexes (plain and multikey, their functions persistent ones). The
JOIN and the stream bring every row and every index definition; the replica keeps
following, and its indexes answer as the master's. This was the reported bug: a
replica of a master with a JSON-path index failed its JOIN ("on_rollback trigger
failed") and exited."""
from __future__ import annotations

import pytest

from ..integration.cluster import Cluster, same_vclocks, wait_for

FAST = {"replication_timeout": 0.1}

SCHEMA = """
local s = box.schema.space.create('j')
s:create_index('pk')
s:create_index('path', {parts = {{2, 'string', path = 'a.b'}}})
s:create_index('nullable', {parts = {{3, 'unsigned', is_nullable = true}}, unique = false})
s:create_index('coll', {parts = {{4, 'string', collation = 'unicode_ci'}}, unique = false})
s:create_index('bits', {type = 'bitset', parts = {5, 'unsigned'}})
local r = box.schema.space.create('r')
r:create_index('pk')
r:create_index('rt', {type = 'rtree', parts = {2, 'array'}})
r:create_index('rt3', {type = 'rtree', parts = {3, 'array'}, dimension = 3,
                       distance = 'manhattan'})
local m = box.schema.space.create('m')
m:create_index('pk')
m:create_index('mk', {parts = {{2, 'unsigned', path = '[*]'}}, unique = false})
box.schema.func.create('first', {body = 'function(t) return {t[2][1]} end',
                                 is_deterministic = true, is_sandboxed = true})
m:create_index('func', {func = 'first', parts = {{1, 'unsigned'}}, unique = false})
"""


def rows(first: int, count: int) -> str:
    return f"""
for i = {first}, {first + count - 1} do
    box.space.j:insert{{i, {{a = {{b = 'k' .. i}}}}, i % 3 == 0 and box.NULL or i % 4,
                        i % 2 == 0 and 'Word' or 'word', i}}
    box.space.r:insert{{i, {{i, -i}}, {{i, i, i, i + 1, i + 2, i + 3}}}}
    box.space.m:insert{{i, {{i, i + 1}}}}
end
"""


READS = """
local j, r = box.space.j, box.space.r
local function ids(list) local out = {} for _, t in ipairs(list) do table.insert(out, t[1]) end
    return out end
return {
    ids(j.index.path:select({'k1'}, {iterator = 'GE', limit = 5})),
    ids(j.index.nullable:select({box.NULL})),
    j.index.coll:count('WORD'),
    ids(j.index.bits:select(4, {iterator = 'BITS_ALL_SET'})),
    ids(r.index.rt:select({0, -4, 4, 0}, {iterator = 'LE'})),
    ids(r.index.rt:select({2, -2}, {iterator = 'NEIGHBOR', limit = 3})),
    ids(r.index.rt3:select({1, 1, 1}, {iterator = 'NEIGHBOR', limit = 3})),
    box.space.m:len(),
    box.space._index:count(),
    ids(box.space.m.index.func:select({5}, {iterator = 'GE', limit = 6})),
    ids(box.space.m.index.func:select({7}, {iterator = 'LT', limit = 3})),
    box.space.m.index.func:count(),
}
"""

# a multikey functional index (one key per element of field 2), made in the stream
MULTIKEY_FUNC = """
box.schema.func.create('each', {body = [[function(t)
    local keys = {}
    for _, v in ipairs(t[2]) do table.insert(keys, {v}) end
    return keys
end]], is_deterministic = true, is_sandboxed = true, opts = {is_multikey = true}})
box.space.m:create_index('fmk', {func = 'each', parts = {{1, 'unsigned'}}, unique = false})
"""
FUNC_READS = """
local function ids(list) local out = {} for _, t in ipairs(list) do table.insert(out, t[1]) end
    return out end
local m = box.space.m
return ids(m.index.fmk:select({6}, {iterator = 'LE', limit = 7})), m.index.fmk:count(),
    ids(m.index.func:select({8})), box.space._func_index:select{}
"""


@pytest.mark.parametrize("master_kind, replica_kind", [("tarantool", "spindle"),
                                                       ("spindle", "tarantool")])
def test_replica_of_a_master_with_every_index_kind(master_kind, replica_kind, tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add(master_kind, "master", dict(FAST)).start()
        master.eval(SCHEMA + rows(1, 20))
        replica = cluster.add(replica_kind, "replica",
                              {**FAST, "replication": [master.rep_uri], "read_only": True})
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "the replica to follow")

        def in_sync() -> bool:
            return same_vclocks(master, replica) and all(
                replica.select(space) == master.select(space) for space in "jrm")
        wait_for(in_sync, 15, "the joined data")
        assert replica.eval(READS) == master.eval(READS)

        # the stream: more rows, and new definitions of every kind
        master.eval(rows(21, 10) + """
box.space.j:create_index('path2', {parts = {{2, 'string', path = '["a"]["b"]'},
                                            {1, 'unsigned'}}, unique = false})
box.space.j:delete{3}
box.space.j:update({4}, {{'=', 2, {a = {b = 'changed'}}}})
box.space.r:create_index('rt_e', {type = 'rtree', parts = {2, 'array'}})
box.space.m:create_index('mk2', {parts = {{2, 'unsigned', path = '[*]'}}, unique = false})
box.space.m:delete{1}
""" + MULTIKEY_FUNC + """
box.space.m:update({2}, {{'=', 2, {9, 2}}})
box.space.m:replace{3, {30, 31, 30}}
""")
        wait_for(in_sync, 15, "the stream")
        assert replica.upstream_status(1) == "follow"
        assert replica.eval(READS) == master.eval(READS)
        assert replica.eval("return box.space.j.index.path2:select({'changed'})") == \
            master.eval("return box.space.j.index.path2:select({'changed'})")
        multikey = "return box.space.m.index.mk:select({5}, {iterator = 'GE'}), " \
            "box.space.m.index.mk2:count()"
        assert replica.eval(multikey) == master.eval(multikey)
        # the functional indexes: their definitions and their keys as the master's
        assert replica.eval("return box.space._index:get{box.space.m.id, 3}") == \
            master.eval("return box.space._index:get{box.space.m.id, 3}")
        assert replica.eval(FUNC_READS) == master.eval(FUNC_READS)
        master.eval("box.space.m:insert{200, {8}} box.space.m:delete{5}")
        wait_for(in_sync, 15, "rows after the functional index reads")
        assert replica.upstream_status(1) == "follow"
        assert replica.eval(FUNC_READS) == master.eval(FUNC_READS)
