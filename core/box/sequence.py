"""Sequences of Tarantool 2.6.0: the sequence cache and its values, the triggers of
`_sequence`, `_sequence_data` and `_space_sequence`, and auto-increment.

Facts from 2.6.0 (sequence.c, the sequence parts of alter.cc, request.c, box.cc):

* A sequence is a `_sequence` row {id, owner, name, step, min, max, start, cache,
  cycle}. Its value lives apart, in the sequence data (by id): a sequence that has
  none is "not started".
* next(): a sequence not started gives `start`; then each call adds `step`. A value
  before `min` (ascending; after `max` descending) jumps there; past the other end
  it overflows: ER_SEQUENCE_OVERFLOW, or with `cycle` it starts again at `min`
  (ascending) or `max`. `update(v)` (what an explicit value in a sequence field
  does) only moves the value forward, in the step's direction.
* Values are not transactional: a rolled back statement keeps the value it moved
  the sequence to. Only the DELETE of a `_sequence_data` row (reset, drop) is undone.
* box.sequence.X:next() and :set() REPLACE {id, value} into `_sequence_data` as
  admin, :reset() DELETEs it; auto-increment writes nothing there, the INSERT or
  REPLACE row carries the value and applying it (a replica, recovery) moves the
  sequence forward. So `_sequence_data` in memory may lag the values, and a
  checkpoint (or a JOIN) writes the values, not the space's rows.
* Auto-increment: an INSERT or REPLACE into a space with a sequence whose sequence
  field is nil (box.NULL) gets the next value there, before any before_replace
  trigger runs; an integer there is update()d into the sequence; a tuple too short
  to have the field, or another type, leaves the sequence alone. A sequence the
  space did not generate needs usage and write on it (the generated one goes with
  the space's rights).
"""
from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Callable

from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import PutRequest

from .field_types import FieldType
from .index import DupMode
from .stat import REQUESTS
from .txn import Statement, put_row

if TYPE_CHECKING:
    from .space import Space
    from .txn import Engine

SEQUENCE_DATA, PRIV, SPACE_SEQUENCE = 285, 312, 340      # system space ids (schema_def.h)
INT64_MIN, INT64_MAX, UINT32_MAX = -(1 << 63), (1 << 63) - 1, (1 << 32) - 1
NAME_MAX, INVALID_NAME_MAX = 65000, 64
_INSERT, _REPLACE = 2, 3            # IPROTO_INSERT, IPROTO_REPLACE


def _nothing() -> None:
    return None


class Sequence:
    """One `_sequence` row as the cache holds it (sequence_def + is_generated)."""

    __slots__ = ("id", "uid", "name", "step", "min", "max", "start", "cache", "cycle",
                 "is_generated", "catalogue")

    def __init__(self, catalogue: "Sequences", fields: tuple):
        self.catalogue = catalogue
        self.is_generated = False
        self.define(fields)

    def define(self, fields: tuple) -> None:
        (self.id, self.uid, self.name, self.step, self.min, self.max, self.start,
         self.cache, self.cycle) = fields

    def fields(self) -> tuple:
        return (self.id, self.uid, self.name, self.step, self.min, self.max, self.start,
                self.cache, self.cycle)

    def __repr__(self) -> str:
        return f"<Sequence {self.id} {self.name!r}>"


# ------------------------------------------------- reading the system rows

def _field_type(fieldno: int, type_name: str) -> ClientError:
    return ClientError(ErrorCode.ER_FIELD_TYPE, str(fieldno + 1), type_name)


def _field(row: Any, fieldno: int) -> Any:
    if fieldno >= len(row):
        raise ClientError(ErrorCode.ER_NO_SUCH_FIELD_NO, fieldno)
    return row[fieldno]


def field_u32(row: Any, fieldno: int) -> int:
    value = _field(row, fieldno)
    if type(value) is not int or not 0 <= value <= UINT32_MAX:
        raise _field_type(fieldno, "unsigned")
    return value


def field_i64(row: Any, fieldno: int) -> int:
    value = _field(row, fieldno)
    if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
        raise _field_type(fieldno, "integer")
    return value


def field_bool(row: Any, fieldno: int) -> bool:
    value = _field(row, fieldno)
    if type(value) is not bool:
        raise _field_type(fieldno, "boolean")
    return value


def field_str(row: Any, fieldno: int) -> str:
    value = _field(row, fieldno)
    if type(value) is not str:
        raise _field_type(fieldno, "string")
    return value


def sequence_def_from_tuple(row: Any, errcode: int) -> tuple:
    """sequence_def_new_from_tuple(): the checked fields of a `_sequence` row, or
    the ClientError 2.6.0 raises (`errcode`: ER_CREATE_SEQUENCE or ER_ALTER_SEQUENCE)."""
    from .alter import check_identifier          # (alter imports this module)
    name = field_str(row, 2)
    if len(name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        raise ClientError(errcode, name[:INVALID_NAME_MAX], "sequence name is too long")
    check_identifier(name)
    fields = (field_u32(row, 0), field_u32(row, 1), name, field_i64(row, 3),
              field_i64(row, 4), field_i64(row, 5), field_i64(row, 6), field_i64(row, 7),
              field_bool(row, 8))
    _, _, _, step, low, high, start, _, _ = fields
    if step == 0:
        raise ClientError(errcode, name, "step option must be non-zero")
    if low > high:
        raise ClientError(errcode, name, "max must be greater than or equal to min")
    if not low <= start <= high:
        raise ClientError(errcode, name, "start must be between min and max")
    return fields


# ------------------------------------------------------------ JSON paths

_TOKEN = re.compile(r"""\.([^.\[]+)|\[(\d+)\]|\["([^"\]]*)"\]|\['([^'\]]*)'\]""")


def path_tokens(path: str | None) -> list[Any] | None:
    """A field path (".a[2]", '["a"]', "a") as its keys: strings, and 0-based
    array positions for [n] (JSON paths count from 1). None when it does not parse."""
    if not path:
        return []
    if path[0] not in ".[":
        path = "." + path
    tokens: list[Any] = []
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            return None
        name, number, dq, sq = m.groups()
        if number is not None:
            tokens.append(int(number) - 1)
        else:
            tokens.append(name if name is not None else (dq if dq is not None else sq))
        pos = m.end()
    return tokens


def _child(value: Any, token: Any) -> tuple[bool, Any]:
    if isinstance(token, int):
        if isinstance(value, (list, tuple)) and 0 <= token < len(value):
            return True, value[token]
        return False, None
    if isinstance(value, dict) and token in value:
        return True, value[token]
    return False, None


def _with_value(container: Any, tokens: list, value: Any) -> Any:
    """A copy of `container` with `value` at `tokens` (which exist in it)."""
    token = tokens[0]
    inner = value if len(tokens) == 1 else _with_value(container[token], tokens[1:], value)
    if isinstance(container, dict):
        copy = dict(container)
        copy[token] = inner
        return copy
    items = list(container)
    items[token] = inner
    return tuple(items) if type(container) is tuple else items


# ---------------------------------------------------------------- the cache

class Sequences:
    """The sequence cache (by id) and the sequence data (values by id) of one
    instance, and the catalogue triggers that keep them."""

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.by_id: dict[int, Sequence] = {}
        self.values: dict[int, int] = {}
        # access_check_sequence() for the running fiber's effective user (the Lua
        # layer sets it; without it every caller is admin)
        self.check_access: Callable[[Sequence], None] = lambda seq: None

    def find(self, seq_id: Any) -> Sequence:
        """sequence_cache_find()."""
        seq = self.by_id.get(seq_id) if isinstance(seq_id, int) else None
        if seq is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_SEQUENCE, str(seq_id))
        return seq

    def by_name(self, name: str) -> Sequence | None:
        for seq in self.by_id.values():
            if seq.name == name:
                return seq
        return None

    # ---------------------------------------------------------- sequence.c

    def next(self, seq: Sequence) -> int:
        values = self.values
        value = values.get(seq.id)
        if value is None:
            values[seq.id] = seq.start
            return seq.start
        if seq.step > 0:
            if value < seq.min:
                value = seq.min
            else:
                value += seq.step
                if value > seq.max:
                    value = self._overflow(seq, seq.min)
        else:
            if value > seq.max:
                value = seq.max
            else:
                value += seq.step
                if value < seq.min:
                    value = self._overflow(seq, seq.max)
        values[seq.id] = value
        return value

    @staticmethod
    def _overflow(seq: Sequence, restart: int) -> int:
        if not seq.cycle:
            raise ClientError(ErrorCode.ER_SEQUENCE_OVERFLOW, seq.name)
        return restart

    def update(self, seq: Sequence, value: int) -> None:
        """sequence_update(): only forward, in the step's direction."""
        current = self.values.get(seq.id)
        if current is None or (value > current if seq.step > 0 else value < current):
            self.values[seq.id] = value

    def current(self, seq: Sequence) -> int:
        value = self.values.get(seq.id)
        if value is None:
            raise ClientError(ErrorCode.ER_SEQUENCE_NOT_STARTED, seq.name)
        return value

    def snapshot_tuples(self) -> list:
        """What a checkpoint writes as `_sequence_data`: every value, by id."""
        return [(seq_id, value) for seq_id, value in sorted(self.values.items())]

    # ------------------------------------------------- box_sequence_* (box.cc)
    # `check_writable` raises ER_READONLY for a write the instance refuses; as in
    # 2.6.0 it runs after the value moved (next) or was set.

    def box_next(self, seq_id: Any, check_writable: Callable[[], None] = _nothing) -> int:
        seq = self.find(seq_id)
        self.check_access(seq)
        value = self.next(seq)
        check_writable()
        self._write_value(seq.id, value)
        return value

    def _write_value(self, seq_id: int, value: int) -> None:
        """REPLACE {id, value} into `_sequence_data`, the value already in place.
        Inside this fiber's own open transaction, with no trigger on that space but
        the catalogue's (on_sequence_data, which would set the value again and
        leave nothing to undo), the statement is made here in one frame, as
        Space.put_in_txn makes one: the tuple stored, then the statement and its
        redo row join the transaction. The row is the one Space.replace writes.
        Anywhere else it is Space.replace."""
        space = self.engine.space(SEQUENCE_DATA)
        txns = self.engine.txns
        txn = txns.open.get(txns.fiber_key())
        if (txn is None or txn.replicated or len(space.on_replace) != 1
                or len(space.before_replace)):
            space.replace([seq_id, value])
            return
        REQUESTS[_REPLACE] += 1
        new, displaced, data = space._put((seq_id, value), DupMode.REPLACE_OR_INSERT)
        if data is None:        # (no int64 fails MsgPack; as put_in_txn, just in case)
            space.undo(displaced, new)
            space.replace([seq_id, value])
            return
        txn.statements.append(Statement(space, None, displaced, new, data,
                                        put_row(_REPLACE, SEQUENCE_DATA, data, space.group_id)))

    def box_current(self, seq_id: Any) -> int:
        seq = self.find(seq_id)
        self.check_access(seq)
        return self.current(seq)

    def box_set(self, seq_id: Any, value: int,
                check_writable: Callable[[], None] = _nothing) -> None:
        seq = self.find(seq_id)
        self.check_access(seq)
        self.values[seq.id] = value
        check_writable()
        self._write_value(seq.id, value)

    def box_reset(self, seq_id: Any, check_writable: Callable[[], None] = _nothing) -> None:
        seq = self.find(seq_id)
        self.check_access(seq)
        self.values.pop(seq.id, None)
        check_writable()
        self.engine.space(SEQUENCE_DATA).delete([seq.id])

    # ------------------------------------------------ catalogue triggers
    # Each returns what undoes it (Schema runs that on rollback).

    def on_sequence(self, old: Any, new: Any) -> Callable[[], None]:
        """on_replace_dd_sequence(): create, drop or alter a sequence."""
        if old is None:
            seq = Sequence(self, sequence_def_from_tuple(new, ErrorCode.ER_CREATE_SEQUENCE))
            self.by_id[seq.id] = seq
            return lambda: self._forget(seq)
        if new is None:
            seq = self.by_id[old[0]]
            self._check_drop(seq)
            value = self.values.get(seq.id)
            self._forget(seq)
            return lambda: self._restore(seq, value)
        fields = sequence_def_from_tuple(new, ErrorCode.ER_ALTER_SEQUENCE)
        seq = self.by_id[fields[0]]
        before = seq.fields()
        seq.define(fields)
        return lambda: seq.define(before)

    def _check_drop(self, seq: Sequence) -> None:
        engine = self.engine
        why = None
        if engine.space(SEQUENCE_DATA).get([seq.id]) is not None:
            why = "the sequence has data"
        elif engine.space(SPACE_SEQUENCE).select([seq.id], 1, limit=1):
            why = "the sequence is in use"
        elif engine.space(PRIV).select(["sequence", seq.id], 2, limit=1):
            why = "the sequence has grants"
        if why is not None:
            raise ClientError(ErrorCode.ER_DROP_SEQUENCE, seq.name, why)

    def _forget(self, seq: Sequence) -> None:
        self.by_id.pop(seq.id, None)
        self.values.pop(seq.id, None)

    def _restore(self, seq: Sequence, value: int | None) -> None:
        self.by_id[seq.id] = seq
        if value is not None:
            self.values[seq.id] = value

    def on_sequence_data(self, old: Any, new: Any) -> Callable[[], None]:
        """on_replace_dd_sequence_data(): a REPLACE sets the value (and stays when
        its transaction rolls back); a DELETE resets it (undone on rollback)."""
        seq_id = field_u32(old if old is not None else new, 0)
        seq = self.by_id.get(seq_id)
        if seq is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_SEQUENCE, str(seq_id))
        if new is not None:
            self.values[seq_id] = field_i64(new, 1)
            return _nothing
        value = field_i64(old, 1)
        self.values.pop(seq_id, None)
        return lambda: self.values.__setitem__(seq_id, value)

    def on_space_sequence(self, old: Any, new: Any) -> Callable[[], None]:
        """on_replace_dd_space_sequence(): attach a sequence to a space or detach it."""
        row = new if new is not None else old
        space_id, seq_id = field_u32(row, 0), field_u32(row, 1)
        is_generated = field_bool(row, 2)
        space = self.engine.space(space_id)
        seq = self.by_id.get(seq_id)
        if seq is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_SEQUENCE, str(seq_id))
        if old is not None and new is not None:
            raise ClientError(ErrorCode.ER_UNSUPPORTED, 'space "_space_sequence"', "update")
        if new is not None:
            fieldno, path = sequence_field_from_tuple(space, new)
            if seq.is_generated:
                raise ClientError(ErrorCode.ER_ALTER_SPACE, space.name,
                                  "can not attach generated sequence")
            attach(space, seq, is_generated, fieldno, path)
            return lambda: detach(space)
        detach(space)
        return lambda: attach(space, seq, is_generated, *sequence_field_from_tuple(space, old))


def attach(space: "Space", seq: Sequence, is_generated: bool, fieldno: int,
           path: str | None) -> None:
    seq.is_generated = is_generated
    space.sequence = seq
    space.sequence_fieldno = fieldno
    space.sequence_path = path


def detach(space: "Space") -> None:
    if space.sequence is not None:
        space.sequence.is_generated = False
    space.sequence = None
    space.sequence_fieldno = 0
    space.sequence_path = None


def sequence_field_from_tuple(space: "Space", row: Any) -> tuple[int, str | None]:
    """The sequence field of a `_space_sequence` row (rows before 2.2.1 have none:
    the first part of the primary key), checked against the primary key."""
    pk = space.index(0)
    first = pk.key_def.parts[0]
    fieldno, path = first.fieldno, getattr(first, "path", None)
    if len(row) > 3:
        fieldno = field_u32(row, 3)
        path = field_str(row, 4) or None
    check_sequence_part(pk.index_def, fieldno, path, space.name)
    return fieldno, path


def check_sequence_part(index_def: Any, fieldno: int, path: str | None,
                        space_name: str) -> None:
    """index_def_check_sequence(): the sequence field must be an integer part."""
    want = path_tokens(path)
    for part in index_def.key_def.parts:
        if part.fieldno == fieldno and path_tokens(getattr(part, "path", None)) == want:
            if part.type not in (FieldType.UNSIGNED, FieldType.INTEGER):
                raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name,
                                  "sequence cannot be used with a non-integer key")
            return
    raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name,
                      "sequence field must be a part of the index")


# ------------------------------------------------------------ auto-increment

def handle_sequence(space: "Space", stmt: "Statement") -> None:
    """request_handle_sequence(), for a statement of a space with a sequence."""
    request = stmt.request
    assert request is not None       # (execute()'s statements carry one)
    rtype = request.type
    if rtype != _INSERT and rtype != _REPLACE:
        return
    tup = request.tuple
    new = sequence_tuple(space, tup)
    if new is not tup:
        if isinstance(request, PutRequest):
            stmt.request = PutRequest(rtype, request.space_id, new)
        else:
            stmt.request = dataclasses.replace(request, tuple=new)


def sequence_tuple(space: "Space", tup: Any) -> Any:
    """The tuple an INSERT/REPLACE of `tup` into `space` (which has a sequence)
    stores: `tup` with the next value in place of a nil sequence field, or `tup`
    itself (having moved the sequence to an explicit value)."""
    seq = space.sequence
    assert seq is not None
    if not seq.is_generated:
        seq.catalogue.check_access(seq)
    fieldno = space.sequence_fieldno
    if 0 not in space.indexes or not isinstance(tup, (list, tuple)) or len(tup) <= fieldno:
        return tup
    value = tup[fieldno]
    path = space.sequence_path
    if path is None:
        if value is None:
            generated = seq.catalogue.next(seq)
            new = list(tup)
            new[fieldno] = generated
            return tuple(new) if type(tup) is tuple else new
    else:
        tokens = path_tokens(path) or []
        for token in tokens:
            found, value = _child(value, token)
            if not found:
                return tup
        if value is None:
            return _with_value(tup, [fieldno, *tokens], seq.catalogue.next(seq))
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        seq.catalogue.update(seq, value)
    return tup
