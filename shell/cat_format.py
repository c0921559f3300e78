"""Rows as `tarantoolctl cat` (Tarantool 2.6.0) prints them.

`build_record()` makes the Lua table that the `xlog` module's iterator gives
tarantoolctl for a row (src/box/lua/xlog.c): HEADER and BODY, BODY keys named
after IPROTO keys for DML rows, KEY/TUPLE arrays as box tuples, other values
through luamp_decode. The three output formats then follow tarantoolctl:
yaml.encode(record) minus its '\\n...\\n' (cat_yaml), json.encode(record)
(lua-cjson's encoder) and the `box.space[N]:op(...)` lines of its Lua writer.
"""
from __future__ import annotations

import re
from typing import Any

from spindle.core.iproto.xrow import XRow

from .cat_luajit import (NULL, BoxTuple, DecimalValue, I64, LuaError, LuaTable, LuampDecoder,
                         MsgpackError, U64, UuidValue, fmt_g14, lua_tostring)
from .cat_yaml import (F_ARRAY, F_BOOL, F_DECIMAL, F_DOUBLE, F_INT, F_MAP, F_NIL, F_STR,
                       F_UINT, F_UUID, number_text, to_field, yaml_encode)

NOP = 12
VY_INDEX_RUN_INFO, VY_INDEX_PAGE_INFO, VY_RUN_ROW_INDEX = 100, 101, 102

# iproto_type_strs[] (NOP named separately by iproto_type_name()).
_TYPE_NAMES = {1: "SELECT", 2: "INSERT", 3: "REPLACE", 4: "UPDATE", 5: "DELETE", 7: "AUTH",
               8: "EVAL", 9: "UPSERT", 10: "CALL", 11: "EXECUTE", 12: "NOP", 13: "PREPARE",
               VY_INDEX_RUN_INFO: "RUNINFO", VY_INDEX_PAGE_INFO: "PAGEINFO",
               VY_RUN_ROW_INDEX: "ROWINDEX"}

# iproto_key_strs[] of 2.6.0 (keys >= 0x44 have no name).
_KEY_NAMES = {
    0x00: "type", 0x01: "sync", 0x02: "replica id", 0x03: "lsn", 0x04: "timestamp",
    0x05: "schema version", 0x06: "server version", 0x07: "group id", 0x08: "tsn",
    0x09: "flags", 0x10: "space id", 0x11: "index id", 0x12: "limit", 0x13: "offset",
    0x14: "iterator", 0x15: "index base", 0x20: "key", 0x21: "tuple",
    0x22: "function name", 0x23: "user name", 0x24: "instance uuid", 0x25: "cluster uuid",
    0x26: "vector clock", 0x27: "expression", 0x28: "operations", 0x29: "ballot",
    0x2A: "tuple meta", 0x2B: "options", 0x30: "data", 0x31: "error", 0x32: "metadata",
    0x33: "bind meta", 0x34: "bind count", 0x40: "SQL text", 0x41: "SQL bind",
    0x42: "SQL info", 0x43: "stmt id",
}
_VY_RUN_INFO_KEYS = {1: "min key", 2: "max key", 3: "min lsn", 4: "max lsn", 5: "page count",
                     6: "bloom filter legacy", 7: "bloom filter", 8: "stmt stat"}
_VY_PAGE_INFO_KEYS = {1: "offset", 2: "size", 3: "unpacked size", 4: "row count",
                      5: "min key", 6: "row index offset"}
_VY_ROW_INDEX_KEYS = {1: "row index"}


def type_name(request_type: int) -> str | None:
    return _TYPE_NAMES.get(request_type)


def _is_dml(request_type: int) -> bool:
    return 1 <= request_type <= 5 or request_type in (9, NOP)


def _body_key_name(request_type: int, key: int) -> str | None:
    if _is_dml(request_type):
        name = _KEY_NAMES.get(key)
        if name is not None:
            return name
    if request_type == VY_INDEX_RUN_INFO:
        return _VY_RUN_INFO_KEYS.get(key)
    if request_type == VY_INDEX_PAGE_INFO:
        return _VY_PAGE_INFO_KEYS.get(key)
    if request_type == VY_RUN_ROW_INDEX:
        return _VY_ROW_INDEX_KEYS.get(key)
    return None


class BodyWarning(Exception):
    """say_warn() of lbox_xlog_parse_body: the map had fewer values than declared."""


def _mp_next(data: bytes, pos: int) -> int:
    """Position after the MsgPack value at `pos`; MsgpackError when it is broken."""
    from spindle.core.iproto.xrow import MsgpackError as XrowMsgpackError, mp_next
    try:
        return mp_next(data, pos, len(data))
    except (XrowMsgpackError, IndexError) as exc:
        raise MsgpackError(str(exc)) from None


def _read_uint(data: bytes, pos: int) -> tuple[int, int] | None:
    c = data[pos]
    if c <= 0x7F:
        return c, pos + 1
    size = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}.get(c)
    if size is None or pos + 1 + size > len(data):
        return None
    return int.from_bytes(data[pos + 1:pos + 1 + size], "big"), pos + 1 + size


def _read_map_header(data: bytes) -> tuple[int, int] | None:
    c = data[0]
    if 0x80 <= c <= 0x8F:
        return c & 0x0F, 1
    if c == 0xDE and len(data) >= 3:
        return int.from_bytes(data[1:3], "big"), 3
    if c == 0xDF and len(data) >= 5:
        return int.from_bytes(data[1:5], "big"), 5
    return None


def parse_body(request_type: int, data: bytes, warnings: list[str]) -> LuaTable:
    """lbox_xlog_parse_body() into a fresh lua_newtable()."""
    body = LuaTable()
    header = _read_map_header(data) if data else None
    if header is None:
        return body
    size, pos = header
    end = len(data)
    count = 0
    while count < size and pos < end:
        decoded = _read_uint(data, pos)
        if decoded is None:
            raise LuaError("Broken type of body key")
        key, pos = decoded
        name = _body_key_name(request_type, key)
        lua_key: Any = name.replace(" ", "_").encode() if name is not None else float(key)
        value: Any
        if key in (0x20, 0x21) and pos < end and (0x90 <= data[pos] <= 0x9F
                                                   or data[pos] in (0xDC, 0xDD)):
            try:
                nxt = _mp_next(data, pos)
            except MsgpackError:
                raise LuaError("Failed to allocate tuple: invalid MsgPack") from None
            value = BoxTuple(data[pos:nxt])
            pos = nxt
        else:
            try:
                nxt = _mp_next(data, pos) if pos < end else None
            except MsgpackError:
                nxt = None
            if nxt is None:
                value = b"<invalid msgpack>"
            else:
                decoder = LuampDecoder(data, pos)
                try:
                    value = decoder.decode_value()
                except MsgpackError as exc:
                    raise LuaError(f"msgpack.decode: {exc}") from None
                pos = decoder.pos
        body.set(lua_key, value)
        count += 1
    if count != size:
        warnings.append(f"warning: decoded {count} values from MP_MAP, {size} expected")
    return body


def build_record(row: XRow, warnings: list[str]) -> LuaTable:
    """The record table of lbox_xlog_parser_iterate()."""
    record = LuaTable.create(0, 8)
    header = LuaTable.create(0, 8)
    name = type_name(row.type)
    header.set(b"type", name.encode() if name is not None else float(row.type))
    if row.sync:
        header.set(b"sync", float(row.sync))
    if row.lsn:
        header.set(b"lsn", float(row.lsn))
    if row.replica_id:
        header.set(b"replica_id", float(row.replica_id))
    if row.group_id:
        header.set(b"group_id", float(row.group_id))
    if row.timestamp != 0:
        header.set(b"timestamp", float(row.timestamp))
    if row.tsn != row.lsn or not row.is_commit:
        header.set(b"tsn", float(row.tsn))
    if row.is_commit and row.tsn != row.lsn:
        header.set(b"commit", True)
    record.set(b"HEADER", header)
    if row.body is not None:
        record.set(b"BODY", parse_body(row.type, row.body, warnings))
    return record


def record_space_id(record: LuaTable) -> Any:
    """record.BODY and record.BODY.space_id."""
    body = record.get(b"BODY")
    return body.get(b"space_id") if isinstance(body, LuaTable) else None


def record_replica_id(record: LuaTable) -> Any:
    return record.get(b"HEADER").get(b"replica_id")


# ---------------------------------------------------------------------------
# Formats.

def format_yaml(record: LuaTable) -> bytes:
    """cat_yaml_cb: print(yaml.encode(record):sub(1, -6))."""
    return yaml_encode(record)[:-5] + b"\n"


_JSON_ESCAPES = {i: ("\\u%04x" % i).encode() for i in range(0x20)}
_JSON_ESCAPES.update({0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0C: b"\\f", 0x0D: b"\\r",
                      0x22: b'\\"', 0x2F: b"\\/", 0x5C: b"\\\\", 0x7F: b"\\u007f"})
_JSON_TABLE = [_JSON_ESCAPES.get(i, bytes((i,))) for i in range(256)]


_JSON_NEEDS_ESCAPE = re.compile(rb'[\x00-\x1f"/\\\x7f]')


def _json_string(s: bytes, out: list[bytes]) -> None:
    if _JSON_NEEDS_ESCAPE.search(s):
        s = b"".join(_JSON_TABLE[c] for c in s)
    out.append(b'"' + s + b'"')


def _json_value(value: Any, out: list[bytes], depth: int) -> None:
    tv = type(value)
    if tv is float:
        out.append(b"nan" if value != value else number_text(value))
        return
    if tv is bytes:
        _json_string(value, out)
        return
    field = to_field(value, False)
    ftype = field.type
    if ftype == F_UINT or ftype == F_INT:
        out.append(str(field.value).encode())
    elif ftype == F_STR:
        _json_string(field.value, out)
    elif ftype == F_DOUBLE:
        x = field.value
        out.append(b"nan" if x != x else fmt_g14(x).encode())
    elif ftype == F_BOOL:
        out.append(b"true" if field.value else b"false")
    elif ftype == F_NIL:
        out.append(b"null")
    elif ftype == F_MAP:
        if depth >= 128:
            raise LuaError("Too high nest level")
        out.append(b"{")
        first = True
        for key, item in field.table.items():
            if not first:
                out.append(b",")
            first = False
            kfield = to_field(key, False)
            if kfield.type in (F_UINT, F_INT):
                out.append(b'"' + str(kfield.value).encode() + b'":')
            elif kfield.type == F_STR:
                _json_string(kfield.value, out)
                out.append(b":")
            else:
                raise LuaError("table key must be a number or string")
            _json_value(item, out, depth + 1)
        out.append(b"}")
    elif ftype == F_ARRAY:
        if depth >= 128:
            raise LuaError("Too high nest level")
        out.append(b"[")
        table = field.table
        for i in range(1, field.size + 1):
            if i > 1:
                out.append(b",")
            _json_value(table.geti(i), out, depth + 1)
        out.append(b"]")
    elif ftype in (F_DECIMAL, F_UUID):
        _json_string(field.value.encode(), out)
    else:   # pragma: no cover
        raise LuaError("unsupported Lua type")


def format_json(record: LuaTable) -> bytes:
    """cat_json_cb: print(json.encode(record))."""
    out: list[bytes] = []
    _json_value(record, out, 0)
    return b"".join(out) + b"\n"


def _lua_value(value: Any, out: list[bytes]) -> None:
    if isinstance(value, bytes):
        out.append(b"'" + b"".join(b"\\x%02x" % c for c in value) + b"'")
    elif isinstance(value, LuaTable):
        _lua_table(value, out)
    else:
        out.append(lua_tostring(value).encode())


def _lua_table(value: Any, out: list[bytes]) -> None:
    """write_lua_table(): pairs() order; a tuple iterates its fields (tuple_ipairs)."""
    if isinstance(value, BoxTuple):
        pairs = [(float(i), field) for i, field in enumerate(value.fields(), 1)]
    elif isinstance(value, LuaTable):
        pairs = value.items()
    else:
        kind = "nil" if value is None else "cdata" if value is NULL or isinstance(
            value, (U64, I64, DecimalValue, UuidValue)) else type(value).__name__
        raise LuaError(f"bad argument #1 to 'for iterator' (table expected, got {kind})")
    out.append(b"{")
    for n, (key, item) in enumerate(pairs):
        if n:
            out.append(b", ")
        out.append(b"[")
        _lua_value(key, out)
        out.append(b"] = ")
        _lua_value(item, out)
    out.append(b"}")


def format_lua(record: LuaTable) -> bytes | None:
    """cat_lua_cb: `box.space[N]:op(...)`, or None for rows it skips."""
    header = record.get(b"HEADER")
    body = record.get(b"BODY")
    op_name = header.get(b"type")
    if op_name == b"NOP" or not isinstance(body, LuaTable):
        return None
    space_id = body.get(b"space_id")
    if space_id is None:
        return None
    if not isinstance(op_name, bytes):
        raise LuaError("attempt to index a number value")
    out = [b"box.space[%d]" % int(space_id)]
    op = op_name.lower()
    out.append(b":" + op + b"(")
    if op in (b"insert", b"replace"):
        _lua_table(body.get(b"tuple"), out)
    elif op == b"delete":
        _lua_table(body.get(b"key"), out)
    elif op == b"update":
        _lua_table(body.get(b"key"), out)
        out.append(b", ")
        _lua_table(body.get(b"tuple"), out)
    elif op == b"upsert":
        _lua_table(body.get(b"tuple"), out)
        out.append(b", ")
        _lua_table(body.get(b"operations"), out)
    out.append(b")\n")
    return b"".join(out)


FORMATTERS = {"yaml": format_yaml, "json": format_json, "lua": format_lua}
