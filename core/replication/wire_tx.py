"""xlog rows forwarded to the wire as they are stored (the relay's fast path).

A row in an xlog block is the MsgPack header map and body map that also go on the
wire, after the packet's length prefix. 2.6.0's relay re-encodes the header
(xrow_header_encode, with the SUBSCRIBE/JOIN request's sync) and sends the body as
stored; for a header stored in that same canonical form, the stored bytes are that
encoding already, so a block is forwarded with no row decoded or re-encoded:
`scan_block` finds the row boundaries and the few header fields the relay decides by
(replica id, LSN, commit flag, timestamp) in one pass and frames the rows.

A header qualifies when re-encoding it gives back the same bytes — keys in
xrow_header_encode's order, shortest integers, no field it would drop (a zero LSN
or timestamp, a TSN/FLAGS pair that says "single statement", SCHEMA_VERSION, a stored
SYNC) — and when it is the usual replicated row: a replica id of 1..127, no GROUP_ID,
a fixint type. Any other row sends its whole block down the general path (rows
decoded, filtered and encoded one by one, with its errors), so the fast path never
decides anything the general path would decide differently.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence

import msgpack

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.msgpack import mp_encode_uint
from spindle.core.iproto.row_block import decode_rows
from spindle.core.iproto.xrow import KEY_SYNC, RELAY_HEADER, TIMESTAMP_AFTER_LSN, XRow

_pack_frame_head = struct.Struct(">BI").pack     # 0xce + u32: Tarantool's length prefix
_unpack_double = struct.Struct(">d").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from
_FRAME_HEAD_SIZE = 5
_NOP_TYPE = bytes((IprotoType.NOP,))


def _uint_value(encoded: bytes) -> int:
    return encoded[0] if len(encoded) == 1 else int.from_bytes(encoded[1:], "big")


class WireTx:
    """One whole transaction of an xlog block (or a run of whole transactions from
    the in-memory tail: WireRun), framed for the wire.

    `replica_id` is the id every row of it has (0 when they differ: the relay then
    takes the rows one by one); its rows have LSNs from `first_lsn` to `lsn` of that
    id. `frames` holds `count` packets (length prefix, header with the relay's sync,
    body); `rows()` decodes them as the general path sees them, from
    `payload[start:end]`: rows as stored, or (`framed`) packets with sync 0."""

    __slots__ = ("replica_id", "first_lsn", "lsn", "timestamp", "count", "frames",
                 "_payload", "_start", "_end", "_framed")

    def __init__(self, replica_id: int, first_lsn: int, lsn: int, timestamp: float,
                 count: int, frames: bytes, payload: bytes, start: int, end: int,
                 framed: bool = False):
        self.replica_id = replica_id
        self.first_lsn = first_lsn
        self.lsn = lsn
        self.timestamp = timestamp
        self.count = count
        self.frames = frames
        self._payload = payload
        self._start = start
        self._end = end
        self._framed = framed

    def rows(self) -> list[XRow]:
        data = self._payload[self._start:self._end]
        return decode_frames(data) if self._framed else decode_rows(data)

    def __repr__(self) -> str:
        return (f"WireTx(replica_id={self.replica_id}, lsn={self.first_lsn}..{self.lsn}, "
                f"rows={self.count})")


def decode_tail(payload: bytes, start: int) -> list[XRow]:
    """The rows from `start` on of a payload scan_block accepted (the transaction it
    leaves unfinished)."""
    return decode_rows(payload[start:]) if start < len(payload) else []


def plain_tx(rows: list[XRow]) -> bool:
    """Whether the relay may take this transaction whole by its replica id and LSN
    range (wire_tx_share) once its rows are encoded as the WAL wrote them: rows of
    one replica id with growing LSNs, none GROUP_LOCAL (the filter's only other
    rule), of a fixint type (frame_rows inserts SYNC after it)."""
    replica_id = rows[0].replica_id
    if not replica_id:
        return False
    lsn = 0
    for row in rows:
        if (row.replica_id != replica_id or row.lsn <= lsn or row.group_id
                or not 0 <= row.type < 0x80):
            return False
        lsn = row.lsn
    return True


class WireRun:
    """Transactions plain_tx accepts, one after another and all of one replica id,
    gathered into one WireTx framed from each row's bytes as the WAL wrote them
    (encode_header(row, 0) + body): the relay then decides on them, frames and
    notes them as sent once, not once per transaction (a stream of one-row
    transactions is mostly such runs). Its filters leave a prefix of a run or
    none of it, with the commit flag on the last row kept, as they would of its
    transactions one by one. The pieces are kept framed with sync 0, as the tail's
    spans are: a relay with sync 0 (every applier's SUBSCRIBE) sends them as they
    are, one with another sync gets them framed again."""

    __slots__ = ("sync", "replica_id", "first_lsn", "lsn", "timestamp", "count", "frames")

    def __init__(self, sync: int):
        self.sync = sync
        self.replica_id = self.first_lsn = self.lsn = self.count = 0
        self.timestamp = 0.0
        self.frames: list[bytes | bytearray] = []

    def add(self, rows: list[XRow], encoded: Sequence[bytes], out: list) -> None:
        """Append a transaction (after growing LSNs); a run of another replica id
        goes to `out` first."""
        last = rows[-1]
        self.add_span(last.replica_id, rows[0].lsn, last.lsn, last.timestamp,
                      frame_rows(encoded, 0), len(encoded), out)

    def add_span(self, replica_id: int, first_lsn: int, lsn: int, timestamp: float,
                 frames: bytes | bytearray, count: int, out: list) -> None:
        """add() of `count` rows already framed with sync 0, known by their replica
        id, LSN range and last timestamp alone (a span of the WAL tail). `frames`
        must not change until flush()."""
        if self.frames and self.replica_id != replica_id:
            self.flush(out)
        if not self.frames:
            self.replica_id, self.first_lsn = replica_id, first_lsn
        self.lsn, self.timestamp = lsn, timestamp
        self.frames.append(frames)
        self.count += count

    def flush(self, out: list) -> None:
        """The run so far, as one WireTx, to `out` (its rows, if a filter needs them,
        decoded from the bytes)."""
        if self.frames:
            plain = b"".join(self.frames)
            frames = frame_rows(unframe(plain), self.sync) if self.sync else plain
            out.append(WireTx(self.replica_id, self.first_lsn, self.lsn, self.timestamp,
                              self.count, frames, plain, 0, len(plain), framed=True))
            self.frames = []
            self.count = 0


class NotForwardable(Exception):
    """A row of the block is not in the form scan_block forwards as stored."""


def scan_block(payload: bytes, sync: int = 0, *, covered: dict[int, int] | None = None,
               keep_first: bool = False, runs: bool = False) -> tuple[list[WireTx], int]:
    """The whole transactions of a block payload, framed with `sync` in their headers,
    and the offset where a transaction the block does not finish begins (len(payload)
    when there is none). NotForwardable when any row is not in the forwardable form
    (or not valid at all): the caller then takes the general path for the block.

    `covered` ({replica id: LSN}): a transaction of one id's rows that are all at or
    below its LSN there is left out (not even framed) — the cursor would drop it.
    `keep_first`: never the first one (it may end a transaction an earlier block
    began). `runs`: consecutive transactions of one replica id with growing LSNs
    come as one WireTx (as WireRun makes them of the tail): a file of one-row
    transactions is then framed and handed on in a few pieces, not one per row."""
    try:
        return _scan(payload, sync, covered or {}, keep_first, runs)
    except (IndexError, struct.error, ValueError, msgpack.UnpackException) as exc:
        raise NotForwardable() from exc


def _scan(payload: bytes, sync: int, covered: dict[int, int], keep_first: bool,
          runs: bool) -> tuple[list[WireTx], int]:
    end = len(payload)
    unpacker = msgpack.Unpacker(max_buffer_size=max(end, 1))
    unpacker.feed(payload)
    read_bytes, skip, tell = unpacker.read_bytes, unpacker.skip, unpacker.tell
    match = RELAY_HEADER.match
    found: list[_Found] = []
    starts: list[int] = []          # where the rows of the open transaction begin
    tx_start = pos = 0
    replica = first_lsn = last_lsn = b""
    while pos < end:
        header = match(payload, pos)
        if header is None:
            raise NotForwardable()
        in_tx, _, row_type, row_replica, lsn = header.groups()
        p = header.end()
        read_bytes(p - pos)
        if p < end and row_type != _NOP_TYPE:      # NOP rows have no body
            skip()
            nxt = tell()
        else:
            nxt = p
        if not starts:
            replica, first_lsn = row_replica, lsn
        elif row_replica != replica or lsn <= last_lsn:
            replica = b""                   # not one id's LSN range: rows one by one
        starts.append(pos)
        last_lsn = lsn
        pos = nxt
        if in_tx is not None:
            continue
        # the transaction's last row
        replica_id, tx_lsn = (replica[0] if replica else 0), _uint_value(lsn)
        if not (replica_id and tx_lsn <= covered.get(replica_id, 0)
                and (tx_start or not keep_first)):
            timestamp = _unpack_double(payload, header.end(5) + TIMESTAMP_AFTER_LSN)[0]
            found.append(_Found(replica_id, _uint_value(first_lsn), tx_lsn, timestamp,
                                starts, tx_start, pos))
        starts = []
        tx_start = pos
    if runs:
        found = _join_runs(found)
    return [WireTx(one.replica_id, one.first_lsn, one.lsn, one.timestamp, len(one.starts),
                   _frames(payload, one.starts, one.end, sync), payload, one.start, one.end)
            for one in found], tx_start


class _Found:
    """A transaction (or a run of them) _scan found: its rows begin at `starts`,
    it spans payload[start:end]."""

    __slots__ = ("replica_id", "first_lsn", "lsn", "timestamp", "starts", "start", "end")

    def __init__(self, replica_id: int, first_lsn: int, lsn: int, timestamp: float,
                 starts: list[int], start: int, end: int):
        self.replica_id = replica_id
        self.first_lsn = first_lsn
        self.lsn = lsn
        self.timestamp = timestamp
        self.starts = starts
        self.start = start
        self.end = end


def _join_runs(found: list[_Found]) -> list[_Found]:
    """Adjacent transactions of one replica id, next to each other in the payload
    and with growing LSNs, as one."""
    out: list[_Found] = []
    run = None
    for tx in found:
        if (run is not None and tx.replica_id and tx.replica_id == run.replica_id
                and tx.start == run.end and tx.first_lsn > run.lsn):
            run.starts += tx.starts
            run.lsn, run.timestamp, run.end = tx.lsn, tx.timestamp, tx.end
            continue
        run = tx
        out.append(run)
    return out


_FRAME_HEADS = [_pack_frame_head(0xCE, size) for size in range(4096)]   # the usual sizes


def _frames(payload: bytes, starts: list[int], end: int, sync: int) -> bytes:
    """The rows at `starts` (the last one ending at `end`) as packets with `sync`."""
    ends = starts[1:]
    ends.append(end)
    return frame_rows([payload[start:stop] for start, stop in zip(starts, ends)], sync)


def frame_rows(encoded: Sequence[bytes], sync: int) -> bytes:
    """Rows stored as xrow_header_encode writes them without SYNC (a fixmap whose
    first key is REQUEST_TYPE with a fixint value) as packets with `sync`: the same
    bytes as encoding them again with it."""
    heads = _FRAME_HEADS
    if not sync and len(encoded) == 1 and len(encoded[0]) < 4096:   # one-row transaction
        return heads[len(encoded[0])] + encoded[0]
    out: list[bytes] = []
    append = out.append
    if sync:
        # one more key in the map, and SYNC right after REQUEST_TYPE (00 <type>)
        sync_field = KEY_SYNC + mp_encode_uint(sync)
        extra = len(sync_field)
        for row in encoded:
            append(_pack_frame_head(0xCE, len(row) + extra))
            append(bytes((row[0] + 1,)))
            append(row[1:3])
            append(sync_field)
            append(row[3:])
    else:
        for row in encoded:
            size = len(row)
            append(heads[size] if size < 4096 else _pack_frame_head(0xCE, size))
            append(row)
    return b"".join(out)


def extend_frames(frames: bytearray, encoded: Sequence[bytes]) -> None:
    """frames += frame_rows(encoded, 0), without the intermediate bytes."""
    heads = _FRAME_HEADS
    for row in encoded:
        size = len(row)
        frames += heads[size] if size < 4096 else _pack_frame_head(0xCE, size)
        frames += row


def unframe(frames: bytes | bytearray) -> list[bytes]:
    """The rows of packets frame_rows(rows, 0) made: each one's bytes without its
    length prefix."""
    rows = []
    pos, end = 0, len(frames)
    while pos < end:
        size = _unpack_u32(frames, pos + 1)[0]
        pos += _FRAME_HEAD_SIZE
        rows.append(bytes(frames[pos:pos + size]))
        pos += size
    return rows


def decode_frames(frames: bytes | bytearray) -> list[XRow]:
    """The rows of packets frame_rows(rows, 0) made, decoded as decode_rows would
    decode the rows themselves."""
    return decode_rows(b"".join(unframe(frames)))
