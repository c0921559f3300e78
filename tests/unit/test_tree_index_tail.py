"""The TREE index's tail: keys inserted past the end wait in a list and join the
key order when something needs it. Whatever the mix of appends, inserts in the
middle, deletes, rollbacks and reads, the index holds what a plain model holds,
iterators see what they saw before (keys added while they run included), and the
SortedList underneath passes its own invariant check after every merge."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from spindle.core.box.index import IndexDef, TreeIndex
from spindle.core.box.key_def import KeyPart
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import IteratorType
from spindle.lua.box.space import iterate_after

OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),          # past the largest key
    st.tuples(st.just("insert"), st.integers(0, 400)),         # anywhere
    st.tuples(st.just("delete"), st.integers(0, 10_000)),      # the n-th key, if any
    st.tuples(st.just("txn_rollback"), st.integers(1, 40)),    # appends, rolled back
    st.tuples(st.just("txn_commit"), st.integers(1, 40)),
    st.tuples(st.just("select"), st.integers(0, 400)),
    st.tuples(st.just("iterate_appending"), st.integers(1, 5)),
), max_size=60)


def make_space(load: int):
    engine = Engine()
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    space.create_index(IndexDef(1, "sk", parts=[KeyPart(1, "unsigned")], unique=False))
    for index in space.indexes.values():
        index._order._reset(load)        # small sublists: merges cross many of them
    return engine, space


def check(space, model: dict) -> None:
    pk, sk = space.indexes[0], space.indexes[1]
    assert pk.tuples() == [model[k] for k in sorted(model)]
    assert sk.tuples() == sorted(model.values(), key=lambda t: (t[1], t[0]))
    for index in (pk, sk):
        assert not index._tail            # tuples() merged it
        index._order._check()
        assert len(index) == len(model)


@settings(max_examples=300, deadline=None)
@given(OPS, st.sampled_from([4, 8, 1000]))
def test_the_tail_merges_into_an_order_equal_to_a_model(ops, load):
    engine, space = make_space(load)
    pk = space.indexes[0]
    model: dict[int, tuple] = {}
    top = 0
    for op, arg in ops:
        if op == "append":
            top += arg
            model[top] = space.insert((top, top % 7))
        elif op == "insert":
            if arg not in model:
                model[arg] = space.insert((arg, arg % 7))
                top = max(top, arg)
        elif op == "delete":
            if model:
                key = sorted(model)[arg % len(model)]
                space.delete([key])
                del model[key]
        elif op in ("txn_rollback", "txn_commit"):
            engine.txns.begin()
            added = {}
            for i in range(1, arg + 1):
                added[top + i] = space.insert((top + i, i % 7))
            if op == "txn_commit":
                engine.txns.commit()
                model.update(added)
                top += arg
            else:
                engine.txns.rollback()
        elif op == "select":
            expected = [model[k] for k in sorted(model) if k >= arg][:5]
            assert pk.select([arg], IteratorType.GE, limit=5) == expected
            expected = [model[k] for k in sorted(model, reverse=True) if k < arg][:5]
            assert pk.select([arg], IteratorType.LT, limit=5) == expected
        elif op == "iterate_appending":
            # an iterator re-seeks after each step: keys appended meanwhile are seen
            seen = []
            for tup in pk.pairs([], IteratorType.GE):
                seen.append(tup)
                if len(seen) <= arg:
                    top += 1
                    model[top] = space.insert((top, 0))
            assert seen == [model[k] for k in sorted(model)]
    check(space, model)


def test_an_iteration_continued_from_lua_sees_keys_appended_meanwhile():
    engine, space = make_space(4)
    pk = space.indexes[0]
    for key in range(1, 11):
        space.insert((key, 0))
    first = pk.select([], IteratorType.GE, limit=1)[0]
    for key in range(11, 21):
        space.insert((key, 0))          # into the tail: nothing has read them yet
    rest = []
    for tup in iterate_after(pk, IteratorType.GE, [], first):
        rest.append(tup[0])
        if tup[0] == 15:
            for key in range(21, 26):
                space.insert((key, 0))  # while it runs: into the tail again
    assert rest == list(range(2, 26))


def test_a_key_below_the_tail_merges_it_first():
    engine, space = make_space(4)
    pk: TreeIndex = space.indexes[0]
    for key in (10, 20, 30):
        space.insert((key, 0))
    assert pk._tail == [10, 20, 30]       # appended: the order is still empty
    space.insert((15, 0))
    assert pk._tail == [] and list(pk._order) == [10, 15, 20, 30]
    pk._order._check()
    space.insert((40, 0))
    assert pk._tail == [40]
    assert [t[0] for t in pk.tuples()] == [10, 15, 20, 30, 40]
