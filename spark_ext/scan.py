"""One .xlog/.snap file (or a block range of it) -> Arrow record batches. No pyspark.

The block layer (fixheaders, CRC, zstd) is core/xlog/format.py's; rows are
walked here with one C MsgPack unpacker per block instead of building XRow
objects, which is ~3x faster and is where the time of a scan goes. Values of
key / tuple / ops are sliced out as the exact MsgPack bytes the file holds.

Rules (reference/xlog.md §5, as 2.6.0 reads files):
* a partial block at the end of a file (torn tail) ends the data; so does the
  end of the file without EOF marker (an instance still writing, or a crash);
  in both cases the rows of a transaction that has not reached its commit row
  are left out, so a live WAL is read up to its last whole transaction;
* a damaged complete block (bad magic, CRC, zstd, undecodable row) is an
  XlogError naming the file and the offset;
* a .snap without EOF marker is an error (2.6.0 refuses to trust it).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgpack
import pyarrow as pa
import pyarrow.compute as pc

from spindle.core.xlog.format import (
    EOF_MARKER_BYTES, FIXHEADER_SIZE, MARKER_SIZE, META_LEN_MAX, CorruptBlock, NeedMore, XlogError,
    XlogHeaderError, XlogMeta, crc32c, decode_fixheader, parse_meta, zstd_decompress,
)

from .rows import (
    ARROW_SCHEMA, BODY_KEY_NAMES, DML_TYPES, NOP, SPACE_SPACE_ID, UPDATE, RowFilter, SpaceNames,
    type_name,
)
from .values import msgpack_to_json, named_body_json

XLOG_KIND, SNAP_KIND = "xlog", "snap"
DEFAULT_BATCH_ROWS = 8192
_TS_TYPE = pa.timestamp("us", tz="UTC")
_U64_HALF = 1 << 63
# What undecodable rows raise in iter_rows (a header that is not a map, a cut
# value, a body of the wrong type, ...).
ROW_ERRORS = (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException)


class RowError(XlogError):
    """A row inside a good block cannot be decoded."""


@dataclass
class ScanTask:
    """What one reader (one Spark partition) reads: blocks of `path` starting at
    `start` (None: right after the header) and before `end` (None: to the end
    of the file), with the space names as of `start`.

    `lsn_ceiling` (xlogs that are not the newest of their directory): the last
    LSN each replica can have in the file, from the next file's VClock; it lets
    a scan with an upper LSN bound stop early.
    """

    path: str
    kind: str
    start: int | None = None
    end: int | None = None
    names: dict[int, str] = field(default_factory=dict)
    lsn_floor: dict[int, int] = field(default_factory=dict)
    lsn_ceiling: dict[int, int] | None = None

    @property
    def last_of_file(self) -> bool:
        return self.end is None


# ---------------------------------------------------------------------------
# Files and blocks.

class XlogFile:
    """A file's header, and its bytes through positional reads.

    The size is taken once, at open: a WAL growing meanwhile is read up to what
    it held then. Reads are pread()s through a window of at least 1 MiB, not a
    memory map: a WAL writer that cuts its file (a torn tail at restart, a
    failed write) would turn reads of a mapping into SIGBUS; here it is only a
    short read, i.e. a torn tail.
    """

    WINDOW = 1 << 20

    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_RDONLY)
        self._win_pos = 0
        self._win = b""
        try:
            self.size = os.fstat(self._fd).st_size
            head = self.read(0, min(self.size, META_LEN_MAX + 2))
            try:
                parsed = parse_meta(head)
            except XlogHeaderError as exc:
                raise XlogHeaderError(f"{path}: {exc}") from exc
            if parsed is None:
                raise XlogHeaderError(f"{path}: Unexpected end of file")
        except BaseException:
            self.close()
            raise
        self.meta: XlogMeta = parsed[0]
        self.header_size: int = parsed[1]

    def read(self, pos: int, n: int) -> bytes:
        """Up to `n` bytes at `pos` (fewer only at the end of the file)."""
        offset = pos - self._win_pos
        if offset < 0 or offset + n > len(self._win):
            want = min(max(n, self.WINDOW), max(self.size - pos, 0))
            self._win, self._win_pos, offset = os.pread(self._fd, want, pos), pos, 0
        return self._win[offset:offset + n]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> XlogFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


EOF, TORN = "eof", "torn"


def read_block(xf: XlogFile, pos: int, *, payload: bool = True, check: bool = True,
               ) -> tuple[bytes | None, int, bool] | str:
    """The block at `pos`: (rows bytes, block size, compressed), or EOF / TORN.

    `payload=False` reads the fixheader only (rows bytes None); `check=False`
    skips the CRC (the planner's pre-pass; the scan checks every block).
    """
    head = xf.read(pos, FIXHEADER_SIZE)
    if len(head) < MARKER_SIZE:
        return TORN
    if head[:MARKER_SIZE] == EOF_MARKER_BYTES:
        if pos + MARKER_SIZE < xf.size:
            raise XlogError(f"{xf.path}: has some data after eof marker at {pos}")
        return EOF
    try:
        fixheader = decode_fixheader(head, base_offset=pos)
    except CorruptBlock as exc:
        raise XlogError(f"{xf.path}: {exc}") from exc
    if isinstance(fixheader, NeedMore):
        return TORN
    size = FIXHEADER_SIZE + fixheader.length
    if pos + size > xf.size:
        return TORN
    if not payload:
        return None, size, fixheader.compressed
    stored = xf.read(pos + FIXHEADER_SIZE, fixheader.length)
    if len(stored) < fixheader.length:
        return TORN                   # the file was cut while we read it
    if check and crc32c(stored) != fixheader.crc32c:
        raise XlogError(f"{xf.path}: tx checksum mismatch at offset {pos}")
    if fixheader.compressed:
        try:
            stored = zstd_decompress(stored)
        except ValueError as exc:
            raise XlogError(f"{xf.path}: can't decompress block: {exc} at offset {pos}") from exc
    return stored, size, fixheader.compressed


def iter_rows(data: bytes) -> Iterator[tuple]:
    """The rows of a block payload, one tuple each:
    (row_pos, type, replica_id, group_id, lsn, tsn, is_commit, timestamp,
     space_id, index_id, index_base, key_s, key_e, tup_s, tup_e, ops_s, ops_e)
    where the *_s/*_e pairs are spans in `data` (-1 when absent). For DML
    bodies UPDATE operations (stored under TUPLE) are reported as ops; for
    other bodies the whole body is reported as the tuple span.
    Raises ValueError-family errors on undecodable MsgPack (callers add the
    file and offset)."""
    u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
    u.feed(data)
    tell, unpack, skip, read_map_header = u.tell, u.unpack, u.skip, u.read_map_header
    end = len(data)
    while True:
        row_pos = tell()
        if row_pos >= end:
            return
        h = unpack()
        rtype = h.get(0, 0)
        lsn = h.get(3, 0)
        if 8 in h:
            diff = h[8]
            if diff >= _U64_HALF:     # a local row's wrapped difference (see xrow)
                diff -= 1 << 64
            tsn, commit = lsn - diff, bool(h.get(9, 0) & 1)
        else:
            tsn, commit = lsn, True
        space_id = index_id = None
        index_base = 0
        key_s = key_e = tup_s = tup_e = ops_s = ops_e = -1
        if rtype != NOP and tell() < end:
            if rtype in DML_TYPES:
                index_id = 0          # the primary index unless the body names one
                for _ in range(read_map_header()):
                    k = unpack()
                    if k == 0x10:
                        space_id = unpack()
                    elif k == 0x11:
                        index_id = unpack()
                    elif k == 0x15:
                        index_base = unpack()
                    elif k == 0x21:
                        tup_s = tell()
                        skip()
                        tup_e = tell()
                    elif k == 0x20:
                        key_s = tell()
                        skip()
                        key_e = tell()
                    elif k == 0x28:
                        ops_s = tell()
                        skip()
                        ops_e = tell()
                    else:
                        skip()
                if rtype == UPDATE:   # 2.6.0 writes UPDATE operations under TUPLE
                    ops_s, ops_e, tup_s, tup_e = tup_s, tup_e, -1, -1
            else:
                tup_s = tell()
                skip()
                tup_e = tell()
        yield (row_pos, rtype, h.get(2, 0), h.get(7, 0), lsn, tsn, commit, h.get(4, 0.0),
               space_id, index_id, index_base, key_s, key_e, tup_s, tup_e, ops_s, ops_e)


def _span(data: bytes, s: int, e: int) -> bytes | None:
    return data[s:e] if s >= 0 else None


# ---------------------------------------------------------------------------
# The scan.

class Scan:
    """Reads one ScanTask into record batches of at most `batch_rows` rows."""

    def __init__(self, task: ScanTask, filters: RowFilter | None = None, *,
                 batch_rows: int = DEFAULT_BATCH_ROWS, with_json: bool = True):
        self.task = task
        self.filters = filters or RowFilter()
        self.batch_rows = batch_rows
        self.with_json = with_json
        self.names = SpaceNames(dict(task.names))
        self.eof_marker = False
        self.torn = False
        self.rows_read = 0          # every row decoded, filtered out or not
        self.blocks_read = 0
        self._pending: list[tuple] = []
        self._committed = 0          # rows of _pending that end a whole transaction
        self._accepts = self.filters.predicate()
        space = self.filters.get("space_id")
        # Snapshots hold spaces in ascending id order: past the highest wanted
        # id nothing more can match.
        self._space_high = space.top if space is not None and task.kind == SNAP_KIND else None
        self._lsn_high = self._lsn_stop_bound()
        self._last_lsn: dict[int, int] = {}
        self._done = False

    def _lsn_stop_bound(self) -> dict[int, int] | None:
        """Per replica, the LSN after which this task has nothing left to give
        (xlogs only, when an upper LSN bound is filtered and the next file's
        VClock bounds this one)."""
        lsn = self.filters.get("lsn")
        ceiling = self.task.lsn_ceiling
        if self.task.kind != XLOG_KIND or lsn is None or ceiling is None:
            return None
        high = lsn.top
        replicas = self.filters.get("replica_id")
        bound = {}
        for replica, last in ceiling.items():
            if last <= self.task.lsn_floor.get(replica, 0):
                continue             # no rows of this replica in the file
            if replicas is not None and not replicas.accepts(replica):
                continue
            bound[replica] = min(high, last)
        return bound

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self.filters.impossible:
            return
        with XlogFile(self.task.path) as xf:
            pos = self.task.start if self.task.start is not None else xf.header_size
            end = xf.size if self.task.end is None else self.task.end
            while pos < end and not self._done:
                block = read_block(xf, pos)
                if block == EOF:
                    self.eof_marker = True
                    break
                if block == TORN:
                    self.torn = pos < xf.size
                    break
                data, size, _ = block
                self._scan_block(xf, data, pos)
                self.blocks_read += 1
                pos += size
                while self._committed >= self.batch_rows:
                    yield self._flush(self.batch_rows)
                if self._lsn_high is not None and self._lsn_done():
                    self._done = True
                    break
        if self.task.last_of_file and not self._done and not self.eof_marker:
            if self.task.kind == SNAP_KIND:
                raise XlogError(f"snapshot `{self.task.path}' has no EOF marker")
            # The live WAL (or a crashed one): whole transactions only.
            del self._pending[self._committed:]
        # Otherwise rows after the last commit are kept: a file closed with an
        # unfinished transaction is read row by row, as 2.6.0 recovery does,
        # and a range that stops early stops at a block boundary.
        while self._pending:
            yield self._flush(self.batch_rows)

    def _lsn_done(self) -> bool:
        last = self._last_lsn
        return all(last.get(replica, -1) >= bound for replica, bound in self._lsn_high.items())

    def _scan_block(self, xf: XlogFile, data: bytes, block_pos: int) -> None:
        pending = self._pending
        accepts = self._accepts
        names = self.names
        known = names.names
        space_high = self._space_high
        track_lsn = self._lsn_high is not None
        last_lsn = self._last_lsn
        with_json = self.with_json
        rows = iter_rows(data)
        count = 0
        row_pos = 0
        try:
            for row in rows:
                count += 1
                (row_pos, rtype, replica_id, group_id, lsn, tsn, commit, ts, space_id,
                 index_id, index_base, key_s, key_e, tup_s, tup_e, ops_s, ops_e) = row
                if track_lsn:
                    last_lsn[replica_id] = lsn
                if space_high is not None and space_id is not None and space_id > space_high:
                    self._done = True
                    break
                if accepts is None or accepts(lsn, replica_id, ts, space_id):
                    key = data[key_s:key_e] if key_s >= 0 else None
                    tup = data[tup_s:tup_e] if tup_s >= 0 else None
                    ops = data[ops_s:ops_e] if ops_s >= 0 else None
                    if with_json:
                        key_json = msgpack_to_json(key) if key is not None else None
                        ops_json = msgpack_to_json(ops) if ops is not None else None
                        if tup is None:
                            tup_json = None
                        elif space_id is None and rtype in BODY_KEY_NAMES:
                            tup_json = named_body_json(tup, BODY_KEY_NAMES[rtype])
                        else:
                            tup_json = msgpack_to_json(tup)
                    else:
                        key_json = tup_json = ops_json = None
                    pending.append((lsn, replica_id, group_id, tsn, commit, ts, rtype, space_id,
                                    known.get(space_id) if space_id is not None else None,
                                    index_id, key, key_json, tup, tup_json, ops, ops_json))
                if space_id == SPACE_SPACE_ID and index_id is not None:
                    names.apply(rtype, _span(data, key_s, key_e), _span(data, tup_s, tup_e),
                                _span(data, ops_s, ops_e), index_base)
                if commit:
                    self._committed = len(pending)
        except ROW_ERRORS as exc:
            raise RowError(f"{xf.path}: can't parse row at offset {block_pos} "
                           f"(row at payload offset {row_pos if count else 0}): {exc}") from exc
        self.rows_read += count

    def _flush(self, n: int) -> pa.RecordBatch:
        rows, self._pending = self._pending[:n], self._pending[n:]
        self._committed = max(0, self._committed - len(rows))
        return rows_to_batch(self.task.path, rows)


def rows_to_batch(path: str, rows: list[tuple]) -> pa.RecordBatch:
    """Arrow batch from the row tuples Scan collects."""
    n = len(rows)
    cols = list(zip(*rows)) if rows else [()] * 16
    ts = pa.array(cols[5], pa.float64())
    # Microseconds, rounded half-to-even as Python's round() in timestamp_us()
    # (filters compare on the same value); a 0.0 timestamp means "not set".
    micros = pc.cast(pc.round(pc.multiply(ts, 1_000_000.0)), pa.int64()).cast(_TS_TYPE)
    timestamps = pc.if_else(pc.equal(ts, 0.0), pa.scalar(None, _TS_TYPE), micros)
    arrays = [
        pa.array([path] * n, pa.string()),
        pa.array(cols[0], pa.int64()),
        pa.array(cols[1], pa.int32()),
        pa.array(cols[2], pa.int32()),
        pa.array(cols[3], pa.int64()),
        pa.array(cols[4], pa.bool_()),
        timestamps,
        pa.array([type_name(t) for t in cols[6]], pa.string()),
        pa.array(cols[7], pa.int32()),
        pa.array(cols[8], pa.string()),
        pa.array(cols[9], pa.int32()),
        pa.array(cols[10], pa.binary()),
        pa.array(cols[11], pa.string()),
        pa.array(cols[12], pa.binary()),
        pa.array(cols[13], pa.string()),
        pa.array(cols[14], pa.binary()),
        pa.array(cols[15], pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def scan(task: ScanTask, filters: RowFilter | None = None, **kwargs) -> Iterator[pa.RecordBatch]:
    return Scan(task, filters, **kwargs).batches()
