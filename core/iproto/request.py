"""The bodies of rows (2.6.0's struct request and struct synchro_request, xrow.c's
xrow_encode_dml / xrow_decode_dml / xrow_decode_synchro): DML bodies encoded as box
writes them to the WAL and decoded as strictly as 2.6.0 decodes them, and
CONFIRM/ROLLBACK bodies. The row and its header are core/iproto/xrow.py's.

Below them, the replication stream's quick reads of a whole DML row (decode_dml_packet,
decode_relay_put_frame): header and body in one go, each equal to what the strict
decoders give, or None where the strict path has to decide.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, NamedTuple

import msgpack

from spindle.core.iproto.constants import (
    DML_BODY_KEYS, DML_MANDATORY_KEYS, IPROTO_KEY_NAMES, IPROTO_KEY_TYPE, IprotoKey,
    IprotoType, MpType,
)
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import (
    MsgpackError, encode_value, invalid_msgpack, mp_encode_uint, needs_exact, raw_ext, unpack,
)
from spindle.core.iproto.xrow import (
    FLAGS_COMMIT, KEY_TSN, SHORTEST_FROM, NotUsual, XRow, relay_header, relay_layout, usual_header,
)

_pack_u32 = struct.Struct(">I").pack


# ---------------------------------------------------------------------------
# DML bodies.

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
    # PutRequest's `data`: a DmlRequest never carries its tuple's bytes
    data: ClassVar[bytes | None] = None

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
    no `extra` dict.

    `data`, when set, is the tuple's MsgPack as the row carried it (a replicated or
    logged row's body, from the TUPLE key on): box counts its length as the tuple's
    bsize (as 2.6.0 counts the bytes it stores), instead of packing the decoded
    tuple again to learn it. None: unknown (a Lua insert), the tuple is packed."""

    __slots__ = ("type", "space_id", "tuple", "data")
    index_id = 0
    index_base = 0
    key = None
    ops = None
    tuple_meta = None
    limit = None
    offset = 0
    iterator = 0

    def __init__(self, type: int, space_id: int, tuple: Any, data: bytes | None = None):
        self.type = type
        self.space_id = space_id
        self.tuple = tuple
        self.data = data

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


# {SPACE_ID: ce <u32>, TUPLE: ...}: the body of snapshot and JOIN rows, up to the
# space id, and the key after it (checkpoint writes them too)
SNAPSHOT_BODY_HEAD = bytes((0x82, IprotoKey.SPACE_ID, 0xCE))
TUPLE_KEY = bytes((IprotoKey.TUPLE,))


def encode_snapshot_body(space_id: int, tuple: Any) -> bytes:
    """`{SPACE_ID: ce <u32>, TUPLE: ...}`: the body of snapshot and JOIN rows."""
    return SNAPSHOT_BODY_HEAD + _pack_u32(space_id) + TUPLE_KEY + encode_value(tuple)


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
    """Body of CONFIRM / ROLLBACK / PROMOTE: the limbo owner and an LSN; PROMOTE
    (2.6.3) also has the writer's Raft term (IPROTO_TERM)."""

    replica_id: int
    lsn: int
    term: int = 0


def encode_synchro_body(replica_id: int, lsn: int) -> bytes:
    """`{REPLICA_ID: id, LSN: lsn}` with shortest integers, as 2.6.0 writes it."""
    return (b"\x82\x02" + mp_encode_uint(replica_id) + b"\x03" + mp_encode_uint(lsn))


def decode_synchro_body(body: bytes | None) -> SynchroRequest:
    """Decode a CONFIRM/ROLLBACK/PROMOTE body; non-integer keys and unknown keys
    are skipped."""
    if body is None:
        raise invalid_msgpack("request body")
    decoded = unpack(body, "request body")
    if not isinstance(decoded, dict):
        raise invalid_msgpack("request body")
    replica_id = decoded.get(IprotoKey.REPLICA_ID, 0)
    lsn = decoded.get(IprotoKey.LSN, 0)
    term = decoded.get(IprotoKey.TERM, 0)
    if not _is_uint(replica_id) or not _is_uint(lsn) or not _is_uint(term):
        raise invalid_msgpack("request body")
    return SynchroRequest(replica_id, lsn, term)


def synchro_row(request_type: int, owner_id: int, target_lsn: int, **header: Any) -> XRow:
    """A CONFIRM or ROLLBACK row about `owner_id`'s `target_lsn`; the row's own
    header fields (replica_id, lsn, timestamp) come as keyword arguments."""
    if request_type not in (IprotoType.CONFIRM, IprotoType.ROLLBACK):
        raise ValueError(f"not a synchro request type: {request_type}")
    return XRow(type=request_type, body=encode_synchro_body(owner_id, target_lsn), **header)

# ---------------------------------------------------------------------------
# A replicated DML row read whole.

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
        header = relay_header(packet)
        row, pos = header if header is not None else usual_header(packet)
    except (NotUsual, IndexError, struct.error, MsgpackError):
        return None
    rtype = row.type
    if rtype not in DML_WRITE_TYPES or pos >= len(packet):
        return None
    body = packet[pos:]
    if b"\xff" in body and needs_exact(body):     # (the memchr inline: a row per call)
        return None
    try:
        if ((rtype == _INSERT or rtype == _REPLACE) and body[:3] == _PUT_BODY_HEAD
                and body[5:6] == TUPLE_KEY):
            tup = msgpack.unpackb(body[6:], raw=False, strict_map_key=False,
                                  unicode_errors="surrogateescape",
                                  ext_hook=ext_hook or raw_ext)
            if type(tup) is not list:
                return None
            request: DmlRequest | PutRequest = PutRequest(
                rtype, (body[3] << 8) | body[4], tup, stored_data(body[6:]))
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


def stored_data(data: bytes) -> bytes | None:
    """`data`, a tuple's MsgPack as a row carried it, when box may count its length
    as the bsize of the tuple it decodes to; None when it may not.

    The tuple is stored decoded, and a tuple leaving a space counts the length of
    its packing again (Space._account): the two must agree, so the bytes must be
    what the packer writes for the values they decode to. Box, 2.6.0 and the usual
    connectors write MsgPack that way, in the shortest form, but for a float32
    (0xca: the packer writes a double) and the old spec's strings (a str16 0xda or
    str32 0xdb of a string that fits in fewer bytes, as connectors with
    use_bin_type=False write 32..255-byte strings). Bytes with any of these three
    markers are packed again (also where the byte merely occurs inside a value, or
    a string really needs 16 bits of length: rare, and only slower). An int looked
    for in bytes is one memchr (~1/5 of a pack of a small tuple, for the three);
    a bytes pattern would go through the buffer protocol (~1.5x the pack)."""
    if 0xCA in data or 0xDA in data or 0xDB in data:
        return None
    return data


# ---------------------------------------------------------------------------
# A relay's INSERT/REPLACE frame whole, in C: a regular expression checks its
# layout, a struct reads its numbers.

def _relay_put_frames() -> tuple[Any, dict]:
    """The pattern of decode_relay_put_frame and, by the number of the group that
    matched, (unpack_from, the tuple's offset in the packet, kind, least LSN): the
    header by xrow.relay_layout, the body {SPACE_ID: uint16, TUPLE: ...} after it."""
    layouts: dict[int, tuple] = {}
    alternatives = []
    body_re = re.escape(_PUT_BODY_HEAD) + b".." + re.escape(TUPLE_KEY) + b"()"
    body_format = "x" * len(_PUT_BODY_HEAD) + "H" + "x" * len(TUPLE_KEY)
    for width, lsn_marker, lsn_format in ((4, b"\xce", "I"), (2, b"\xcd", "H")):
        # kind 0: a single-row transaction; 1: a row inside a transaction (TSN, a
        # fixint); 2: its last row (TSN, not 0, and FLAGS: COMMIT)
        for kind, map_head, tail in (
                (0, b"\x84", (b"", "")),
                (1, b"\x85", (re.escape(KEY_TSN) + rb"[\x00-\x7f]", "xB")),
                (2, b"\x86", (re.escape(KEY_TSN) + rb"[\x01-\x7f]" + re.escape(FLAGS_COMMIT),
                              "xBxx"))):
            # {REQUEST_TYPE: INSERT|REPLACE, REPLICA_ID: 1..31 (below VCLOCK_MAX),
            #  LSN: uint of `width` bytes, TIMESTAMP: double, ...}
            head_re, head_format = relay_layout(
                map_head, (rb"[\x02\x03]", "B"), (rb"[\x01-\x1f]", "B"),
                (re.escape(lsn_marker) + b"." * width, "x" + lsn_format), (b"." * 8, "d"), tail)
            alternatives.append(head_re + body_re)
            layouts[len(alternatives)] = (
                struct.Struct(">xI" + head_format + body_format).unpack_from,
                struct.calcsize(">" + head_format + body_format), kind,
                SHORTEST_FROM[1 + width])
    pattern = re.compile(rb"\xce....(?:" + b"|".join(alternatives) + rb")", re.DOTALL)
    return pattern.match, layouts


_match_relay_put, _RELAY_PUT_LAYOUTS = _relay_put_frames()


def decode_relay_put_frame(buf: bytes | bytearray, pos: int, ext_hook: Callable | None = None
                           ) -> tuple[XRow, PutRequest, int] | None:
    """decode_dml_packet's answer for the frame at `pos` (length prefix included)
    when it is an INSERT/REPLACE as a relay writes them — the header relay_header
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
    # an LSN in more bytes than it needs is not canonical (see relay_header)
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
    return row, PutRequest(rtype, space_id, tup, stored_data(packet[tuple_at:])), stop
