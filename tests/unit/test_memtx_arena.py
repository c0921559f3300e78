"""The memtx tuple quota (core/box/memtx_arena.py): grants, refusals, accounting."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.box.memtx_arena import TUPLE_HEADER, OutOfMemory
from spindle.core.box.txn import Engine
from spindle.core.iproto.msgpack import tuple_bsize


def make(engine, space_id, name, secondary=False):
    space = engine.create_space(space_id, name)
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    if secondary:
        space.create_index(IndexDef(1, "sk", parts=[KeyPart(1, "string")], unique=False))
    return space


def test_refused_past_quota_nothing_lost():
    engine = Engine()
    engine.arena.quota = 10_000
    a, b = make(engine, 512, "a"), make(engine, 513, "b", secondary=True)
    big = "x" * 1000
    stored = 0
    with pytest.raises(OutOfMemory) as info:
        for i in range(100):
            (a if i % 2 else b).insert((i, big))
            stored += 1
    size = tuple_bsize((stored, big))
    assert str(info.value) == f"Failed to allocate {size + TUPLE_HEADER} bytes in " \
        "slab allocator for memtx_tuple"
    assert info.value.errno == 12 and info.value.type == "OutOfMemory"
    assert len(a) + len(b) == stored
    assert engine.arena.used == a.bsize() + b.bsize() <= 10_000
    assert engine.arena.used + size + TUPLE_HEADER > 10_000
    # an update that grows a tuple, a replace by a bigger one: refused too
    with pytest.raises(OutOfMemory):
        a.replace((1, big * 2))
    with pytest.raises(OutOfMemory):
        a.update(1, [("=", 2, big * 2)])
    assert a.get(1)[1] == big
    # room made in one space is room for the other
    b.delete(0)
    b.delete(2)
    a.insert((1001, big))
    # truncation frees everything; a system space's row is never refused
    system = make(engine, 280, "_system")
    system.insert((1, big))
    a.truncate()
    assert a.bsize() == 0
    for i in range(3):
        a.insert((i, big))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("irdu"), st.integers(0, 20), st.integers(0, 400),
                          st.booleans()), max_size=80))
def test_grants_never_let_used_pass_the_quota(ops):
    engine = Engine()
    engine.arena.quota = 4_000
    spaces = [make(engine, 512, "a"), make(engine, 513, "b", secondary=True)]
    for op, key, length, which in ops:
        space = spaces[which]
        try:
            if op == "i":
                space.insert((key, "y" * length))
            elif op == "r":
                space.replace((key, "z" * length))
            elif op == "u":
                space.update(key, [("=", 2, "w" * length)])
            else:
                space.delete(key)
        except OutOfMemory:
            pass
        except Exception:   # noqa: BLE001 - duplicates and the like
            pass
        assert engine.arena.used == sum(s.bsize() for s in spaces)
        assert engine.arena.used + TUPLE_HEADER <= 4_000
        for s in spaces:
            assert s.bsize() == sum(tuple_bsize(t) for t in s.select())
