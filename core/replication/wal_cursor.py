"""The relay's recovery (relay->r of the seed): every WAL row after a vclock, in order.

A WalCursor starts at a vclock (the subscriber's, or a JOIN's start vclock) and hands out
transactions of rows not covered by it, following its `vclock` as it goes. It reads:

* **files** while the rows it needs are older than the in-memory tail: the newest
  .xlog whose header vclock is <= the cursor's, then the following ones (the current
  file is read while it grows), one block per call so the loop is never held long;
* **the tail** (wal_tail.py) once it has reached it, following batches as the WAL
  completes them.

Switching never loses or repeats a row. The rule: the cursor leaves the files at the
first row the tx thread does not know as written yet (beyond `wal.vclock`) or at the end
of the newest file. At that point everything before is covered by the cursor, so the
cursor is >= wal.vclock >= tail.base_vclock and every row it still needs is in the tail;
rows the tail holds that the cursor has already read are dropped by the LSN check,
which also makes a start vclock that is not a prefix of this WAL (a peer of a
master-master pair) work. If the tail drops a batch the cursor has not read yet, the
cursor goes back to the files from its vclock.

With `wire_sync` set (the relay's cursors), transactions read from files come as
`WireTx` (wire_tx.py): their rows framed for the wire as stored, with that sync, and
only blocks with rows outside that form are decoded into XRows; blocks read one after
another (up to GROUP_BYTES) are scanned as one payload and consecutive transactions of
one replica id come as one WireTx, so a file of one-row transactions, one block each,
costs little per row. Transactions of the
tail come framed from the bytes the WAL wrote, a run of one replica id's plain
transactions as one WireTx (wire_tx.WireRun). A helper-thread call reads blocks for
up to READ_BUDGET, so small blocks (one per transaction when every commit waits for
the WAL) do not cost a thread hand-off each.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator, Sequence

from spindle.core import log
from spindle.core.iproto.errors import ErrorCode
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogReader, format_filename
from spindle.core.xlog.format import (
    XLOG, Block, XlogError, decode_block_rows, split_transactions,
)

from .wal_tail import TailBatch, WalTail, vclock_covers
from .wire_tx import (NotForwardable, WireRun, WireTx, decode_tail, plain_tx, scan_block,
                      unframe)

READ_CHUNK = 128 * 1024        # bytes read from a file at a time (a block is ~128 KiB)
TAIL_ROWS_PER_READ = 4096      # rows handed out of the tail per call
READ_BUDGET = 0.005            # seconds of file reading per call (then "call again")
GROUP_BYTES = 64 * 1024        # block payloads scanned together (wire_tx.scan_block)

Transaction = list[XRow] | WireTx


class XlogGapError(XlogError):
    """Rows the cursor needs are in no file any more (or never were)."""

    type = "XlogGapError"

    def __init__(self, start: VClock, end: VClock):
        super().__init__(f"Missing .xlog file between LSN {start.signature} {start} "
                         f"and {end.signature} {end}")
        # 2.6.0 sends errors that are not ClientErrors or SystemErrors with this code
        self.code = ErrorCode.ER_PROC_LUA


def drop_covered(tx: list[XRow], vclock: VClock) -> list[XRow]:
    """The rows of `tx` not covered by `vclock`, which follows them."""
    out = []
    for row in tx:
        if row.lsn > vclock.get(row.replica_id):
            vclock.reset(row.replica_id, row.lsn)
            out.append(row)
    return out


class WalCursor:
    def __init__(self, wal, tail: WalTail, vclock: VClock,
                 offload: Callable[..., Any] | None = None, wire_sync: int | None = None):
        """`offload(fn, *args)` runs the reading and decoding of file blocks
        elsewhere while the caller's fiber waits (coio.run_in_thread): a block of
        128 KiB takes ~20 ms of CPU to decode, more on a busy machine. `wire_sync`:
        hand out transactions of files as WireTx framed with this sync."""
        self.wal = wal
        self.tail = tail
        self._offload = offload
        self._wire_sync = wire_sync
        self.vclock = vclock.copy()     # every row up to here has been handed out
        self.mode = "files"             # "files" or "tail" (tests and logs)
        self.files_read = 0             # files opened so far (tests)
        self._reader: XlogReader | None = None
        self._blocks: Iterator[Block] | None = None     # the reader's block generator
        self._file_vclock: VClock | None = None
        self._pending: list[XRow] = []  # rows of a transaction cut by a block end
        self._deferred_error: BaseException | None = None   # met after a batch's blocks
        self._tail_seq: int | None = None
        if tail.reaches(self.vclock):
            self._enter_tail()

    def close(self) -> None:
        self._close_file()

    # ------------------------------------------------------------------ API

    def read(self) -> list[Transaction] | None:
        """Transactions available now. None means "nothing until the WAL writes
        again" (wait()); a list, even an empty one, means "call again" — file mode
        reads about one block per call so the loop is never held for long."""
        if self._tail_seq is None:
            txs = self._read_files()
            if self._tail_seq is None:
                return txs
            # Switched to the tail: go on there at once.
            more = self._read_tail()
            if more is None:
                return txs or None
            return (txs or []) + more
        return self._read_tail()

    def wait(self, timeout: float | None) -> bool:
        """Park until the WAL writes something new (or `timeout`)."""
        return self.tail.cond.wait(timeout)

    def caught_up(self) -> bool:
        """Whether the cursor reads the tail and has read every batch in it."""
        return self._tail_seq is not None and self._tail_seq >= self.tail.next_seq

    def urgent_unread(self) -> bool:
        """Whether a batch the tail marked urgent is not read yet (True while the
        cursor reads files: it never waits there)."""
        return self._tail_seq is None or self.tail.urgent_seq >= self._tail_seq

    # ------------------------------------------------------------------ tail

    def _enter_tail(self) -> None:
        self._close_file()
        self._file_vclock = None
        self._tail_seq = self.tail.seek(self.vclock)
        self.mode = "tail"

    def _read_tail(self) -> list[Transaction] | None:
        out: list[Transaction] = []
        sync = self._wire_sync
        run = WireRun(0 if sync is None else sync)   # (given nothing without a wire sync)
        rows = 0
        got_batch = False
        assert self._tail_seq is not None   # (read() comes here in tail mode)
        while rows < TAIL_ROWS_PER_READ:
            try:
                batch = self.tail.get(self._tail_seq)
            except LookupError:
                # The tail dropped rows this cursor has not read: back to the files.
                log.verbose("relay: fell behind the in-memory WAL tail at %s", self.vclock)
                self._tail_seq = None
                self.mode = "files"
                run.flush(out)
                return out
            if batch is None:
                break
            got_batch = True
            self._tail_seq += 1
            if self._wire_sync is not None:
                if batch.frames is not None:
                    rows += self._take_span(batch, run, out)
                    continue
                if batch.encoded is not None:
                    assert batch.rows is not None   # (a batch with its bytes keeps its rows)
                    rows += self._take_encoded(batch.rows, batch.encoded, run, out)
                    continue
            run.flush(out)
            for tx in split_transactions(batch.xrows())[0]:
                fresh = drop_covered(tx, self.vclock)
                if fresh:
                    out.append(fresh)
                    rows += len(fresh)
        run.flush(out)
        return out if got_batch else None

    def _take_span(self, batch: TailBatch, run: WireRun, out: list[Transaction]) -> int:
        """_take_encoded of a span (wal_tail.py): whole, by its LSN range, unless the
        cursor has part of it (then its rows, decoded, as any batch's)."""
        vclock = self.vclock
        frames = batch.frames
        assert frames is not None   # (a span)
        have = vclock.get(batch.replica_id)
        if have >= batch.lsn:
            return 0
        if have >= batch.first_lsn:
            return self._take_encoded(batch.xrows(), unframe(frames), run, out)
        vclock.reset(batch.replica_id, batch.lsn)
        run.add_span(batch.replica_id, batch.first_lsn, batch.lsn, batch.timestamp,
                     frames, batch.count, out)
        return batch.count

    def _take_encoded(self, rows: list[XRow], encoded: Sequence[bytes], run: WireRun,
                      out: list[Transaction]) -> int:
        """The fresh transactions of a tail batch whose rows come with the bytes the
        WAL wrote: added to `run` when plain_tx (framed from those bytes later, no
        row encoded again); rows one by one as usual otherwise, and for a
        transaction the cursor has part of. Returns the rows added."""
        vclock = self.vclock
        added = start = 0
        for end, row in enumerate(rows, 1):
            if not row.is_commit:
                continue
            tx = rows[start:end]
            if plain_tx(tx) and vclock.get(row.replica_id) < tx[0].lsn:
                vclock.reset(row.replica_id, row.lsn)
                run.add(tx, encoded[start:end], out)
                added += len(tx)
            else:
                run.flush(out)
                fresh = drop_covered(tx, vclock)
                if fresh:
                    out.append(fresh)
                    added += len(fresh)
            start = end
        return added

    # ----------------------------------------------------------------- files

    def _read_files(self) -> list[Transaction] | None:
        """Rows of the first batch of blocks that has any (blocks read for up to
        READ_BUDGET in the helper), or [] after READ_BUDGET spent on blocks the cursor
        had already; None when the cursor has to wait. With the cursor switched to the
        tail the caller reads the tail at once."""
        deadline = time.monotonic() + READ_BUDGET
        while time.monotonic() < deadline:
            if self._reader is None and not self._open_next():
                return [] if self._tail_seq is not None else None
            reader = self._reader
            assert reader is not None   # open, or opened by _open_next
            blocks = self._next_blocks()
            if blocks:
                txs = self._take_blocks(blocks)
                if txs or self._tail_seq is not None:
                    return txs
                continue
            # No more data for now: the end of a closed file, of the file being
            # written, or of a file a crash left unfinished.
            if reader.eof_marker:
                self._close_file()
                continue
            if not self._has_next_file():
                # The newest file: everything written is read, the tail has the rest.
                self._switch_to_tail()
                return [] if self._tail_seq is not None else None
            # A newer file exists, so this one is finished; the WAL writes the EOF
            # marker before it creates the next file, so a second look settles it.
            self._blocks = reader.blocks()
            blocks = self._next_blocks()
            if blocks:
                txs = self._take_blocks(blocks)
                if txs or self._tail_seq is not None:
                    return txs
                continue
            if not reader.eof_marker:
                log.warn("relay: %s ends without an EOF marker, going on with the next "
                         "file", reader.path)
            self._close_file()
        return []

    def _next_blocks(self) -> list:
        """The next blocks of the file, prepared (`_prepare`); [] when there are no
        more for now. An error met after some blocks is raised by the next call, so
        the rows before it go out first, as when blocks were read one at a time."""
        error, self._deferred_error = self._deferred_error, None
        if error is not None:
            raise error
        covered = self._covered() if self._wire_sync is not None else {}
        if self._offload is None:
            return self._read_blocks(covered)
        return self._offload(self._read_blocks, covered)

    def _covered(self) -> dict[int, int]:
        """Per replica id, the LSN up to which a transaction of its rows is dropped
        whole by `_take_tx` (covered by the cursor, and written as far as tx knows:
        both only grow while the helper reads)."""
        written = self.wal.vclock
        return {replica_id: min(lsn, written.get(replica_id))
                for replica_id, lsn in self.vclock.items() if replica_id}

    def _read_blocks(self, covered: dict[int, int]) -> list:
        """Runs in the helper thread: blocks for up to READ_BUDGET, prepared
        (`_prepare_group`) up to GROUP_BYTES of payload at a time."""
        prepared: list = []
        deadline = time.monotonic() + READ_BUDGET
        open_tx = bool(self._pending)       # the next block may end a transaction
        group: list = []
        size = 0
        error = None
        blocks = self._blocks
        assert blocks is not None   # (a file is open while its blocks are read)
        try:
            for block in blocks:
                group.append(block)
                size += len(block.data)
                out_of_time = time.monotonic() > deadline
                if size >= GROUP_BYTES or out_of_time:
                    group, size, open_tx = [], 0, self._prepare_group(group, covered,
                                                                      open_tx, prepared)
                if out_of_time:
                    break
        except Exception as exc:   # noqa: BLE001 - raised in order, below
            error = exc
        try:
            if group:
                self._prepare_group(group, covered, open_tx, prepared)
        except Exception as exc:   # noqa: BLE001 - a row before the block that failed
            error = exc
        if error is not None:
            if not prepared:
                raise error
            self._deferred_error = error    # raised by the next call
        return prepared

    def _prepare_group(self, group: list, covered: dict[int, int], open_tx: bool,
                       prepared: list) -> bool:
        """Prepare blocks read one after another into `prepared`; returns whether a
        transaction may be left open after them. Small blocks (one per transaction
        when every commit waited for the WAL) are scanned as one payload, their
        transactions joined into runs; a group scan_block refuses goes block by
        block, as its errors would."""
        if len(group) > 1 and self._wire_sync is not None:
            payload = b"".join([block.data for block in group])
            try:
                txs, rest = scan_block(payload, self._wire_sync, covered=covered,
                                       keep_first=open_tx, runs=True)
            except NotForwardable:
                pass
            else:
                tail = decode_tail(payload, rest)
                prepared.append((txs, tail))
                return bool(tail) or (open_tx and not payload)
        for block in group:
            item = self._prepare(block, covered, open_tx)
            prepared.append(item)
            if isinstance(item, list):
                open_tx = True          # may be: scan_block never saw these rows
            else:
                open_tx = bool(item[1]) or (open_tx and not block.data)
        return open_tx

    def _prepare(self, block, covered: dict[int, int], open_tx: bool
                 ) -> list[XRow] | tuple[list[WireTx], list[XRow]]:
        """A block's rows (XRows), or with `wire_sync` its whole transactions as
        WireTx (those `covered` left out) and the rows of one it leaves unfinished
        (XRows)."""
        if self._wire_sync is None:
            return block.rows
        try:
            txs, rest = scan_block(block.data, self._wire_sync, covered=covered,
                                   keep_first=open_tx)
        except NotForwardable:
            return decode_block_rows(block.offset, block.data)
        return txs, decode_tail(block.data, rest)

    def _take_blocks(self, blocks: list) -> list[Transaction]:
        out: list[Transaction] = []
        for block in blocks:
            if isinstance(block, list):
                done = self._take_rows(block, out)
            else:
                txs, rest = block   # (_prepare's WireTx and leftover rows)
                done = self._take_wire(txs, rest, out)
            if done:
                break
        return out

    def _take_rows(self, rows: list[XRow], out: list[Transaction]) -> bool:
        """Add the fresh rows of a block's XRows to `out`; True once the cursor
        switched to the tail."""
        txs, self._pending = split_transactions(rows, self._pending)
        return any(self._take_tx(tx, out) for tx in txs)

    def _take_tx(self, tx: list[XRow], out: list[Transaction]) -> bool:
        if not vclock_covers(self.wal.vclock, _tx_vclock(tx)):
            # Written to the file, not yet reported to tx: the tail will have it.
            self._switch_to_tail()
            return True
        fresh = drop_covered(tx, self.vclock)
        if fresh:
            out.append(fresh)
        return False

    def _take_wire(self, txs: list[WireTx], rest: list[XRow],
                   out: list[Transaction]) -> bool:
        """`_take_rows` for a scanned block: a transaction of one replica id goes as
        it is unless the cursor has some of its rows already."""
        if not txs:
            self._pending += rest
            return False
        if self._pending:
            # ends the open transaction (and may be a run of more after it)
            if self._take_rows(txs[0].rows(), out):
                return True
            txs = txs[1:]
        vclock, written = self.vclock, self.wal.vclock
        for tx in txs:
            replica_id = tx.replica_id
            if not replica_id:                  # rows of several ids: one by one
                if self._take_tx(tx.rows(), out):
                    return True
                continue
            if written.get(replica_id) < tx.lsn:
                self._switch_to_tail()
                return True
            have = vclock.get(replica_id)
            if have >= tx.lsn:
                continue                        # the cursor has all of it
            if have >= tx.first_lsn:            # some of it: drop those
                self._take_rows(tx.rows(), out)
                continue
            vclock.reset(replica_id, tx.lsn)
            out.append(tx)
        self._pending = rest
        return False

    def _switch_to_tail(self) -> None:
        if not self.tail.reaches(self.vclock):
            # Cannot happen with a tail attached before this cursor read anything
            # (cursor >= wal.vclock >= tail base); stay on the files and retry.
            log.warn("relay: WAL tail starts at %s, cursor at %s", self.tail.base_vclock,
                     self.vclock)
            return
        self._enter_tail()

    def _open_next(self) -> bool:
        """Open the next file to read: the newest one starting at or before the cursor
        at first, then the one after the file just read. False when there is none
        (the cursor is then in the tail, or waits)."""
        index = self.wal.xlog_vclocks()
        if self._file_vclock is None:
            candidates = [clock for clock in index if vclock_covers(self.vclock, clock)]
            if not candidates:
                if not vclock_covers(self.vclock, self.wal.vclock):
                    # Rows after the cursor were written, and no file has them.
                    raise XlogGapError(self.vclock, index[0] if index else self.wal.vclock)
                self._switch_to_tail()
                return False
            start = candidates[-1]
        else:
            later = [clock for clock in index
                     if clock.signature > self._file_vclock.signature]
            if not later:
                self._switch_to_tail()
                return False
            start = later[0]
            if not vclock_covers(self.vclock, start):
                raise XlogGapError(self.vclock, start)
        path = os.path.join(self.wal.wal_dir, format_filename(start.signature, ".xlog"))
        try:
            # scanned WireTx-wise in _prepare; decoded there only when that fails
            self._reader = XlogReader(path, expected_type=XLOG, chunk_size=READ_CHUNK,
                                      with_rows=self._wire_sync is None)
        except FileNotFoundError:
            raise XlogGapError(self.vclock, start) from None
        self._blocks = self._reader.blocks()
        self._file_vclock = start
        self._pending = []
        self.files_read += 1
        self.mode = "files"
        return True

    def _has_next_file(self) -> bool:
        assert self._file_vclock is not None   # (asked with a file open)
        current = self._file_vclock.signature
        return any(clock.signature > current for clock in self.wal.xlog_vclocks())

    def _close_file(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader = None
        self._blocks = None
        self._deferred_error = None     # of this file's blocks


def _tx_vclock(tx: list[XRow]) -> VClock:
    clock = VClock()
    for row in tx:
        if row.lsn > clock.get(row.replica_id):
            clock.reset(row.replica_id, row.lsn)
    return clock
