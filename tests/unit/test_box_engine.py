"""Spaces: DML, format checks, triggers, runtime indexes, logged requests; and a
model check of random DML against a naive dict + sorted lists."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.box.space import NULL_TUPLE, Space
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import GroupId, IprotoKey, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode


class Journal:
    def __init__(self):
        self.batches = []

    def __call__(self, rows):
        self.batches.append(rows)

    @property
    def rows(self):
        return [r for batch in self.batches for r in batch]

    def decoded(self):
        return [(r.type, r.body_map()) for r in self.rows]


@pytest.fixture
def journal():
    return Journal()


@pytest.fixture
def engine(journal):
    return Engine(journal=journal)


def make_t(engine, **options):
    space = engine.create_space(512, "t", format=[
        {"name": "id", "type": "unsigned"}, {"name": "name", "type": "string"},
        {"name": "n", "type": "integer", "is_nullable": True}], **options)
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    space.create_index(IndexDef(1, "sk", parts=[KeyPart(1, "string")], unique=False))
    space.create_index(IndexDef(2, "uk", parts=[KeyPart(2, "integer", is_nullable=True)]))
    return space


def err(fn, *args, **kwargs) -> ClientError:
    with pytest.raises(ClientError) as e:
        fn(*args, **kwargs)
    return e.value


# ---------------------------------------------------------------- DML and format

@pytest.mark.parametrize("tup, message", [
    ([1, "a"], None), ([1, "a", None], None), ([1, "a", -5, "x", [1]], None),
    ([7, 8], "Tuple field 2 type does not match one required by operation: expected string"),
    (["x", "y"], "Tuple field 1 type does not match one required by operation: expected unsigned"),
    ([], "Tuple field 1 required by space format is missing"),
    ([1], "Tuple field 2 required by space format is missing"),
    ([1, "a", 1.5], "Tuple field 3 type does not match one required by operation: expected integer"),
    (5, "Tuple/Key must be MsgPack array"),
])
def test_format_checks(engine, tup, message):
    space = make_t(engine)
    if message is None:
        assert space.insert(tup) == tuple(tup)
    else:
        assert str(err(space.insert, tup)) == message


def test_field_count_and_type_order(engine):
    space = engine.create_space(600, "fc", field_count=3, format=[
        {"name": "a", "type": "unsigned"}, {"name": "b", "type": "double"},
        {"name": "c", "type": "number"}, {"name": "d", "type": "varbinary"}])
    space.create_index(IndexDef(0, "pk"))
    assert str(err(space.insert, [1, 1.5])) == "Tuple field count 2 does not match space field count 3"
    # types of present fields are checked before missing ones
    assert str(err(space.insert, [1, 1, 1])) == \
        "Tuple field 2 type does not match one required by operation: expected double"
    assert str(err(space.insert, [1, 1.5, 1])) == "Tuple field 4 required by space format is missing"


def test_duplicates_name_the_index(engine):
    space = make_t(engine)
    space.insert([1, "a", 10])
    assert str(err(space.insert, [1, "b"])) == "Duplicate key exists in unique index 'pk' in space 't'"
    e = err(space.insert, [2, "b", 10])
    assert e.code == ErrorCode.ER_TUPLE_FOUND
    assert str(e) == "Duplicate key exists in unique index 'uk' in space 't'"
    assert str(err(space.replace, [2, "b", 10])) == "Duplicate key exists in unique index 'uk' in space 't'"
    assert space.select() == [(1, "a", 10)]
    assert space.select("b", 1) == []           # nothing left behind in the secondary key


def test_delete_update_through_indexes(engine, journal):
    space = make_t(engine)
    for t in ([1, "a", 10], [2, "b", 20], [3, "a"]):
        space.insert(t)
    assert space.update([20], [["=", 2, "B"]], index_id=2) == (2, "B", 20)
    assert str(err(space.update, [20], [["=", 1, 99]], index_id=2)) == \
        "Attempt to modify a tuple field which is part of index 'pk' in space 't'"
    assert str(err(space.update, [1], [["=", 1, 2]])) == \
        "Duplicate key exists in unique index 'pk' in space 't'"
    assert str(err(space.delete, ["a"], 1)) == \
        "Get() doesn't support partial keys and non-unique indexes"
    assert str(err(space.delete, [1], 7)) == "No index #7 is defined in space 't'"
    assert str(err(space.index, "nope")) == "No index 'nope' is defined in space 't'"
    assert space.update([100], [["=", 2, "x"]]) is None
    assert space.delete([20], 2) == (2, "B", 20)
    assert space.delete([20], 2) is None
    bodies = journal.decoded()[3:]
    # rebound to the primary key when found through a secondary index
    assert bodies[0] == (IprotoType.UPDATE, {IprotoKey.SPACE_ID: 512, IprotoKey.INDEX_BASE: 1,
                                             IprotoKey.KEY: [2], IprotoKey.TUPLE: [["=", 2, "B"]]})
    assert bodies[1] == (IprotoType.UPDATE, {IprotoKey.SPACE_ID: 512, IprotoKey.INDEX_BASE: 1,
                                             IprotoKey.KEY: [100], IprotoKey.TUPLE: [["=", 2, "x"]]})
    assert bodies[2] == (IprotoType.DELETE, {IprotoKey.SPACE_ID: 512, IprotoKey.KEY: [2]})
    # a miss is logged as it came
    assert bodies[3] == (IprotoType.DELETE, {IprotoKey.SPACE_ID: 512, IprotoKey.INDEX_ID: 2,
                                             IprotoKey.KEY: [20]})


def test_upsert(engine, journal):
    space = make_t(engine)
    assert space.upsert([10, "u", 100], [["+", 3, 1]]) is None
    space.upsert([10, "u", 100], [["+", 3, 1]])
    space.upsert([10, "u", 100], [["+", 2, 1], ["-", 3, 50]])     # first op skipped
    space.upsert([10, "u", 100], [["=", 1, 99]])                  # pk change: ignored
    assert space.select() == [(10, "u", 51)]
    assert str(err(space.upsert, [10, "u", 100], [["%", 1, 1]])) == 'Unknown UPDATE operation #1: "%"'
    assert str(err(space.upsert, [10, "u", 100], [["=", 2, 5]])) == \
        "Tuple field 2 type does not match one required by operation: expected string"
    assert str(err(space.upsert, [11, 5], [])) == \
        "Tuple field 2 type does not match one required by operation: expected string"
    assert str(err(space.upsert, [12, "x", 51], [])) == \
        "Duplicate key exists in unique index 'uk' in space 't'"
    types = [r.type for r in journal.rows]
    assert types == [IprotoType.UPSERT] * 4
    assert journal.rows[0].body_map() == {
        IprotoKey.SPACE_ID: 512, IprotoKey.INDEX_BASE: 1, IprotoKey.OPS: [["+", 3, 1]],
        IprotoKey.TUPLE: [10, "u", 100]}


def test_space_without_primary_key(engine):
    space = engine.create_space(700, "empty")
    assert str(err(space.insert, [1])) == "No index #0 is defined in space 'empty'"
    assert str(err(space.create_index, IndexDef(1, "sk"))) == \
        "Can't modify space 'empty': can not add a secondary key before primary"
    assert len(space) == 0


def test_engine_registry(engine):
    make_t(engine)
    assert engine.space("t") is engine.space(512)
    assert str(err(engine.space, 999)) == "Space '999' does not exist"
    assert str(err(engine.create_space, 513, "t")) == "Space 't' already exists"
    engine.rename_space("t", "t2")
    assert engine.space("t2").name == "t2"
    engine.drop_space(512)
    assert engine.find_space("t2") is None


# ---------------------------------------------------------------- runtime indexes

def test_create_index_builds_and_checks(engine):
    space = engine.create_space(601, "s")
    space.create_index(IndexDef(0, "pk"))
    for t in ([1, "a", 5], [2, "b", 5], [3, "c", 6]):
        space.insert(t)
    assert str(err(space.create_index, IndexDef(1, "u", parts=[KeyPart(2, "unsigned")]))) == \
        "Duplicate key exists in unique index 'u' in space 's'"
    assert str(err(space.create_index, IndexDef(1, "s", parts=[KeyPart(1, "unsigned")]))) == \
        "Tuple field 2 type does not match one required by operation: expected unsigned"
    space.insert([4, 5, 7])                       # the failed index left no constraint
    space.delete(4)
    idx = space.create_index(IndexDef(1, "n", parts=[KeyPart(2, "unsigned")], unique=False))
    assert idx.select([5]) == [(1, "a", 5), (2, "b", 5)]
    assert str(err(space.insert, [9, "x", "y"])) == \
        "Tuple field 3 type does not match one required by operation: expected unsigned"
    assert str(err(space.insert, [9, "x"])) == "Tuple field 3 required by space format is missing"
    assert str(err(space.create_index, IndexDef(1, "n2"))) == "Index 'n2' already exists"
    assert str(err(space.drop_index, 0)) == \
        "Can't drop primary key in space 's' while secondary keys exist"
    space.drop_index(1)
    space.insert([9, "x"])
    assert str(err(space.create_index, IndexDef(2, "h", "HASH", unique=False))) == \
        "Can't create or modify index 'h' in space 's': HASH index must be unique"


def test_format_and_index_type_conflicts(engine):
    space = engine.create_space(602, "f", format=[{"name": "a", "type": "double"}])
    e = err(space.create_index, IndexDef(0, "pk", parts=[KeyPart(0, "string")]))
    assert str(e) == "Field 1 has type 'double' in space format, but type 'string' in index definition"
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "number")]))   # number contains double
    assert str(err(space.insert, [1])) == \
        "Tuple field 1 type does not match one required by operation: expected double"
    s2 = engine.create_space(603, "g")
    s2.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    e = err(s2.create_index, IndexDef(1, "x", parts=[KeyPart(0, "string")]))
    assert str(e) == "Field 1 has type 'unsigned' in one index, but type 'string' in another"
    h = engine.create_space(604, "h")
    e = err(h.create_index, IndexDef(0, "pk", parts=[KeyPart(0, "unsigned", is_nullable=True)]))
    assert str(e) == "Primary index of space 'h' can not contain nullable parts"
    e = err(h.create_index, IndexDef(0, "pk", parts=[KeyPart(0, "array")]))
    assert str(e) == "Can't create or modify index 'pk' in space 'h': field type 'array' is not supported"
    h.create_index(IndexDef(0, "pk"))
    e = err(h.create_index, IndexDef(1, "x", "HASH", parts=[KeyPart(1, "unsigned", is_nullable=True)]))
    assert str(e) == "HASH does not support nullable parts"


def test_set_format_validates_existing_tuples(engine):
    space = engine.create_space(605, "sf")
    space.create_index(IndexDef(0, "pk"))
    space.insert([1, "x"])
    with pytest.raises(ClientError, match="Tuple field 2 type"):
        space.set_format([{"name": "a", "type": "unsigned"}, {"name": "b", "type": "unsigned"}])
    space.set_format([{"name": "a", "type": "unsigned"}, {"name": "b", "type": "string"}])
    assert space.update(1, [["=", "b", "y"]]) == (1, "y")


def test_truncate_and_bsize(engine):
    space = make_t(engine)
    space.insert([1, "a", 10])
    space.insert([2, "bb"])
    assert space.bsize() == len(b"\x93\x01\xa1a\x0a") + len(b"\x92\x02\xa2bb")
    assert space.truncate() == [(1, "a", 10), (2, "bb")]
    assert len(space) == 0 and space.bsize() == 0 and space.select("a", 1) == []


# ---------------------------------------------------------------- triggers

def test_before_replace_semantics(engine, journal):
    space = make_t(engine)
    seen = []

    def before(old, new, name, op):
        seen.append((old, new, name, op))
        if new is None:
            return None
        if new[0] == 100:
            return None                     # keep
        if new[0] == 101:
            return NULL_TUPLE               # drop
        if new[0] == 102:
            return (102, "changed")
        if new[0] == 103:
            return {"bad": 1}
        if new[0] == 104:
            return (999, "other")           # a new key for an INSERT is fine
        if new[0] == 105:
            return old                      # nothing to do: NOP
        if new[0] == 106:
            return (1060, "x")              # changing the key of an existing tuple
        return None

    replaced = []
    space.before_replace.add(before)
    space.on_replace.add(lambda old, new, name, op: replaced.append((old, new, op)))
    assert space.insert([100, "a"]) == (100, "a")
    assert space.insert([101, "a"]) is None
    assert space.insert([102, "a"]) == (102, "changed")
    assert str(err(space.insert, [103, "a"])) == \
        "Invalid return value of space:before_replace trigger: expected tuple or nil, got dict"
    assert space.insert([104, "a"]) == (999, "other")
    space.insert([105, "a"])  # first time: old is None, new returned as is
    assert space.replace([105, "b"]) is None
    space.before_replace.remove(before)
    space.insert([106, "a"])
    space.before_replace.add(before)
    assert str(err(space.update, [106], [["=", 2, "z"]])) == \
        "Attempt to modify a tuple field which is part of index 'pk' in space 't'"
    assert space.delete([100]) == (100, "a")
    assert space.delete([100]) is None        # not found: trigger not called
    assert seen[-1] == ((100, "a"), None, "t", "DELETE")
    assert [op for _, _, op in replaced] == ["INSERT", "REPLACE", "REPLACE", "INSERT",
                                              "INSERT", "DELETE"]
    assert [r.type for r in journal.rows] == [
        IprotoType.INSERT, IprotoType.NOP, IprotoType.REPLACE, IprotoType.REPLACE,
        IprotoType.INSERT, IprotoType.NOP, IprotoType.INSERT, IprotoType.DELETE,
        IprotoType.DELETE]
    assert journal.rows[2].body_map()[IprotoKey.TUPLE] == [102, "changed"]


def test_before_replace_to_delete(engine, journal):
    space = make_t(engine)
    space.insert([1, "a"])
    space.before_replace.add(lambda old, new, name, op: NULL_TUPLE)
    # the request became a DELETE, which returns the deleted tuple (as 2.6.0 does)
    assert space.update([1], [["=", 2, "b"]]) == (1, "a")
    assert space.select() == []
    assert journal.decoded()[-1] == (IprotoType.DELETE, {IprotoKey.SPACE_ID: 512, IprotoKey.KEY: [1]})


def test_before_replace_chain_sees_previous_result(engine):
    space = make_t(engine)
    space.before_replace.add(lambda old, new, name, op: (new[0], new[1] + "1"))
    space.before_replace.add(lambda old, new, name, op: (new[0], new[1] + "2"))  # runs first
    assert space.insert([1, "x"]) == (1, "x21")


def test_on_replace_error_undoes_statement(engine, journal):
    space = make_t(engine)

    def boom(old, new, name, op):
        if new is not None and new[1] == "bad":
            raise ClientError(ErrorCode.ER_PROC_LUA, "boom")

    space.on_replace.add(boom)
    space.insert([1, "ok"])
    with pytest.raises(ClientError, match="boom"):
        space.insert([2, "bad"])
    assert space.select() == [(1, "ok")] and space.select("bad", 1) == []
    assert len(journal.batches) == 1


def test_trigger_dml_joins_the_statement(engine, journal):
    space = make_t(engine)
    audit = engine.create_space(610, "audit")
    audit.create_index(IndexDef(0, "pk"))

    def log_it(old, new, name, op):
        audit.insert([len(audit) + 1, op])
        if new is not None and new[1] == "bad":
            raise ClientError(ErrorCode.ER_PROC_LUA, "refused")

    space.on_replace.add(log_it)
    space.insert([1, "a"])
    assert len(journal.batches) == 1 and len(journal.batches[0]) == 2
    with pytest.raises(ClientError):
        space.insert([2, "bad"])
    assert audit.select() == [(1, "INSERT")]          # the nested insert was undone too
    assert len(journal.batches) == 1


# ---------------------------------------------------------------- rows and groups

def test_temporary_and_local_spaces(engine, journal):
    tmp = engine.create_space(620, "tmp", flags={"temporary": True})
    tmp.create_index(IndexDef(0, "pk"))
    loc = engine.create_space(621, "loc", flags={"group_id": 1})
    loc.create_index(IndexDef(0, "pk"))
    glob = engine.create_space(622, "glob")
    glob.create_index(IndexDef(0, "pk"))
    tmp.insert([1])
    assert journal.batches == []
    loc.insert([1])
    assert [(r.type, r.group_id) for r in journal.rows] == [(IprotoType.INSERT, GroupId.LOCAL)]
    engine.txns.begin()
    glob.insert([1])
    loc.insert([2])
    tmp.insert([2])
    engine.txns.commit()
    assert [(r.type, r.group_id) for r in journal.batches[-1]] == [
        (IprotoType.INSERT, GroupId.DEFAULT), (IprotoType.INSERT, GroupId.LOCAL),
        (IprotoType.NOP, GroupId.DEFAULT)]
    assert all(r.lsn == 0 and r.replica_id == 0 for r in journal.rows)


def test_standalone_space_and_execute_request():
    space = Space(1, "solo", indexes=[IndexDef(0, "pk")])
    from spindle.core.iproto.request import DmlRequest
    assert space.execute_request(DmlRequest(type=IprotoType.REPLACE, space_id=1,
                                            tuple=[1, "x"])) == (1, "x")
    assert space.get(1) == (1, "x") and space.count() == 1 and space.len() == 1
    assert list(space.pairs()) == [(1, "x")]


def test_uuid_and_decimal_values_are_logged(engine, journal):
    import decimal
    import uuid
    space = engine.create_space(630, "ext", format=[{"name": "u", "type": "uuid"},
                                                    {"name": "d", "type": "decimal"}])
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "uuid")]))
    u = uuid.UUID("11111111-2222-3333-4444-555555555555")
    space.insert([u, decimal.Decimal("-12.34")])
    body = journal.rows[0].body
    assert b"\xd8\x02" + u.bytes in body and b"\xd6\x01\x02\x01\x23\x4d" in body


# ---------------------------------------------------------------- model check

KEYS = st.integers(0, 7)
NAMES_ = st.sampled_from(["a", "b", "c"])
OPS = st.one_of(
    st.tuples(st.just("insert"), KEYS, NAMES_, st.integers(0, 5)),
    st.tuples(st.just("replace"), KEYS, NAMES_, st.integers(0, 5)),
    st.tuples(st.just("delete"), KEYS),
    st.tuples(st.just("update_name"), KEYS, NAMES_),
    st.tuples(st.just("update_code"), KEYS, st.integers(-2, 2)),
)


def make_model_space(engine):
    space = engine.create_space(700, "model")
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    space.create_index(IndexDef(1, "name", parts=[KeyPart(1, "string")], unique=False))
    space.create_index(IndexDef(2, "code", "HASH", parts=[KeyPart(2, "integer")]))
    return space


def model_apply(model: dict, op) -> str | None:
    """Apply `op` to {pk: tuple}; returns the expected error message or None."""
    kind, key = op[0], op[1]

    def code_taken(code, pk):
        return any(t[2] == code and t[0] != pk for t in model.values())

    if kind in ("insert", "replace"):
        t = (key, op[2], op[3])
        if kind == "insert" and key in model:
            return "Duplicate key exists in unique index 'pk' in space 'model'"
        if code_taken(op[3], key):
            return "Duplicate key exists in unique index 'code' in space 'model'"
        model[key] = t
    elif kind == "delete":
        model.pop(key, None)
    elif key in model:
        old = model[key]
        if kind == "update_name":
            new = (key, op[2], old[2])
        else:
            new = (key, old[1], old[2] + op[2])
        if code_taken(new[2], key):
            return "Duplicate key exists in unique index 'code' in space 'model'"
        model[key] = new
    return None


def engine_apply(space, op):
    kind, key = op[0], op[1]
    if kind in ("insert", "replace"):
        getattr(space, kind)([key, op[2], op[3]])
    elif kind == "delete":
        space.delete(key)
    elif kind == "update_name":
        space.update(key, [["=", 2, op[2]]])
    else:
        space.update(key, [["+", 3, op[2]]])


def snapshot(space):
    return (space.select(), space.select(None, 1), sorted(space.index(2).tuples()),
            [space.index(2).get(t[2]) for t in space.select()], space.bsize())


def check_against_model(space, model):
    assert space.select() == sorted(model.values())
    assert space.select(None, 1) == sorted(model.values(), key=lambda t: (t[1], t[0]))
    for name in "abc":
        assert space.select(name, 1) == sorted(t for t in model.values() if t[1] == name)
        assert space.select(name, 1, "LT") == sorted(
            (t for t in model.values() if t[1] < name), key=lambda t: (t[1], t[0]), reverse=True)
    for t in model.values():
        assert space.index(2).get(t[2]) == t
    assert len(space.index(2)) == len(model)


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_random_dml_matches_model(ops):
    engine = Engine()
    space = make_model_space(engine)
    model: dict = {}
    for op in ops:
        expected_error = model_apply(model, op)
        if expected_error is None:
            engine_apply(space, op)
        else:
            assert str(err(engine_apply, space, op)) == expected_error
        check_against_model(space, model)


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=20), st.lists(OPS, max_size=20), st.lists(OPS, max_size=10),
       st.booleans())
def test_random_transaction_rollback_restores_state(setup, body, tail, whole):
    journal = Journal()
    engine = Engine(journal=journal)
    space = make_model_space(engine)
    model: dict = {}
    for op in setup:
        if model_apply(model, op) is None:
            engine_apply(space, op)
    before = snapshot(space)
    batches = len(journal.batches)
    engine.txns.begin()
    done = 0
    for op in body:
        try:
            engine_apply(space, op)
            done += 1
        except ClientError:
            pass
    middle = snapshot(space)
    sp = engine.txns.savepoint()
    for op in tail:
        try:
            engine_apply(space, op)
        except ClientError:
            pass
    engine.txns.rollback_to_savepoint(sp)
    assert snapshot(space) == middle
    if whole:
        engine.txns.rollback()
        assert snapshot(space) == before
        check_against_model(space, model)
        assert len(journal.batches) == batches
    else:
        engine.txns.commit()
        assert snapshot(space) == middle
        assert len(journal.batches) == batches + (1 if done else 0)
        if done:
            assert len(journal.batches[-1]) == done
