"""IPROTO packets on a byte stream: framing, strict packet decoding, reply encoding.

Everything here matches what Tarantool 2.6.0 puts on the wire, checked against the
live binary (probes in ../shared/fixtures/tarantool-2.6/wire/probes and the interop
tests):

* a reply header is always `83 00 ce<type> 01 cf<sync> 05 ce<schema_version>`;
* DATA is always `30 dd <u32 count>` followed by the values;
* an error reply carries ERROR_24 (the message) and the ERROR stack, each entry a
  map in the key order TYPE, LINE, FILE, MESSAGE, ERRNO, CODE[, FIELDS];
* a packet whose header cannot be decoded still gets an error reply, with the
  SYNC read before the defect (0 if none); only a broken length prefix, or one
  above the size limit, ends the connection (after an error reply with sync 0).

Errors raised by this layer carry the `file`/`line` Tarantool reports for them, so
their replies are byte-identical to 2.6.0's.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple, TypeVar

import msgpack

from spindle.core.iproto.constants import (
    IPROTO_BODY_LEN_MAX, IprotoType, MpType,
)
from spindle.core.iproto.errors import (BoxError, ClientError, ErrorCode, error_location,
                                        iproto_code)
from spindle.core.iproto.msgpack import (
    MP_TYPE_OF_BYTE, MsgpackError, MsgpackRaw, decode_uint as _decode_uint, ext_hook, mp_next,
    needs_exact, pack, unpack_exact,
)
from spindle.core.iproto.xrow import XRow, decode_header

# Largest packet (header + body) accepted; 2.6.0 refuses a longer one with
# "too big packet size in the header" and closes the connection.
PACKET_SIZE_MAX = IPROTO_BODY_LEN_MAX
READAHEAD_DEFAULT = 16320          # box.cfg.readahead default
_RECV_CHUNK_MAX = 4 << 20          # one recv() never asks for more than this

_pack_u32 = struct.Struct(">I").pack
_unpack_u32 = struct.Struct(">I").unpack_from
_U32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------
# Where 2.6.0 raises the errors this layer reproduces (file, line) — measured.

class Where:
    IPROTO_PACKET_LENGTH = ("./src/box/iproto.cc", 826)
    IPROTO_UNKNOWN_REQUEST = ("./src/box/iproto.cc", 1313)
    IPROTO_SCHEMA_VERSION = ("./src/box/iproto.cc", 1411)
    XROW_HEADER = ("./src/box/xrow.c", 142)
    XROW_BODY = ("./src/box/xrow.c", 209)
    XROW_BODY_END = ("./src/box/xrow.c", 217)
    XROW_SQL_NO_BODY = ("./src/box/xrow.c", 617)
    XROW_SQL_BODY = ("./src/box/xrow.c", 627)
    XROW_SQL_MISSING = ("./src/box/xrow.c", 661)
    XROW_DML_BODY = ("./src/box/xrow.c", 715)
    XROW_DML_MISSING = ("./src/box/xrow.c", 782)
    XROW_CALL_NO_BODY = ("./src/box/xrow.c", 1028)
    XROW_CALL_BODY = ("./src/box/xrow.c", 1040)
    XROW_EVAL_MISSING = ("./src/box/xrow.c", 1086)
    XROW_CALL_MISSING = ("./src/box/xrow.c", 1093)
    XROW_AUTH_NO_BODY = ("./src/box/xrow.c", 1109)
    XROW_AUTH_BODY = ("./src/box/xrow.c", 1121)
    XROW_AUTH_USER_MISSING = ("./src/box/xrow.c", 1159)
    XROW_AUTH_TUPLE_MISSING = ("./src/box/xrow.c", 1164)
    AUTH_REQUEST_BODY = ("./src/box/authentication.cc", 70)
    AUTH_SCRAMBLE = ("./src/box/authentication.cc", 83)
    AUTH_SCRAMBLE_SIZE = ("./src/box/authentication.cc", 88)
    AUTH_PASSWORD_MISMATCH = ("./src/box/authentication.cc", 96)
    USER_NOT_FOUND = ("./src/box/user.cc", 539)


_Error = TypeVar("_Error", bound=BaseException)


def with_location(err: _Error, where: tuple[str, int]) -> _Error:
    """Attach the (file, line) an error reply reports; returns `err`."""
    try:
        # any exception may carry them (BoxError declares them; others get them here)
        err.file, err.line = where  # type: ignore[attr-defined]
    except AttributeError:   # an error class with read-only location: keep its own
        pass
    return err


def client_error(where: tuple[str, int], code: int, *args) -> ClientError:
    return with_location(ClientError(code, *args), where)


class PacketError(Exception):
    """A packet that cannot be served: `error` goes back with `sync`."""

    def __init__(self, error: BaseException, sync: int = 0):
        super().__init__(str(error))
        self.error = error
        self.sync = sync


class FramingError(PacketError):
    """The byte stream itself is broken: reply (sync 0) and close the connection."""


# ---------------------------------------------------------------------------
# MsgPack checks with msgpuck's rules (what 2.6.0 accepts as "valid MsgPack").

def mp_check(buf, pos: int, end: int) -> int:
    """End of the MsgPack value at `pos` with msgpuck's mp_check rules: 0xc1 counts as
    a one-byte value, as 2.6.0 lets it through; MsgpackError if it overruns `end`."""
    return mp_next(buf, pos, end, allow_c1=True)


# ---------------------------------------------------------------------------
# Packets.

class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_BODY = _Marker("NO_BODY")
# The body is valid for msgpuck but the msgpack package cannot decode it (0xc1).
UNDECODABLE = _Marker("UNDECODABLE")


class Packet(NamedTuple):
    row: XRow          # header fields; row.body holds the raw body bytes (or None)
    body: Any          # the decoded body, NO_BODY or UNDECODABLE

    @property
    def route(self) -> int:
        """The type 2.6.0 dispatches on: the low byte of the header's type."""
        return self.row.type & 0xFF


def _bad_header(sync: int) -> PacketError:
    return PacketError(client_error(Where.XROW_HEADER, ErrorCode.ER_INVALID_MSGPACK,
                                    "packet header"), sync)


def _decode_body(data, pos: int, end: int, sync: int) -> tuple[Any, int]:
    view = memoryview(data)[pos:end]
    if needs_exact(data, pos):
        # ext -1, which the C unpacker would make a Timestamp or refuse
        try:
            return unpack_exact(data, pos, end, ext_hook)
        except MsgpackError:
            pass
    # extensions become what box keeps (uuid, Decimal, RawExt): nothing is left to
    # convert in a request's values, however deep they nest
    kwargs = dict(raw=False, strict_map_key=False, unicode_errors="surrogateescape",
                  ext_hook=ext_hook)
    try:
        try:
            return msgpack.unpackb(view, **kwargs), end
        except TypeError:
            # a map keyed by an array or a map: keys made hashable (tuples, KeyMaps)
            return unpack_exact(data, pos, end, ext_hook)
    except msgpack.ExtraData as extra:
        return extra.unpacked, end - len(extra.extra)
    except Exception:   # noqa: BLE001 - any decoder failure is judged by msgpuck's rules
        pass
    try:
        body_end = mp_check(data, pos, end)
    except MsgpackError:
        raise PacketError(client_error(Where.XROW_BODY, ErrorCode.ER_INVALID_MSGPACK,
                                       "packet body"), sync) from None
    return UNDECODABLE, body_end


def decode_packet(data: bytes) -> Packet:
    """Decode one packet (header + optional body, no length prefix) like 2.6.0's
    iproto thread does; raises PacketError with the reply's sync on a defect."""
    end = len(data)
    if end == 0:
        raise _bad_header(0)
    try:
        row, pos = decode_header(data, 0, end)
    except ClientError as exc:
        raise _bad_header(getattr(exc, "sync", 0)) from None
    body: Any = NO_BODY
    if pos < end:
        body, body_end = _decode_body(data, pos, end, row.sync)
        if body_end != end:
            raise PacketError(client_error(Where.XROW_BODY_END, ErrorCode.ER_INVALID_MSGPACK,
                                           "packet body"), row.sync)
        row.body = bytes(data[pos:end])
    return Packet(row, body)


def decode_length(buf, pos: int, limit: int = PACKET_SIZE_MAX) -> tuple[int, int] | None:
    """(packet length, bytes taken by the prefix), or None if more bytes are needed.

    Any uint width is accepted; a non-uint raises FramingError "packet length", a
    length above `limit` FramingError "too big packet size in the header: N".
    """
    if pos >= len(buf):
        return None
    first = buf[pos]
    if MP_TYPE_OF_BYTE[first] is not MpType.UINT:
        raise FramingError(client_error(Where.IPROTO_PACKET_LENGTH,
                                        ErrorCode.ER_INVALID_MSGPACK, "packet length"))
    size = 1 if first < 0x80 else {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}[first]
    if pos + size > len(buf):
        return None
    length, _ = _decode_uint(buf, pos)
    if length > limit:
        raise FramingError(client_error(
            Where.IPROTO_PACKET_LENGTH, ErrorCode.ER_INVALID_MSGPACK,
            f"too big packet size in the header: {length}"))
    return length, size


class FrameReader:
    """Cuts packets out of a CoSocket's byte stream with `readahead`-sized reads.

    Memory follows the bytes actually received, never a length prefix: a prefix
    announcing 2 GiB allocates nothing until the data arrives. The same reader
    (and its buffered bytes) is handed to a replication handler that takes over.
    """

    def __init__(self, sock, readahead: int = READAHEAD_DEFAULT,
                 max_packet: int = PACKET_SIZE_MAX):
        self.sock = sock
        self.readahead = max(int(readahead), 128)
        self.max_packet = max_packet
        self._buf = bytearray()
        self._pos = 0
        self.bytes_read = 0
        self._drained = False   # the last read got less than it asked: nothing was left

    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def next_buffered(self) -> bytes | None:
        """The next complete packet already in the buffer, or None."""
        buf, pos = self._buf, self._pos
        if len(buf) >= pos + 5 and buf[pos] == 0xCE:     # what every client sends
            length, size = _unpack_u32(buf, pos + 1)[0], 5
            if length > self.max_packet:
                decode_length(buf, pos, self.max_packet)   # raises the framing error
        else:
            decoded = decode_length(buf, pos, self.max_packet)
            if decoded is None:
                return None
            length, size = decoded
        start = self._pos + size
        if len(self._buf) - start < length:
            return None
        packet = bytes(self._buf[start:start + length])
        self.skip(start + length - self._pos)
        return packet

    def peek(self) -> tuple[bytearray, int]:
        """The buffer and where its unread bytes start, for a reader that cuts many
        packets at once; it then tells skip() how many bytes it took."""
        return self._buf, self._pos

    def skip(self, size: int) -> None:
        self._pos += size
        if self._pos > 65536 and self._pos * 2 > len(self._buf):
            del self._buf[:self._pos]
            self._pos = 0

    def _wanted(self) -> int:
        """How much one recv() should ask for: readahead, or the rest of a big packet."""
        want = self.readahead
        if self._pos >= len(self._buf):
            return want
        try:
            decoded = decode_length(self._buf, self._pos, self.max_packet)
        except FramingError:
            return want
        if decoded is not None:
            length, size = decoded
            want = max(want, length + size - self.buffered())
        return min(want, max(self.readahead, _RECV_CHUNK_MAX))

    def fill(self, timeout: float | None = None) -> bool:
        """Read once from the socket; False on EOF."""
        want = self._wanted()
        if self._drained:
            data = self.sock.recv(want, timeout, wait_first=True)
        else:
            data = self.sock.recv(want, timeout)
        if not data:
            return False
        self._drained = len(data) < want
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data
        self.bytes_read += len(data)
        return True

    def read_packet(self, timeout: float | None = None) -> bytes | None:
        """The next packet, reading as needed; None on a clean EOF between packets.
        An EOF inside a packet raises EOFError."""
        while True:
            packet = self.next_buffered()
            if packet is not None:
                return packet
            if not self.fill(timeout):
                if self.buffered():
                    raise EOFError("connection closed inside a packet")
                return None

    def read_row(self, timeout: float | None = None) -> XRow | None:
        """The next packet decoded as a row (for replication streams)."""
        packet = self.read_packet(timeout)
        if packet is None:
            return None
        try:
            return decode_packet(packet).row
        except PacketError as exc:
            raise exc.error from None


# ---------------------------------------------------------------------------
# Replies.

# length prefix (ce + u32) and the reply header `83 00 ce<type> 01 cf<sync> 05 ce<schema>`
_REPLY_HEAD = struct.Struct(">BIBBBIBBQBBI")
_REPLY_HEAD_SIZE = _REPLY_HEAD.size - 5


def encode_reply(request_type: int, sync: int, schema_version: int, body: bytes) -> bytes:
    return _REPLY_HEAD.pack(0xCE, _REPLY_HEAD_SIZE + len(body), 0x83, 0x00, 0xCE,
                            request_type & _U32, 0x01, 0xCF, sync, 0x05, 0xCE,
                            schema_version & _U32) + body


def encode_ok(sync: int, schema_version: int) -> bytes:
    """OK with an empty body: the 29-byte reply to PING and AUTH."""
    return encode_reply(IprotoType.OK, sync, schema_version, b"\x80")


def _value(value: Any) -> bytes:
    return bytes(value) if isinstance(value, MsgpackRaw) else pack(value)


def encode_data_body(values) -> bytes:
    """`{DATA: [...]}` with the array header always `dd` + u32, as 2.6.0 writes it."""
    return (b"\x81\x30\xdd" + _pack_u32(len(values))
            + b"".join(_value(value) for value in values))


def encode_data(sync: int, schema_version: int, values, request_type: int = IprotoType.OK
                ) -> bytes:
    return encode_reply(request_type, sync, schema_version, encode_data_body(values))


def encode_chunk(sync: int, schema_version: int, value: Any) -> bytes:
    """An out-of-band box.session.push() message."""
    return encode_data(sync, schema_version, [value], IprotoType.CHUNK)


def encode_map_body(body: dict) -> bytes:
    """A body map in insertion order; MsgpackRaw values are inserted verbatim."""
    parts = [_value(key) + _value(value) for key, value in body.items()]
    return _container_header(len(parts), 0x80, b"\xde", b"\xdf") + b"".join(parts)


def _container_header(n: int, fix: int, head16: bytes, head32: bytes) -> bytes:
    if n < 16:
        return bytes((fix | n,))
    if n <= 0xFFFF:
        return head16 + n.to_bytes(2, "big")
    return head32 + n.to_bytes(4, "big")


def encode_result(sync: int, schema_version: int, result: Any) -> bytes:
    """An executor's result as a reply: list -> DATA, dict -> that body map,
    bytes -> a ready body, None -> empty body."""
    if type(result) is bytes:
        return encode_reply(IprotoType.OK, sync, schema_version, result)
    if result is None:
        return encode_ok(sync, schema_version)
    if isinstance(result, (list, tuple)):
        return encode_data(sync, schema_version, result)
    if isinstance(result, dict):
        return encode_reply(IprotoType.OK, sync, schema_version, encode_map_body(result))
    if isinstance(result, (bytes, bytearray)):
        return encode_reply(IprotoType.OK, sync, schema_version, bytes(result))
    raise TypeError(f"executor returned {type(result).__name__}, not list/dict/bytes/None")


# ---- errors

_STACK_DEPTH_MAX = 64


def _location(err: BaseException) -> tuple[str, int]:
    where = error_location(err) if isinstance(err, BoxError) else None
    if where is not None:
        return where
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        return tb.tb_frame.f_code.co_filename, tb.tb_lineno
    return "", 0


def error_code(err: BaseException) -> int:
    if isinstance(err, BoxError):
        return iproto_code(err) & _U32
    return ErrorCode.ER_PROC_LUA


def _error_entry(err: BaseException) -> bytes:
    """One ERROR stack entry; keys in 2.6.0's order TYPE, LINE, FILE, MESSAGE,
    ERRNO, CODE[, FIELDS]."""
    file, line = _location(err)
    if isinstance(err, BoxError):
        err_type, errno, fields = err.base_type or err.type, getattr(err, "errno", 0), err.fields
    else:   # not a box error: a bug below the executor, shown as Lua shows its errors
        err_type, errno, fields = "LuajitError", 0, None
    entry = {0x00: err_type, 0x02: line & _U32, 0x01: file, 0x03: error_message(err),
             0x04: int(errno or 0) & _U32, 0x05: error_code(err)}
    if fields:
        entry[0x06] = fields
    return pack(entry)


def error_stack(err: BaseException) -> list[BaseException]:
    """`err` and the errors chained behind it through `.prev` (newest first)."""
    stack: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen and len(stack) < _STACK_DEPTH_MAX:
        stack.append(cur)
        seen.add(id(cur))
        cur = getattr(cur, "prev", None)   # BoxError's cause; other errors have none
    return stack


# 2.6.0 formats every error's message into a 512-byte buffer (DIAG_ERRMSG_MAX):
# the bytes past 511 never reach a client, even in the middle of a character
_ERRMSG_MAX = 511


def error_message(err: BaseException) -> str:
    text = err.message if isinstance(err, BoxError) else f"{type(err).__name__}: {err}"
    if len(text) > _ERRMSG_MAX // 4:
        raw = text.encode("utf-8", "surrogateescape")
        if len(raw) > _ERRMSG_MAX:
            text = raw[:_ERRMSG_MAX].decode("utf-8", "surrogateescape")
    return text


def encode_error_body(err: BaseException) -> bytes:
    """`{ERROR_24: message, ERROR: {STACK: [...]}}`, both always present (2.6.0)."""
    stack = error_stack(err)
    return (b"\x82\x31" + pack(error_message(err)) + b"\x52\x81\x00"
            + _container_header(len(stack), 0x90, b"\xdc", b"\xdd")
            + b"".join(_error_entry(e) for e in stack))


def encode_error(err: BaseException, sync: int, schema_version: int) -> bytes:
    """An error reply: type 0x8000 | code, the request's sync, the current schema."""
    return encode_reply(IprotoType.TYPE_ERROR | error_code(err), sync, schema_version,
                        encode_error_body(err))
