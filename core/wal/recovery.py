"""Local recovery: the newest .snap, then the .xlog files that follow it.

What 2.6.0 does, and so what this module does (messages are the oracle's, measured by
starting the real binary on damaged copies of the fixture directories):

* The newest snapshot is read whole; one without its EOF marker is never trusted
  ("snapshot `…' has no EOF marker").
* Xlogs are read from the newest one whose vclock <= the snapshot vclock. A row whose
  LSN is already covered by the vclock (per replica component) is skipped. Rows reach
  `apply_row` grouped by transaction.
* A gap — the first xlog starts after the snapshot, or an xlog's PrevVClock is not the
  VClock of the xlog read before it — is XlogGapError "Missing .xlog file between LSN
  25 {1: 25} and 26 {1: 26}" (the recovery vclock, then the next file's vclock);
  with force_recovery it is logged, followed by "ignoring a gap in LSN", and the
  vclock jumps to the file's so the lost LSNs are never reused.
* An xlog without EOF marker (the last one after a crash) gives the warning
  "file `…` wasn't correctly closed"; a torn last block is dropped silently (the
  rows of a transaction it cut are not applied). The file is not changed here: the
  WAL writer cuts the tail when it reopens that file for appending, as 2.6.0 does.
* A damaged block in the middle: "can't open tx: tx checksum mismatch" and the error
  XlogError "tx checksum mismatch" (box then dies with "can't initialize storage: …");
  with force_recovery the block is skipped and reading goes on at the next block.
* Files with a bad header, a foreign "Instance:" or a name that does not match their
  vclock: XlogError "<path>: invalid instance UUID" / "<path>: signature check
  failed"; with force_recovery the file is logged and ignored.
* A row that `apply_row` refuses is fatal, or with force_recovery logged as
  "skipping row {1: 11}" plus the error, and recovery goes on.
* "%.1fM rows processed" every 100,000 rows of a file; "removed <path>" for every
  `.inprogress` leftover, deleted once recovery is done.

The "instance uuid …", "instance vclock …", "recovery start" lines and the
"can't initialize storage: …" fatal line belong to box, which drives this function.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from spindle.core import log
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.row_block import UnreadableRow, visit_rows
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogReader, list_files, read_meta, remove_inprogress
from spindle.core.xlog.format import SNAP, XLOG, CorruptBlock, XlogError, XlogMeta

ROWS_PER_LOG_LINE = 100_000


class XlogGapError(XlogError):
    type = "XlogGapError"

    def __init__(self, from_vclock: VClock, to_vclock: VClock):
        super().__init__(f"Missing .xlog file between LSN {from_vclock.signature} {from_vclock}"
                         f" and {to_vclock.signature} {to_vclock}")
        self.from_vclock = from_vclock.copy()
        self.to_vclock = to_vclock.copy()


@dataclass(frozen=True, slots=True)
class RecoveryProgress:
    """What a progress bar needs: bytes of all files to read, rows so far."""

    phase: str            # "snapshot" or "xlog"
    path: str
    rows: int             # rows read so far, all files
    bytes_done: int
    bytes_total: int
    # what the instance is while it loads (box.info shows them, as 2.6.0's): the
    # live vclock of recovery (the snapshot's, then each transaction's), and the UUID
    vclock: VClock
    instance_uuid: str | None

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.bytes_total if self.bytes_total else 1.0


@dataclass
class RecoveryResult:
    vclock: VClock                                  # the instance vclock after recovery
    last_checkpoint_vclock: VClock | None = None    # the snapshot recovered from
    instance_uuid: str | None = None
    snapshot_path: str | None = None
    checkpoints: list[VClock] = field(default_factory=list)   # every .snap, oldest first
    xlogs: list[str] = field(default_factory=list)            # xlogs read, in order
    snapshot_rows: int = 0
    rows_applied: int = 0
    rows_skipped: int = 0          # already covered by the vclock
    transactions: int = 0
    not_closed: list[str] = field(default_factory=list)       # xlogs without EOF marker
    torn_tails: dict[str, int] = field(default_factory=dict)  # path -> size of good data
    corrupt_blocks: list[str] = field(default_factory=list)   # skipped with force_recovery
    gaps: list[str] = field(default_factory=list)             # ignored with force_recovery
    failed_rows: list[tuple[int, int]] = field(default_factory=list)  # (replica_id, lsn)
    removed: list[str] = field(default_factory=list)          # .inprogress leftovers

    @property
    def bootstrap_needed(self) -> bool:
        """No snapshot: the directory holds no instance yet (box bootstraps)."""
        return self.snapshot_path is None



_Error = TypeVar("_Error", bound=BaseException)


def logged(exc: _Error) -> _Error:
    """Mark an error this module logged already (as 2.6.0's e->log() before its
    panic), so whoever stops on it does not log it a second time."""
    # (any exception class may carry the mark; lua/box reads it with getattr)
    exc.logged = True  # type: ignore[attr-defined]
    return exc


class _BlockError(XlogError):
    """A damaged block as recovery reports it: 2.6.0's reason alone ("tx checksum
    mismatch"), with the file and the block's offset for whoever stops on it."""

    def __init__(self, reason: str, path: str, offset: int):
        super().__init__(reason)
        self.path, self.offset = path, offset


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        try:
            return f"{ErrorCode(exc.code).name}: {exc}"
        except ValueError:
            pass
    if isinstance(exc, BoxError):
        return f"{exc.type}: {exc}"
    return f"{type(exc).__name__}: {exc}"


class _Recovery:
    def __init__(self, memtx_dir: str, wal_dir: str,
                 apply_snapshot_row: Callable[[XRow], None],
                 apply_row: Callable[[list[XRow]], None], force_recovery: bool,
                 instance_uuid: str | None,
                 progress: Callable[[RecoveryProgress], None] | None):
        self.memtx_dir = memtx_dir
        self.wal_dir = wal_dir
        self.apply_snapshot_row = apply_snapshot_row
        self.apply_row = apply_row
        self.force = force_recovery
        self.expected_uuid = instance_uuid
        self.progress = progress
        self.result = RecoveryResult(VClock())
        self.rows = 0
        self.bytes_done = 0
        self.bytes_total = 0

    # -- scanning

    def _refuse(self, exc: XlogError) -> None:
        """A file that cannot be used: fatal, or skipped with force_recovery."""
        log.error("XlogError: %s", exc)
        if not self.force:
            raise logged(exc)

    def _scan(self, dirname: str, filetype: str, uuid: str | None,
              ) -> list[tuple[str, XlogMeta, VClock]]:
        """(path, header, the header's vclock) of each usable file, oldest first."""
        found: list[tuple[str, XlogMeta, VClock]] = []
        ext = ".snap" if filetype == SNAP else ".xlog"
        if not os.path.isdir(dirname):
            return found
        for entry in list_files(dirname, ext):
            try:
                meta = read_meta(entry.path)
            except XlogError as exc:
                self._refuse(XlogError(f"{entry.path}: {exc}"))
                continue
            if meta.filetype != filetype:
                error = ClientError(ErrorCode.ER_INVALID_XLOG_TYPE, filetype, meta.filetype)
                log.error("%s", _error_text(error))
                if not self.force:
                    raise logged(error)
                continue
            vclock = meta.vclock
            if vclock is None or meta.signature != entry.signature:
                self._refuse(XlogError(f"{entry.path}: signature check failed"))
                continue
            if uuid is not None and meta.instance_uuid != uuid:
                self._refuse(XlogError(f"{entry.path}: invalid instance UUID"))
                continue
            found.append((entry.path, meta, vclock))
        return found

    # -- progress

    def _report(self, phase: str, path: str, file_done: int, file_base: int) -> None:
        if self.progress is not None:
            result = self.result
            self.progress(RecoveryProgress(phase, path, self.rows, file_base + file_done,
                                           self.bytes_total, result.vclock,
                                           result.instance_uuid))

    def _apply_forced(self, row: XRow) -> None:
        """A snapshot row applied under force_recovery: a row that cannot be is
        logged and left out, as 2.6.0 does."""
        try:
            self.apply_snapshot_row(row)
        except (BoxError, ValueError) as exc:
            log.error("can't apply row: ")
            log.error("%s", _error_text(exc))

    def _log_skipped(self, reader: XlogReader, reported: int, path: str) -> int:
        for err in reader.skipped[reported:]:
            reason = err.reason if isinstance(err, CorruptBlock) else str(err)
            log.error("can't open tx: %s", reason)
            self.result.corrupt_blocks.append(f"{path}: {err}")
        return len(reader.skipped)

    def _read_error(self, exc: XlogError, path: str) -> XlogError:
        """2.6.0 reports a damaged block by its reason alone ("tx checksum mismatch")."""
        error: XlogError
        if isinstance(exc, CorruptBlock):
            log.error("can't open tx: %s", exc.reason)
            error = _BlockError(exc.reason, path, exc.offset)
        else:
            error = exc
        log.error("XlogError: %s", error)
        return logged(error)

    # -- the snapshot

    def recover_snapshot(self, path: str, meta: XlogMeta) -> None:
        result = self.result
        log.info("recovering from `%s'", path)
        size = os.path.getsize(path)
        file_rows = 0
        reported = 0
        # Each row is read into one XRow (visit_rows) and applied before the next is
        # read over it: a snapshot row is kept by no one, and a new XRow per row was
        # ~15% of reading it.
        row = XRow(0)
        apply = self.apply_snapshot_row if not self.force else self._apply_forced
        with XlogReader(path, expected_type=SNAP, force_recovery=self.force,
                        with_rows=False) as reader:
            try:
                for block in reader.blocks():
                    try:
                        count = visit_rows(block.data, row, apply)
                    except UnreadableRow as exc:
                        # a row of this block unreadable: what decode_block says of it
                        corrupt = CorruptBlock(block.offset, "can't parse row",
                                               row_offset=getattr(exc.error, "offset", None))
                        if not self.force:
                            raise corrupt from exc.error
                        # (2.6.0 too has applied the rows before it, and skips the rest)
                        reader.skipped.append(corrupt)
                        count = exc.visited
                    for done in range(file_rows // ROWS_PER_LOG_LINE + 1,
                                      (file_rows + count) // ROWS_PER_LOG_LINE + 1):
                        log.info("%.1fM rows processed", done * ROWS_PER_LOG_LINE / 1e6)
                    file_rows += count
                    self.rows += count
                    reported = self._log_skipped(reader, reported, path)
                    self._report("snapshot", path, reader.position, 0)
            except XlogError as exc:
                raise self._read_error(exc, path) from exc
            self._log_skipped(reader, reported, path)
            reader.check_snapshot_complete()
        result.snapshot_rows = file_rows
        self.bytes_done = size
        self._report("snapshot", path, 0, size)

    # -- the xlogs

    def recover_xlogs(self, xlogs: list[tuple[str, XlogMeta, VClock]], start: int) -> None:
        prev_vclock: VClock | None = None    # the previous file's (None: the first file)
        for path, meta, file_vclock in xlogs[start:]:
            vclock = self.result.vclock
            if prev_vclock is None:
                gap = file_vclock.compare(vclock) not in (-1, 0)
            else:
                gap = meta.prev_vclock is not None and meta.prev_vclock != prev_vclock
            if gap:
                error = XlogGapError(vclock, file_vclock)
                log.error("XlogGapError: %s", error)
                if not self.force:
                    raise logged(error)
                log.warn("ignoring a gap in LSN")
                self.result.gaps.append(str(error))
                # The lost rows keep their LSNs: new writes must not reuse them
                # (2.6.0 comes out of this at the vclock of the file after the gap).
                vclock.merge(file_vclock)
            self.recover_xlog(path)
            prev_vclock = file_vclock

    def recover_xlog(self, path: str) -> None:
        result = self.result
        vclock = result.vclock
        log.info("recover from `%s'", path)
        base = self.bytes_done
        file_rows = 0
        reported = 0
        pending: list[XRow] = []
        with XlogReader(path, expected_type=XLOG, force_recovery=self.force) as reader:
            try:
                for block in reader.blocks():
                    for row in block.rows:
                        pending.append(row)
                        if row.is_commit:
                            file_rows = self._apply_tx(pending, vclock, file_rows)
                            pending = []
                    reported = self._log_skipped(reader, reported, path)
                    self._report("xlog", path, reader.position, base)
            except XlogError as exc:
                raise self._read_error(exc, path) from exc
            self._log_skipped(reader, reported, path)
            if reader.eof_marker:
                if pending:   # a closed file never ends inside a transaction; be lenient
                    self._apply_tx(pending, vclock, file_rows)
                log.info("done `%s'", path)
            else:
                log.warn("file `%s` wasn't correctly closed", path)
                result.not_closed.append(path)
                if reader.torn_tail is not None:
                    result.torn_tails[path] = reader.torn_tail.offset
            result.xlogs.append(path)
        self.bytes_done = base + os.path.getsize(path)
        self._report("xlog", path, 0, self.bytes_done)

    def _apply_tx(self, tx: list[XRow], vclock: VClock, file_rows: int) -> int:
        result = self.result
        known = vclock.get
        fresh = [row for row in tx if row.lsn > known(row.replica_id)]
        if len(fresh) != len(tx):
            result.rows_skipped += len(tx) - len(fresh)
            if not fresh:
                return file_rows
        # Like 2.6.0, the vclock moves before the rows are applied: with
        # force_recovery a refused row still counts as read.
        for row in fresh:
            if row.lsn > known(row.replica_id):
                vclock.reset(row.replica_id, row.lsn)
        try:
            self.apply_row(fresh)
        except (BoxError, ValueError) as exc:
            if not self.force:
                raise
            for row in fresh:
                log.error("skipping row {%d: %d}", row.replica_id, row.lsn)
                result.failed_rows.append((row.replica_id, row.lsn))
            log.error("%s", _error_text(exc))
        else:
            result.rows_applied += len(fresh)
            result.transactions += 1
        self.rows += len(fresh)
        return _count_rows(file_rows, len(fresh))

    # -- the whole flow

    def run(self) -> RecoveryResult:
        result = self.result
        snaps = self._scan(self.memtx_dir, SNAP, None)
        result.checkpoints = [vclock.copy() for _, _, vclock in snaps]
        if not snaps:
            self._remove_leftovers()
            return result
        snap_path, snap_meta, snap_vclock = snaps[-1]
        uuid = snap_meta.instance_uuid
        if self.expected_uuid is not None and self.expected_uuid != uuid:
            error = ClientError(ErrorCode.ER_INSTANCE_UUID_MISMATCH, self.expected_uuid, uuid)
            log.error("%s", _error_text(error))
            raise error
        result.instance_uuid = uuid
        result.snapshot_path = snap_path
        result.last_checkpoint_vclock = snap_vclock.copy()
        result.vclock = snap_vclock.copy()

        xlogs = self._scan(self.wal_dir, XLOG, uuid)
        start = self._first_xlog(xlogs, result.vclock)
        self.bytes_total = os.path.getsize(snap_path) + sum(
            os.path.getsize(path) for path, _, _ in xlogs[start:])
        self.recover_snapshot(snap_path, snap_meta)
        self.recover_xlogs(xlogs, start)
        self._remove_leftovers()
        return result

    @staticmethod
    def _first_xlog(xlogs: list[tuple[str, XlogMeta, VClock]], vclock: VClock) -> int:
        """The newest xlog starting at or before `vclock` (vclockset_match), else 0."""
        start = 0
        for i, (_, _, file_vclock) in enumerate(xlogs):
            if file_vclock.compare(vclock) in (-1, 0):
                start = i
        return start

    def _remove_leftovers(self) -> None:
        dirs = [self.wal_dir]
        if os.path.realpath(self.memtx_dir) != os.path.realpath(self.wal_dir):
            dirs.append(self.memtx_dir)
        for dirname in dirs:
            if not os.path.isdir(dirname):
                continue
            for path in remove_inprogress(dirname):
                log.info("removed %s", path)
                self.result.removed.append(path)


def _count_rows(file_rows: int, more: int) -> int:
    """`file_rows` + `more`, with a progress line for every ROWS_PER_LOG_LINE
    crossed."""
    total = file_rows + more
    for mark in range(file_rows // ROWS_PER_LOG_LINE + 1, total // ROWS_PER_LOG_LINE + 1):
        log.info("%.1fM rows processed", mark * ROWS_PER_LOG_LINE / 1e6)
    return total


def recover(memtx_dir: str, wal_dir: str, apply_snapshot_row: Callable[[XRow], None],
            apply_row: Callable[[list[XRow]], None], force_recovery: bool = False, *,
            instance_uuid: str | None = None,
            progress: Callable[[RecoveryProgress], None] | None = None) -> RecoveryResult:
    """Recover an instance's state from its files (see the module doc).

    `apply_snapshot_row(row)` gets every snapshot row (one XRow read over again for
    each: a caller that keeps rows keeps copies), `apply_row(rows)` every xlog
    transaction not yet covered by the vclock. `instance_uuid`, when the configuration
    names one, must match the snapshot's. `progress` is called after every block.
    Runs in the calling fiber; it yields only if `progress` does (box's yields once
    per time slice, between blocks, so the instance answers while it loads).
    """
    return _Recovery(memtx_dir, wal_dir, apply_snapshot_row, apply_row, force_recovery,
                     instance_uuid, progress).run()
