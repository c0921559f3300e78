"""MsgPack extension values as 2.6.0 takes them, whatever their payload.

2.6.0 reads an extension's payload only where it needs its value; everywhere else it
keeps the bytes it was given (tests/interop/test_bad_input_oracle.py). So here:

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
"""
from __future__ import annotations

import decimal
import re
import struct
import uuid
from typing import Any, Callable

import msgpack

from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode

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
    scale = _scale(data)
    if scale is None:
        return None
    scale, start = scale
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
        value = ExtDecimal(value)
        value.ext_data = bytes(data)
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
    if err_type == "CustomError":
        if "custom_type" not in fields:
            return None
        err = BoxError(got["message"], got["code"])
        err.type = fields["custom_type"]
    elif err_type == "AccessDeniedError" and not all(f in fields for f in _ACCESS_FIELDS):
        return None
    elif err_type in _ERROR_CLASS_CODE:
        err = BoxError(got["message"], _ERROR_CLASS_CODE[err_type])
        err.type = err_type
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
    except MsgpackDecodeError:
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


class MsgpackDecodeError(ValueError):
    """unpack_exact met malformed or truncated MsgPack."""


_DEPTH_MAX = 400         # (two Python frames a level, under the interpreter's 1000)
_unpack_from = struct.unpack_from


def unpack_exact(buf, pos: int = 0, end: int | None = None,
                 ext_hook: Callable[[int, bytes], Any] = raw_ext) -> tuple[Any, int]:
    """One MsgPack value at `pos` as the C unpacker decodes it (str with
    surrogateescape, bin as bytes, float32 as float), every extension through
    `ext_hook`; returns it and the position after it. MsgpackDecodeError on
    malformed or truncated input."""
    data = bytes(buf[pos:end])
    try:
        value, used = _value(data, 0, ext_hook, 0)
    except (IndexError, struct.error):
        raise MsgpackDecodeError("truncated value") from None
    except RecursionError:      # nested deeper than the stack of a deep caller allows
        raise MsgpackDecodeError("nesting too deep") from None
    return value, pos + used


_FIXED = {0xCA: (">f", 4), 0xCB: (">d", 8), 0xCC: (">B", 1), 0xCD: (">H", 2),
          0xCE: (">I", 4), 0xCF: (">Q", 8), 0xD0: (">b", 1), 0xD1: (">h", 2),
          0xD2: (">i", 4), 0xD3: (">q", 8)}
_LENGTH = {1: ">B", 2: ">H", 4: ">I"}
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


def _take(data: bytes, pos: int, size: int) -> bytes:
    if pos + size > len(data):
        raise MsgpackDecodeError("truncated value")
    return data[pos:pos + size]


def _length(data: bytes, pos: int, width: int) -> tuple[int, int]:
    return _unpack_from(_LENGTH[width], _take(data, pos, width))[0], pos + width


def _value(data: bytes, pos: int, hook, depth: int) -> tuple[Any, int]:
    if depth > _DEPTH_MAX:
        raise MsgpackDecodeError("nesting too deep")
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
    raise MsgpackDecodeError(f"invalid byte 0x{b:02x}")


def _array(data: bytes, pos: int, n: int, hook, depth: int) -> tuple[list, int]:
    if n > len(data) - pos:          # every item takes a byte at least
        raise MsgpackDecodeError("truncated array")
    items = []
    for _ in range(n):
        item, pos = _value(data, pos, hook, depth + 1)
        items.append(item)
    return items, pos


def _map(data: bytes, pos: int, n: int, hook, depth: int) -> tuple[dict, int]:
    if 2 * n > len(data) - pos:
        raise MsgpackDecodeError("truncated map")
    result = {}
    for _ in range(n):
        key, pos = _value(data, pos, hook, depth + 1)
        value, pos = _value(data, pos, hook, depth + 1)
        result[hashable_key(key)] = value
    return result, pos


class KeyMap(dict):
    """A map that is a key of another map (MsgPack allows it): hashed by identity,
    packed as the map it is."""

    __hash__ = object.__hash__


def hashable_key(key: Any) -> Any:
    """A map key a dict takes: arrays as tuples, maps as KeyMaps."""
    kind = type(key)
    if kind is list:
        return tuple(hashable_key(item) for item in key)
    if kind is dict:
        return KeyMap({hashable_key(k): v for k, v in key.items()})
    return key
