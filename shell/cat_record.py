"""The rows of an .xlog/.snap as `spindle cat` prints them: values and key order.

`build_record(row)` turns a row into a `Table` with HEADER and BODY, holding
what `tarantoolctl cat` (Tarantool 2.6.0) shows for it:

* HEADER: `type` (a name such as INSERT, or the number for types without a
  name), then the non-zero numeric fields, `tsn` when the row is part of a
  multi-statement transaction (or is not its last row) and `commit: true` on
  the last row of such a transaction.
* BODY: the body map, keyed by IPROTO key names (`space_id`, `tuple`, ...) for
  DML/NOP rows and by vinyl run/page-info names for .run/.index rows; keys
  without a name stay numbers. The values are MsgPack decoded into the small
  value model below.

Key order. tarantoolctl builds Lua tables and prints them in the order of their
hash parts, which no rule we state in terms of keys describes. The orders it
uses for the HEADER and BODY key sets Tarantool writes were recorded from its
output (over the fixture files and over data directories written by a real
2.6.0 instance with DML of every kind, transactions mixing local and global
spaces, NOP rows, synchronous spaces, vinyl .run/.index/.vylog files) and are
the tables HEADER_ORDERS / BODY_ORDERS (tests/interop/test_cat_oracle.py
checks that they are exactly the orders tarantoolctl prints there). A key set
not in them (not seen in files Tarantool writes) is printed in a fixed order
for HEADER (HEADER_FALLBACK), in MsgPack order for BODY, and may differ from
tarantoolctl's.

Maps inside the data (tuple fields, operations, vinyl statistics) are printed
in the order their keys have in the MsgPack, with later duplicates of a key
replacing the earlier value. tarantoolctl prints them in its hash-table order
instead, so maps with two keys or more may come out in another order than
tarantoolctl's; the values are the same.

Value model (the Lua value tarantoolctl has -> Python):
  string -> bytes, number -> float or int (an integer as MsgPack has it;
  `SignedInt` when it had a signed type), boolean -> bool, box.NULL -> NULL,
  decimal/uuid -> ExtValue, decoded array or tuple -> Seq, decoded map -> Map,
  the tables tarantoolctl builds itself (the record, HEADER, BODY) -> Table.
"""
from __future__ import annotations

import math
import struct
import uuid
from typing import Any

from spindle.core.iproto.msgpack import MsgpackError, decode_uint, mp_next
from spindle.core.iproto.xrow import XRow

NOP = 12
RUN_INFO, PAGE_INFO, ROW_INDEX = 100, 101, 102
# Integers this large (in absolute value) are 64-bit cdata in Tarantool's Lua,
# smaller ones plain Lua numbers; only the Lua output format shows it.
LUA_NUMBER_LIMIT = 10 ** 14


class CatError(Exception):
    """A row that cannot be shown (tarantoolctl stops with a Lua error there)."""


# ---------------------------------------------------------------------------
# Values.

class _Null:
    """box.NULL (MsgPack nil)."""

    _instance: _Null | None = None

    def __new__(cls) -> _Null:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class SignedInt(int):
    """An integer MsgPack stored with a signed type (int8..int64, negative fixint)."""


class ExtValue:
    """A decimal or a UUID (MsgPack extension): printed as its text."""

    __slots__ = ("kind", "text")

    def __init__(self, kind: str, text: str):
        self.kind = kind
        self.text = text

    def __repr__(self) -> str:
        return f"{self.kind}({self.text})"


class Seq(list):
    """A decoded MsgPack array (or a tuple): printed in flow style."""


class Map:
    """A decoded MsgPack map: printed in flow style, keys in MsgPack order."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[Any, Any]]):
        self.items = items

    def __repr__(self) -> str:
        return f"Map({self.items!r})"


class Table:
    """A table tarantoolctl builds itself (record, HEADER, BODY): block style.

    `items` are (key, value) pairs in output order. Its keys are all strings or
    all numbers; a table of positive integer keys that is not too sparse is
    printed as a sequence, with null in the holes (Tarantool's serializer with
    its default encode_sparse_ratio = 2 and encode_sparse_safe = 10).
    """

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[Any, Any]] | None = None):
        self.items = items if items is not None else []

    def get(self, key: Any) -> Any:
        for k, v in self.items:
            if type(k) is type(key) and k == key:
                return v
        return None

    def as_sequence(self) -> list[Any] | None:
        """The values as a sequence when the table prints as one, else None."""
        if not self.items:
            return []
        keys = []
        for key, _ in self.items:
            if type(key) is not int or key < 1:
                return None
            keys.append(key)
        top = max(keys)
        if top > 10 and top > 2 * len(keys):
            return None
        values: list[Any] = [NULL] * top
        for key, value in self.items:
            values[key - 1] = value
        return values

    def __repr__(self) -> str:
        return f"Table({self.items!r})"


def lua_key(value: Any) -> Any:
    """What makes two map keys the same key of a Lua table: numbers by value
    (1 and 1.0 are one key), strings and booleans by value, box.NULL is one
    object; 64-bit integers, decimals, UUIDs and tables are objects, each a
    key of its own."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, bytes):
        return ("str", value)
    if isinstance(value, float):
        return ("num", value)
    if isinstance(value, int) and abs(value) < LUA_NUMBER_LIMIT:
        return ("num", float(value))
    if value is NULL:
        return ("null",)
    return ("object", id(value))


def make_map(pairs: list[tuple[Any, Any]]) -> Map:
    """A Map from MsgPack's pairs: a repeated key keeps its first place and
    takes the last value."""
    index: dict[Any, int] = {}
    items: list[tuple[Any, Any]] = []
    for key, value in pairs:
        if isinstance(key, float):
            if math.isnan(key):
                raise CatError("table index is NaN")
            if key == 0:
                key = 0.0       # a Lua table key -0 is 0
        ident = lua_key(key)
        at = index.get(ident)
        if at is None:
            index[ident] = len(items)
            items.append((key, value))
        else:
            items[at] = (items[at][0], value)
    return Map(items)


# ---------------------------------------------------------------------------
# MsgPack.

_BE = {1: struct.Struct(">B"), 2: struct.Struct(">H"), 4: struct.Struct(">I"),
       8: struct.Struct(">Q")}
_BE_SIGNED = {1: struct.Struct(">b"), 2: struct.Struct(">h"), 4: struct.Struct(">i"),
              8: struct.Struct(">q")}
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
EXT_DECIMAL, EXT_UUID = 1, 2


class Decoder:
    """MsgPack (the spec) into the value model, from `pos` in `data`.

    tarantoolctl decodes a tuple's fields with another decoder than the other
    values of a body; the one difference that shows is NaN: one read outside a
    tuple always prints as -nan in yaml, in a tuple its sign shows. So outside
    tuples (`in_tuple` false) every NaN is made a negative one.
    """

    def __init__(self, data: bytes, pos: int = 0, in_tuple: bool = False):
        self.data = data
        self.pos = pos
        self.in_tuple = in_tuple

    def _double(self, value: float) -> float:
        if value != value and not self.in_tuple:
            return -math.nan
        return value

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise CatError("msgpack.decode: truncated MsgPack")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def _uint(self, size: int) -> int:
        return _BE[size].unpack(self._take(size))[0]

    def value(self) -> Any:
        c = self._take(1)[0]
        if c <= 0x7F:
            return c
        if c >= 0xE0:
            return SignedInt(c - 0x100)
        if c <= 0x8F:
            return self._map(c & 0x0F)
        if c <= 0x9F:
            return self._array(c & 0x0F)
        if c <= 0xBF:
            return self._take(c & 0x1F)
        if c == 0xC0:
            return NULL
        if c == 0xC2:
            return False
        if c == 0xC3:
            return True
        if c in (0xC4, 0xC5, 0xC6):                    # bin 8/16/32
            return self._take(self._uint(1 << (c - 0xC4)))
        if c in (0xD9, 0xDA, 0xDB):                    # str 8/16/32
            return self._take(self._uint(1 << (c - 0xD9)))
        if c in (0xC7, 0xC8, 0xC9):                    # ext 8/16/32
            size = self._uint(1 << (c - 0xC7))
            return self._ext(size)
        if c == 0xCA:
            return self._double(float(_F32.unpack(self._take(4))[0]))
        if c == 0xCB:
            return self._double(_F64.unpack(self._take(8))[0])
        if 0xCC <= c <= 0xCF:
            return self._uint(1 << (c - 0xCC))
        if 0xD0 <= c <= 0xD3:
            size = 1 << (c - 0xD0)
            return SignedInt(_BE_SIGNED[size].unpack(self._take(size))[0])
        if 0xD4 <= c <= 0xD8:                          # fixext 1..16
            return self._ext(1 << (c - 0xD4))
        if c == 0xDC:
            return self._array(self._uint(2))
        if c == 0xDD:
            return self._array(self._uint(4))
        if c == 0xDE:
            return self._map(self._uint(2))
        if c == 0xDF:
            return self._map(self._uint(4))
        raise CatError(f"msgpack.decode: invalid MsgPack byte 0x{c:02x}")

    def _array(self, size: int) -> Seq:
        items = Seq()
        for _ in range(size):
            items.append(self.value())
        return items

    def _map(self, size: int) -> Map:
        pairs = []
        for _ in range(size):
            key = self.value()
            pairs.append((key, self.value()))
        return make_map(pairs)

    def _ext(self, size: int) -> ExtValue:
        ext_type = _BE_SIGNED[1].unpack(self._take(1))[0]
        payload = self._take(size)
        if ext_type == EXT_DECIMAL:
            return ExtValue("decimal", decimal_text(payload))
        if ext_type == EXT_UUID and size == 16:
            return ExtValue("uuid", str(uuid.UUID(bytes=payload)))
        raise CatError(f"msgpack.decode: unsupported extension: {ext_type & 0xFF}")


def decimal_text(payload: bytes) -> str:
    """A MsgPack decimal (a MsgPack integer scale, then packed BCD digits ending
    with a sign nibble, 0xB or 0xD for minus) in plain notation, as Tarantool
    2.6 prints decimals: no exponent, the digits as stored."""
    reader = Decoder(payload)
    scale = reader.value()
    if not isinstance(scale, int) or isinstance(scale, bool):
        raise CatError("msgpack.decode: invalid MsgPack")
    nibbles = []
    for byte in payload[reader.pos:]:
        nibbles += (byte >> 4, byte & 0x0F)
    if not nibbles or max(nibbles[:-1], default=0) > 9:
        raise CatError("msgpack.decode: invalid MsgPack")
    sign = nibbles.pop()
    digits = "".join(map(str, nibbles)).lstrip("0") or "0"
    if scale <= 0:
        text = digits + "0" * -scale
    else:
        digits = digits.rjust(scale + 1, "0")
        text = f"{digits[:-scale]}.{digits[-scale:]}"
    return ("-" if sign in (0x0B, 0x0D) else "") + text


# ---------------------------------------------------------------------------
# Names.

# Request types with a name (iproto_type_strs of 2.6.0; vinyl's run/page info).
TYPE_NAMES = {1: "SELECT", 2: "INSERT", 3: "REPLACE", 4: "UPDATE", 5: "DELETE", 7: "AUTH",
              8: "EVAL", 9: "UPSERT", 10: "CALL", 11: "EXECUTE", NOP: "NOP", 13: "PREPARE",
              RUN_INFO: "RUNINFO", PAGE_INFO: "PAGEINFO", ROW_INDEX: "ROWINDEX"}

# Body key names of DML and NOP rows (IPROTO keys of 2.6.0, spaces made '_').
IPROTO_KEY_NAMES = {
    0x00: "type", 0x01: "sync", 0x02: "replica_id", 0x03: "lsn", 0x04: "timestamp",
    0x05: "schema_version", 0x06: "server_version", 0x07: "group_id", 0x08: "tsn",
    0x09: "flags", 0x10: "space_id", 0x11: "index_id", 0x12: "limit", 0x13: "offset",
    0x14: "iterator", 0x15: "index_base", 0x20: "key", 0x21: "tuple",
    0x22: "function_name", 0x23: "user_name", 0x24: "instance_uuid", 0x25: "cluster_uuid",
    0x26: "vector_clock", 0x27: "expression", 0x28: "operations", 0x29: "ballot",
    0x2A: "tuple_meta", 0x2B: "options", 0x30: "data", 0x31: "error", 0x32: "metadata",
    0x33: "bind_metadata", 0x34: "bind_count", 0x40: "SQL_text", 0x41: "SQL_bind",
    0x42: "SQL_info", 0x43: "stmt_id",
}
VY_KEY_NAMES = {
    RUN_INFO: {1: "min_key", 2: "max_key", 3: "min_lsn", 4: "max_lsn", 5: "page_count",
               6: "bloom_filter_legacy", 7: "bloom_filter", 8: "stmt_stat"},
    PAGE_INFO: {1: "offset", 2: "size", 3: "unpacked_size", 4: "row_count", 5: "min_key",
                6: "row_index_offset"},
    ROW_INDEX: {1: "row_index"},
}
KEY_TUPLE_KEYS = (0x20, 0x21)      # decoded as tuples when they are arrays


def body_key_name(request_type: int, key: int) -> str | None:
    if 1 <= request_type <= 5 or request_type in (9, NOP):
        return IPROTO_KEY_NAMES.get(key)
    names = VY_KEY_NAMES.get(request_type)
    return names.get(key) if names else None


# ---------------------------------------------------------------------------
# Key order, as observed in tarantoolctl's output (see the module docstring).

def _orders(*orders: str) -> dict[frozenset, tuple[bytes, ...]]:
    table = {}
    for order in orders:
        keys = tuple(name.encode() for name in order.split())
        table[frozenset(keys)] = keys
    return table


HEADER_ORDERS = _orders(
    "type",                                             # .vylog rows
    "timestamp type",                                   # first row of a snapshot (lsn 0)
    "lsn type",                                         # .run rows
    "lsn type timestamp",                               # snapshot rows
    "lsn replica_id type timestamp",                    # xlog rows
    "lsn replica_id type tsn timestamp",                # in a transaction
    "lsn commit replica_id type tsn timestamp",         # last row of a transaction
    "lsn group_id type timestamp",                      # rows of local spaces
    "lsn group_id type tsn timestamp",                  # ... in a transaction
    "lsn group_id type commit tsn timestamp",           # ... last row of one
)
# Any other header key set (none seen in files Tarantool writes).
HEADER_FALLBACK = tuple(b"lsn commit replica_id group_id sync type tsn timestamp".split())

BODY_ORDERS = _orders(
    "space_id tuple",                                   # INSERT, REPLACE
    "space_id key",                                     # DELETE
    "space_id index_id key",                            # DELETE by another index
    "space_id index_base key tuple",                    # UPDATE (ops in `tuple`)
    "space_id operations tuple",                        # UPSERT
    "space_id operations index_base tuple",             # UPSERT
    "tuple tuple_meta",                                 # .run REPLACE
    "min_lsn bloom_filter max_key page_count stmt_stat max_lsn min_key",   # RUNINFO
    "row_index_offset offset size unpacked_size row_count min_key",        # PAGEINFO
)


def ordered(items: list[tuple[Any, Any]], orders: dict[frozenset, tuple],
            fallback: tuple | None = None) -> list[tuple[Any, Any]]:
    """`items` in the recorded order of their key set; else in `fallback`'s
    order (keys not in it last, as they are), or as they are."""
    keys = [key for key, _ in items]
    order = orders.get(frozenset(keys))
    if order is None:
        if fallback is None:
            return items
        rank = {key: i for i, key in enumerate(fallback)}
        return sorted(items, key=lambda kv: rank.get(kv[0], len(rank)))
    by_key = dict(items)
    return [(key, by_key[key]) for key in order]


# ---------------------------------------------------------------------------
# Records.

def _read_map_header(data: bytes) -> tuple[int, int] | None:
    c = data[0]
    if 0x80 <= c <= 0x8F:
        return c & 0x0F, 1
    if c == 0xDE and len(data) >= 3:
        return _BE[2].unpack_from(data, 1)[0], 3
    if c == 0xDF and len(data) >= 5:
        return _BE[4].unpack_from(data, 1)[0], 5
    return None


def _read_uint(data: bytes, pos: int) -> tuple[int, int] | None:
    """decode_uint's answer, or None for anything but a whole uint."""
    try:
        return decode_uint(data, pos)
    except (MsgpackError, IndexError, struct.error):
        return None


def _value_end(data: bytes, pos: int) -> int | None:
    try:
        return mp_next(data, pos, len(data))
    except (MsgpackError, IndexError):
        return None


def parse_body(request_type: int, data: bytes, warnings: list[str]) -> Table:
    """The BODY table. A body that is not a map gives an empty table; a value
    that is not valid MsgPack shows as the string '<invalid msgpack>'; a map
    shorter than its header says gets a warning."""
    items: list[tuple[Any, Any]] = []
    header = _read_map_header(data) if data else None
    if header is None:
        return Table(items)
    size, pos = header
    end = len(data)
    count = 0
    while count < size and pos < end:
        decoded = _read_uint(data, pos)
        if decoded is None:
            raise CatError("Broken type of body key")
        key, pos = decoded
        name = body_key_name(request_type, key)
        value_end = _value_end(data, pos) if pos < end else None
        if value_end is None:
            if key in KEY_TUPLE_KEYS and pos < end and _is_array_start(data[pos]):
                raise CatError("Failed to allocate tuple: invalid MsgPack")
            value: Any = b"<invalid msgpack>"
        else:
            in_tuple = key in KEY_TUPLE_KEYS and _is_array_start(data[pos])
            value = Decoder(data[:value_end], pos, in_tuple).value()
            pos = value_end
        items.append((name.encode() if name is not None else key, value))
        count += 1
    if count != size:
        warnings.append(f"warning: decoded {count} values from MP_MAP, {size} expected")
    # Later duplicates replace the value of a key.
    merged = make_map(items).items
    if any(isinstance(k, int) for k, _ in merged):
        return Table(merged)
    return Table(ordered(merged, BODY_ORDERS))


def _is_array_start(c: int) -> bool:
    return 0x90 <= c <= 0x9F or c in (0xDC, 0xDD)


def build_record(row: XRow, warnings: list[str]) -> Table:
    """The record tarantoolctl's xlog reader gives for a row."""
    name = TYPE_NAMES.get(row.type)
    header: list[tuple[bytes, Any]] = [(b"type", name.encode() if name else float(row.type))]
    for key, value in ((b"sync", row.sync), (b"lsn", row.lsn),
                       (b"replica_id", row.replica_id), (b"group_id", row.group_id),
                       (b"timestamp", row.timestamp)):
        if value:
            header.append((key, float(value)))
    if row.tsn != row.lsn or not row.is_commit:
        header.append((b"tsn", float(row.tsn)))
    if row.is_commit and row.tsn != row.lsn:
        header.append((b"commit", True))
    record = [(b"HEADER", Table(ordered(header, HEADER_ORDERS, HEADER_FALLBACK)))]
    if row.body is not None:
        record.append((b"BODY", parse_body(row.type, row.body, warnings)))
    return Table(record)


def record_space_id(record: Table) -> Any:
    """BODY.space_id, None without it."""
    body = record.get(b"BODY")
    return body.get(b"space_id") if isinstance(body, Table) else None


def record_replica_id(record: Table) -> Any:
    return record.get(b"HEADER").get(b"replica_id")
