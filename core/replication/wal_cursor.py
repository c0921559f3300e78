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
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from spindle.core import log
from spindle.core.iproto.errors import ErrorCode
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogReader, format_filename
from spindle.core.xlog.format import XLOG, XlogError, split_transactions

from .wal_tail import WalTail, vclock_covers

READ_CHUNK = 128 * 1024        # bytes read from a file at a time (a block is ~128 KiB)
TAIL_ROWS_PER_READ = 4096      # rows handed out of the tail per call
READ_BUDGET = 0.005            # seconds of file reading per call (then "call again")


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
                 offload: Callable[..., Any] | None = None):
        """`offload(fn, *args)` runs the reading and decoding of a file block
        elsewhere while the caller's fiber waits (coio.run_in_thread): a block of
        128 KiB takes ~20 ms of CPU to decode, more on a busy machine."""
        self.wal = wal
        self.tail = tail
        self._offload = offload
        self.vclock = vclock.copy()     # every row up to here has been handed out
        self.mode = "files"             # "files" or "tail" (tests and logs)
        self.files_read = 0             # files opened so far (tests)
        self._reader: XlogReader | None = None
        self._blocks = None             # the reader's block generator
        self._file_vclock: VClock | None = None
        self._pending: list[XRow] = []  # rows of a transaction cut by a block end
        self._tail_seq: int | None = None
        if tail.reaches(self.vclock):
            self._enter_tail()

    def close(self) -> None:
        self._close_file()

    # ------------------------------------------------------------------ API

    def read(self) -> list[list[XRow]] | None:
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

    # ------------------------------------------------------------------ tail

    def _enter_tail(self) -> None:
        self._close_file()
        self._file_vclock = None
        self._tail_seq = self.tail.seek(self.vclock)
        self.mode = "tail"

    def _read_tail(self) -> list[list[XRow]] | None:
        out: list[list[XRow]] = []
        rows = 0
        got_batch = False
        while rows < TAIL_ROWS_PER_READ:
            try:
                batch = self.tail.get(self._tail_seq)
            except LookupError:
                # The tail dropped rows this cursor has not read: back to the files.
                log.verbose("relay: fell behind the in-memory WAL tail at %s", self.vclock)
                self._tail_seq = None
                self.mode = "files"
                return out
            if batch is None:
                break
            got_batch = True
            self._tail_seq += 1
            for tx in split_transactions(batch.rows)[0]:
                fresh = drop_covered(tx, self.vclock)
                if fresh:
                    out.append(fresh)
                    rows += len(fresh)
        return out if got_batch else None

    # ----------------------------------------------------------------- files

    def _read_files(self) -> list[list[XRow]] | None:
        """Rows of the first block that has any (a block of 128 KiB decodes in about
        20 ms), or [] after READ_BUDGET spent on blocks the cursor had already; None
        when the cursor has to wait. With the cursor switched to the tail the caller
        reads the tail at once."""
        deadline = time.monotonic() + READ_BUDGET
        while time.monotonic() < deadline:
            if self._reader is None and not self._open_next():
                return [] if self._tail_seq is not None else None
            block = self._next_block()
            if block is not None:
                txs = self._take_block(block.rows)
                if txs or self._tail_seq is not None:
                    return txs
                continue
            # No more data for now: the end of a closed file, of the file being
            # written, or of a file a crash left unfinished.
            if self._reader.eof_marker:
                self._close_file()
                continue
            if not self._has_next_file():
                # The newest file: everything written is read, the tail has the rest.
                self._switch_to_tail()
                return [] if self._tail_seq is not None else None
            # A newer file exists, so this one is finished; the WAL writes the EOF
            # marker before it creates the next file, so a second look settles it.
            self._blocks = self._reader.blocks()
            block = self._next_block()
            if block is not None:
                txs = self._take_block(block.rows)
                if txs or self._tail_seq is not None:
                    return txs
                continue
            if not self._reader.eof_marker:
                log.warn("relay: %s ends without an EOF marker, going on with the next "
                         "file", self._reader.path)
            self._close_file()
        return []

    def _next_block(self):
        if self._offload is None:
            return next(self._blocks, None)
        return self._offload(next, self._blocks, None)

    def _take_block(self, rows: list[XRow]) -> list[list[XRow]]:
        txs, self._pending = split_transactions(rows, self._pending)
        written = self.wal.vclock
        out = []
        for tx in txs:
            if not vclock_covers(written, _tx_vclock(tx)):
                # Written to the file, not yet reported to tx: the tail will have it.
                self._switch_to_tail()
                return out
            fresh = drop_covered(tx, self.vclock)
            if fresh:
                out.append(fresh)
        return out

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
            self._reader = XlogReader(path, expected_type=XLOG, chunk_size=READ_CHUNK)
        except FileNotFoundError:
            raise XlogGapError(self.vclock, start) from None
        self._blocks = self._reader.blocks()
        self._file_vclock = start
        self._pending = []
        self.files_read += 1
        self.mode = "files"
        return True

    def _has_next_file(self) -> bool:
        current = self._file_vclock.signature
        return any(clock.signature > current for clock in self.wal.xlog_vclocks())

    def _close_file(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader = None
        self._blocks = None


def _tx_vclock(tx: list[XRow]) -> VClock:
    clock = VClock()
    for row in tx:
        if row.lsn > clock.get(row.replica_id):
            clock.reset(row.replica_id, row.lsn)
    return clock
