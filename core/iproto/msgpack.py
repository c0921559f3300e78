"""MsgPack as Tarantool 2.6.0 writes and reads it: the primitives the msgpack
package does not offer, Tarantool's extensions (decimal, uuid, error) and the
packers and unpackers every other module uses. One home for all of it: the row
codec (xrow), the box (field_types: which values a field takes) and the network
layer import from here.

Primitives (msgpuck's): the exact type of the value at a position (uint vs int,
float32 vs float64: MP_TYPE_OF_BYTE), skipping a value (mp_next), the shortest
uint (mp_encode_uint) and reading one (decode_uint).

Extensions. 2.6.0 reads an extension's payload only where it needs its value;
everywhere else it keeps the bytes it was given (tests/interop/test_bad_input_oracle.py).
So here:

* decimal (ext 1) and uuid (ext 2) become values when their payload is what
  decimal_unpack / uuid_unpack accept (`decimal_unpack`, `uuid_unpack`). Any other
  extension — a malformed decimal or uuid, an error (ext 3), an unknown or negative
  type, a timestamp (-1) — is kept as it came: a `RawExt`, which packs back to
  the same bytes. A valid decimal written in a longer form than 2.6.0 writes
  (leading zero bytes, another sign nibble, a wide scale) is an `ExtDecimal`,
  which packs back to its own bytes.
* where 2.6.0 has to read a malformed payload and crashes or reads past the value
  (an index over it), Spindle refuses with `malformed_ext()`, the error later
  versions give such input at the door (ER_INVALID_MSGPACK "packet body", gh-6857).
  What field types take is in core/box/field_types.py.

The C MsgPack unpacker turns ext -1 into its own Timestamp class (refusing a
payload of another length than 4, 8 or 12), so a value that may hold one
(`needs_exact`) is decoded by `unpack_exact`, a plain Python decoder of the same
value model.

Two packers: `pack` (the wire's: extensions kept raw stay raw, a uuid or Decimal
is refused) and `packb` (the box's: uuid and Decimal as ext 2 and 1, one Packer
per thread); `unpack` and `unpackb` are their decoders.
"""
from __future__ import annotations

import decimal
import re
import struct
import threading
import uuid
from typing import Any, Callable

import msgpack

from spindle.core.iproto.constants import MpType
from spindle.core.iproto.errors import BoxError, ClientError, CustomError, ErrorCode

_UINT64_MAX = (1 << 64) - 1
_pack_u16 = struct.Struct(">H").pack
_pack_u32 = struct.Struct(">I").pack
_pack_u64 = struct.Struct(">Q").pack
_unpack_u16 = struct.Struct(">H").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from
_unpack_u64 = struct.Struct(">Q").unpack_from


def invalid_msgpack(what: str) -> ClientError:
    return ClientError(ErrorCode.ER_INVALID_MSGPACK, what)


# ---------------------------------------------------------------------------
# MsgPack primitives the msgpack package does not offer: exact type of the
# value at a position (uint vs int, float32 vs float64) and skipping a value.

def _build_type_table() -> tuple[MpType | None, ...]:
    table: list[MpType | None] = [None] * 256
    for b in range(0x00, 0x80):
        table[b] = MpType.UINT
    for b in range(0x80, 0x90):
        table[b] = MpType.MAP
    for b in range(0x90, 0xA0):
        table[b] = MpType.ARRAY
    for b in range(0xA0, 0xC0):
        table[b] = MpType.STR
    for b in range(0xE0, 0x100):
        table[b] = MpType.INT
    table[0xC0] = MpType.NIL
    table[0xC2] = table[0xC3] = MpType.BOOL
    for b in (0xC4, 0xC5, 0xC6):
        table[b] = MpType.BIN
    for b in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
        table[b] = MpType.EXT
    table[0xCA] = MpType.FLOAT
    table[0xCB] = MpType.DOUBLE
    for b in (0xCC, 0xCD, 0xCE, 0xCF):
        table[b] = MpType.UINT
    for b in (0xD0, 0xD1, 0xD2, 0xD3):
        table[b] = MpType.INT
    for b in (0xD9, 0xDA, 0xDB):
        table[b] = MpType.STR
    table[0xDC] = table[0xDD] = MpType.ARRAY
    table[0xDE] = table[0xDF] = MpType.MAP
    return tuple(table)


MP_TYPE_OF_BYTE = _build_type_table()   # None marks 0xc1, which is never valid

# Bytes taken by the fixed part of a value, for first bytes whose size does not
# depend on a length field.
_FIXED_SIZE = {0xC0: 1, 0xC2: 1, 0xC3: 1, 0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5,
               0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9, 0xD4: 3, 0xD5: 4, 0xD6: 6,
               0xD7: 10, 0xD8: 18}


class MsgpackError(ValueError):
    """Malformed or truncated MsgPack (found by mp_next, decode_uint, unpack_exact)."""


def mp_next(buf: bytes, pos: int, end: int | None = None, *, allow_c1: bool = False) -> int:
    """Position right after the MsgPack value at `pos` (msgpuck's mp_check + mp_next);
    MsgpackError if the value is malformed or overruns `end`.

    `allow_c1`: count the never-valid byte 0xc1 as a one-byte value, as 2.6.0's
    IPROTO packet check lets it through. Pure Python, meant for small values
    (headers, fixheader padding); row bodies are skipped with the C unpacker.
    """
    if end is None:
        end = len(buf)
    pending = 1
    while pending:
        if pos >= end:
            raise MsgpackError("truncated value")
        b = buf[pos]
        pending -= 1
        if b < 0x80 or b >= 0xE0:
            pos += 1
        elif b < 0x90:
            pos += 1
            pending += 2 * (b & 0x0F)
        elif b < 0xA0:
            pos += 1
            pending += b & 0x0F
        elif b < 0xC0:
            pos += 1 + (b & 0x1F)
        elif b in _FIXED_SIZE:
            pos += _FIXED_SIZE[b]
        elif b == 0xC1:
            if not allow_c1:
                raise MsgpackError("invalid byte 0xc1")
            pos += 1
        elif b in _SIZED:
            width, extra = _SIZED[b]
            pos += 1 + width + extra + _read_len(buf, pos + 1, width, end)
        else:  # 0xdc 0xdd arrays, 0xde 0xdf maps
            width = 2 if b in (0xDC, 0xDE) else 4
            count = _read_len(buf, pos + 1, width, end)
            pos += 1 + width
            pending += count * (2 if b >= 0xDE else 1)
    if pos > end:
        raise MsgpackError("truncated value")
    return pos


# first byte -> (bytes of the length field, extra bytes before the payload)
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xD9: (1, 0), 0xDA: (2, 0),
          0xDB: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1)}


def _read_len(buf, pos: int, width: int, end: int) -> int:
    if pos + width > end:
        raise MsgpackError("truncated length")
    if width == 1:
        return buf[pos]
    return (_unpack_u16 if width == 2 else _unpack_u32)(buf, pos)[0]


def mp_encode_uint(value: int) -> bytes:
    """Shortest MsgPack encoding of an unsigned integer (mp_encode_uint)."""
    if value < 0:
        raise ValueError(f"negative value {value} where an unsigned int is required")
    if value < 0x80:
        return bytes((value,))
    if value <= 0xFF:
        return bytes((0xCC, value))
    if value <= 0xFFFF:
        return b"\xcd" + _pack_u16(value)
    if value <= 0xFFFFFFFF:
        return b"\xce" + _pack_u32(value)
    if value <= _UINT64_MAX:
        return b"\xcf" + _pack_u64(value)
    raise ValueError(f"{value} does not fit in uint64")


def decode_uint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of a MsgPack uint at `pos`."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    if b == 0xCC:
        return buf[pos + 1], pos + 2
    if b == 0xCD:
        return _unpack_u16(buf, pos + 1)[0], pos + 3
    if b == 0xCE:
        return _unpack_u32(buf, pos + 1)[0], pos + 5
    if b == 0xCF:
        return _unpack_u64(buf, pos + 1)[0], pos + 9
    raise MsgpackError("not an unsigned integer")


UINT_WIDE_MARKERS = frozenset((0xCC, 0xCD, 0xCE, 0xCF))


def pack(value: Any) -> bytes:
    """MsgPack as Tarantool expects it: str for text, bin for bytes; strings
    decoded with surrogateescape and extensions kept raw come back byte-identical."""
    return msgpack.packb(value, use_bin_type=True, unicode_errors="surrogateescape",
                         default=_pack_raw_ext)


def _pack_raw_ext(value: Any) -> Any:
    if type(value) is RawExt:
        return value.packable()
    if type(value) is int:          # what the packer says without a `default`
        raise OverflowError("Integer value out of range")
    raise TypeError(f"can not serialize {type(value).__name__!r} object")


def unpack(raw: bytes, what: str = "packet body", ext_hook: Callable | None = None) -> Any:
    """Decode one complete MsgPack value; any defect is ER_INVALID_MSGPACK `what`.
    `ext_hook` turns MsgPack extensions into values (the box passes its own, so
    uuid and decimal fields of stored rows come back as uuid and Decimal); without
    it stay RawExt, negative types and timestamps (ext -1) included."""
    hook = ext_hook or raw_ext                 # extensions kept as they came
    if needs_exact(raw):
        return _unpack_whole_exact(raw, what, hook)
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False,
                               unicode_errors="surrogateescape", ext_hook=hook)
    except TypeError:
        # A map keyed by an array or a map (legal in a Tarantool tuple) cannot
        # become a dict with list keys: the exact decoder makes them hashable.
        return _unpack_whole_exact(raw, what, hook)
    except Exception as exc:
        raise invalid_msgpack(what) from exc


def _unpack_whole_exact(raw: bytes, what: str, hook: Callable) -> Any:
    """unpack() by the exact decoder: one value that must fill `raw`."""
    try:
        value, end = unpack_exact(raw, 0, None, hook)
    except MsgpackError as exc:
        raise invalid_msgpack(what) from exc
    if end != len(raw):
        raise invalid_msgpack(what)
    return value


class MsgpackRaw(bytes):
    """Already-encoded MsgPack: body builders insert it verbatim (e.g. a stored tuple)."""


def encode_value(value: Any) -> bytes:
    """pack(), but a MsgpackRaw as the bytes it holds."""
    return bytes(value) if isinstance(value, MsgpackRaw) else pack(value)


# ---------------------------------------------------------------------------
# Extensions.

MP_EXT_DECIMAL = 1
MP_EXT_UUID = 2
MP_EXT_ERROR = 3
DECIMAL_MAX_DIGITS = 38          # the scale range of decimal_unpack
DECIMAL_ROOM = 39                # digits a decimal_t holds (lsu[13] of 3 digits)

_new_tuple = tuple.__new__


class RawExt:
    """An extension kept as it came. Not a tuple (msgpack's ExtType is a namedtuple,
    which every `isinstance(v, (list, tuple))` would take for an array)."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes):
        self.code = code
        self.data = data

    def __eq__(self, other: object) -> bool:
        return type(other) is RawExt and self.code == other.code and self.data == other.data

    def __hash__(self) -> int:
        return hash((RawExt, self.code, self.data))

    def __repr__(self) -> str:
        return f"RawExt({self.code}, {self.data!r})"

    def packable(self) -> msgpack.ExtType:
        """What msgpack's packer writes as this extension (its ExtType refuses
        negative types in its constructor, not in its packer)."""
        return _new_tuple(msgpack.ExtType, (self.code, self.data))


def raw_ext(code: int, data: bytes) -> RawExt:
    """An ext_hook keeping every extension as it came, negative types included."""
    return RawExt(code, bytes(data))


def ext_code(value: Any) -> int | None:
    """The type code of an extension kept raw (a msgpack Timestamp, which only the
    C unpacker makes, is ext -1), else None."""
    kind = type(value)
    if kind is RawExt:
        return value.code
    if kind is msgpack.Timestamp:
        return -1
    return None


def malformed_ext() -> ClientError:
    """What Spindle says where 2.6.0 would read a malformed extension and crash."""
    return ClientError(ErrorCode.ER_INVALID_MSGPACK, "packet body")


# ---------------------------------------------------------------------------
# Payloads 2.6.0 turns into values.

class ExtDecimal(decimal.Decimal):
    """A decimal whose MsgPack form is not the one decimal_pack writes: it keeps the
    payload it came with, so it is stored and sent back byte for byte. Arithmetic
    on it gives plain Decimals."""

    __slots__ = ("ext_data",)
    ext_data: bytes


_SCALE_INT = {0xCC: (1, False), 0xCD: (2, False), 0xCE: (4, False), 0xCF: (8, False),
              0xD0: (1, True), 0xD1: (2, True), 0xD2: (4, True), 0xD3: (8, True)}


def _scale(data: bytes) -> tuple[int, int] | None:
    """decimal_unpack's scale: any MsgPack integer, kept in an int32_t."""
    first = data[0]
    if first < 0x80:
        return first, 1
    if first >= 0xE0:
        return first - 0x100, 1
    width = _SCALE_INT.get(first)
    if width is None or len(data) < 1 + width[0]:
        return None
    size, signed = width
    value = int.from_bytes(data[1:1 + size], "big", signed=signed)
    value &= 0xFFFFFFFF                      # scale is an int32_t in 2.6.0
    return (value - (1 << 32) if value & 0x80000000 else value), 1 + size


def decimal_unpack(data: bytes) -> decimal.Decimal | None:
    """The decimal of an ext 1 payload, or None where 2.6.0's decimal_unpack fails:
    no integer scale, a scale outside (-38, 38], no BCD, a last nibble that is no
    sign (0xa..0xf, 0xb and 0xd negative), a digit nibble above 9. More digits than
    a decimal_t holds pass (2.6.0 writes them past its buffer and goes on); only Lua,
    which cannot hold them, refuses them."""
    if not data:
        return None
    found = _scale(data)
    if found is None:
        return None
    scale, start = found
    if scale > DECIMAL_MAX_DIGITS or scale <= -DECIMAL_MAX_DIGITS or start >= len(data):
        return None
    digits = data[start:].hex()
    sign = digits[-1]
    if sign not in "abcdef":
        return None
    digits = digits[:-1].lstrip("0")
    if not digits.isdigit():
        if digits:
            return None
        digits = "0"
    value = decimal.Decimal((1 if sign in "bd" else 0, tuple(map(int, digits)), -scale))
    if decimal_pack(value) != data:
        kept = ExtDecimal(value)
        kept.ext_data = bytes(data)
        return kept
    return value


def decimal_unpack_zeroed(data: bytes) -> decimal.Decimal | None:
    """What a decimal_t holds after 2.6.0's decimal_unpack read `data`: its value,
    or 0 where decPackedToNumber refused the digits (it zeroes the number first);
    None where the scale was refused before that and the decimal_t keeps whatever
    it held (update arithmetic then works on garbage)."""
    value = decimal_unpack(data)
    if value is not None:
        return value
    scale = _scale(data) if data else None
    if scale is None or scale[0] > DECIMAL_MAX_DIGITS or scale[0] <= -DECIMAL_MAX_DIGITS:
        return None
    if scale[1] >= len(data) and data[scale[1] - 1] & 0x0F > 9:
        return None     # no digits, and the scale's byte read as a sign: past the value
    return decimal.Decimal(0)


def decimal_pack(value: decimal.Decimal) -> bytes:
    """decimal_pack(): scale as a MsgPack int, then packed BCD with a sign nibble
    (an ExtDecimal: the payload it came with)."""
    if type(value) is ExtDecimal:
        return value.ext_data
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError("NaN and Infinity cannot be packed as a Tarantool decimal")
    head = msgpack.packb(-exponent)
    nibbles = list(digits) + [0x0D if sign else 0x0C]
    if len(nibbles) % 2:
        nibbles.insert(0, 0)
    return head + bytes((nibbles[i] << 4) | nibbles[i + 1] for i in range(0, len(nibbles), 2))


def uuid_unpack(data: bytes) -> uuid.UUID | None:
    """uuid_unpack(): 16 bytes whose variant tt_uuid_validate accepts."""
    if len(data) != 16:
        return None
    n = data[8]
    if n & 0x80 and n & 0xC0 != 0x80 and n & 0xE0 != 0xC0:
        return None
    return uuid.UUID(bytes=bytes(data))


def ext_hook(code: int, data: bytes) -> Any:
    """The box's view of an extension: uuid.UUID, Decimal, or the extension kept raw."""
    value: uuid.UUID | decimal.Decimal | None
    if code == MP_EXT_UUID:
        value = uuid_unpack(data)
    elif code == MP_EXT_DECIMAL:
        value = decimal_unpack(data)
    else:
        return raw_ext(code, data)
    return raw_ext(code, data) if value is None else value


# ---------------------------------------------------------------------------
# MP_ERROR (ext 3): the errors a peer sends with error marshaling on.

# error types 2.6.0's error_build_xc knows -> the IPROTO code of their class
# (ClientError::get_errcode: SystemError and its kin are ER_SYSTEM, other non-client
# errors ER_PROC_LUA); ClientError, CustomError and unknown types carry a code
_ERROR_CLASS_CODE = {
    "AccessDeniedError": ErrorCode.ER_ACCESS_DENIED, "XlogError": ErrorCode.ER_PROC_LUA,
    "XlogGapError": ErrorCode.ER_PROC_LUA, "SystemError": ErrorCode.ER_SYSTEM,
    "SocketError": ErrorCode.ER_SYSTEM, "OutOfMemory": ErrorCode.ER_PROC_LUA,
    "TimedOut": ErrorCode.ER_SYSTEM, "ChannelIsClosed": ErrorCode.ER_PROC_LUA,
    "FiberIsCancelled": ErrorCode.ER_PROC_LUA, "LuajitError": ErrorCode.ER_PROC_LUA,
    "IllegalParams": ErrorCode.ER_PROC_LUA, "CollationError": ErrorCode.ER_PROC_LUA,
    "SwimError": ErrorCode.ER_PROC_LUA, "CryptoError": ErrorCode.ER_PROC_LUA,
}
_ACCESS_FIELDS = ("object_type", "object_name", "access_type")


def _is_uint(value: Any) -> bool:
    return type(value) is int and value >= 0


def _error_one(entry: Any) -> BoxError | None:
    """mp_decode_error_one + error_build_xc: one error of the stack, or None."""
    if type(entry) is not dict:
        return None
    got: dict[str, Any] = {"line": 0, "errno": 0, "code": 0}
    fields: dict[str, str] = {}
    for key, value in entry.items():
        if not _is_uint(key):
            return None
        name = {0: "type", 1: "file", 3: "message"}.get(key)
        if name is not None:
            if type(value) is not str:
                return None
            got[name] = value
        elif key in (2, 4, 5):
            if not _is_uint(value):
                return None
            got[{2: "line", 4: "errno", 5: "code"}[key]] = value
        elif key == 6:
            if type(value) is not dict:
                return None
            for fname, fvalue in value.items():
                if type(fname) is not str:
                    return None
                if fname in _ACCESS_FIELDS or fname == "custom_type":
                    if type(fvalue) is not str:
                        return None
                    fields[fname] = fvalue
    if "type" not in got or "message" not in got or "file" not in got:
        return None
    err_type = got["type"]
    err: BoxError
    if err_type == "CustomError":
        if "custom_type" not in fields:
            return None
        err = CustomError(fields["custom_type"], got["message"], got["code"])
    elif err_type == "AccessDeniedError" and not all(f in fields for f in _ACCESS_FIELDS):
        return None
    elif err_type in _ERROR_CLASS_CODE:
        err = BoxError(got["message"], _ERROR_CLASS_CODE[err_type])
        err.type = err_type
        if err_type == "AccessDeniedError":   # (its fields, in 2.6.0's order)
            err.fields = {f: fields[f] for f in _ACCESS_FIELDS}
    else:   # ClientError, and any type 2.6.0 does not know, which it makes one
        err = BoxError(got["message"], got["code"] if err_type == "ClientError" else 0)
        err.type = "ClientError"
    err.file, err.line, err.errno = got["file"], got["line"] & 0xFFFFFFFF, got["errno"]
    return err


def error_unpack(data: bytes) -> BoxError | None:
    """error_unpack(): the error (its `prev` chain the rest of the stack) of an
    ext 3 payload, or None where 2.6.0 cannot parse one."""
    try:
        root, _ = unpack_exact(data)
    except MsgpackError:
        return None
    if type(root) is not dict:
        return None
    first = last = None
    for key, value in root.items():
        if not _is_uint(key):
            return None
        if key != 0:
            continue
        if type(value) is not list:
            return None
        for entry in value:
            err = _error_one(entry)
            if err is None:
                return None
            if first is None:
                first = err
            else:
                assert last is not None   # (set with `first`)
                last.prev = err
            last = err
    return first


# ---------------------------------------------------------------------------
# Decoding a value that may hold ext -1.

_maybe_timestamp = re.compile(rb"[\xd4-\xd8]\xff|\xc7.\xff|\xc8..\xff|\xc9....\xff",
                              re.DOTALL).search


def needs_exact(raw, start: int = 0) -> bool:
    """True when `raw` (from `start`) may hold an ext -1, which msgpack's C unpacker
    would turn into a Timestamp or refuse: such a value is decoded by unpack_exact.
    One memchr for the usual value, which has no 0xff byte at all."""
    if type(raw) is memoryview:
        raw = raw.tobytes()
    return raw.find(b"\xff", start) >= 0 and _maybe_timestamp(raw, start) is not None


_DEPTH_MAX = 400         # (two Python frames a level, under the interpreter's 1000)
_unpack_from = struct.unpack_from


def unpack_exact(buf, pos: int = 0, end: int | None = None,
                 ext_hook: Callable[[int, bytes], Any] = raw_ext) -> tuple[Any, int]:
    """One MsgPack value at `pos` as the C unpacker decodes it (str with
    surrogateescape, bin as bytes, float32 as float), every extension through
    `ext_hook`; returns it and the position after it. MsgpackError on
    malformed or truncated input."""
    data = bytes(buf[pos:end])
    try:
        value, used = _value(data, 0, ext_hook, 0)
    except (IndexError, struct.error):
        raise MsgpackError("truncated value") from None
    except RecursionError:      # nested deeper than the stack of a deep caller allows
        raise MsgpackError("nesting too deep") from None
    return value, pos + used


_FIXED = {0xCA: (">f", 4), 0xCB: (">d", 8), 0xCC: (">B", 1), 0xCD: (">H", 2),
          0xCE: (">I", 4), 0xCF: (">Q", 8), 0xD0: (">b", 1), 0xD1: (">h", 2),
          0xD2: (">i", 4), 0xD3: (">q", 8)}
_LENGTH = {1: ">B", 2: ">H", 4: ">I"}
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


def _take(data: bytes, pos: int, size: int) -> bytes:
    if pos + size > len(data):
        raise MsgpackError("truncated value")
    return data[pos:pos + size]


def _length(data: bytes, pos: int, width: int) -> tuple[int, int]:
    return _unpack_from(_LENGTH[width], _take(data, pos, width))[0], pos + width


def _value(data: bytes, pos: int, hook, depth: int) -> tuple[Any, int]:
    if depth > _DEPTH_MAX:
        raise MsgpackError("nesting too deep")
    b = data[pos]
    pos += 1
    if b < 0x80:
        return b, pos
    if b >= 0xE0:
        return b - 0x100, pos
    if b < 0x90:
        return _map(data, pos, b & 0x0F, hook, depth)
    if b < 0xA0:
        return _array(data, pos, b & 0x0F, hook, depth)
    if b < 0xC0:
        n = b & 0x1F
        return _take(data, pos, n).decode("utf-8", "surrogateescape"), pos + n
    if b == 0xC0:
        return None, pos
    if b in (0xC2, 0xC3):
        return b == 0xC3, pos
    if b in _FIXED:
        fmt, size = _FIXED[b]
        return _unpack_from(fmt, _take(data, pos, size))[0], pos + size
    if b in (0xC4, 0xC5, 0xC6):
        n, pos = _length(data, pos, 1 << (b - 0xC4))
        return _take(data, pos, n), pos + n
    if b in (0xD9, 0xDA, 0xDB):
        n, pos = _length(data, pos, 1 << (b - 0xD9))
        return _take(data, pos, n).decode("utf-8", "surrogateescape"), pos + n
    if b in _FIXEXT or b in (0xC7, 0xC8, 0xC9):
        if b in _FIXEXT:
            n = _FIXEXT[b]
        else:
            n, pos = _length(data, pos, 1 << (b - 0xC7))
        code = _unpack_from(">b", _take(data, pos, 1))[0]
        return hook(code, _take(data, pos + 1, n)), pos + 1 + n
    if b in (0xDC, 0xDD):
        n, pos = _length(data, pos, 2 if b == 0xDC else 4)
        return _array(data, pos, n, hook, depth)
    if b in (0xDE, 0xDF):
        n, pos = _length(data, pos, 2 if b == 0xDE else 4)
        return _map(data, pos, n, hook, depth)
    raise MsgpackError(f"invalid byte 0x{b:02x}")


def _array(data: bytes, pos: int, n: int, hook, depth: int) -> tuple[list, int]:
    if n > len(data) - pos:          # every item takes a byte at least
        raise MsgpackError("truncated array")
    items = []
    for _ in range(n):
        item, pos = _value(data, pos, hook, depth + 1)
        items.append(item)
    return items, pos


def _map(data: bytes, pos: int, n: int, hook, depth: int) -> tuple[dict, int]:
    if 2 * n > len(data) - pos:
        raise MsgpackError("truncated map")
    result = {}
    for _ in range(n):
        key, pos = _value(data, pos, hook, depth + 1)
        value, pos = _value(data, pos, hook, depth + 1)
        result[hashable_key(key)] = value
    return result, pos


class KeyMap(dict):
    """A map that is a key of another map (MsgPack allows it): hashed by identity,
    packed as the map it is."""

    # dict makes __hash__ None, which mypy holds to; a KeyMap is hashed by identity
    __hash__ = object.__hash__  # type: ignore[assignment]


def hashable_key(key: Any) -> Any:
    """A map key a dict takes: arrays as tuples, maps as KeyMaps."""
    kind = type(key)
    if kind is list:
        return tuple(hashable_key(item) for item in key)
    if kind is dict:
        return KeyMap({hashable_key(k): v for k, v in key.items()})
    return key


# ---------------------------------------------------------------------------
# The box's packer and unpacker: uuid and Decimal as ext 2 and 1 (the rest kept
# raw, see above), and sizes.

def ext_default(value: Any) -> msgpack.ExtType:
    if type(value) is RawExt:
        return value.packable()
    if isinstance(value, uuid.UUID):
        return msgpack.ExtType(MP_EXT_UUID, value.bytes)
    if isinstance(value, decimal.Decimal):
        return msgpack.ExtType(MP_EXT_DECIMAL, decimal_pack(value))
    raise TypeError(f"cannot serialize {type(value).__name__}")


_packers = threading.local()     # a Packer keeps state while it packs: one per thread


def _new_packer() -> msgpack.Packer:
    packer = _packers.packer = msgpack.Packer(use_bin_type=True, default=ext_default,
                                              unicode_errors="surrogateescape")
    return packer


def packb(value: Any) -> bytes:
    """MsgPack of a tuple/key/ops as box writes it: str as str, bytes as bin, uuid and
    decimal as ext types; surrogate-escaped strings come back byte-identical."""
    try:
        packer = _packers.packer
    except AttributeError:
        packer = _new_packer()
    return packer.pack(value)


def pack_tuple(tup: Any) -> bytes | None:
    """packb() of a tuple to store, or None when it has a value MsgPack cannot hold
    (such a value fails later where it did before: in the redo row). One call, as
    every stored tuple is packed."""
    try:
        packer = _packers.packer
    except AttributeError:
        packer = _new_packer()
    try:
        return packer.pack(tup)
    except (OverflowError, TypeError, ValueError):
        return None


def tuple_packer() -> Callable[[Any], bytes]:
    """packb of the calling thread without the per-call lookup (hot loops)."""
    try:
        return _packers.packer.pack
    except AttributeError:
        return _new_packer().pack


def tuple_bsize(value: Any) -> int:
    """mp_sizeof() of a stored tuple, the fast way: the length of its encoding."""
    try:
        return len(packb(value))
    except (OverflowError, TypeError, ValueError):
        return mp_sizeof(value)


def unpackb(data: bytes) -> Any:
    """One stored value (a tuple, a key) as box keeps it."""
    if needs_exact(data):
        value, end = unpack_exact(data, 0, None, ext_hook)
        if end != len(data):
            raise ValueError("extra data after a MsgPack value")
        return value
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=ext_hook,
                               unicode_errors="surrogateescape")
    except TypeError:           # a map keyed by an array or a map: keys made hashable
        value, end = unpack_exact(data, 0, None, ext_hook)
        if end != len(data):
            raise ValueError("extra data after a MsgPack value") from None
        return value


def _len_header(n: int, fix_limit: int, small: int) -> int:
    if n < fix_limit:
        return 1
    if n <= 0xFF and small:
        return 2
    return 3 if n <= 0xFFFF else 5


def mp_sizeof(v: Any) -> int:
    """Size in bytes of the MsgPack encoding of `v` (what bsize() accounts)."""
    if v is None or isinstance(v, bool):
        return 1
    if isinstance(v, int):
        if v >= 0:
            return 1 if v < 0x80 else 2 if v <= 0xFF else 3 if v <= 0xFFFF else \
                5 if v <= 0xFFFFFFFF else 9
        return 1 if v >= -32 else 2 if v >= -0x80 else 3 if v >= -0x8000 else \
            5 if v >= -0x80000000 else 9
    if isinstance(v, float):
        return 9
    if isinstance(v, str):
        n = len(v) if v.isascii() else len(v.encode("utf-8", "surrogateescape"))
        return n + _len_header(n, 32, 1)
    if isinstance(v, (bytes, bytearray, memoryview)):
        n = len(v)
        return n + (2 if n <= 0xFF else 3 if n <= 0xFFFF else 5)
    if isinstance(v, (list, tuple)):
        return _len_header(len(v), 16, 0) + sum(mp_sizeof(x) for x in v)
    if isinstance(v, dict):
        return _len_header(len(v), 16, 0) + sum(mp_sizeof(k) + mp_sizeof(x)
                                                for k, x in v.items())
    if isinstance(v, uuid.UUID):
        return 18
    return len(packb(v))

