"""The row ("xrow") shared by the WAL, snapshots and the replication stream.

A row is a header map plus an optional body map. The body is kept as the raw
MsgPack bytes it arrived in, so a row read from an .xlog can be relayed or
re-written byte for byte; `XRow.body_map()` decodes it when someone needs values.

Two header layouts exist in 2.6.0 (iproto.md §2):
* the compact *xrow header* (this module's `encode_header`): only non-zero
  fields, shortest integers, in the order REQUEST_TYPE, SYNC, REPLICA_ID,
  GROUP_ID, LSN, TIMESTAMP, TSN, FLAGS. Used for every row in .xlog/.snap
  (with SYNC forced to 0) and for everything relay/applier send;
* the fixed-width *reply header* of iproto replies (`encode_reply_header`).

Header decoding is as strict as 2.6.0's xrow_header_decode(): every key must be
an unsigned int below 0x53 whose value has exactly the MsgPack type of that key;
anything else is ER_INVALID_MSGPACK "packet header".
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import msgpack

from spindle.core.iproto.constants import (
    DML_BODY_KEYS, DML_MANDATORY_KEYS, IPROTO_KEY_MAX, IPROTO_KEY_NAMES, IPROTO_KEY_TYPE,
    GroupId, IprotoFlag, IprotoKey, IprotoType, MpType,
)
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import (
    MP_TYPE_OF_BYTE, UINT_WIDE_MARKERS, MsgpackError, decode_uint, encode_value,
    invalid_msgpack, mp_encode_uint, mp_next, needs_exact, raw_ext, unpack,
)

_pack_u32 = struct.Struct(">I").pack
_pack_u64 = struct.Struct(">Q").pack
_pack_double = struct.Struct(">d").pack
_unpack_u16 = struct.Struct(">H").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from
_unpack_u64 = struct.Struct(">Q").unpack_from
_unpack_double = struct.Struct(">d").unpack_from
# after a 0xCE marker: the uint32, then the next key and marker and a double (the
# layout of a relayed header's LSN and TIMESTAMP)
_unpack_lsn32_timestamp = struct.Struct(">IBBd").unpack_from


# ---------------------------------------------------------------------------
# The row.

@dataclass(slots=True, eq=False)
class XRow:
    """One row: header fields as struct xrow_header has them, body as raw MsgPack.

    `tsn` follows Tarantool: 0 means "not set" (a single-statement transaction,
    encoded without TSN/FLAGS); after decoding it is the absolute transaction id
    (lsn - TSN field, or lsn when the field is absent).
    """

    type: int
    body: bytes | None = None
    replica_id: int = 0
    lsn: int = 0
    timestamp: float = 0.0
    group_id: int = 0
    tsn: int = 0
    is_commit: bool = True
    sync: int = 0
    schema_version: int = 0
    # The row as a relay sent it (header + body) when that is byte for byte what
    # encode_header + body give for it, TIMESTAMP aside: a replica's WAL writes it
    # with its own TIMESTAMP instead of encoding the row again (xlog encode_row).
    # Set by the stream decoder on a row it made; not an __init__ field, so
    # dataclasses.replace() (a skipped conflict's NOP) never carries it over.
    wire: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def is_local(self) -> bool:
        return self.group_id == GroupId.LOCAL

    def _identity(self) -> tuple:
        # tsn 0 ("not set") encodes exactly like tsn == lsn with commit, which
        # is what decoding produces; equality follows the encoding.
        tsn, commit = (self.tsn, self.is_commit) if self.tsn else (self.lsn, True)
        return (self.type, self.body, self.replica_id, self.lsn, self.timestamp,
                self.group_id, tsn, commit, self.sync, self.schema_version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, XRow):
            return NotImplemented
        return self._identity() == other._identity()

    __hash__ = None

    def body_map(self) -> Any:
        """The decoded body (usually a dict keyed by IprotoKey values), or None."""
        return None if self.body is None else unpack(self.body)

    def encode_header(self, sync: int | None = None) -> bytes:
        return encode_header(self, self.sync if sync is None else sync)

    def encode(self, sync: int | None = None) -> bytes:
        """Header + body with no length prefix (the form rows take inside xlog blocks)."""
        header = encode_header(self, self.sync if sync is None else sync)
        return header if self.body is None else header + self.body

    def encode_frame(self, sync: int | None = None) -> bytes:
        """An IPROTO packet: 5-byte length prefix, header, body."""
        return frame(self.encode(sync))

    def __repr__(self) -> str:
        parts = [f"type={self.type}"]
        for name in ("sync", "replica_id", "group_id", "lsn", "timestamp"):
            value = getattr(self, name)
            if value:
                parts.append(f"{name}={value!r}")
        if self.tsn and (self.tsn != self.lsn or not self.is_commit):
            parts.append(f"tsn={self.tsn} is_commit={self.is_commit}")
        if self.body is not None:
            parts.append(f"body={self.body.hex()}" if len(self.body) <= 64
                         else f"body=<{len(self.body)} bytes>")
        return "XRow(" + ", ".join(parts) + ")"


def encode_header(row: XRow, sync: int = 0) -> bytes:
    """The compact xrow header (xrow_header_encode of 2.6.0)."""
    out = [b"\x00", mp_encode_uint(row.type)]
    if sync:
        out += (b"\x01", mp_encode_uint(sync))
    if row.replica_id:
        out += (b"\x02", mp_encode_uint(row.replica_id))
    if row.group_id:
        out += (b"\x07", mp_encode_uint(row.group_id))
    if row.lsn:
        out += (b"\x03", mp_encode_uint(row.lsn))
    if row.timestamp:
        out += (b"\x04\xcb", _pack_double(row.timestamp))
    if row.tsn != 0:
        # Single-statement transactions carry neither TSN nor FLAGS; members of a
        # multi-row one carry TSN = lsn - tsn, and the last one also FLAGS=COMMIT.
        if row.tsn != row.lsn or not row.is_commit:
            # 2.6.0 stores the difference as uint64: a local row written before the
            # first global row of its transaction has tsn > lsn and wraps around.
            out += (b"\x08", mp_encode_uint((row.lsn - row.tsn) & 0xFFFFFFFFFFFFFFFF))
        if row.is_commit and row.tsn != row.lsn:
            out += (b"\x09", mp_encode_uint(IprotoFlag.COMMIT))
    return bytes((0x80 | (len(out) // 2),)) + b"".join(out)


def encode_reply_header(request_type: int, sync: int, schema_version: int) -> bytes:
    """The fixed-width header iproto replies carry: `83 00 ce.. 01 cf.. 05 ce..`."""
    return (b"\x83\x00\xce" + _pack_u32(request_type) + b"\x01\xcf" + _pack_u64(sync)
            + b"\x05\xce" + _pack_u32(schema_version))


def frame(packet: bytes) -> bytes:
    """Length-prefix a header+body the way Tarantool always does (`ce` + u32)."""
    return b"\xce" + _pack_u32(len(packet)) + packet


def decode_frame_length(buf: bytes, pos: int = 0) -> tuple[int, int] | None:
    """(packet length, size of the length field) or None if more bytes are needed.

    Any uint width is accepted, as 2.6.0 does; a non-uint is "packet length".
    """
    if pos >= len(buf):
        return None
    first = buf[pos]
    if MP_TYPE_OF_BYTE[first] is not MpType.UINT:
        raise invalid_msgpack("packet length")
    size = 1 if first < 0x80 else {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}[first]
    if pos + size > len(buf):
        return None
    length, _ = decode_uint(buf, pos)
    return length, size


_HEADER_UINT_FIELDS = {
    IprotoKey.REQUEST_TYPE: "type", IprotoKey.SYNC: "sync",
    IprotoKey.REPLICA_ID: "replica_id", IprotoKey.GROUP_ID: "group_id",
    IprotoKey.LSN: "lsn", IprotoKey.SCHEMA_VERSION: "schema_version",
}


def _decode_header(buf: bytes, pos: int, end: int) -> tuple[XRow, int]:
    """Strict header decode; raises ER_INVALID_MSGPACK "packet header"."""
    try:
        first = buf[pos]
        if 0x80 <= first <= 0x8F:
            size, pos = first & 0x0F, pos + 1
        elif first == 0xDE:
            size, pos = _unpack_u16(buf, pos + 1)[0], pos + 3
        elif first == 0xDF:
            size, pos = _unpack_u32(buf, pos + 1)[0], pos + 5
        else:
            raise MsgpackError("header is not a map")
        values = {"type": 0, "sync": 0, "replica_id": 0, "group_id": 0, "lsn": 0,
                  "schema_version": 0}
        timestamp = 0.0
        tsn_field = None
        flags = 0
        for _ in range(size):
            key, pos = decode_uint(buf, pos)
            if key >= IPROTO_KEY_MAX or MP_TYPE_OF_BYTE[buf[pos]] is not IPROTO_KEY_TYPE[key]:
                raise MsgpackError(f"bad header key {key}")
            if key == IprotoKey.TIMESTAMP:
                timestamp = _unpack_double(buf, pos + 1)[0]
                pos += 9
            elif key in _HEADER_UINT_FIELDS:
                values[_HEADER_UINT_FIELDS[key]], pos = decode_uint(buf, pos)
            elif key == IprotoKey.TSN:
                tsn_field, pos = decode_uint(buf, pos)
            elif key == IprotoKey.FLAGS:
                flags, pos = decode_uint(buf, pos)
            else:
                pos = mp_next(buf, pos, end)
            if pos > end:
                raise MsgpackError("header overruns the packet")
    except (IndexError, struct.error, MsgpackError) as exc:
        raise invalid_msgpack("packet header") from exc
    lsn = values["lsn"]
    row = XRow(timestamp=timestamp, **values)
    if tsn_field is None:
        row.tsn, row.is_commit = lsn, True
    else:
        if tsn_field >= 1 << 63:     # the wrapped difference of a local row (see encode)
            tsn_field -= 1 << 64
        row.tsn, row.is_commit = lsn - tsn_field, bool(flags & IprotoFlag.COMMIT)
    return row, pos


def _body_end(buf: bytes, pos: int, end: int) -> int:
    unpacker = msgpack.Unpacker(max_buffer_size=max(end - pos, 1))
    unpacker.feed(memoryview(buf)[pos:end])
    try:
        unpacker.skip()
    except Exception as exc:
        raise invalid_msgpack("packet body") from exc
    return pos + unpacker.tell()


def decode_row(buf: bytes, pos: int = 0, end: int | None = None, *,
               exact: bool = False) -> tuple[XRow, int]:
    """Decode one row at `pos`; returns it and the position after it.

    NOP rows never have a body; other rows take the next value as their body if
    any bytes remain. With `exact` (a network packet) the row must end at `end`.
    """
    if end is None:
        end = len(buf)
    if pos >= end:
        raise invalid_msgpack("packet header")
    row, pos = _decode_header(buf, pos, end)
    if pos < end and row.type != IprotoType.NOP:
        body_end = _body_end(buf, pos, end)
        row.body = bytes(buf[pos:body_end])
        pos = body_end
    if exact and pos != end:
        raise invalid_msgpack("packet body")
    return row, pos


class _NotUsual(Exception):
    """decode_dml_packet met something it leaves to the strict decoder."""


# the row types that change data, as plain ints (a set lookup, no enum compare)
DML_WRITE_TYPES = frozenset(int(t) for t in (IprotoType.INSERT, IprotoType.REPLACE,
                                              IprotoType.UPDATE, IprotoType.DELETE,
                                              IprotoType.UPSERT))


def decode_dml_packet(packet: bytes, ext_hook: Callable | None = None
                      ) -> tuple[XRow, DmlRequest | PutRequest] | None:
    """A replication stream's DML row the quick way: (row, its request as
    dml_request_from_map makes it of the body), the row equal to what
    decode_row(packet, exact=True) returns. None for anything unusual — another
    row type, a header decode_row would refuse or that has keys or value
    encodings beyond fixint keys, uint values and a double TIMESTAMP, a body
    the unpacker or the request refuses — which the caller then hands to
    decode_row, so errors and odd rows keep their one strict path.

    The body every INSERT/REPLACE of a user space has, {SPACE_ID: uint16,
    TUPLE: array} in this order, is read by its bytes: only the tuple is
    unpacked, into a PutRequest."""
    try:
        header = _relay_header(packet)
        row, pos = header if header is not None else _usual_header(packet)
    except (_NotUsual, IndexError, struct.error, MsgpackError):
        return None
    rtype = row.type
    if rtype not in DML_WRITE_TYPES or pos >= len(packet):
        return None
    body = packet[pos:]
    if b"\xff" in body and needs_exact(body):     # (the memchr inline: a row per call)
        return None
    try:
        if ((rtype == _INSERT or rtype == _REPLACE) and body[:3] == _PUT_BODY_HEAD
                and body[5:6] == _TUPLE_KEY):
            tup = msgpack.unpackb(body[6:], raw=False, strict_map_key=False,
                                  unicode_errors="surrogateescape",
                                  ext_hook=ext_hook or raw_ext)
            if type(tup) is not list:
                return None
            request = PutRequest(rtype, (body[3] << 8) | body[4], tup)
        else:
            request = dml_request_from_map(
                msgpack.unpackb(body, raw=False, strict_map_key=False,
                                unicode_errors="surrogateescape",
                                ext_hook=ext_hook or raw_ext), rtype)
    except Exception:   # noqa: BLE001 - whatever it is, the strict path says it
        return None
    row.body = body
    return row, request


# {SPACE_ID: uint16 ...} and TUPLE: the usual INSERT/REPLACE body (encode_dml_body)
_PUT_BODY_HEAD = bytes((0x82, IprotoKey.SPACE_ID, 0xCD))
_TUPLE_KEY = bytes((IprotoKey.TUPLE,))


# header keys the quick decoder takes (uint values): REQUEST_TYPE, SYNC, REPLICA_ID,
# LSN, SCHEMA_VERSION, GROUP_ID, TSN, FLAGS; TIMESTAMP (4) has its own branch
_USUAL_UINT_KEY = (True, True, True, True, False, True, False, True, True, True)
_COMMIT_FLAG = int(IprotoFlag.COMMIT)


def _relay_header(buf: bytes) -> tuple[XRow, int] | None:
    """_usual_header's answer for the layout a relay writes (2.6.0's and Spindle's):
    {REQUEST_TYPE, REPLICA_ID, LSN, TIMESTAMP[, TSN[, FLAGS]]} in this order, type,
    replica id and flags fixints; None for any other layout."""
    extra = buf[0] - 0x84            # 0: single-row txn, 1: TSN, 2: TSN and FLAGS
    rtype, replica_id = buf[2], buf[4]
    if not (0 <= extra <= 2 and buf[1] == 0 and buf[3] == 2 and buf[5] == 3
            and rtype < 0x80 and replica_id < 0x80):
        return None
    if buf[6] == 0xCE:
        # the LSN of an instance past its first 65536 rows: uint32, then TIMESTAMP
        lsn, key, marker, timestamp = _unpack_lsn32_timestamp(buf, 7)
        canonical = replica_id and lsn >= 0x10000
        pos = 21
    else:
        lsn, pos = decode_uint(buf, 6)
        # encode_header writes a non-zero replica id and LSN, in the fewest bytes
        canonical = replica_id and lsn and lsn >= _SHORTEST_FROM[pos - 6]
        key, marker = buf[pos], buf[pos + 1]
        timestamp = _unpack_double(buf, pos + 2)[0]
        pos += 10
    if key != 4 or marker != 0xCB:
        return None
    if extra == 0:
        row = XRow(rtype, None, replica_id, lsn, timestamp, 0, lsn, True)
    else:
        if buf[pos] != 8:
            return None
        tsn_field = buf[pos + 1]
        if tsn_field < 0x80:        # a fixint: the row is among its txn's first 128
            pos += 2
        else:
            tsn_start = pos + 1
            tsn_field, pos = decode_uint(buf, tsn_start)
            canonical = canonical and tsn_field >= _SHORTEST_FROM0[pos - tsn_start]
        # not the LSN itself either: that is TSN 0 ("not set"), which encode_header
        # writes as the short single-row header
        canonical = canonical and tsn_field != lsn
        if extra == 1:
            is_commit = False
        elif buf[pos] == 9 and buf[pos + 1] < 0x80:
            flags = buf[pos + 1]
            is_commit = bool(flags & _COMMIT_FLAG)
            # FLAGS as encode_header writes them: COMMIT alone, on a row whose
            # TSN field is not 0 (else the short single-row header is written)
            canonical = canonical and flags == _COMMIT_FLAG and tsn_field
            pos += 2
        else:
            return None
        if tsn_field >= 1 << 63:     # the wrapped difference of a local row (see encode)
            tsn_field -= 1 << 64
        row = XRow(rtype, None, replica_id, lsn, timestamp, 0, lsn - tsn_field, is_commit)
    if canonical:
        row.wire = buf
    return row, pos


# by the size of a MsgPack uint: the smallest value written in that size (the
# shortest encoding); _SHORTEST_FROM0 lets a 0 fixint pass
_SHORTEST_FROM = (None, 1, 0x80, 0x100, None, 0x10000, None, None, None, 0x100000000)
_SHORTEST_FROM0 = (None, 0) + _SHORTEST_FROM[2:]


# ---------------------------------------------------------------------------
# A relay's INSERT/REPLACE frame whole, in C: a regular expression checks its
# layout, a struct reads its numbers.

def _relay_put_frames() -> tuple[Any, dict]:
    """The pattern of decode_relay_put_frame and, by the number of the group that
    matched, (unpack_from, the tuple's offset in the packet, kind, least LSN)."""
    layouts: dict[int, tuple] = {}
    alternatives = []
    for width, lsn_marker, lsn_format in ((4, rb"\xce", "I"), (2, rb"\xcd", "H")):
        # {REQUEST_TYPE: INSERT|REPLACE, REPLICA_ID: 1..31 (below VCLOCK_MAX),
        #  LSN: uint of `width` bytes, TIMESTAMP: double, ...}
        head = (rb"\x00[\x02\x03]\x02[\x01-\x1f]\x03" + lsn_marker + b"." * width
                + rb"\x04\xcb" + b"." * 8)
        head_format = f"xxBxBxx{lsn_format}xxd"
        head_size = 1 + 2 + 2 + 2 + width + 10
        # kind 0: a single-row transaction; 1: a row inside a transaction (TSN, a
        # fixint); 2: its last row (TSN, not 0, and FLAGS: COMMIT)
        for kind, map_head, tail, tail_format, tail_size in (
                (0, b"\x84", b"", "", 0),
                (1, b"\x85", rb"\x08[\x00-\x7f]", "xB", 2),
                (2, b"\x86", rb"\x08[\x01-\x7f]\x09\x01", "xBxx", 4)):
            # the body {SPACE_ID: uint16, TUPLE: ...} up to the tuple
            alternatives.append(map_head + head + tail + rb"\x82\x10\xcd..\x21()")
            body_at = head_size + tail_size
            layouts[len(alternatives)] = (
                struct.Struct(">xI" + head_format + tail_format + "xxxHx").unpack_from,
                body_at + 6, kind, _SHORTEST_FROM[1 + width])
    pattern = re.compile(rb"\xce....(?:" + b"|".join(alternatives) + rb")", re.DOTALL)
    return pattern.match, layouts


_match_relay_put, _RELAY_PUT_LAYOUTS = _relay_put_frames()


def decode_relay_put_frame(buf: bytes | bytearray, pos: int, ext_hook: Callable | None = None
                           ) -> tuple[XRow, PutRequest, int] | None:
    """decode_dml_packet's answer for the frame at `pos` (length prefix included)
    when it is an INSERT/REPLACE as a relay writes them — the header _relay_header
    calls canonical, the body {SPACE_ID: uint16, TUPLE: array} — read without a
    bytecode per header field, and the position after the frame. None for
    anything else, an incomplete frame too: decode_dml_packet decides those."""
    found = _match_relay_put(buf, pos)
    if found is None:
        return None
    unpack, tuple_at, kind, least_lsn = _RELAY_PUT_LAYOUTS[found.lastindex]
    if kind:
        size, rtype, replica_id, lsn, timestamp, tsn_field, space_id = unpack(buf, pos)
        tsn, is_commit = lsn - tsn_field, kind == 2
    else:
        size, rtype, replica_id, lsn, timestamp, space_id = unpack(buf, pos)
        tsn, is_commit = lsn, True
    stop = pos + 5 + size
    # an LSN in more bytes than it needs is not canonical (see _relay_header)
    if lsn < least_lsn or stop > len(buf):
        return None
    packet = bytes(buf[pos + 5:stop])
    if packet.find(b"\xff", tuple_at) >= 0 and needs_exact(packet, tuple_at):
        return None
    try:
        tup = msgpack.unpackb(packet[tuple_at:], raw=False, strict_map_key=False,
                              unicode_errors="surrogateescape",
                              ext_hook=ext_hook or raw_ext)
    except Exception:   # noqa: BLE001 - whatever it is, the strict path says it
        return None
    if type(tup) is not list:
        return None
    row = XRow(rtype, packet[tuple_at - 6:], replica_id, lsn, timestamp, 0, tsn, is_commit)
    row.wire = packet
    return row, PutRequest(rtype, space_id, tup), stop


def _usual_header(buf: bytes) -> tuple[XRow, int]:
    """The header as _decode_header reads it, for fixmap headers whose keys are
    fixints of the uint fields and TIMESTAMP; _NotUsual for anything else."""
    first = buf[0]
    if first & 0xF0 != 0x80:
        raise _NotUsual()
    # by key: type, sync, replica_id, lsn, timestamp, schema_version, -,
    # group_id, the TSN field (None: absent), flags
    fields = [0, 0, 0, 0, 0.0, 0, 0, 0, None, 0]
    pos = 1
    for _ in range(first & 0x0F):
        key = buf[pos]
        marker = buf[pos + 1]
        if marker < 0x80:
            if key > 9 or not _USUAL_UINT_KEY[key]:
                raise _NotUsual()
            fields[key] = marker
            pos += 2
        elif key == 4:
            if marker != 0xCB:              # TIMESTAMP is a double, nothing else
                raise _NotUsual()
            fields[4] = _unpack_double(buf, pos + 2)[0]
            pos += 10
        elif marker in UINT_WIDE_MARKERS:
            if key > 9 or not _USUAL_UINT_KEY[key]:
                raise _NotUsual()
            fields[key], pos = decode_uint(buf, pos + 1)
        else:
            raise _NotUsual()
    if pos > len(buf):
        raise _NotUsual()
    lsn = fields[3]
    tsn_field = fields[8]
    if tsn_field is None:
        tsn, is_commit = lsn, True
    else:
        if tsn_field >= 1 << 63:     # the wrapped difference of a local row (see encode)
            tsn_field -= 1 << 64
        tsn, is_commit = lsn - tsn_field, bool(fields[9] & _COMMIT_FLAG)
    return XRow(fields[0], None, fields[2], lsn, fields[4], fields[7], tsn, is_commit,
                fields[1], fields[5]), pos


def decode_rows(payload: bytes) -> list[XRow]:
    """All rows of an xlog block payload (back-to-back, no length prefixes).

    A defect raises ER_INVALID_MSGPACK with `.offset` set to the row's position
    in the payload.
    """
    rows: list[XRow] = []
    end = len(payload)
    # One C unpacker walks the bodies; our own parser reads the headers and the
    # unpacker is advanced past them with read_bytes().
    unpacker = msgpack.Unpacker(max_buffer_size=max(end, 1))
    unpacker.feed(payload)
    pos = 0
    while pos < end:
        try:
            row, body_pos = _decode_header(payload, pos, end)
            unpacker.read_bytes(body_pos - pos)
            if body_pos < end and row.type != IprotoType.NOP:
                try:
                    unpacker.skip()
                except Exception as exc:
                    raise invalid_msgpack("packet body") from exc
                next_pos = unpacker.tell()
                row.body = payload[body_pos:next_pos]
            else:
                next_pos = body_pos
        except ClientError as err:
            err.offset = pos
            raise
        rows.append(row)
        pos = next_pos
    return rows


# ---------------------------------------------------------------------------
# Bodies.

@dataclass(slots=True)
class DmlRequest:
    """A decoded DML body. For UPDATE the ops travel under the TUPLE key (legacy);
    here they are always in `ops` and `tuple` is None."""

    type: int
    space_id: int = 0
    index_id: int = 0
    index_base: int = 0
    key: list | None = None
    tuple: list | None = None
    ops: list | None = None
    tuple_meta: dict | None = None
    limit: int | None = None
    offset: int = 0
    iterator: int = 0
    extra: dict = field(default_factory=dict, repr=False)

    def encode(self, *, space_id_u32: bool = False) -> bytes:
        return encode_dml_body(self.type, self.space_id, index_id=self.index_id,
                               index_base=self.index_base, key=self.key, tuple=self.tuple,
                               ops=self.ops, tuple_meta=self.tuple_meta,
                               space_id_u32=space_id_u32)


class PutRequest:
    """An INSERT or REPLACE of a whole tuple, holding what its DmlRequest would hold:
    the request of every Lua insert (Space.insert/replace) and of the usual body of
    a logged or replicated INSERT/REPLACE row, {SPACE_ID, TUPLE}
    (dml_request_from_map). It is made per statement at a third of a DmlRequest's
    cost: the fields such a request never sets are class constants, and there is
    no `extra` dict."""

    __slots__ = ("type", "space_id", "tuple")
    index_id = 0
    index_base = 0
    key = None
    ops = None
    tuple_meta = None
    limit = None
    offset = 0
    iterator = 0

    def __init__(self, type: int, space_id: int, tuple: Any):
        self.type = type
        self.space_id = space_id
        self.tuple = tuple

    encode = DmlRequest.encode

    def __repr__(self) -> str:
        return f"PutRequest(type={self.type}, space_id={self.space_id}, tuple={self.tuple!r})"


def _uint_key(key: int, value: int, u32: bool = False) -> bytes:
    if u32:
        return bytes((key, 0xCE)) + _pack_u32(value)
    return bytes((key,)) + mp_encode_uint(value)


def encode_dml_body(request_type: int, space_id: int, *, index_id: int = 0,
                    index_base: int = 0, key: Any = None, tuple: Any = None,
                    ops: Any = None, tuple_meta: Any = None,
                    space_id_u32: bool = False) -> bytes:
    """A DML body laid out as box writes it to the WAL (xrow_encode_dml).

    Keys in the order SPACE_ID, INDEX_ID, INDEX_BASE, KEY, OPS, TUPLE_META, TUPLE,
    zero/None values omitted. UPDATE ops go under TUPLE (where 2.6.0 puts them);
    UPSERT ops under OPS. Values may be `MsgpackRaw`. `space_id_u32` forces the
    5-byte SPACE_ID that snapshot and JOIN rows use.
    """
    if request_type == IprotoType.UPDATE:
        if tuple is not None:
            raise ValueError("UPDATE carries its operations in `ops`")
        tuple, ops = ops, None
    parts = []
    if space_id:
        parts.append(_uint_key(IprotoKey.SPACE_ID, space_id, space_id_u32))
    if index_id:
        parts.append(_uint_key(IprotoKey.INDEX_ID, index_id))
    if index_base:
        parts.append(_uint_key(IprotoKey.INDEX_BASE, index_base))
    for body_key, value in ((IprotoKey.KEY, key), (IprotoKey.OPS, ops),
                            (IprotoKey.TUPLE_META, tuple_meta), (IprotoKey.TUPLE, tuple)):
        if value is not None:
            parts.append(bytes((body_key,)) + encode_value(value))
    return bytes((0x80 | len(parts),)) + b"".join(parts)


def encode_snapshot_body(space_id: int, tuple: Any) -> bytes:
    """`{SPACE_ID: ce <u32>, TUPLE: ...}`: the body of snapshot and JOIN rows."""
    return b"\x82\x10\xce" + _pack_u32(space_id) + b"\x21" + encode_value(tuple)


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _has_type(value: Any, mp_type: MpType) -> bool:
    if mp_type is MpType.UINT:
        return _is_uint(value)
    if mp_type is MpType.ARRAY:
        return isinstance(value, (list, tuple))
    if mp_type is MpType.MAP:
        return isinstance(value, dict)
    return True


# body key -> DmlRequest attribute
_DML_FIELDS = {IprotoKey.SPACE_ID: "space_id", IprotoKey.INDEX_ID: "index_id",
               IprotoKey.INDEX_BASE: "index_base", IprotoKey.LIMIT: "limit",
               IprotoKey.OFFSET: "offset", IprotoKey.ITERATOR: "iterator",
               IprotoKey.KEY: "key", IprotoKey.TUPLE: "tuple", IprotoKey.OPS: "ops",
               IprotoKey.TUPLE_META: "tuple_meta"}


# DML body key -> (DmlRequest attribute, MsgPack type its value must have)
_DML_KEY_KIND = {int(key): (name, IPROTO_KEY_TYPE[key]) for key, name in _DML_FIELDS.items()
                 if key in DML_BODY_KEYS}
_DML_MANDATORY_SORTED = {request_type: tuple(sorted(keys))
                         for request_type, keys in DML_MANDATORY_KEYS.items()}


def decode_dml_body(body: bytes | None, request_type: int,
                    ext_hook: Callable | None = None) -> DmlRequest | PutRequest:
    """Decode and validate a DML body like xrow_decode_dml() (keys outside the
    DML set are kept in `extra`; mandatory keys per type are enforced)."""
    if body is None:
        return dml_request_from_map(NO_BODY, request_type)
    return dml_request_from_map(unpack(body, "packet body", ext_hook), request_type)


NO_BODY = object()      # dml_request_from_map: the row had no body at all
_INSERT, _REPLACE = int(IprotoType.INSERT), int(IprotoType.REPLACE)
_SPACE_ID, _TUPLE = int(IprotoKey.SPACE_ID), int(IprotoKey.TUPLE)


def dml_request_from_map(decoded: Any, request_type: int) -> DmlRequest | PutRequest:
    """The validation half of decode_dml_body, for a body unpacked already (or
    NO_BODY). The body every INSERT/REPLACE row of a WAL or a replication stream
    has, {SPACE_ID: uint, TUPLE: array} with int keys, is taken at once, as a
    PutRequest."""
    if type(decoded) is dict and len(decoded) == 2 and (
            request_type == _INSERT or request_type == _REPLACE):
        first, second = decoded
        if type(first) is int and type(second) is int:
            space_id = decoded.get(_SPACE_ID)
            tup = decoded.get(_TUPLE)
            if type(space_id) is int and space_id >= 0 and type(tup) is list:
                return PutRequest(request_type, space_id, tup)
    request = DmlRequest(type=request_type)
    found: set[int] = set()
    if decoded is not NO_BODY:
        if not isinstance(decoded, dict):
            raise invalid_msgpack("packet body")
        for key, value in decoded.items():
            # MsgPack keys are ints, bools, floats, strings...: only an int is a uint
            kind = _DML_KEY_KIND.get(key) if type(key) is int else None
            if kind is None:
                request.extra[key] = value
                continue
            name, mp_type = kind
            if mp_type is MpType.UINT:
                if type(value) is not int or value < 0:
                    raise invalid_msgpack("packet body")
            elif not _has_type(value, mp_type):
                raise invalid_msgpack("packet body")
            found.add(key)
            setattr(request, name, value)
    for key in _DML_MANDATORY_SORTED.get(request_type, ()):
        if key not in found:
            raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, IPROTO_KEY_NAMES[key])
    if request_type == IprotoType.UPDATE:
        request.ops, request.tuple = request.tuple, None
    return request


class SynchroRequest(NamedTuple):
    """Body of CONFIRM / ROLLBACK: the limbo owner and an LSN."""

    replica_id: int
    lsn: int


def encode_synchro_body(replica_id: int, lsn: int) -> bytes:
    """`{REPLICA_ID: id, LSN: lsn}` with shortest integers, as 2.6.0 writes it."""
    return (b"\x82\x02" + mp_encode_uint(replica_id) + b"\x03" + mp_encode_uint(lsn))


def decode_synchro_body(body: bytes | None) -> SynchroRequest:
    """Decode a CONFIRM/ROLLBACK body; non-integer keys and unknown keys are skipped."""
    if body is None:
        raise invalid_msgpack("request body")
    decoded = unpack(body, "request body")
    if not isinstance(decoded, dict):
        raise invalid_msgpack("request body")
    replica_id = decoded.get(IprotoKey.REPLICA_ID, 0)
    lsn = decoded.get(IprotoKey.LSN, 0)
    if not _is_uint(replica_id) or not _is_uint(lsn):
        raise invalid_msgpack("request body")
    return SynchroRequest(replica_id, lsn)


def synchro_row(request_type: int, owner_id: int, target_lsn: int, **header: Any) -> XRow:
    """A CONFIRM or ROLLBACK row about `owner_id`'s `target_lsn`; the row's own
    header fields (replica_id, lsn, timestamp) come as keyword arguments."""
    if request_type not in (IprotoType.CONFIRM, IprotoType.ROLLBACK):
        raise ValueError(f"not a synchro request type: {request_type}")
    return XRow(type=request_type, body=encode_synchro_body(owner_id, target_lsn), **header)
