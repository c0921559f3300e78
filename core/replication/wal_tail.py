"""The in-memory tail of the WAL: rows written lately, for relays that are close behind.

2.6.0's relay thread re-reads the current .xlog file on every WAL event. A relay here is
a fiber of the tx thread, where decoding a file again costs the loop; instead the tail
is the WAL watcher (wal_set_watcher, called in tx after every batch, with the rows
signed: REPLICA_ID, LSN, TSN, FLAGS, TIMESTAMP, and each row's bytes as written) and
appends each batch to itself, and relays that caught up read from it. Relays that are further behind read
files (wal_cursor.py) and switch to the tail once they reach it. A relay waits for
batches on `cond` (woken by each) or, to let several pile up, in `hold()` (woken only
by an urgent one: appended while `urgent()` says so — the relays' says "synchronous
transactions are pending").

Invariants the cursor relies on:
* batches are appended in WAL order, each with the WAL vclock right after it, so
  `vclock_after` only grows (component-wise) along the list (the open span's moves
  on with each batch added to it, still not past the next batch's);
* a batch a reader has taken (get) or that lies before a reader's position (seek)
  never changes again: only the open span grows, and both close it;
* `base_vclock` is the WAL vclock before the oldest batch kept: every row written
  after it is in the tail, every row before it only in the files;
* the tail is bounded (rows and bytes); dropping the oldest batches moves
  `base_vclock` forward. A relay whose next batch was dropped goes back to files.

A batch whose rows the relay forwards as written — one replica id, growing LSNs,
none GROUP_LOCAL (wire_tx.plain_tx over the whole batch), the usual local
transaction — is kept as a *span*: its rows framed as packets with sync 0 (what a
relay sends them as) in one buffer, and its LSN range, not its XRows. The next
such batch of the same id is added to that span for as long as no reader has
taken it (up to MAX_SPAN_ROWS / MAX_SPAN_BYTES), so while a relay holds back, the
rows written meanwhile pile up in one buffer. Kept objects cost the writer more
than the appending itself: each one is something for the collector to traverse
and for the allocator to spread out. Kept as a bytes object per row and a batch
and vclock per transaction, they cost a master with a replica following ~0.4 µs
per row at 100 rows per transaction and ~1 µs per one-row transaction
(scripts/bench/master_commit.py --replica, docs/PERFORMANCE.md). A reader that
needs a span's rows (a cursor with part of it already) decodes them from the
frames.

A one-row batch that would be added to the open span — a stream of autocommit
statements is nothing else — is only noted (its bytes in a list, the span's LSN
and room moved on): the noted rows are framed into the span in one pass, with
its counters, vclock and the tail's trim, when anything looks at the tail (get,
seek, append, `batches`/`rows`/`bytes`), so a reader never sees the difference.
Framing each one as it came cost the writer about as much again as the rest of
keeping it.
"""
from __future__ import annotations

import builtins
import weakref
from dataclasses import dataclass
from typing import Callable, Sequence

from spindle.core.fiber import Cond
from spindle.core.iproto.row_block import LocalTxRows
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock
from spindle.core.wal.writer import wal_clear_watcher, wal_set_watcher

from .wire_tx import decode_frames, extend_frames, plain_tx

DEFAULT_MAX_ROWS = 50_000
DEFAULT_MAX_BYTES = 16 << 20
# How big a span grows while nobody reads it: bounded (and to a quarter of the
# tail's limits) so that a reader that comes late takes, and a trim drops, a
# bounded piece, and a bytearray stays small enough to grow in place.
MAX_SPAN_ROWS = 4096
MAX_SPAN_BYTES = 1 << 20
_ROW_OVERHEAD = 48          # header fields of an encoded row, roughly
_SPAN_OVERHEAD = 200        # a span's batch and vclock, roughly


@dataclass(slots=True)
class TailBatch:
    rows: list[XRow] | None  # whole transactions, in WAL order; None for a span
    vclock_after: VClock     # the WAL vclock right after these rows
    size: int                # approximate memory kept
    count: int               # rows in the batch
    encoded: Sequence[bytes] | None = None   # each row as the WAL wrote it, if known
    # a span's rows: packets with sync 0 of replica_id's LSNs first_lsn..lsn (growing,
    # not necessarily consecutive); the last one's timestamp
    frames: bytearray | None = None
    replica_id: int = 0
    first_lsn: int = 0
    lsn: int = 0
    timestamp: float = 0.0

    def xrows(self) -> list[XRow]:
        """The rows, decoded from their frames when the batch is a span."""
        if self.rows is not None:
            return self.rows
        assert self.frames is not None   # a batch has rows or is a span
        return decode_frames(self.frames)


def vclock_covers(vclock: VClock, other: VClock) -> bool:
    """`other` <= `vclock` in every component but 0 (local rows are never relayed,
    so component 0 never decides what a relay still has to read)."""
    for replica_id, lsn in other.items():
        if replica_id and lsn > vclock.get(replica_id):
            return False
    return True


class WalTail:
    def __init__(self, sched, wal, *, max_rows: int = DEFAULT_MAX_ROWS,
                 max_bytes: int = DEFAULT_MAX_BYTES):
        self.sched = sched
        self.wal = wal
        self.max_rows = max_rows      # (properties: the span limits follow them)
        self.max_bytes = max_bytes
        self.base_vclock = wal.vclock.copy()
        self._batches: list[TailBatch] = []
        self.first_seq = 0          # seq of batches[0] (== next_seq when empty)
        self.next_seq = 0
        self._rows = 0
        self._bytes = 0
        self.cond = Cond(sched)     # broadcast on every batch: relays waiting wake up
        self.urgent: Callable[[], int] = _never      # true: a batch must not wait
        self.urgent_seq = -1        # seq of the newest batch appended while urgent
        self._open: TailBatch | None = None   # the newest batch if a span nobody took
        # One-row batches that continue the open span, not framed into it yet (see
        # _on_write): their bytes, the last one's row and the WAL vclock after it,
        # the open span's LSN with them, and the room left in it.
        self._pending: list[bytes] = []
        self._pending_last: XRow | None = None
        self._pending_vclock: VClock | None = None
        self._open_lsn = 0
        self._room_rows = 0
        self._room_bytes = 0
        self._held: set = set()     # fibers in hold()
        wal_set_watcher(wal, self._on_write)

    @property
    def max_rows(self) -> int:
        return self._max_rows

    @max_rows.setter
    def max_rows(self, rows: int) -> None:
        self._max_rows = rows
        self._span_rows = min(MAX_SPAN_ROWS, rows >> 2)

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, size: int) -> None:
        self._max_bytes = size
        self._span_bytes = min(MAX_SPAN_BYTES, size >> 2)

    def detach(self) -> None:
        wal_clear_watcher(self.wal, self._on_write)

    # ----------------------------------------------------------- WAL side

    @property
    def batches(self) -> list[TailBatch]:
        self._settle()
        return self._batches

    @property
    def rows(self) -> int:
        self._settle()
        return self._rows

    @property
    def bytes(self) -> int:
        self._settle()
        return self._bytes

    # (`builtins.bytes` in the annotations below: the `bytes` property above hides it)
    def _on_write(self, rows: list[XRow], encoded: list[builtins.bytes] | None = None) -> None:
        """The WAL watcher (relay_process_wal_event of the seed, for every relay):
        runs in tx with the rows of one completed batch; the writer's vclock is already the one after them (kept as it is:
        the writer never changes a vclock it has handed out).

        A one-row batch that continues the open span (plain_tx of one row, the
        span's id, a later LSN, room left) is only noted: its bytes are framed into
        the span with the others noted since, in one pass, when anything looks at
        the tail (_settle). A stream of autocommit statements costs the writer a
        list append per statement, not the span's bookkeeping."""
        span = self._open
        if span is not None and encoded is not None and len(rows) == 1:
            row = rows[0]
            if (row.replica_id == span.replica_id and row.lsn > self._open_lsn
                    and not row.group_id and 0 <= row.type < 0x80
                    and self._room_rows > 0 and self._room_bytes >= 0):
                data = encoded[0]
                self._pending.append(data)
                self._pending_last = row
                self._pending_vclock = self.wal.vclock
                self._open_lsn = row.lsn
                self._room_rows -= 1
                self._room_bytes -= len(data)
                self.cond.broadcast()
                if self.urgent():
                    self._urge()
                return
        self.append(rows, self.wal.vclock, encoded)

    def _settle(self) -> None:
        """Frame the noted one-row batches into the open span (see _on_write)."""
        pending = self._pending
        if not pending:
            return
        span, last, vclock_after = self._open, self._pending_last, self._pending_vclock
        # rows are noted only while a span is open, with the last one and the vclock
        assert span is not None and last is not None and vclock_after is not None
        frames = span.frames
        assert frames is not None   # (the open batch is a span)
        before = len(frames)
        extend_frames(frames, pending)
        added = len(frames) - before
        span.vclock_after = vclock_after
        span.size += added
        span.count += len(pending)
        span.lsn, span.timestamp = last.lsn, last.timestamp
        self._rows += len(pending)
        self._bytes += added
        self._pending = []
        self._pending_last = self._pending_vclock = None
        if self._rows > self._max_rows or self._bytes > self._max_bytes:
            self._trim()

    def _open_span(self, span: TailBatch) -> None:
        """`span` (the newest batch) takes batches that continue it from now on."""
        self._open = span
        self._open_lsn = span.lsn
        self._room_rows = self._span_rows - span.count
        assert span.frames is not None   # (a span)
        self._room_bytes = self._span_bytes - len(span.frames)

    def append(self, rows: list[XRow], vclock_after: VClock,
               encoded: list[builtins.bytes] | None = None) -> None:
        """Keep one batch: a span when the WAL gave its bytes and plain_tx takes it
        whole (added to the newest span when that one is still open). `rows` and
        `encoded` of a batch kept as rows are kept as given, not copied: the WAL
        hands each batch lists nobody changes afterwards."""
        self._settle()
        count = len(rows)
        if encoded is None:
            size = sum(len(row.body or b"") + _ROW_OVERHEAD for row in rows)
            self._add(TailBatch(rows, vclock_after, size, count))
        elif self._open is None or not self._extend_open(rows, vclock_after, encoded):
            if type(encoded) is LocalTxRows or plain_tx(rows):
                last = rows[-1]
                frames = bytearray()
                extend_frames(frames, encoded)
                self._add(TailBatch(None, vclock_after, len(frames) + _SPAN_OVERHEAD,
                                    count, None, frames, last.replica_id, rows[0].lsn,
                                    last.lsn, last.timestamp))
                self._open_span(self._batches[-1])
            else:
                # the bytes, and about as much again in the rows (bodies, headers)
                self._add(TailBatch(rows, vclock_after, 2 * sum(map(len, encoded)),
                                    count, encoded))
        if self._rows > self._max_rows or self._bytes > self._max_bytes:
            self._trim()
        self.cond.broadcast()
        if self.urgent():
            self._urge()

    def _urge(self) -> None:
        """The newest batch was appended while urgent(): relays holding wake now."""
        self.urgent_seq = self.next_seq - 1
        if self._held:
            held, self._held = self._held, set()
            for fiber in held:
                self.sched.wakeup(fiber)

    def _add(self, batch: TailBatch) -> None:
        self._batches.append(batch)
        self.next_seq += 1
        self._rows += batch.count
        self._bytes += batch.size
        self._open = None

    def _extend_open(self, rows: list[XRow], vclock_after: VClock,
                     encoded: list[builtins.bytes]) -> bool:
        """Add a batch to the open span when plain_tx takes it and it continues the
        span (same id, growing LSNs), and the span has room; False when it cannot.
        (The WAL's one-row batches are usually noted by _on_write instead.)"""
        span = self._open
        # (append() calls it with a span open)
        assert span is not None and span.frames is not None
        frames = span.frames
        last = rows[-1]
        count = len(rows)
        grown = span.count + count
        if (last.replica_id != span.replica_id or rows[0].lsn <= span.lsn
                or grown > self._span_rows or len(frames) > self._span_bytes
                or not (type(encoded) is LocalTxRows or plain_tx(rows))):
            return False
        before = len(frames)
        extend_frames(frames, encoded)
        added = len(frames) - before
        span.vclock_after = vclock_after
        span.size += added
        span.count = grown
        span.lsn, span.timestamp = last.lsn, last.timestamp
        self._rows += count
        self._bytes += added
        self._open_span(span)
        return True

    def _trim(self) -> None:
        """Drop the oldest batches down to 3/4 of the limits (in one slice, so that
        appending stays O(1) amortized)."""
        rows_goal, bytes_goal = self.max_rows * 3 // 4, self.max_bytes * 3 // 4
        drop = 0
        while drop < len(self._batches) - 1 and (self._rows > rows_goal
                                                 or self._bytes > bytes_goal):
            batch = self._batches[drop]
            self._rows -= batch.count
            self._bytes -= batch.size
            drop += 1
        if drop:
            self.base_vclock = self._batches[drop - 1].vclock_after.copy()
            del self._batches[:drop]
            self.first_seq += drop

    # ---------------------------------------------------------- relay side

    def hold(self, timeout: float) -> None:
        """Let batches pile up for `timeout` seconds: unlike `cond`, only an urgent
        batch ends the wait early. Returns early on fiber.wakeup too; raises if the
        fiber is cancelled."""
        me = self.sched.current
        self._held.add(me)
        try:
            self.sched.sleep(timeout)
        finally:
            self._held.discard(me)

    def reaches(self, vclock: VClock) -> bool:
        """True when every row after `vclock` is still here (or not written yet)."""
        return vclock_covers(vclock, self.base_vclock)

    def seek(self, vclock: VClock) -> int:
        """The seq of the first batch with a row not covered by `vclock` (binary
        search on the monotone `vclock_after`); next_seq when all are covered.
        A reader starts there: the open span is closed, as on get(), since what is
        added to it from now on could be after that reader's position."""
        self._settle()
        self._open = None
        lo, hi = 0, len(self._batches)
        while lo < hi:
            mid = (lo + hi) // 2
            if vclock_covers(vclock, self._batches[mid].vclock_after):
                lo = mid + 1
            else:
                hi = mid
        return self.first_seq + lo

    def get(self, seq: int) -> TailBatch | None:
        """The batch `seq`, or None when it is not written yet. A seq already dropped
        raises LookupError: the reader must go back to the files."""
        self._settle()
        if seq < self.first_seq:
            raise LookupError(seq)
        index = seq - self.first_seq
        if index >= len(self._batches):
            return None
        batch = self._batches[index]
        if batch is self._open:
            self._open = None       # taken: it never changes from now on
        return batch


def _never() -> int:
    return 0


_tails: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def wal_tail_of(wal, sched) -> WalTail:
    """The tail of `wal`, attached on first use (rows written before that are read
    from the files)."""
    tail = _tails.get(wal)
    if tail is None:
        tail = _tails[wal] = WalTail(sched, wal)
    return tail
