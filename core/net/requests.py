"""Typed IPROTO requests and their decoding, with 2.6.0's validation and errors.

The iproto layer decodes every request before anyone executes it (as 2.6.0's
iproto thread does) and hands the executor one of the classes below. Each keeps
the packet's `row` (header fields and raw body) for those who need exact bytes.

Validation, measured against the live 2.6.0 binary:
* DML bodies (SELECT..UPSERT): keys outside the DML set are skipped whatever their
  type; a DML key with the wrong MsgPack type is "Invalid MsgPack - packet body";
  a missing mandatory key is ER_MISSING_REQUEST_FIELD (no body at all is "missing
  'space id'"). Integer fields are C uint32_t: larger values wrap.
* CALL/EVAL and AUTH bodies: every key must be an unsigned integer; the known
  keys must have their type; no body is "missing request body".
"""
from __future__ import annotations

from typing import Any

import msgpack

from spindle.core.iproto.constants import (
    DML_BODY_KEYS, DML_MANDATORY_KEYS, IPROTO_KEY_NAMES, IPROTO_KEY_TYPE, IprotoKey,
    IprotoType, MpType,
)
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import ext_hook, needs_exact, pack
from spindle.core.iproto.request import decode_dml_body
from spindle.core.iproto.xrow import XRow, read_rows

from .protocol import NO_BODY, UNDECODABLE, Packet, Where, client_error, with_location

_U32 = 0xFFFFFFFF


def _u32(value: int) -> int:
    return value & _U32


def _i32(value: int) -> int:
    value &= _U32
    return value - (1 << 32) if value & 0x80000000 else value


# Plain classes with __slots__, not dataclasses: a dataclass costs ~0.2 ms to build
# at import, and these 17 are imported by every start. Constructed positionally
# by the decoders below; a list field left out starts as a new empty list.

class Request:
    """Base of all requests: the packet's header fields live in `row`."""

    __slots__ = ("row",)

    def __init__(self, row: XRow):
        self.row = row

    def __repr__(self) -> str:
        names = [name for cls in reversed(type(self).__mro__)
                 for name in getattr(cls, "__slots__", ()) if name != "row"]
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({fields})"

    @property
    def type(self) -> int:
        return self.row.type & 0xFF

    @property
    def sync(self) -> int:
        return self.row.sync

    @property
    def schema_version(self) -> int:
        return self.row.schema_version


def _list(value: list | None) -> list:
    return [] if value is None else value


class Select(Request):
    __slots__ = ("space_id", "index_id", "iterator", "offset", "limit", "key")

    def __init__(self, row: XRow, space_id: int = 0, index_id: int = 0, iterator: int = 0,
                 offset: int = 0, limit: int = 0, key: list | None = None):
        self.row = row
        self.space_id, self.index_id, self.iterator = space_id, index_id, iterator
        self.offset, self.limit, self.key = offset, limit, _list(key)


class Insert(Request):
    __slots__ = ("space_id", "tuple")

    def __init__(self, row: XRow, space_id: int = 0, tuple: list | None = None):
        self.row, self.space_id, self.tuple = row, space_id, _list(tuple)


class Replace(Insert):
    __slots__ = ()


class Update(Request):
    __slots__ = ("space_id", "index_id", "key", "ops", "index_base")

    def __init__(self, row: XRow, space_id: int = 0, index_id: int = 0,
                 key: list | None = None, ops: list | None = None, index_base: int = 0):
        self.row, self.space_id, self.index_id = row, space_id, index_id
        self.key, self.ops, self.index_base = _list(key), _list(ops), index_base


class Upsert(Request):
    __slots__ = ("space_id", "tuple", "ops", "index_base")

    def __init__(self, row: XRow, space_id: int = 0, tuple: list | None = None,
                 ops: list | None = None, index_base: int = 0):
        self.row, self.space_id = row, space_id
        self.tuple, self.ops, self.index_base = _list(tuple), _list(ops), index_base


class Delete(Request):
    __slots__ = ("space_id", "index_id", "key")

    def __init__(self, row: XRow, space_id: int = 0, index_id: int = 0,
                 key: list | None = None):
        self.row, self.space_id, self.index_id, self.key = row, space_id, index_id, _list(key)


class Call(Request):
    """CALL (1.7+ semantics: results sent as they are)."""

    __slots__ = ("name", "args")

    def __init__(self, row: XRow, name: str = "", args: list | None = None):
        self.row, self.name, self.args = row, name, _list(args)


class Call16(Call):
    """CALL_16 (1.6 semantics: every result converted to a tuple)."""

    __slots__ = ()


class Eval(Request):
    __slots__ = ("expr", "args")

    def __init__(self, row: XRow, expr: str = "", args: list | None = None):
        self.row, self.expr, self.args = row, expr, _list(args)


class Execute(Request):
    """SQL EXECUTE (passed through; the executor may refuse it)."""

    __slots__ = ("sql_text", "stmt_id", "bind", "options")

    def __init__(self, row: XRow, sql_text: str | None = None, stmt_id: int | None = None,
                 bind: list | None = None, options: Any = None):
        self.row, self.sql_text, self.stmt_id = row, sql_text, stmt_id
        self.bind, self.options = _list(bind), options


class Prepare(Execute):
    __slots__ = ()


class Vote(Request):
    """VOTE: the executor answers with a body {BALLOT: {...}} (a dict)."""

    __slots__ = ()


class VoteDeprecated(Request):
    """VOTE_DEPRECATED (67): the executor answers {VCLOCK: vclock}."""

    __slots__ = ()


class Auth(Request):
    """AUTH, handled by the iproto layer itself (never reaches `execute`)."""

    __slots__ = ("user_name", "tuple")

    def __init__(self, row: XRow, user_name: str = "", tuple: list | None = None):
        self.row, self.user_name, self.tuple = row, user_name, _list(tuple)


class Ping(Request):
    """PING, answered by the iproto layer itself."""

    __slots__ = ()


class ReplicationRequest(Request):
    """JOIN, SUBSCRIBE, FETCH_SNAPSHOT or REGISTER: the body is left to the
    replication handler (`body` decoded, `row.body` raw), which takes over the
    connection."""

    __slots__ = ("body",)

    def __init__(self, row: XRow, body: Any = None):
        self.row, self.body = row, body


DML_CLASSES: dict[int, type] = {
    IprotoType.SELECT: Select, IprotoType.INSERT: Insert, IprotoType.REPLACE: Replace,
    IprotoType.UPDATE: Update, IprotoType.DELETE: Delete, IprotoType.UPSERT: Upsert,
}
REPLICATION_TYPES = frozenset({IprotoType.JOIN, IprotoType.SUBSCRIBE,
                               IprotoType.FETCH_SNAPSHOT, IprotoType.REGISTER})


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _decode_dml(packet: Packet, route: int) -> Request:
    body = packet.body
    if body is UNDECODABLE:
        raise client_error(Where.XROW_DML_BODY, ErrorCode.ER_INVALID_MSGPACK, "packet body")
    raw = None if body is NO_BODY else packet.row.body
    try:
        dml = decode_dml_body(raw, route)
    except ClientError as err:
        where = (Where.XROW_DML_MISSING if err.code == ErrorCode.ER_MISSING_REQUEST_FIELD
                 else Where.XROW_DML_BODY)
        raise with_location(err, where) from None
    row = packet.row
    # (the asserts: decode_dml_body refused a body without the type's mandatory keys)
    if route == IprotoType.SELECT:
        assert dml.limit is not None and dml.key is not None
        return Select(row, _u32(dml.space_id), _u32(dml.index_id), _u32(dml.iterator),
                      _u32(dml.offset), _u32(dml.limit), list(dml.key))
    if route in (IprotoType.INSERT, IprotoType.REPLACE):
        assert dml.tuple is not None
        return DML_CLASSES[route](row, _u32(dml.space_id), list(dml.tuple))
    if route == IprotoType.UPDATE:
        assert dml.key is not None and dml.ops is not None
        return Update(row, _u32(dml.space_id), _u32(dml.index_id), list(dml.key),
                      list(dml.ops), _i32(dml.index_base))
    if route == IprotoType.UPSERT:
        assert dml.tuple is not None and dml.ops is not None
        return Upsert(row, _u32(dml.space_id), list(dml.tuple), list(dml.ops),
                      _i32(dml.index_base))
    assert dml.key is not None
    return Delete(row, _u32(dml.space_id), _u32(dml.index_id), list(dml.key))


def _strict_map(packet: Packet, no_body: tuple, bad_body: tuple) -> dict:
    """The body of CALL/EVAL/AUTH: a map whose keys are all unsigned integers."""
    body = packet.body
    if body is NO_BODY:
        raise client_error(no_body, ErrorCode.ER_INVALID_MSGPACK, "missing request body")
    if not isinstance(body, dict) or not all(_is_uint(key) for key in body):
        raise client_error(bad_body, ErrorCode.ER_INVALID_MSGPACK, "packet body")
    return body


def _typed(body: dict, key: int, kind: type | tuple[type, ...], bad_body: tuple) -> Any:
    if key not in body:
        return None
    value = body[key]
    if not isinstance(value, kind):
        raise client_error(bad_body, ErrorCode.ER_INVALID_MSGPACK, "packet body")
    return value


def _missing(where: tuple, key: int) -> ClientError:
    return client_error(where, ErrorCode.ER_MISSING_REQUEST_FIELD, IPROTO_KEY_NAMES[key])


def _decode_call(packet: Packet, route: int) -> Request:
    bad = Where.XROW_CALL_BODY
    body = _strict_map(packet, Where.XROW_CALL_NO_BODY, bad)
    name = _typed(body, IprotoKey.FUNCTION_NAME, str, bad)
    expr = _typed(body, IprotoKey.EXPR, str, bad)
    args = _typed(body, IprotoKey.TUPLE, (list, tuple), bad)
    args = [] if args is None else list(args)
    if route == IprotoType.EVAL:
        if expr is None:
            raise _missing(Where.XROW_EVAL_MISSING, IprotoKey.EXPR)
        return Eval(packet.row, expr, args)
    if name is None:
        raise _missing(Where.XROW_CALL_MISSING, IprotoKey.FUNCTION_NAME)
    cls = Call16 if route == IprotoType.CALL_16 else Call
    return cls(packet.row, name, args)


def _decode_auth(packet: Packet) -> Auth:
    bad = Where.XROW_AUTH_BODY
    body = _strict_map(packet, Where.XROW_AUTH_NO_BODY, bad)
    user = _typed(body, IprotoKey.USER_NAME, str, bad)
    parts = _typed(body, IprotoKey.TUPLE, (list, tuple), bad)
    if user is None:
        raise _missing(Where.XROW_AUTH_USER_MISSING, IprotoKey.USER_NAME)
    if parts is None:
        raise _missing(Where.XROW_AUTH_TUPLE_MISSING, IprotoKey.TUPLE)
    return Auth(packet.row, user, list(parts))


def _decode_sql(packet: Packet, route: int) -> Request:
    body = packet.body
    if body is NO_BODY:
        raise client_error(Where.XROW_SQL_NO_BODY, ErrorCode.ER_INVALID_MSGPACK,
                           "missing request body")
    if not isinstance(body, dict):
        raise client_error(Where.XROW_SQL_BODY, ErrorCode.ER_INVALID_MSGPACK, "packet body")
    text = body.get(IprotoKey.SQL_TEXT)
    stmt_id = body.get(IprotoKey.STMT_ID)
    if text is None and stmt_id is None:
        raise client_error(Where.XROW_SQL_MISSING, ErrorCode.ER_MISSING_REQUEST_FIELD,
                           "SQL text or stmt id")
    bind = body.get(IprotoKey.SQL_BIND)
    cls = Prepare if route == IprotoType.PREPARE else Execute
    return cls(packet.row, text, stmt_id, list(bind) if isinstance(bind, (list, tuple)) else [],
               body.get(IprotoKey.OPTIONS))


def unknown_request_type(route: int) -> ClientError:
    return client_error(Where.IPROTO_UNKNOWN_REQUEST, ErrorCode.ER_UNKNOWN_REQUEST_TYPE, route)


def decode_request(packet: Packet) -> Request:
    """The typed request of a decoded packet, or a ClientError exactly as 2.6.0
    reports it (ER_UNKNOWN_REQUEST_TYPE for types it does not serve)."""
    route = packet.route
    if route in DML_CLASSES:
        return _decode_dml(packet, route)
    if route in (IprotoType.CALL, IprotoType.CALL_16, IprotoType.EVAL):
        return _decode_call(packet, route)
    if route == IprotoType.AUTH:
        return _decode_auth(packet)
    if route == IprotoType.PING:
        return Ping(packet.row)
    if route == IprotoType.VOTE:
        return Vote(packet.row)
    if route == IprotoType.VOTE_DEPRECATED:
        return VoteDeprecated(packet.row)
    if route in (IprotoType.EXECUTE, IprotoType.PREPARE):
        return _decode_sql(packet, route)
    if route in REPLICATION_TYPES:
        body = None if packet.body in (NO_BODY, UNDECODABLE) else packet.body
        return ReplicationRequest(packet.row, body)
    raise unknown_request_type(route)


# ---------------------------------------------------------------------------
# The fast path: `decode_request(decode_packet(raw))` for the packets clients send
# all the time, with the same result. Anything it is not sure about (another header
# layout, a body that is not a plain valid DML map) goes down the general path,
# which also produces every error.

# DML body key -> what its value must be (decode_dml_body's _has_type)
_DML_KEY_CHECK = {key: IPROTO_KEY_TYPE[key] for key in DML_BODY_KEYS}
_UINT_KEYS = frozenset(key for key, kind in _DML_KEY_CHECK.items() if kind is MpType.UINT)
_ARRAY_KEYS = frozenset(key for key, kind in _DML_KEY_CHECK.items() if kind is MpType.ARRAY)
_MAP_KEYS = frozenset(key for key, kind in _DML_KEY_CHECK.items() if kind is MpType.MAP)
_MANDATORY = {route: frozenset(keys) for route, keys in DML_MANDATORY_KEYS.items()}
_SPACE_ID, _INDEX_ID, _LIMIT, _OFFSET, _ITERATOR, _INDEX_BASE, _KEY, _TUPLE, _OPS = (
    IprotoKey.SPACE_ID, IprotoKey.INDEX_ID, IprotoKey.LIMIT, IprotoKey.OFFSET,
    IprotoKey.ITERATOR, IprotoKey.INDEX_BASE, IprotoKey.KEY, IprotoKey.TUPLE,
    IprotoKey.OPS)
_CALL_ROUTES = frozenset({IprotoType.CALL, IprotoType.CALL_16, IprotoType.EVAL})
_SELECT, _INSERT, _REPLACE, _UPDATE, _UPSERT, _PING = (
    IprotoType.SELECT, IprotoType.INSERT, IprotoType.REPLACE, IprotoType.UPDATE,
    IprotoType.UPSERT, IprotoType.PING)


def decode_request_fast(raw: bytes) -> Request | None:
    """A DML request, a CALL/EVAL or a PING in the common shape, exactly as the general
    path would decode it; None when the packet needs the general path (which reports
    every error)."""
    try:
        # the header as xrow.py's one quick reader reads it: the row decode_packet
        # makes of it, unless a field decode_packet cuts to uint32 is larger or the
        # TSN field is there (its wrap-around is read as decode_packet does not)
        row, pos = read_rows(raw, 0, None)
        assert row is not None
        if ((row.type | row.schema_version | row.replica_id | row.group_id) > _U32
                or row.tsn != row.lsn):
            return None
        route = row.type & 0xFF
        cls = DML_CLASSES.get(route)
        if cls is None:
            if route == _PING and (pos == len(raw) or raw[pos:] == b"\x80"):
                # no body, or an empty map: decodes cleanly, PING ignores it
                row.body = None if pos == len(raw) else raw[pos:]
                return Ping(row)
            if route not in _CALL_ROUTES:
                return None
        if pos >= len(raw) or (raw.find(b"\xff", pos) >= 0 and needs_exact(raw, pos)):
            return None
        body = msgpack.unpackb(memoryview(raw)[pos:], raw=False, strict_map_key=False,
                               unicode_errors="surrogateescape", ext_hook=ext_hook)
    except Exception:   # noqa: BLE001 - the general path says what is wrong
        return None
    if type(body) is not dict:
        return None
    if cls is None:
        # CALL, CALL_16, EVAL: the body as decode_packet decodes it, checked by the
        # general path's own _decode_call (its header, already read, is the costly
        # part of decode_packet)
        row.body = bytes(raw[pos:])
        try:
            return _decode_call(Packet(row, body), route)
        except Exception:   # noqa: BLE001 - the general path reports it
            return None
    found = 0
    mandatory = _MANDATORY[route]
    for key, value in body.items():
        if type(key) is not int or key not in _DML_KEY_CHECK:
            continue        # skipped whatever its type, as the general path does
        if key in _UINT_KEYS:
            if type(value) is not int or value < 0:
                return None
        elif key in _ARRAY_KEYS:
            if type(value) is not list:
                return None
        elif type(value) is not dict:
            return None
        if key in mandatory:
            found += 1
    if found != len(mandatory):
        return None
    row.body = bytes(raw[pos:])
    get = body.get
    if route == _SELECT:
        return Select(row, get(_SPACE_ID, 0) & _U32, get(_INDEX_ID, 0) & _U32,
                      get(_ITERATOR, 0) & _U32, get(_OFFSET, 0) & _U32, body[_LIMIT] & _U32,
                      body[_KEY])
    if route == _INSERT or route == _REPLACE:
        return cls(row, body[_SPACE_ID] & _U32, body[_TUPLE])
    if route == _UPDATE:
        return Update(row, body[_SPACE_ID] & _U32, get(_INDEX_ID, 0) & _U32, body[_KEY],
                      body[_TUPLE], _i32(get(_INDEX_BASE, 0)))
    if route == _UPSERT:
        return Upsert(row, body[_SPACE_ID] & _U32, body[_TUPLE], body[_OPS],
                      _i32(get(_INDEX_BASE, 0)))
    return Delete(row, body[_SPACE_ID] & _U32, get(_INDEX_ID, 0) & _U32, body[_KEY])


# ---------------------------------------------------------------------------
# Encoding requests (clients, tests, the replication applier).

def encode_request(request_type: int, body: dict | None = None, sync: int = 0,
                   schema_version: int = 0) -> bytes:
    """A request packet with a compact header `{0: type, 1: sync[, 5: schema]}`."""
    header = {IprotoKey.REQUEST_TYPE: request_type, IprotoKey.SYNC: sync}
    if schema_version:
        header[IprotoKey.SCHEMA_VERSION] = schema_version
    payload = pack(header) + (b"" if body is None else pack(body))
    return b"\xce" + len(payload).to_bytes(4, "big") + payload
