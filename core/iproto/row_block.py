"""The rows of an xlog block payload (a transaction's, a block's: rows back to back,
no length prefixes), read and written the fast way, on xrow's one header layout.

Reading: `decode_rows` (the quick reader `xrow.read_rows` for the usual headers, the
strict `decode_rows_strict` for anything else, with the same rows and the same
errors), `visit_rows` (every row read into one reused XRow, for a reader that keeps
none). Writing: `encode_row_list` and `encode_local_tx`, which put together once the
header parts rows of a run share, and a replicated row's own bytes (XRow.wire).
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any

import msgpack

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError
from spindle.core.iproto.msgpack import invalid_msgpack, mp_encode_uint
from spindle.core.iproto.xrow import (
    FLAGS_COMMIT, KEY_LSN, KEY_REPLICA_ID, KEY_TSN, KEY_TYPE, TIMESTAMP_HEAD, XRow, decode_header, encode_header, read_rows,
)

_pack_double = struct.Struct(">d").pack
_NOP = IprotoType.NOP


def decode_rows_strict(payload: bytes) -> list[XRow]:
    """All rows of an xlog block payload (back-to-back, no length prefixes), read
    by the strict header decoder (decode_rows reads the usual ones faster).

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
            row, body_pos = decode_header(payload, pos, end)
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
            # the row's place in the payload, read with getattr by those who report it
            err.offset = pos  # type: ignore[attr-defined]
            raise
        rows.append(row)
        pos = next_pos
    return rows


def decode_rows(payload: bytes) -> list[XRow]:
    """All rows of a block payload, as decode_rows_strict decodes them (and with its
    errors): the usual headers are read here in one tight loop, anything else (or
    any defect) by the strict decoder."""
    rows = _decode_rows_fast(payload)
    return rows if rows is not None else decode_rows_strict(payload)


def _decode_rows_fast(payload) -> list[XRow] | None:
    """The rows of a payload whose headers read_rows reads; None at the first it does
    not (or at any defect: the strict decoder then judges them all)."""
    rows: list[XRow] = []
    if payload:
        try:
            read_rows(payload, 0, rows)
        except Exception:   # noqa: BLE001 - a defect: the strict decoder reports it
            return None
    return rows


class UnreadableRow(Exception):
    """visit_rows met a row it cannot read: `error` is what decode_rows would raise
    (ER_INVALID_MSGPACK, its `.offset` the row's place in the payload), after
    `visited` rows were visited. Apart from the visitor's own errors, which pass
    through as they are."""

    def __init__(self, error: ClientError, visited: int):
        super().__init__(str(error))
        self.error, self.visited = error, visited


def visit_rows(payload: bytes, into: XRow, visit: Callable[[XRow], Any]) -> int:
    """visit(row) for every row of a block payload, as decode_rows decodes them (its
    error comes as UnreadableRow), each read into the one row `into` (read_rows'
    third mode), for a reader that keeps no row: snapshot recovery. A row that
    read_rows does not take, and every row after it, is decoded strictly (the rows
    before it were visited already). Returns how many rows there were."""
    count, stopped = read_rows(payload, 0, visit, into) if payload else (0, 0)
    if stopped < len(payload):
        try:
            rest = decode_rows_strict(payload[stopped:])
        except ClientError as err:
            err.offset = getattr(err, "offset", 0) + stopped  # type: ignore[attr-defined]
            raise UnreadableRow(err, count) from err
        for row in rest:
            visit(row)
        count += len(rest)
    return count


_pack_u16_uint = struct.Struct(">BH").pack      # 0xCD and a uint16
_pack_u32_uint = struct.Struct(">BI").pack      # 0xCE and a uint32
_SMALL_UINT = [bytes((i,)) for i in range(0x80)]
_TSN_FIELDS = [KEY_TSN + uint for uint in _SMALL_UINT]     # key TSN and a fixint
_TSN_FLAGS_COMMIT = (KEY_TSN[0], *FLAGS_COMMIT)     # as ints, for the struct calls
# encode_local_tx's row header in one struct call, by the LSN's size: its first 7
# bytes (fixmap, type, replica id, key LSN, the LSN's marker) given, the LSN, the
# TIMESTAMP pair given, key TSN and a fixint value; for the last row, FLAGS: COMMIT too
_PACK_TX = {0xCE: (struct.Struct(">7sI10sBB").pack, struct.Struct(">7sI10sBBBB").pack),
            0xCD: (struct.Struct(">7sH10sBB").pack, struct.Struct(">7sH10sBBBB").pack)}


def encode_row(row: XRow) -> bytes:
    """A row as it sits in a payload (SYNC is never written to disk); see
    encode_row_list."""
    return encode_row_list((row,))[0]


def encode_row_list(rows: Iterable[XRow]) -> list[bytes]:
    """Each row as it sits in a payload (SYNC is never written to disk): the compact
    header of encode_header, written out directly for the usual WAL row (signed,
    of a replica id below 128, not of a local space); a replicated row is the bytes
    it came in with its new TIMESTAMP (see XRow.wire).

    Rows one after another mostly share their type, replica id and TIMESTAMP (a
    journal entry's rows all have its write time): those parts of the header are
    put together once for the run that shares them, and each row adds its LSN, TSN
    and FLAGS: the rows of a 100-row entry take ~60% of the time they took encoded
    one by one."""
    out: list[bytes] = []
    append = out.append
    stamp_of = heads_of = None      # what `stamp` and `heads` below were made for
    stamp, heads = b"", _NO_HEADS
    for row in rows:
        wire, timestamp = row.wire, row.timestamp
        if wire is not None and not row.group_id:       # (no GROUP_ID in its layout)
            if timestamp != stamp_of:
                stamp_of = timestamp
                stamp = TIMESTAMP_HEAD + _pack_double(timestamp)
            # the header the relay sent, after `8x 00 tt 02 rr 03 <lsn> 04 cb`
            at = _WIRE_TIMESTAMP_AT[wire[6]]
            append(wire[:at - 2] + stamp + wire[at + 8:])
            continue
        rtype, replica_id, lsn = row.type, row.replica_id, row.lsn
        if row.group_id or not (0 <= rtype < 0x80 and 0 < replica_id < 0x80 and lsn > 0
                                and timestamp):
            append(encode_header(row, 0) + (row.body or b""))
            continue
        if timestamp != stamp_of:
            stamp_of = timestamp
            stamp = TIMESTAMP_HEAD + _pack_double(timestamp)
        if lsn < 0x80:
            lsn_bytes = _SMALL_UINT[lsn]
        elif 0x10000 <= lsn <= 0xFFFFFFFF:
            lsn_bytes = _pack_u32_uint(0xCE, lsn)
        elif 0x100 <= lsn < 0x10000:
            lsn_bytes = _pack_u16_uint(0xCD, lsn)
        else:
            lsn_bytes = mp_encode_uint(lsn)
        kind = rtype << 7 | replica_id
        if kind != heads_of:
            heads_of = kind
            heads = _HEADS.get(kind) or _heads(kind)
        tsn = row.tsn
        body = row.body or b""
        if tsn == 0 or (tsn == lsn and row.is_commit):
            append(heads[0] + lsn_bytes + stamp + body)
            continue
        # a row of a multi-row transaction: TSN as lsn - tsn, FLAGS on the last one
        diff = (lsn - tsn) & 0xFFFFFFFFFFFFFFFF        # tsn_field(lsn, tsn), inline
        diff_bytes = _TSN_FIELDS[diff] if diff < 0x80 else KEY_TSN + mp_encode_uint(diff)
        if row.is_commit:           # tsn != lsn here
            append(heads[2] + lsn_bytes + stamp + diff_bytes + FLAGS_COMMIT + body)
        else:
            append(heads[1] + lsn_bytes + stamp + diff_bytes + body)
    return out


class LocalTxRows(list):
    """encode_local_tx's answer when it wrote the shared header of a transaction of
    several rows: each row's bytes, the rows of one replica id (not 0) and one
    fixint type, with consecutive LSNs and no GROUP_ID. The WAL tail takes such a
    list as plain (wire_tx.plain_tx) without going over the rows again (a single
    row costs plain_tx next to nothing: it stays a list)."""

    __slots__ = ()


def encode_local_tx(rows: list[XRow]) -> list[bytes]:
    """encode_row_list of a transaction as the WAL signs the usual local one
    (writer.assign_lsn): one replica id, consecutive LSNs from the TSN on, one
    TIMESTAMP, COMMIT on the last row only, no GROUP_ID, no relayed bytes. When
    they also share a fixint type and their LSNs one size of uint (uint16 or
    uint32), each row's header differs from the next only in its LSN and TSN
    offset: about half of encode_row_list's work per row, a third for a single
    row. Any other transaction is encoded by encode_row_list."""
    first, last = rows[0], rows[-1]
    rtype, replica_id, tsn, timestamp = first.type, first.replica_id, first.lsn, first.timestamp
    if 0x10000 <= tsn and last.lsn <= 0xFFFFFFFF:
        pack, marker = _pack_u32_uint, 0xCE
    elif 0x100 <= tsn and last.lsn < 0x10000:
        pack, marker = _pack_u16_uint, 0xCD
    else:
        return encode_row_list(rows)
    if not (0 <= rtype < 0x80 and 0 < replica_id < 0x80 and timestamp):
        return encode_row_list(rows)
    heads = _HEADS.get(rtype << 7 | replica_id) or _heads(rtype << 7 | replica_id)
    stamp = TIMESTAMP_HEAD + _pack_double(timestamp)
    if first is last:       # an autocommit statement: the short single-row header
        return [heads[0] + pack(marker, tsn) + stamp + (first.body or b"")]
    # the header up to the LSN's marker, then (struct) the LSN, TIMESTAMP and TSN
    # field in one call while the TSN field is a fixint (a transaction's first 128 rows)
    head = heads[1] + bytes((marker,))
    pack_member, pack_last = _PACK_TX[marker]
    # (locals: as fast as the literals they stand for)
    key_tsn, key_flags, commit = _TSN_FLAGS_COMMIT
    out = LocalTxRows()
    append = out.append
    for diff, row in enumerate(rows):          # diff: LSN - TSN
        if row.type != rtype:
            return encode_row_list(rows)
        if diff < 0x80:
            append(pack_member(head, tsn + diff, stamp, key_tsn, diff) + (row.body or b""))
        else:
            append(heads[1] + pack(marker, tsn + diff) + stamp + KEY_TSN
                   + mp_encode_uint(diff) + (row.body or b""))
    diff = len(rows) - 1                       # the last row: FLAGS (COMMIT) too
    if diff < 0x80:
        out[-1] = (pack_last(heads[2] + bytes((marker,)), tsn + diff, stamp, key_tsn, diff,
                             key_flags, commit)
                   + (last.body or b""))
    else:
        out[-1] = (heads[2] + pack(marker, tsn + diff) + stamp + KEY_TSN
                   + mp_encode_uint(diff) + FLAGS_COMMIT + (last.body or b""))
    return out


# The usual header up to its LSN value, by `type << 7 | replica id`: of a single-row
# transaction (4 keys), of a row of a longer one (5: TSN), of its last row (6: FLAGS)
_HEADS: dict[int, tuple[bytes, bytes, bytes]] = {}
_NO_HEADS = (b"", b"", b"")


def _heads(kind: int) -> tuple[bytes, bytes, bytes]:
    common = (KEY_TYPE + _SMALL_UINT[kind >> 7] + KEY_REPLICA_ID + _SMALL_UINT[kind & 0x7F]
              + KEY_LSN)
    heads = _HEADS[kind] = (b"\x84" + common, b"\x85" + common, b"\x86" + common)
    return heads


# where a relay-layout header's TIMESTAMP value starts, by the first byte of its LSN
_WIRE_TIMESTAMP_AT = tuple(9 if b < 0x80 else 8 + {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}.get(b, 0)
                           for b in range(256))
