"""The per-statement fast paths of INSERT/REPLACE give what the general paths give:
the compiled format check (Space._fits, field_types.format_check) against the full
check, the TREE index's direct key insertion against SortedDict's own, plain
(one-part) entry keys against a model of the index, PutRequest against DmlRequest,
the transaction's rows and sync flag, Lua's insert/replace of plain fields, and
small Lua arrays converted in one call against element by element."""
from __future__ import annotations

import decimal
import enum
import itertools
import random
import uuid

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedDict

from spindle.core.box.field_types import UINT64_MAX
from spindle.core.iproto.msgpack import pack_tuple, packb
from spindle.core.box.index import DupMode, HashIndex, IndexDef, TreeIndex
from spindle.core.box.key_def import KeyPart
from spindle.core.box.txn import Engine, PutRequest, request_row
from spindle.core.iproto.constants import GroupId, IprotoType, IteratorType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import DmlRequest
from spindle.lua.box.space import iterate_after

from .test_lua_box import box, runners  # noqa: F401 - fixtures


_INSERT, _REPLACE = int(IprotoType.INSERT), int(IprotoType.REPLACE)


class Small(enum.IntEnum):
    ONE = 1


VALUES = [None, 0, 1, -1, UINT64_MAX, UINT64_MAX + 1, -(1 << 63), -(1 << 63) - 1, 1.5,
          float("nan"), True, False, "a", b"b", decimal.Decimal("1.5"), uuid.UUID(int=7),
          [1], {"k": 1}, Small.ONE]

ALL_TYPES = ["unsigned", "string", "number", "double", "integer", "boolean", "varbinary",
             "scalar", "decimal", "uuid", "array", "map", "any"]


def spaces():
    """Spaces whose formats cover every field type, nullability, exact field counts,
    key parts beyond the format and a space with no index."""
    engine = Engine()
    made = []
    ids = itertools.count(512)

    def make(format=(), field_count=0, parts=((0, "unsigned", False),)):
        space = engine.create_space(next(ids), f"s{len(made)}", format=list(format),
                                    field_count=field_count)
        for iid, part in enumerate(parts):
            space.create_index(IndexDef(iid, f"i{iid}", parts=[KeyPart(*part)]))
        made.append(space)

    make()                                                # the common case
    make(parts=())                                        # no index at all
    make(parts=((0, "string", False),))
    make(parts=((0, "unsigned", False), (2, "string", True)))
    make(format=[{"name": "id", "type": "integer"}], field_count=3)
    # a lone unsigned key, the rest only required (Space._put's inline check)
    make(format=[{"name": "id", "type": "unsigned"}, {"name": "a", "type": "any"},
                 {"name": "b", "type": "any"}])
    for ftype in ALL_TYPES:
        for nullable in (False, True):
            make(format=[{"name": "id", "type": "any"},
                         {"name": "f", "type": ftype, "is_nullable": nullable},
                         {"name": "g", "type": "any", "is_nullable": True}],
                 parts=((0, "scalar", False),))
    return made


def outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except ClientError as exc:
        return "error", exc.code, str(exc)


class ListSubclass(list):
    """Not a plain list: validate_tuple gives it the full check only."""


def candidate_tuples():
    yield ()
    for a in VALUES:
        yield (a,)
        for b in VALUES:
            yield (a, b)
            yield (1, b, a)
    yield (1, "x", 2, 3)


@pytest.mark.parametrize("space", spaces(), ids=lambda s: s.name)
def test_compiled_format_check_agrees_with_the_full_check(space):
    for tup in candidate_tuples():
        fast = outcome(space.validate_tuple, tup)     # a tuple: compiled check first
        decoded = outcome(space.validate_tuple, list(tup))     # as MsgPack decodes it
        full = outcome(space.validate_tuple, ListSubclass(tup))    # only the full check
        assert fast == decoded == full, tup
        assert space._fits(tup) == (full[0] == "ok"), tup
        # a statement checks as validate_tuple does (Space._put, inline for a
        # lone unsigned key); a tuple that fits is stored, or refused by no index
        try:
            stored = outcome(space.replace, tup)
        except TypeError:
            stored = ("not for MsgPack",)       # (a value the redo row cannot hold)
        if full[0] == "error":
            assert stored == full, tup
        else:
            assert stored[0] != "error" or not space.indexes, (tup, stored)


def test_field_count_change_recompiles_the_check():
    engine = Engine()
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    assert space.validate_tuple((1, 2)) == (1, 2)
    space.field_count = 3
    assert outcome(space.validate_tuple, (1, 2))[2] == \
        "Tuple field count 2 does not match space field count 3"
    space.set_format([], 0)
    assert space.validate_tuple((1, 2)) == (1, 2)


def test_failed_create_index_keeps_the_compiled_check():
    engine = Engine()
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    space.insert((1, "a"))
    with pytest.raises(ClientError):
        space.create_index(IndexDef(1, "sk", parts=[KeyPart(1, "unsigned")]))
    assert space.insert((2, "b")) == (2, "b")          # field 2 is still `any`
    assert outcome(space.insert, ("x",))[2] == \
        "Tuple field 1 type does not match one required by operation: expected unsigned"


def test_insert_reuses_the_tuple_it_validated():
    engine = Engine()
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    tup = (1, "a")
    assert space.insert(tup) is tup
    assert space.replace([1, "b"]) == (1, "b")


@pytest.mark.parametrize("unique, nullable", [(True, False), (False, False), (True, True)])
def test_tree_index_keeps_sorteddict_order(unique, nullable):
    """replace() adds keys to the SortedDict itself: the index matches a SortedDict
    filled through its public interface after random inserts, replaces and deletes."""
    engine = Engine()
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    space.create_index(IndexDef(1, "sk", parts=[KeyPart(1, "integer", is_nullable=nullable)],
                                unique=unique))
    rnd = random.Random(5)
    for _ in range(3000):
        key, value = rnd.randrange(300), rnd.choice([None, *range(40)]) if nullable \
            else rnd.randrange(40)
        op = rnd.random()
        if op < 0.6:
            outcome(space.replace, (key, value))
        elif op < 0.8:
            outcome(space.insert, (key, value))
        else:
            space.delete([key])
    for index in space.indexes.values():
        data = index._data
        model = SortedDict((index._entry_key(t), t) for t in index.tuples())
        assert list(data.keys()) == list(model.keys()) == sorted(dict.keys(data))
        assert list(data.values()) == list(model.values())
        assert len(data) == len(model) == len(space.indexes[0])


def test_index_replace_modes_on_a_tree():
    engine = Engine()
    space = engine.create_space(512, "t")
    pk = space.create_index(IndexDef(0, "pk"))
    assert pk.replace(None, (1, "a"), DupMode.INSERT) is None
    assert outcome(pk.replace, None, (1, "b"), DupMode.INSERT)[1] == ErrorCode.ER_TUPLE_FOUND
    assert pk.replace(None, (1, "c"), DupMode.REPLACE_OR_INSERT) == (1, "a")
    assert outcome(pk.replace, None, (2, "d"), DupMode.REPLACE)[1] == \
        ErrorCode.ER_TUPLE_NOT_FOUND
    assert list(pk.ordered().keys()) == [1] and pk.tuples() == [(1, "c")]  # a plain key


def test_pack_tuple():
    assert pack_tuple((1, "a", b"b", None)) == packb((1, "a", b"b", None))
    assert pack_tuple((1 << 70,)) is None and pack_tuple((object(),)) is None
    assert pack_tuple((2,)) == packb((2,))       # the packer is usable after a failure


def test_rows_close_with_a_nop_only_after_mixed_local_rows():
    engine = Engine(journal=lambda rows: None)
    glob = engine.create_space(10, "g")
    glob.create_index(IndexDef(0, "pk"))
    loc = engine.create_space(11, "l", flags={"is_local": True})
    loc.create_index(IndexDef(0, "pk"))
    sync = engine.create_space(12, "s", flags={"is_sync": True})
    sync.create_index(IndexDef(0, "pk"))
    txns = engine.txns
    cases = [([glob, glob], [0, 0], False), ([glob, loc], [0, 1, "NOP"], False),
             ([loc, loc], [1, 1], False), ([loc, glob], [1, 0], False),
             ([glob, loc, glob, glob, sync], [0, 1, 0, 0, 0], True)]
    for spaces, groups, is_sync in cases:
        txn = txns.begin()
        for i, space in enumerate(spaces):
            space.replace((i,))
        rows = txn.rows()
        assert txn.is_sync is is_sync
        shown = ["NOP" if r.type == IprotoType.NOP else r.group_id for r in rows]
        assert shown == groups
        if "NOP" in shown:
            assert rows[-1].group_id == GroupId.DEFAULT
        txns.rollback()


def test_lua_insert_of_plain_fields_returns_what_was_stored(box):  # noqa: F811
    """The plain-fields path hands back the given fields unless a before_replace
    trigger stored another tuple; strings that are not UTF-8 come back as given."""
    assert box.lua("""
        local a = s:insert{10, 'ten'}
        local b = s:replace{10, 'x', '\\xff\\xfe'}
        local f = s:before_replace(function(old, new) return new end)
        local c = s:replace{11, 'same'}
        s:before_replace(nil, f)
        f = s:before_replace(function(old, new) return box.tuple.new{new[1], 'other'} end)
        local d = s:insert{12, 'given'}
        s:before_replace(nil, f)
        box.begin()
        local e = s:insert{13}
        box.commit()
        return a, b[3] == '\\xff\\xfe', c, d, s:get{12}, e, s:get{13}
    """) == [[10, "ten"], True, [11, "same"], [12, "other"], [12, "other"], [13], [13]]


DUPLICATE = "Duplicate key exists in unique index 'pk' in space 'test'"


def test_lua_plain_fields_native_raises_box_errors(box):  # noqa: F811
    """The direct native of insert/replace (inside a transaction) and the wait()
    path (an autocommit) raise the same box.error, which box.error.last() then
    holds; a failed statement leaves the transaction going on."""
    assert box.lua("""
        box.begin()
        s:insert{20}
        local ok, err = pcall(s.insert, s, {20})
        local last = box.error.last()
        local ok2, err2 = pcall(s.replace, s, {'x'})
        s:insert{21, 'y'}
        box.commit()
        local ok3, err3 = pcall(s.insert, s, {21})
        return ok, err.code, err.message, last.code, ok2, err2.message, s:get{20},
               s:get{21}, ok3, err3.code, err3.message, box.error.last().code
    """) == [False, ErrorCode.ER_TUPLE_FOUND, DUPLICATE, ErrorCode.ER_TUPLE_FOUND, False,
             "Tuple field 1 type does not match one required by operation: "
             "expected unsigned", [20], [21, "y"], False, ErrorCode.ER_TUPLE_FOUND,
             DUPLICATE, ErrorCode.ER_TUPLE_FOUND]


def test_lua_put_fields_is_right_whatever_the_transaction_hint_says(box):  # noqa: F811
    """space.lua's hint of an open transaction only picks the way tried first. A
    hint left true by a transaction a yield aborted: another fiber's autocommit
    still commits. No hint for a transaction opened outside Lua: the insert still
    joins it, and its rollback takes it back."""
    assert box.lua("""
        local fiber = require('fiber')
        box.begin()
        s:insert{40}
        fiber.create(function() s:insert{41} end)     -- yields: the txn is aborted
        box.rollback()
        return s:get{40}, s:get{41}
    """) == [None, [41]]
    instance, sched = box.instance, box.sched

    def main():
        try:
            txns = instance.storage.box.engine.txns
            txn = txns.begin()
            instance.run_chunk("box.space.test:insert{50}", "=test")
            joined = [stmt.new_tuple for stmt in txn.statements]
            txns.rollback()
            return joined
        finally:
            sched.stop()
    assert sched.run(main) == [(50,)]
    assert box.lua("return s:get{50}") == []


def test_lua_put_fields_in_a_transaction_checks_the_space_and_read_only(box):  # noqa: F811
    """The native's inline space lookup leaves the rest to _writable's checks: a
    dropped space, a read-only instance (a temporary space still takes the insert)."""
    assert box.lua("""
        local gone = box.schema.space.create('gone')
        gone:create_index('pk')
        gone:drop()
        local tmp = box.schema.space.create('tmp', {temporary = true})
        tmp:create_index('pk')
        box.begin()
        local ok, err = pcall(gone.insert, gone, {1})
        box.rollback()
        box.cfg{read_only = true}
        box.begin()
        local ok2, err2 = pcall(s.insert, s, {60})
        tmp:insert{1, 'x'}
        box.commit()
        box.cfg{read_only = false}
        return ok, err.code, ok2, err2.code, s:get{60}, tmp:get{1}
    """) == [False, ErrorCode.ER_NO_SUCH_SPACE, False, ErrorCode.ER_READONLY, None,
             [1, "x"]]


# Tables space.lua's plain_length takes as plain fields or leaves to the general
# conversion: arrays, holes, other keys, integer keys kept in the hash part (set in
# another order, or after a string key), t[0], values that do not come back as given.
PUT_TABLES = [
    "{1, 'a'}", "{2}", "{}", "{3, true, false, 1.5, 'x'}", "{4, -0.0}", "{5, 0/0}",
    "{6, 2^53}", "{7, 2^53 + 2}", "{8, nil, 3}", "{9, x = 1}", "{[1] = 10, [2] = 'b'}",
    "{[2] = 'b', [1] = 11}", "{[0] = 0, 12}", "{13, 'é', '\\xff'}", "{14, 1ULL}",
    "{15, {1}}", "{16, box.NULL}",
    "(function() local t = {} t.x = 1 t[1] = 17 t.x = nil return t end)()",
    "(function() local t = {} t.x = 1 t[1] = 18 return t end)()",
    "(function() local t = {} t[3] = 'c' t[2] = 'b' t[1] = 19 return t end)()",
    "(function() local t = {20} for i = 2, 128 do t[i] = i end return t end)()",
    "(function() local t = {21} for i = 2, 129 do t[i] = i end return t end)()",
]


def test_lua_put_of_plain_fields_stores_what_the_general_conversion_stores(box):  # noqa: F811
    """space.lua sends a table's fields one by one only when a walk with next()
    meets exactly its keys 1..n and plain values; whatever it takes or leaves,
    replace() stores (or refuses) what the general conversion of the same table
    does (forced here by an empty metatable)."""
    cases = "{" + ", ".join(f"function() return {expr} end" for expr in PUT_TABLES) + "}"
    assert box.lua(f"""
        local a = box.schema.space.create('plain_a')
        a:create_index('pk')
        local b = box.schema.space.create('plain_b')
        b:create_index('pk')
        local differ = {{}}
        for i, make in ipairs({cases}) do
            local ok1, r1 = pcall(a.replace, a, make())
            local ok2, r2 = pcall(b.replace, b, setmetatable(make(), {{}}))
            local same = ok1 == ok2 and (ok1 and require('json').encode(r1) ==
                require('json').encode(r2) or not ok1 and tostring(r1) == tostring(r2))
            if not same then
                differ[#differ + 1] = i
            end
        end
        return differ, a:len(), b:len(), require('json').encode(a:select()) ==
            require('json').encode(b:select())
    """) == [[], 18, 18, True]


def test_lua_begin_called_directly_raises_a_box_error(box):  # noqa: F811
    """box.begin()'s native is called without a bridge: its error is still the
    box.error pcall catches and box.error.last() holds, and the transaction open
    before it is left as it was."""
    assert box.lua("""
        box.begin()
        s:insert{30}
        local ok, err = pcall(box.begin)
        local last = box.error.last()
        local open = box.is_in_txn()
        box.commit()
        return ok, err.code, err.message, last.code, open, s:get{30}
    """) == [False, ErrorCode.ER_ACTIVE_TRANSACTION,
             "Operation is not permitted when there is an active transaction ",
             ErrorCode.ER_ACTIVE_TRANSACTION, True, [30]]


@pytest.mark.parametrize("rtype", [IprotoType.INSERT, IprotoType.REPLACE])
@pytest.mark.parametrize("group", [GroupId.DEFAULT, GroupId.LOCAL])
def test_put_request_logs_as_its_dml_request(rtype, group):
    """Space.insert/replace log a PutRequest: the same row as the DmlRequest, packed
    or not, and the same fields for whatever reads a statement's request."""
    tup = (1, "a", None, 2.5, [1, {"k": b"v"}])
    put = PutRequest(int(rtype), 512, tup)
    dml = DmlRequest(type=int(rtype), space_id=512, tuple=tup)
    rows = [request_row(r, group, data) for r in (put, dml) for data in (None, packb(tup))]
    assert all(row == rows[0] for row in rows) and rows[0].group_id == group
    for name in ("type", "space_id", "index_id", "index_base", "key", "tuple", "ops",
                 "tuple_meta", "limit", "offset", "iterator"):
        assert getattr(put, name) == getattr(dml, name), name
    assert repr(put) == f"PutRequest(type={int(rtype)}, space_id=512, tuple={tup!r})"


def test_statements_of_insert_and_replace_in_a_txn_carry_their_rows():
    """Space.insert/replace inside a transaction (put_in_txn) leave a statement with
    the redo row and no request: only execute() reads one."""
    engine = Engine(journal=lambda rows: None)
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    txn = engine.txns.begin()
    space.insert((1, "a"))
    space.replace((1, "b"))
    assert [(s.request, s.row.type, s.old_tuple, s.new_tuple)
            for s in txn.statements] == [(None, IprotoType.INSERT, None, (1, "a")),
                                         (None, IprotoType.REPLACE, (1, "a"), (1, "b"))]
    assert "REPLACE t: (1, 'a') -> (1, 'b')" in repr(txn.statements[1])
    engine.txns.rollback()
    assert space.select() == []


def statement_view(stmt):
    """What a statement leaves for its commit and rollback (its request is only
    execute()'s: the row says the same)."""
    row = stmt.row
    return (stmt.old_tuple, stmt.new_tuple, stmt.tuple_data,
            None if row is None else (row.type, row.body, row.group_id))


def puts_in_one_txn(spaces_, ops, put):
    """Run `ops` ((space no, rtype, tuple)) in one transaction with `put(space,
    tuple, rtype)`; what each gave, the statements, the spaces' contents and
    bsize, then the same after a rollback."""
    txns = spaces_[0].txns
    txn = txns.begin()
    outcomes = [any_outcome(put, spaces_[no], tup, rtype) for no, rtype, tup in ops]
    state = [contents(space) for space in spaces_]
    statements = [statement_view(stmt) for stmt in txn.statements]
    txns.rollback()
    return outcomes, statements, state, [contents(space) for space in spaces_]


def any_outcome(fn, *args):
    """outcome(), with any exception (a value MsgPack cannot hold is a TypeError
    from the redo row) told by its type and text."""
    try:
        return outcome(fn, *args)
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return "raised", type(exc).__name__, str(exc)


def contents(space):
    return (space.select() if space.primary is not None else None), space.bsize()


def test_put_in_a_transaction_does_what_execute_does():
    """Space.put's one-frame statement (a memtx space with only its primary key, no
    trigger, an open transaction) against TxnManager.execute of the same
    PutRequest, over spaces of every format, no index and a secondary key, a
    temporary and a local space: results and errors, the statements with their
    redo rows, the stored tuples and bsize, and what a rollback leaves.
    Duplicates, replacements, tuples the format refuses and values MsgPack
    cannot hold (the redo row fails after the index changed) are all drawn."""
    def general(space, tup, rtype):
        return space.txns.execute(space, PutRequest(rtype, space.id, tup))

    def with_flags(made):
        made[0].flags = {"temporary": True}
        made[1].flags = {"group_id": GroupId.LOCAL}
        return made

    fast_spaces, general_spaces = with_flags(spaces()), with_flags(spaces())
    tuples = list(candidate_tuples())
    rng = random.Random(7)
    for _ in range(40):
        ops = []
        for _ in range(30):
            no = rng.randrange(len(fast_spaces))
            tup = rng.choice(tuples)
            ops.append((no, rng.choice([_INSERT, _REPLACE]),
                        list(tup) if rng.random() < 0.3 else tup))
        fast = puts_in_one_txn(fast_spaces, ops, lambda sp, tup, rtype: sp.put(tup, rtype))
        assert fast == puts_in_one_txn(general_spaces, ops, general), ops
        assert any(o[0] == "ok" for o in fast[0]) and any(o[0] == "error" for o in fast[0])
        assert all(content[0] in ([], None) and content[1] == 0 for content in fast[3])


def test_put_takes_execute_where_it_must():
    """Triggers, a secondary key, an autocommit and an applier's transaction send
    Space.put through execute(): the trigger runs, the autocommit commits, the
    replicated statement gets no redo row."""
    rows = []
    engine = Engine(journal=rows.extend)
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk"))
    seen = []
    space.on_replace.append(lambda old, new, name, op: seen.append((old, new, op)))
    engine.txns.begin()
    space.put((1, "a"), _INSERT)
    engine.txns.commit()
    assert seen == [(None, (1, "a"), "INSERT")] and len(rows) == 1
    space.on_replace.clear()
    space.put((2,), _REPLACE)                    # autocommit: committed at once
    assert len(rows) == 2 and engine.txns.current is None
    txn = engine.txns.begin()
    txn.replicated = True
    space.put((3,), _INSERT)
    assert txn.statements[0].row is None
    engine.txns.commit()
    assert space.select() == [(1, "a"), (2,), (3,)]


# ---------------------------------------------------------------- Lua -> Python arrays

ARRAYS = [
    "{1, 'abc', 3}", "{}", "{box.NULL, 2}", "{1, nil, 3}", "{[1] = 1, [3] = 3}",
    "{[2] = 'x'}", "{[10] = 1}", "{[4] = 4, [8] = 8}", "{true, false, 1.5, -0.0}",
    "{'\\xff\\xfe', 'é'}", "{2^53, 2^64, -2^63}", "{1ULL, -5LL, 18446744073709551615ULL}",
    "{{1, {2}}, {a = 1}, setmetatable({}, {__serialize = 'map'})}",
    "setmetatable({1, 2, x = 3}, {__serialize = 'seq'})",
    "setmetatable({[1] = 1, [40] = 40}, {__serialize = 'array'})",
    "box.tuple.new{1, 'two', {3}}",
    "(function() local t = {} for i = 1, 64 do t[i] = i end return t end)()",
    "(function() local t = {} for i = 1, 65 do t[i] = 'v' .. i end return t end)()",
    "(function() local t = {} for i = 1, 300 do t[i] = i * 0.5 end return t end)()",
    "(function() local t = {} for i = 1, 50 do t[i * 2] = i end return t end)()",
]


def elementwise(runtime, table):
    """The element-by-element conversion of an array (the general path)."""
    shape = runtime.convert._classify(table)
    if not isinstance(shape, tuple):
        return None
    return [runtime.to_py(table[i]) for i in range(1, shape[1] + 1)]


@pytest.mark.parametrize("expression", ARRAYS)
def test_small_arrays_convert_in_one_call_as_element_by_element(runners, expression):  # noqa: F811
    runner = runners()
    runtime = runner.instance.runtime

    def check():
        try:
            runner.instance.run_chunk("require('uuid')", "=x", [])
            table = runtime.lua.eval(expression)
            expected = elementwise(runtime, table)
            if expected is not None:
                unpacked = len(runtime.convert._classify(table)) == len(expected) + 2
                assert unpacked == (len(expected) <= 64)
                got = runtime.to_py(table)
                assert got == expected and [type(v) for v in got] == [type(v) for v in expected]
        finally:
            runner.sched.stop()
    runner.sched.run(check)


# ------------------------------------------------- plain (one-part) index entry keys

PLAIN_VALUES = {
    "unsigned": st.integers(0, 12),
    "string": st.sampled_from(["", "a", "ab", "b", "B", "é", "e"]),
    "number": st.one_of(st.integers(-4, 4), st.sampled_from([-1.5, 0.5, 2.0, float("nan"),
                                                            float("inf")])),
    "scalar": st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b"]),
                        st.sampled_from([b"", b"a"]), st.sampled_from([0.5, float("nan")])),
}
PLAIN_PARTS = [("unsigned", None), ("string", None), ("string", "unicode_ci"),
               ("number", None), ("scalar", None)]


class FakeSpace:
    name = "s"
    engine = "memtx"


@settings(max_examples=60, deadline=None)
@given(st.data())
@pytest.mark.parametrize("ftype, collation", PLAIN_PARTS)
@pytest.mark.parametrize("index_type", ["TREE", "HASH"])
def test_plain_keyed_indexes_match_a_naive_model(ftype, collation, index_type, data):
    """A unique one-part index keys its entries by the part key alone: lookups and
    every iterator give what a model ordered by that part key gives, and the rest of
    an iteration resumed after a tuple (Lua's pairs) is the rest of the iteration."""
    part = KeyPart(0, ftype, collation=collation)
    make = TreeIndex if index_type == "TREE" else HashIndex
    index = make(FakeSpace(), IndexDef(0, "pk", index_type, [part]))
    assert index._plain
    values = data.draw(st.lists(PLAIN_VALUES[ftype], max_size=25))
    model = {}
    for n, value in enumerate(values):
        tup = (value, n)
        replaced = model.get(part.sort_key(value))
        assert index.replace(None, tup, DupMode.REPLACE_OR_INSERT) == replaced
        model[part.sort_key(value)] = tup
    for doomed in data.draw(st.lists(st.sampled_from(values), max_size=5)) if values else ():
        old = model.pop(part.sort_key(doomed), None)
        if old is not None:
            assert index.replace(old, None, DupMode.REPLACE_OR_INSERT) == old
    assert len(index) == len(model)
    probe = data.draw(PLAIN_VALUES[ftype])
    sp = part.sort_key(probe)
    assert index.get([probe]) == model.get(sp)
    if index_type == "HASH":
        assert index.select([probe], "EQ") == ([model[sp]] if sp in model else [])
        assert sorted(map(repr, index.select([], "ALL"))) == sorted(map(repr, model.values()))
        return
    order = [model[k] for k in sorted(model)]
    expected = {
        "EQ": [t for t in order if part.sort_key(t[0]) == sp],
        "GE": [t for t in order if part.sort_key(t[0]) >= sp],
        "ALL": [t for t in order if part.sort_key(t[0]) >= sp],
        "GT": [t for t in order if part.sort_key(t[0]) > sp],
        "REQ": [t for t in order if part.sort_key(t[0]) == sp][::-1],
        "LE": [t for t in order if part.sort_key(t[0]) <= sp][::-1],
        "LT": [t for t in order if part.sort_key(t[0]) < sp][::-1],
    }
    for it, tuples in expected.items():
        assert index.select([probe], it) == tuples, it
        if tuples:
            resumed = list(iterate_after(index, IteratorType[it], [probe], tuples[0]))
            assert resumed == tuples[1:], it
    assert index.select([], "ALL") == order
