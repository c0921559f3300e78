"""Field types of Tarantool 2.6.0: which values a type accepts and how index keys compare.

Python value model (what a MsgPack decoder hands us): int, float, str (decoded with
`surrogateescape`, so any byte string survives), bytes (MsgPack bin), bool, None (nil),
list, dict, uuid.UUID (ext 2) and decimal.Decimal (ext 1); any other extension, a
malformed decimal or uuid included, stays a RawExt (see core/iproto/msgpack.py, where
the packers and unpackers of these values live).

Facts from src/box/field_def.c and src/box/tuple_compare.cc of the 2.6.0 tag, checked
against the binary:

* `scalar` takes nil (only when nullable), booleans, numbers (incl. decimal), strings and
  varbinary — *not* uuid in 2.6.0 — and orders them by class:
  nil < boolean < number < string < varbinary (uuid would come next, map/array after).
* numbers compare exactly across int/float (Python's int/float comparison is exact too);
  NaN sorts below every other number, and NaNs are equal to each other here (2.6.0 also
  orders quiet NaN above signalling NaN; not modelled).
* strings compare byte-wise (memcmp, then length). A key is the string's UTF-8 bytes, so
  strings carrying surrogate escapes of invalid UTF-8 compare exactly as their bytes.
* `double` accepts only MsgPack doubles (a Python float); `number` ints, floats and decimals.

Collations: 'none'/'binary' are byte-wise. 'unicode', 'unicode_ci' and the locale ones are
ICU collations, compared by ICU's sort keys (collation.py). Without PyICU, 'unicode' and
'unicode_ci' are approximated (see `collation_key`): equality follows
case folding + canonical decomposition (+ accent stripping for unicode_ci), which matches
ICU for the common cases ('a' == 'A' == 'ä' under unicode_ci, 'ß' == 'ss'; NFC and NFD
forms equal under both); ordering puts spaces < punctuation < digits < letters and
lowercase before uppercase, but within a class it follows code points, not ICU's tables.
"""
from __future__ import annotations

import decimal
import enum
import unicodedata
import uuid
from functools import lru_cache
from typing import Any, Callable

from spindle.core.iproto.msgpack import (
    MP_EXT_DECIMAL, MP_EXT_UUID, RawExt, ext_code, malformed_ext,
)


class FieldType(str, enum.Enum):
    ANY = "any"
    UNSIGNED = "unsigned"
    STRING = "string"
    NUMBER = "number"
    DOUBLE = "double"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    VARBINARY = "varbinary"
    SCALAR = "scalar"
    DECIMAL = "decimal"
    UUID = "uuid"
    ARRAY = "array"
    MAP = "map"

    def __str__(self) -> str:
        return self.value


_ALIASES = {"num": FieldType.UNSIGNED, "str": FieldType.STRING, "*": FieldType.ANY}


def field_type_by_name(name: str | FieldType) -> FieldType:
    """field_type_by_name(): exact names, plus 'num'/'str' (any case) and '*'."""
    if isinstance(name, FieldType):
        return name
    try:
        return FieldType(name)
    except ValueError:
        pass
    alias = _ALIASES.get(name.lower() if name != "*" else name)
    if alias is None:
        raise ValueError(f"unknown field type {name!r}")
    return alias


UINT64_MAX = (1 << 64) - 1
INT64_MIN = -(1 << 63)


def _is_int(v: Any) -> bool:
    return type(v) is int or (isinstance(v, int) and not isinstance(v, bool))


# is_uint / is_integer test `type(v) is int` inline: they run for every key part of
# every stored tuple, and a call to _is_int costs as much as the test itself.
def is_uint(v: Any) -> bool:
    return (type(v) is int or _is_int(v)) and 0 <= v <= UINT64_MAX


def is_integer(v: Any) -> bool:
    return (type(v) is int or _is_int(v)) and INT64_MIN <= v <= UINT64_MAX


def is_number(v: Any) -> bool:
    return is_integer(v) or isinstance(v, (float, decimal.Decimal))


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_bin(v: Any) -> bool:
    return isinstance(v, (bytes, bytearray, memoryview))


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, str, bytes, bytearray, float, decimal.Decimal)) or is_integer(v)


def ext_fits(ftype: str, code: int) -> bool:
    """field_mp_type_is_compatible() for an extension kept raw (iproto.msgpack), by its
    type code alone, with the C shift it makes: `1 << code` keeps the low five bits
    of the code on x86-64, so 2.6.0 takes ext 33 as a decimal, 34 as a uuid, and
    `any` refuses 0, 32, 64 and 96 as it refuses MP_UNKNOWN_EXTENSION (0); no typed
    field takes a negative type. Fields outside the format are not checked at all."""
    if code < 0:
        return False
    bit = code & 31
    if ftype == "any":
        return bit != 0
    if ftype in ("number", "scalar", "decimal"):
        return bit == MP_EXT_DECIMAL
    if ftype == "uuid":
        return bit == MP_EXT_UUID
    return False


def _ext_check(ftype: str, check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """`check`, or for an extension kept raw (iproto.msgpack) its type code's fit."""
    def fits(v: Any) -> bool:
        if check(v):
            return True
        code = ext_code(v)
        return code is not None and ext_fits(ftype, code)
    return fits


def _any_fits(v: Any) -> bool:
    """`any` takes every value but extensions of types 0, 32, 64, 96 and negative."""
    code = ext_code(v)
    return code is None or ext_fits("any", code)


_CHECKS: dict[FieldType, Callable[[Any], bool]] = {
    FieldType.ANY: _any_fits,
    FieldType.UNSIGNED: is_uint,
    FieldType.STRING: _is_str,
    FieldType.NUMBER: _ext_check("number", is_number),
    FieldType.DOUBLE: lambda v: isinstance(v, float),
    FieldType.INTEGER: is_integer,
    FieldType.BOOLEAN: lambda v: isinstance(v, bool),
    FieldType.VARBINARY: _is_bin,
    FieldType.SCALAR: _ext_check("scalar", _is_scalar),
    FieldType.DECIMAL: _ext_check("decimal", lambda v: isinstance(v, decimal.Decimal)),
    FieldType.UUID: _ext_check("uuid", lambda v: isinstance(v, uuid.UUID)),
    FieldType.ARRAY: lambda v: isinstance(v, (list, tuple)),
    FieldType.MAP: lambda v: isinstance(v, dict),
}


def is_compatible(ftype: FieldType, value: Any, is_nullable: bool = False) -> bool:
    """field_mp_type_is_compatible(): may `value` be stored in a field of `ftype`?
    nil passes only for nullable fields, and always for `any`."""
    if value is None:
        return is_nullable or ftype is FieldType.ANY
    return _CHECKS[ftype](value)


def _field_check(ftype: FieldType, is_nullable: bool) -> Callable[[Any], bool]:
    """is_compatible() of one field, bound to its type and nullability."""
    check = _CHECKS[ftype]
    if not is_nullable:
        return check     # no check but `any`'s (never compiled) accepts None

    def nullable_check(value: Any) -> bool:
        return value is None or check(value)
    return nullable_check


def format_check(checks: list, min_len: int, field_count: int) -> Callable[[tuple], bool]:
    """A format's field checks compiled once per format change: for a tuple, True
    exactly when every present field fits `checks` (None: any; else (type,
    nullable), by field number), it has at least `min_len` fields (those of the
    required ones) and, when `field_count` is set, exactly that many. The common
    case, a single non-nullable unsigned key field, is tested inline."""
    fields = [(no, _field_check(*check)) for no, check in enumerate(checks)
              if check is not None]
    if not field_count and len(fields) == 1 and fields[0] == (0, is_uint) and min_len >= 1:
        def fits_uint_key(tup: tuple) -> bool:
            if len(tup) < min_len:
                return False
            value = tup[0]
            return (0 <= value <= UINT64_MAX) if type(value) is int else is_uint(value)
        # (Space._put tests it inline; a function attribute, read with getattr)
        fits_uint_key.uint_key_len = min_len  # type: ignore[attr-defined]
        return fits_uint_key

    def fits(tup: tuple) -> bool:
        n = len(tup)
        if n < min_len or (field_count and n != field_count):
            return False
        for no, check in fields:
            if no < n and not check(tup[no]):
                return False
        return True
    return fits


# field_type_compatibility[] of 2.6.0: type1 contains type2 (values of type2 fit type1).
_CONTAINS: dict[FieldType, frozenset[FieldType]] = {
    FieldType.ANY: frozenset(FieldType),
    FieldType.UNSIGNED: frozenset({FieldType.UNSIGNED}),
    FieldType.STRING: frozenset({FieldType.STRING}),
    FieldType.NUMBER: frozenset({FieldType.UNSIGNED, FieldType.NUMBER, FieldType.DOUBLE,
                                 FieldType.INTEGER, FieldType.DECIMAL}),
    FieldType.DOUBLE: frozenset({FieldType.DOUBLE}),
    FieldType.INTEGER: frozenset({FieldType.UNSIGNED, FieldType.INTEGER}),
    FieldType.BOOLEAN: frozenset({FieldType.BOOLEAN}),
    FieldType.VARBINARY: frozenset({FieldType.VARBINARY}),
    FieldType.SCALAR: frozenset({FieldType.UNSIGNED, FieldType.STRING, FieldType.NUMBER,
                                 FieldType.DOUBLE, FieldType.INTEGER, FieldType.BOOLEAN,
                                 FieldType.VARBINARY, FieldType.SCALAR, FieldType.DECIMAL}),
    FieldType.DECIMAL: frozenset({FieldType.DECIMAL}),
    FieldType.UUID: frozenset({FieldType.UUID}),
    FieldType.ARRAY: frozenset({FieldType.ARRAY}),
    FieldType.MAP: frozenset({FieldType.MAP}),
}


def type1_contains_type2(type1: FieldType, type2: FieldType) -> bool:
    return type2 in _CONTAINS[type1]


# Types an index part may have (memtx TREE/HASH).
INDEXABLE = frozenset({FieldType.UNSIGNED, FieldType.STRING, FieldType.NUMBER,
                       FieldType.DOUBLE, FieldType.INTEGER, FieldType.BOOLEAN,
                       FieldType.VARBINARY, FieldType.SCALAR, FieldType.DECIMAL,
                       FieldType.UUID})


# ---------------------------------------------------------------------------
# Sort keys. A part key maps a field value to a Python object whose natural
# ordering and equality are Tarantool's; keys of one index part always have
# mutually comparable shapes.

class _NanKey:
    """Key of a NaN number: below every other number, equal to other NaNs."""

    __slots__ = ()

    def __lt__(self, other):
        return not isinstance(other, _NanKey)

    def __le__(self, other):
        return True

    def __gt__(self, other):
        return False

    def __ge__(self, other):
        return isinstance(other, _NanKey)

    def __eq__(self, other):
        return isinstance(other, _NanKey)

    def __hash__(self):
        return 0x7FF8

    def __repr__(self):
        return "NaN"


NAN_KEY = _NanKey()


class _MaxKey:
    """Greater than any key element: `prefix + (MAX_KEY,)` bounds all keys with that prefix."""

    __slots__ = ()

    def __lt__(self, other):
        return False

    def __le__(self, other):
        return isinstance(other, _MaxKey)

    def __gt__(self, other):
        return not isinstance(other, _MaxKey)

    def __ge__(self, other):
        return True

    def __eq__(self, other):
        return isinstance(other, _MaxKey)

    def __hash__(self):
        return 0x5EED

    def __repr__(self):
        return "MAX"


MAX_KEY = _MaxKey()


def _num_key(v):
    kind = type(v)
    if kind is float and v != v:
        return NAN_KEY
    if kind is RawExt:         # a decimal 2.6.0 cannot read: it would crash here
        raise malformed_ext()
    if isinstance(v, decimal.Decimal) and v.is_nan():
        return NAN_KEY
    return v


def _str_key(v: str) -> bytes:
    return v.encode("utf-8", "surrogateescape")


def _bin_key(v) -> bytes:
    return bytes(v)


def _uuid_key(v: uuid.UUID) -> bytes:
    if type(v) is uuid.UUID:
        return v.bytes
    # an extension kept raw: 2.6.0 compares the 16 bytes after its header, and its
    # hint (the payload) agrees with that only for a 16-byte payload
    if type(v) is RawExt and len(v.data) == 16:
        return v.data
    raise malformed_ext()


def _identity(v):
    return v


# mp_class ranks of tuple_compare.cc
RANK_NIL, RANK_BOOL, RANK_NUMBER, RANK_STR, RANK_BIN, RANK_UUID = range(6)


def scalar_rank(v: Any) -> int:
    if v is None:
        return RANK_NIL
    if isinstance(v, bool):
        return RANK_BOOL
    if isinstance(v, (int, float, decimal.Decimal)):
        return RANK_NUMBER
    if isinstance(v, str):
        return RANK_STR
    if isinstance(v, (bytes, bytearray, memoryview)):
        return RANK_BIN
    if isinstance(v, uuid.UUID):
        return RANK_UUID
    raise TypeError(f"not a scalar: {type(v).__name__}")


# ---------------------------------------------------------------------------
# Collations.

COLLATIONS = {"none": None, "binary": None, "unicode": "unicode", "unicode_ci": "unicode_ci"}
_CLASS_SPACE, _CLASS_PUNCT, _CLASS_DIGIT, _CLASS_LETTER = "\x01", "\x02", "\x03", "\x04"


def _char_class(ch: str) -> str:
    cat = unicodedata.category(ch)
    if cat[0] == "Z" or ch in "\t\n\r\x0b\x0c":
        return _CLASS_SPACE
    if cat[0] in "PSC":
        return _CLASS_PUNCT
    if cat[0] == "N":
        return _CLASS_DIGIT
    return _CLASS_LETTER


@lru_cache(maxsize=65536)
def _primary(s: str) -> str:
    folded = unicodedata.normalize("NFD", s.casefold())
    out = []
    for ch in folded:
        if unicodedata.combining(ch):
            continue
        out.append(_char_class(ch))
        out.append(ch)
    return "".join(out)


def _unicode_ci_key(v: str) -> str:
    return _primary(v)


def _unicode_key(v: str) -> tuple:
    nfd = unicodedata.normalize("NFD", v)
    return (_primary(v), nfd.casefold(), nfd.swapcase(), nfd)


def collation_key(collation: str | None) -> Callable[[str], Any]:
    """Key function for strings under a collation name (None: byte-wise): ICU's sort
    keys (collation.py), or without PyICU the approximation above."""
    if collation is None or collation in ("none", "binary"):
        return _str_key
    from spindle.core.box import collation as icu_collation    # (it imports PyICU)
    key = icu_collation.icu_key(collation)
    if key is not None:
        return key
    if collation == "unicode":
        return _unicode_key
    if collation == "unicode_ci":
        return _unicode_ci_key
    if icu_collation.is_icu(collation):      # (no PyICU: see collation.py)
        return _unicode_ci_key if icu_collation.strength(collation) == "primary" \
            else _unicode_key
    raise ValueError(f"unsupported collation {collation!r}")


def _scalar_key_func(str_key: Callable) -> Callable:
    def key(v):
        if v is None:
            return (RANK_NIL,)
        if v is True or v is False:
            return (RANK_BOOL, v)
        if isinstance(v, str):
            return (RANK_STR, str_key(v))
        if isinstance(v, (int, float, decimal.Decimal)):
            return (RANK_NUMBER, _num_key(v))
        if isinstance(v, (bytes, bytearray, memoryview)):
            return (RANK_BIN, bytes(v))
        if isinstance(v, uuid.UUID):
            return (RANK_UUID, v.bytes)
        if type(v) is RawExt:      # a decimal 2.6.0 cannot read: it would crash here
            raise malformed_ext()
        raise TypeError(f"not a scalar: {type(v).__name__}")
    return key


def _nullable(func: Callable) -> Callable:
    def key(v):
        return (0,) if v is None else (1, func(v))
    return key


def part_key_func(ftype: FieldType, *, is_nullable: bool = False,
                  collation: str | None = None) -> Callable[[Any], Any]:
    """Map a value of an index part to its sort key."""
    ftype = field_type_by_name(ftype)
    str_key = collation_key(collation)
    if ftype is FieldType.SCALAR:
        return _scalar_key_func(str_key)   # nil already ranks lowest
    if ftype in (FieldType.UNSIGNED, FieldType.INTEGER, FieldType.BOOLEAN):
        func = _identity
    elif ftype in (FieldType.NUMBER, FieldType.DOUBLE, FieldType.DECIMAL):
        func = _num_key
    elif ftype is FieldType.STRING:
        func = str_key
    elif ftype is FieldType.VARBINARY:
        func = _bin_key
    elif ftype is FieldType.UUID:
        func = _uuid_key
    else:
        raise ValueError(f"type {ftype.value!r} cannot be indexed")
    return _nullable(func) if is_nullable else func


def compare(ftype: FieldType, a: Any, b: Any, *, collation: str | None = None) -> int:
    """-1/0/1 comparison of two values of one index part type (nil allowed)."""
    func = part_key_func(ftype, is_nullable=True, collation=collation)
    ka, kb = func(a), func(b)
    return (ka > kb) - (ka < kb)
