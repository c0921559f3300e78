"""UPDATE / UPSERT operations with Tarantool 2.6.0's semantics and messages.

Facts from src/box/xrow_update*.c of the 2.6.0 tag, checked against the binary:

* All operations are decoded and checked first (`decode_ops`); only then applied in order.
  Errors while decoding name the operation by its 1-based position (#N).
* Field numbers are `index_base`-based (box's Lua API uses 1, raw IPROTO may use 0);
  negative numbers count from the end (-1 is the last field; for '!' -1 appends).
  A field may also be named through the space format, or written as "[N]" (1-based).
* '=' on field n+1 appends; '!' inserts before the field (n+1 appends); '#' deletes up to
  `count` fields; '+' '-' work on numbers (int96 arithmetic, overflow outside
  [-2^63, 2^64-1] is ER_UPDATE_INTEGER_OVERFLOW; a float operand makes the result a
  double; a decimal operand a decimal); '&' '|' '^' on unsigned integers; ':' splices
  strings by *byte* offsets.
* A field may be the target of at most one arithmetic/bit/splice operation ('=' may
  override anything): "double update of the same field" otherwise.
* UPSERT applies the operations skipping the ones that fail with a ClientError (2.6.0
  logs them with say_error); malformed operations still fail the whole request.

* A field named by a string may be a JSON path into it ('f.a[2]', '[3].x'):
  update_path.py.

Floats that Tarantool would store as MsgPack float32 are plain Python floats here
(same value).
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from spindle.core.box import update_path
from spindle.core.box.field_types import INT64_MIN, UINT64_MAX, is_uint
from spindle.core.iproto.msgpack import MP_EXT_DECIMAL, decimal_unpack_zeroed, ext_code
from spindle.core.iproto.errors import ClientError, ErrorCode

UPDATE_OP_COUNT_MAX = 4000
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_ARG_COUNT = {"=": 3, "!": 3, "+": 3, "-": 3, "&": 3, "|": 3, "^": 3, ":": 5, "#": 3}
_DECIMAL_CONTEXT = decimal.Context(prec=38, Emax=10 ** 6, Emin=-10 ** 6,
                                   traps=[decimal.Overflow, decimal.InvalidOperation])


@dataclass
class UpdateOp:
    opcode: str
    field_no: int              # 0-based, or negative (from the end)
    name: str | None           # the path as given, when the field was named by a string
    args: tuple                # decoded arguments
    rest: int | None = None    # where a JSON path into the field goes on in `name`

    def field_str(self) -> str:
        """xrow_update_op_field_str(): how messages name the field."""
        if self.name is not None:
            return f"'{self.name}'"
        return str(self.field_no + 1 if self.field_no >= 0 else self.field_no)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_int32(v: Any) -> bool:
    return _is_int(v) and INT32_MIN <= v <= INT32_MAX


def _arg_type_error(op: UpdateOp, needed: str) -> ClientError:
    return ClientError(ErrorCode.ER_UPDATE_ARG_TYPE, op.opcode, op.field_str(), needed)


def _update_field_error(op: UpdateOp, reason: str) -> ClientError:
    return ClientError(ErrorCode.ER_UPDATE_FIELD, op.field_str(), reason)


def _no_such_field(op: UpdateOp) -> ClientError:
    if op.name is None:
        return ClientError(ErrorCode.ER_NO_SUCH_FIELD_NO,
                           op.field_no + (1 if op.field_no >= 0 else 0))
    return ClientError(ErrorCode.ER_NO_SUCH_FIELD_NAME, op.field_str())


def _is_arith_value(v: Any) -> bool:
    return ((_is_int(v) and INT64_MIN <= v <= UINT64_MAX)
            or isinstance(v, (float, decimal.Decimal)))


def _decode_field(op_num: int, raw: Any, index_base: int,
                  field_names: Mapping[str, int] | None) -> tuple[int, str | None, int | None]:
    """(0-based field number, the name as given, where a path into it goes on)."""
    if _is_int(raw):
        if not _is_int32(raw):
            # 2.6.0 prints a stale field number here; we print the value given.
            raise ClientError(ErrorCode.ER_UPDATE_ARG_TYPE, "?", str(raw), "an integer")
        if raw - index_base >= 0:
            return raw - index_base, None, None
        if raw < 0:
            return raw, None, None
        raise ClientError(ErrorCode.ER_NO_SUCH_FIELD_NO, raw)
    if isinstance(raw, str):
        if field_names and raw in field_names:
            return field_names[raw], raw, None
        # the first token of a JSON path now, the rest when the operation runs
        try:
            token, pos = update_path.lex(raw, 0, True) if raw else (None, 0)
        except update_path.PathError as exc:
            raise ClientError(ErrorCode.ER_UPDATE_FIELD, f"'{raw}'",
                              f"invalid JSON in position {exc.position}") from None
        if isinstance(token, int):
            fieldno = token
        elif token != "*" and token is not None and field_names and token in field_names:
            fieldno = field_names[token]
        else:
            raise ClientError(ErrorCode.ER_NO_SUCH_FIELD_NAME, raw)
        return fieldno, raw, (pos if pos < len(raw) else None)
    raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "field id must be a number or a string")


def decode_ops(ops: Any, *, index_base: int = 1,
               field_names: Mapping[str, int] | None = None) -> list[UpdateOp]:
    """xrow_update_read_ops(): validate and decode every operation."""
    if not isinstance(ops, (list, tuple)):
        raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS,
                          "update operations must be an array {{op,..}, {op,..}}")
    if len(ops) > UPDATE_OP_COUNT_MAX:
        raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "too many operations for update")
    decoded = []
    for op_num, raw_op in enumerate(ops, 1):
        decoded.append(_decode_op(op_num, raw_op, index_base, field_names))
    return decoded


def _decode_op(op_num: int, raw_op: Any, index_base: int,
               field_names: Mapping[str, int] | None) -> UpdateOp:
    if not isinstance(raw_op, (list, tuple)):
        raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "update operation must be an array {op,..}")
    if len(raw_op) < 1:
        raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS,
                          "update operation must be an array {op,..}, got empty array")
    opcode = raw_op[0]
    if not isinstance(opcode, str):
        raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "update operation name must be a string")
    if opcode not in _ARG_COUNT:
        raise ClientError(ErrorCode.ER_UNKNOWN_UPDATE_OP, op_num, f'"{opcode}"')
    expected = _ARG_COUNT[opcode]
    if len(raw_op) != expected:
        raise ClientError(ErrorCode.ER_UNKNOWN_UPDATE_OP, op_num,
                          f"wrong number of arguments, expected {expected}, got {len(raw_op)}")
    field_no, name, rest = _decode_field(op_num, raw_op[1], index_base, field_names)
    op = UpdateOp(opcode, field_no, name, (), rest)
    args = raw_op[2:]
    if opcode in "=!":
        op.args = (args[0],)
    elif opcode == "#":
        count = args[0]
        if not is_uint(count):
            raise _arg_type_error(op, "a positive integer")
        if count == 0:
            raise _update_field_error(op, "cannot delete 0 fields")
        op.args = (count,)
    elif opcode in "+-":
        if not _is_arith_value(args[0]):
            if ext_code(args[0]) == MP_EXT_DECIMAL:
                # a decimal 2.6.0 cannot unpack leaves its reader inside the
                # operation, short of the end of the operations
                raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS,
                                  "can't unpack update operations")
            raise _arg_type_error(op, "a number")
        op.args = (args[0],)
    elif opcode in "&|^":
        if not is_uint(args[0]):
            raise _arg_type_error(op, "a positive integer")
        op.args = (args[0],)
    else:   # ':'
        offset, cut, paste = args
        if not _is_int32(offset):
            raise _arg_type_error(op, "an integer")
        if offset >= 0:
            if offset - index_base < 0:
                raise ClientError(ErrorCode.ER_UPDATE_SPLICE, op.field_str(),
                                  "offset is out of bound")
            offset -= index_base
        if not _is_int32(cut):
            raise _arg_type_error(op, "an integer")
        if not isinstance(paste, str):
            raise _arg_type_error(op, "a string")
        op.args = (offset, cut, paste)
    return op


# ---------------------------------------------------------------------------
# Applying.

class _Slot:
    """One field of the tuple being updated; `touched` marks a scalar update.
    `paths` the (tokens, op) of the JSON path operations into it, `base` its value
    before the first of them (None: no path operation, or it cannot be rebuilt)."""

    __slots__ = ("value", "touched", "paths", "base")

    def __init__(self, value: Any, touched: bool = False):
        self.value = value
        self.touched = touched
        self.paths: list | None = None
        self.base: Any = None

    def whole(self, value: Any) -> None:
        """The field is set whole: path operations before it no longer count."""
        self.value = value
        self.touched = True
        self.paths = None


class _PathErrors:
    """How update_path.py words its errors: as this module does."""

    @staticmethod
    def field(op: UpdateOp, reason: str) -> ClientError:
        return _update_field_error(op, reason)

    @staticmethod
    def missing(op: UpdateOp) -> ClientError:
        return _no_such_field(op)


def _adjust(op: UpdateOp, count: int) -> int:
    """xrow_update_op_adjust_field_no(): like 2.6.0 it rewrites a negative field
    number in place, so later messages about the operation show the positive one."""
    no = op.field_no
    if no >= 0:
        if no < count:
            return no
    elif no + count >= 0:
        op.field_no = no + count
        return op.field_no
    raise _no_such_field(op)


def _to_decimal(v: Any) -> decimal.Decimal | None:
    if isinstance(v, decimal.Decimal):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return None
        return decimal.Decimal(format(v, ".15g"))
    return decimal.Decimal(v)


def arith(op: UpdateOp, left: Any, right: Any) -> Any:
    """xrow_update_arith_make(): `left op right` with Tarantool's type promotion."""
    sign = 1 if op.opcode == "+" else -1
    if isinstance(left, decimal.Decimal) or isinstance(right, decimal.Decimal):
        a, b = _to_decimal(left), _to_decimal(right)
        if a is None or b is None:
            raise _arg_type_error(op, "a number convertible to decimal")
        if len(a.as_tuple().digits) > 38 or len(b.as_tuple().digits) > 38:
            # an operand longer than the context loses digits: decNumber's status
            # 2.6.0 reports as an overflow
            raise ClientError(ErrorCode.ER_UPDATE_DECIMAL_OVERFLOW, op.opcode,
                              op.field_str())
        try:
            return _DECIMAL_CONTEXT.add(a, b) if sign > 0 else _DECIMAL_CONTEXT.subtract(a, b)
        except decimal.DecimalException:
            raise ClientError(ErrorCode.ER_UPDATE_DECIMAL_OVERFLOW, op.opcode,
                              op.field_str()) from None
    if isinstance(left, float) or isinstance(right, float):
        return float(left) + float(right) if sign > 0 else float(left) - float(right)
    result = left + sign * right
    if not INT64_MIN <= result <= UINT64_MAX:
        raise ClientError(ErrorCode.ER_UPDATE_INTEGER_OVERFLOW, op.opcode, op.field_str())
    return result


def _apply_scalar(op: UpdateOp, old: Any) -> Any:
    code = op.opcode
    if code in "+-":
        if not _is_arith_value(old):
            # a decimal 2.6.0 cannot read counts as what its decimal_t holds then
            old = (decimal_unpack_zeroed(old.data) if ext_code(old) == MP_EXT_DECIMAL
                   else None)
            if old is None:
                raise _arg_type_error(op, "a number")
        return arith(op, old, op.args[0])
    if code in "&|^":
        if not is_uint(old):
            raise _arg_type_error(op, "a positive integer")
        arg = op.args[0]
        return old & arg if code == "&" else old | arg if code == "|" else old ^ arg
    # ':' splice, on bytes
    if not isinstance(old, str):
        raise _arg_type_error(op, "a string")
    data = old.encode("utf-8", "surrogateescape")
    offset, cut, paste = op.args
    length = len(data)
    if offset < 0:
        if -offset > length + 1:
            raise ClientError(ErrorCode.ER_UPDATE_SPLICE, op.field_str(), "offset is out of bound")
        offset += length + 1
    elif offset > length:
        offset = length
    if cut < 0:
        cut = 0 if -cut > length - offset else cut + length - offset
    elif cut > length - offset:
        cut = length - offset
    result = data[:offset] + paste.encode("utf-8", "surrogateescape") + data[offset + cut:]
    return result.decode("utf-8", "surrogateescape")


def _apply(op: UpdateOp, slots: list[_Slot]) -> None:
    code = op.opcode
    if op.rest is not None:
        _apply_path(op, slots[_adjust(op, len(slots))])
        return
    if code == "!":
        pos = _adjust(op, len(slots) + 1)
        slots.insert(pos, _Slot(op.args[0]))
        return
    if code == "=":
        if op.field_no == len(slots):
            slots.append(_Slot(op.args[0]))       # '=' on n+1 is an insert
            return
        pos = _adjust(op, len(slots))
        slots[pos].whole(op.args[0])
        return
    if code == "#":
        pos = _adjust(op, len(slots))
        del slots[pos:pos + op.args[0]]
        return
    pos = _adjust(op, len(slots))
    slot = slots[pos]
    if slot.touched:
        raise _update_field_error(op, "double update of the same field")
    slot.whole(_apply_scalar(op, slot.value))


def _apply_path(op: UpdateOp, slot: _Slot) -> None:
    """An operation on a JSON path inside the field of `slot` (update_path.py)."""
    assert op.name is not None and op.rest is not None
    try:
        tokens = update_path.lex_rest(op.name, op.rest)
    except update_path.PathError as exc:
        raise _update_field_error(op, f"invalid JSON in position {exc.position}") from None
    before = slot.paths or []
    update_path.check_repeat(op, tokens, [t for t, _ in before], slot.value, _PathErrors)
    value = update_path.apply_path(op, slot.value, tokens, _PathErrors, _apply_scalar)
    if slot.paths is None:
        # (a field set whole before: 2.6.0 crashes; its new value is updated)
        slot.base = None if slot.touched else slot.value
        slot.paths = []
    slot.paths.append((tokens, op))
    slot.value = value


def _finish(slots: list[_Slot]) -> tuple:
    """The new tuple; a field several path operations went into is rebuilt in
    2.6.0's order of map keys (update_path.rebuild)."""
    for slot in slots:
        if slot.paths is not None and len(slot.paths) > 1 and slot.base is not None:
            slot.value = update_path.rebuild(slot.base, slot.paths, _apply_scalar)
    return tuple(slot.value for slot in slots)


def apply_ops(old: Sequence[Any], ops: list[UpdateOp], *,
              on_error: Callable[[ClientError], None] | None = None) -> tuple:
    """Apply decoded operations to a tuple. With `on_error` (UPSERT), a failing
    operation is reported to it and skipped instead of failing the whole update."""
    slots = [_Slot(v) for v in old]
    for op in ops:
        if on_error is None:
            _apply(op, slots)
            continue
        try:
            _apply(op, slots)
        except ClientError as err:
            on_error(err)
    return _finish(slots)


def update_tuple(old: Sequence[Any], ops: Any, *, index_base: int = 1,
                 field_names: Mapping[str, int] | None = None) -> tuple:
    """xrow_update_execute(): the tuple `old` after `ops`, or a ClientError."""
    return apply_ops(old, decode_ops(ops, index_base=index_base, field_names=field_names))


def upsert_tuple(old: Sequence[Any], ops: Any, *, index_base: int = 1,
                 field_names: Mapping[str, int] | None = None,
                 on_error: Callable[[ClientError], None] | None = None) -> tuple:
    """xrow_upsert_execute(): like update_tuple, but operations that fail on this
    tuple are skipped (and passed to `on_error`, which 2.6.0 logs)."""
    decoded = decode_ops(ops, index_base=index_base, field_names=field_names)
    return apply_ops(old, decoded, on_error=on_error or (lambda err: None))


def check_ops(ops: Any, *, index_base: int = 1,
              field_names: Mapping[str, int] | None = None) -> None:
    """xrow_update_check_ops(): the checks an UPSERT that inserts still makes."""
    decode_ops(ops, index_base=index_base, field_names=field_names)
