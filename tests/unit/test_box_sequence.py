"""Sequences in the core (core/box/sequence.py, ddl_sequences.py): values, the
`_sequence`/`_sequence_data`/`_space_sequence` triggers, auto-increment and the rows
box.schema.sequence and the index `sequence` option write.

The messages, results and WAL rows are pinned against the real 2.6.0 binary in
tests/interop/test_sequence_oracle.py; these tests pin the behaviour without it.
"""
from __future__ import annotations

import pytest

from spindle.core.box.access import Access, AccessDeniedError
from spindle.core.box.ddl import Ddl
from spindle.core.box.schema import Schema, load_bootstrap_rows
from spindle.core.box.sequence import INT64_MAX, INT64_MIN, path_tokens
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import DmlRequest, decode_dml_body

SEQUENCE, SEQUENCE_DATA, SPACE_SEQUENCE = 284, 285, 340


class Box:
    def __init__(self, with_access: bool = False):
        self.txns: list[list] = []
        self.engine = Engine(journal=lambda rows: self.txns.append(list(rows)))
        self.schema = Schema(self.engine)
        rows = load_bootstrap_rows()
        self.schema.create_system_spaces(rows)
        for space_id, tup in rows:
            self.engine.space(space_id).replace(tup)
        self.txns.clear()
        self.user = 1
        self.access = Access(self.schema) if with_access else None
        self.ddl = Ddl(self.engine, self.schema, lambda: self.user, access=self.access)
        self.seqs = self.schema.sequences

    def rows(self) -> list[tuple]:
        out = []
        for tx in self.txns:
            for row in tx:
                req = decode_dml_body(row.body, row.type)
                payload = req.tuple if req.tuple is not None else req.key
                out.append((IprotoType(row.type).name, req.space_id, payload))
        self.txns.clear()
        return out

    def create(self, name, **opts):
        return self.seqs.find(self.ddl.sequence_create(name, opts or None)[0])

    def space(self, name, index_opts=None, fmt=None):
        space = self.ddl.space_create(name, {"format": fmt} if fmt else None)
        self.ddl.index_create(space.id, "pk", index_opts or {})
        return space


@pytest.fixture
def box():
    return Box()


def error_of(fn) -> str:
    with pytest.raises(ClientError) as info:
        fn()
    return info.value.message


# -------------------------------------------------------------------- values

def test_next_starts_at_start_then_steps_and_overflows(box):
    seq = box.create("s", min=1, max=3)
    assert [box.seqs.next(seq) for _ in range(3)] == [1, 2, 3]
    assert error_of(lambda: box.seqs.next(seq)) == "Sequence 's' has overflowed"
    assert box.seqs.current(seq) == 3


def test_cycle_and_descending_sequences(box):
    cyc = box.create("c", min=1, max=3, cycle=True)
    assert [box.seqs.next(cyc) for _ in range(4)] == [1, 2, 3, 1]
    down = box.create("d", step=-2)
    assert (down.min, down.max, down.start) == (INT64_MIN, -1, -1)
    assert [box.seqs.next(down) for _ in range(3)] == [-1, -3, -5]
    big = box.create("b", start=INT64_MAX - 1)
    assert [box.seqs.next(big) for _ in range(2)] == [INT64_MAX - 1, INT64_MAX]
    assert "overflowed" in error_of(lambda: box.seqs.next(big))


def test_a_value_before_min_jumps_to_min_and_update_only_moves_forward(box):
    seq = box.create("s", min=10, start=10)
    box.seqs.values[seq.id] = 3
    assert box.seqs.next(seq) == 10
    box.seqs.update(seq, 5)
    assert box.seqs.current(seq) == 10
    box.seqs.update(seq, 50)
    assert box.seqs.current(seq) == 50
    assert error_of(lambda: box.seqs.current(box.create("n"))) == "Sequence 'n' is not started"


def test_box_next_set_reset_write_sequence_data(box):
    seq = box.create("s")
    box.rows()
    assert box.seqs.box_next(seq.id) == 1
    box.seqs.box_set(seq.id, 100)
    box.seqs.box_reset(seq.id)
    assert box.rows() == [("REPLACE", SEQUENCE_DATA, [seq.id, 1]),
                          ("REPLACE", SEQUENCE_DATA, [seq.id, 100]),
                          ("DELETE", SEQUENCE_DATA, [seq.id])]
    assert error_of(lambda: box.seqs.box_next(99)) == "Sequence '99' does not exist"


def test_values_survive_a_rollback_but_a_reset_does_not(box):
    seq = box.create("s")
    txns = box.engine.txns
    txns.begin()
    box.seqs.box_set(seq.id, 7)
    txns.rollback()
    assert box.seqs.current(seq) == 7          # not transactional
    box.seqs.box_set(seq.id, 8)
    txns.begin()
    box.seqs.box_reset(seq.id)
    txns.rollback()
    assert box.seqs.current(seq) == 8          # the DELETE of the row is undone


# ---------------------------------------------------------- catalogue / DDL

def test_create_alter_drop_rows(box):
    box.create("s", step=2, cache=3)
    box.ddl.sequence_alter("s", {"name": "s2", "max": 100})
    box.ddl.sequence_drop("s2")
    assert box.rows() == [
        ("INSERT", SEQUENCE, [1, 1, "s", 2, 1, INT64_MAX, 1, 3, False]),
        ("REPLACE", SEQUENCE, [1, 1, "s2", 2, 1, 100, 1, 3, False]),
        ("DELETE", SEQUENCE_DATA, [1]),
        ("DELETE", SEQUENCE, [1]),
    ]
    assert box.seqs.by_id == {}


@pytest.mark.parametrize("opts, message", [
    ({"step": 0}, "Failed to create sequence 'z': step option must be non-zero"),
    ({"min": 10, "max": 5}, "Failed to create sequence 'z': max must be greater than or "
                            "equal to min"),
    ({"start": 100, "max": 5}, "Failed to create sequence 'z': start must be between "
                               "min and max"),
    ({"foo": 1}, "Illegal parameters, unexpected option 'foo'"),
    ({"step": "x"}, "Illegal parameters, options parameter 'step' should be of type number"),
    ({"step": 1.5}, "Tuple field 4 type does not match one required by operation: "
                    "expected integer"),
])
def test_create_errors(box, opts, message):
    assert error_of(lambda: box.ddl.sequence_create("z", opts)) == message
    assert box.seqs.by_id == {}


def test_exists_and_missing(box):
    box.create("s")
    assert error_of(lambda: box.create("s")) == "Sequence 's' already exists"
    assert box.ddl.sequence_create("s", {"if_not_exists": True}) == (1, False)
    assert error_of(lambda: box.ddl.sequence_drop("x")) == "Sequence 'x' does not exist"
    box.ddl.sequence_drop("x", {"if_exists": True})
    assert error_of(lambda: box.ddl.sequence_alter("x", {})) == "Sequence 'x' does not exist"
    assert error_of(lambda: box.ddl.sequence_alter("s", {"step": 0})) == \
        "Can't modify sequence 's': step option must be non-zero"


def test_raw_rows_are_checked_too(box):
    sequences = box.engine.space(SEQUENCE)
    assert "step option must be non-zero" in error_of(
        lambda: sequences.insert([5, 1, "r", 0, 1, 10, 1, 0, False]))
    assert error_of(lambda: box.engine.space(SEQUENCE_DATA).replace([9, 1])) == \
        "Sequence '9' does not exist"


def test_index_sequence_true_generates_and_drop_drops(box):
    space = box.space("t", {"sequence": True})
    seq = box.seqs.by_name("t_seq")
    assert (space.sequence, seq.is_generated) == (seq, True)
    assert box.engine.space(SPACE_SEQUENCE).select() == [(space.id, seq.id, True, 0, "")]
    assert "in use" in error_of(lambda: box.ddl.sequence_drop("t_seq"))
    assert "can not attach generated sequence" in error_of(
        lambda: box.space("v", {"sequence": "t_seq"}))
    box.ddl.space_drop(space.id)
    assert box.seqs.by_id == {} and box.engine.space(SPACE_SEQUENCE).select() == []


def test_index_alter_attaches_detaches_and_drops_the_generated_one(box):
    space = box.space("t", {"sequence": True})
    mine = box.create("mine", start=100, min=100)
    box.ddl.index_alter(space.id, 0, {"sequence": "mine"})
    assert space.sequence is mine and box.seqs.by_name("t_seq") is None
    box.ddl.index_alter(space.id, 0, {"sequence": False})
    assert space.sequence is None and box.engine.space(SPACE_SEQUENCE).select() == []


@pytest.mark.parametrize("index_opts, message", [
    ({"parts": [1, "string"], "sequence": True},
     "Can't create or modify index 'pk' in space 't': sequence cannot be used with a "
     "non-integer key"),
    ({"sequence": "nosuch"}, "Sequence 'nosuch' does not exist"),
    ({"sequence": 77}, "Sequence '77' does not exist"),
    ({"sequence": {"field": 2}},
     "Can't create or modify index 'pk' in space 't': sequence field must be a part of "
     "the index"),
    ({"sequence": {"field": "nofield"}},
     "Illegal parameters, sequence field: field was not found by name 'nofield'"),
])
def test_index_option_errors(box, index_opts, message):
    space = box.ddl.space_create("t")
    assert error_of(lambda: box.ddl.index_create(space.id, "pk", index_opts)) == message
    assert box.seqs.by_id == {} and not space.indexes


def test_secondary_keys_take_no_sequence(box):
    space = box.space("t")
    assert error_of(lambda: box.ddl.index_create(space.id, "sk", {"sequence": True})) == \
        "Can't create or modify index 'sk' in space 't': sequence cannot be used with a " \
        "secondary key"
    box.ddl.index_create(space.id, "sk", {"parts": [2, "unsigned"], "sequence": False})


def test_the_primary_key_keeps_its_sequence_field(box):
    space = box.space("t", {"sequence": True})
    assert "non-integer key" in error_of(
        lambda: box.ddl.index_alter(space.id, 0, {"parts": [1, "string"]}))
    assert error_of(lambda: box.engine.space(288).delete([space.id, 0])) == \
        "Can't modify space 't': can not drop primary key while space sequence exists"


# ------------------------------------------------------------ auto-increment

def test_nil_gets_the_next_value_and_an_explicit_one_moves_it(box):
    space = box.space("t", {"sequence": True})
    assert space.insert([None, "a"]) == (1, "a")
    assert space.replace([None]) == (2,)
    assert space.insert([10]) == (10,)
    assert space.insert([5]) == (5,)
    assert space.insert([None]) == (11,)
    box.rows()
    space.insert([None, "x"])
    assert box.rows() == [("INSERT", space.id, [12, "x"])]   # the value is logged


def test_what_leaves_the_sequence_alone(box):
    space = box.space("t", {"sequence": True})
    assert "required by space format is missing" in error_of(lambda: space.insert([]))
    assert "expected unsigned" in error_of(lambda: space.insert(["str"]))
    space.insert([2 ** 63])                    # no int64: not an update
    assert space.sequence.id not in box.seqs.values


def test_a_failed_insert_keeps_the_value(box):
    space = box.space("t", {"sequence": True})
    space.insert([1])
    space.insert([None, "a"])
    box.seqs.values[space.sequence.id] = 0
    assert "Duplicate key" in error_of(lambda: space.insert([None, "b"]))
    assert box.seqs.current(space.sequence) == 1


def test_sequence_field_of_a_multipart_key(box):
    fmt = [{"name": "a", "type": "string"}, {"name": "b", "type": "unsigned"}]
    space = box.space("u", {"parts": ["a", "b"], "sequence": {"field": "b"}}, fmt=fmt)
    assert (space.sequence_fieldno, space.sequence_path) == (1, None)
    assert space.insert(["k", None]) == ("k", 1)
    assert space.insert(["j", None, "x"]) == ("j", 2, "x")


def test_replicated_rows_move_the_sequence(box):
    space = box.space("t", {"sequence": True})
    space.execute_request(DmlRequest(type=IprotoType.INSERT, space_id=space.id,
                                     tuple=[40, "from a master"]))
    assert box.seqs.current(space.sequence) == 40
    assert space.insert([None]) == (41,)


def test_an_attached_sequence_needs_usage_and_write(box):
    space = box.space("t")
    box.ddl.index_alter(space.id, 0, {"sequence": box.create("s").id})
    checked = []
    box.seqs.check_access = checked.append
    space.insert([None])
    assert checked == [space.sequence]
    space.sequence.is_generated = True
    space.insert([None])
    assert len(checked) == 1


def test_access_hook_denies(box):
    space = box.space("t")
    box.ddl.index_alter(space.id, 0, {"sequence": box.create("s").id})
    access = Access(box.schema)
    box.ddl.user_create("u")
    uid = box.schema.user_by_name("u").id
    box.seqs.check_access = lambda seq: access.check_sequence(uid, seq.id)
    with pytest.raises(AccessDeniedError):
        space.insert([None])


def test_snapshot_takes_the_values(box):
    space = box.space("t", {"sequence": True})
    space.insert([None])
    space.insert([None])
    seq = box.create("s")
    box.seqs.box_next(seq.id)
    data = box.engine.space(SEQUENCE_DATA)
    assert data.select() == [(seq.id, 1)]
    assert data.primary.snapshot_tuples() == [(space.sequence.id, 2), (seq.id, 1)]


def test_json_paths():
    assert path_tokens(".a[2]") == ["a", 1]
    assert path_tokens('["a"].b') == ["a", "b"]
    assert path_tokens("a") == ["a"]
    assert path_tokens("") == []
    assert path_tokens("[x") is None


def test_error_codes_are_2_6_0s():
    assert ErrorCode.ER_SEQUENCE_OVERFLOW == 147 and ErrorCode.ER_SEQUENCE_NOT_STARTED == 212
