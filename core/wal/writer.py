"""The WAL writer: a thread that appends journal entries to .xlog files with group commit.

Only the tx thread calls the public methods. A fiber hands its rows to `write()`, which
queues a `JournalEntry` and parks the fiber. The writer thread takes *everything* queued
at once (the batch), assigns LSNs, writes the batch as one block (more if it passes
128 KiB, always at transaction boundaries), fsyncs once in 'fsync' mode, and posts one
completion per batch back through `Scheduler.call_soon_threadsafe`. It never touches
fibers; the tx side wakes them.

In 'write' mode an entry submitted while the thread is idle (nothing queued, nothing
being written) is not handed over: the entries submitted until the end of the current
loop iteration form the batch, and tx writes it itself in a hub callback at the next
iteration (`Scheduler.call_soon`), with the same code, then completes it at once. A
write() into the page cache is a few microseconds; the hand-over to the thread and the
wakeup back cost ~100 µs on a small VM, which dominated every autocommit statement.
The writer state (file, vclock, rollback flag) has one owner at a time: tx takes the
idle thread's place under the queue's lock (`_busy`), and anything that must be ordered
after an inline batch not yet written (a rotation, sync, gc, stop) hands that batch to
the thread first. The fiber still parks until its batch is written, as with the thread,
and while the thread is busy entries queue up for it as before (group commit).
A committer that is alone (no other fiber ready: nothing could join its batch before
that callback) writes its entry at once instead, then yields with
`Scheduler.yield_turn()`, which skips the loop iteration when it could only resume
that same fiber.

LSN assignment and the encoding of an entry (wal_assign_lsn) are journal.py's; the
xlog files — creation, rotation, cutting a failed write back, GC — wal_dir.py's.

Failure is 2.6.0's cascading rollback: when a batch cannot be written the file is cut
back to where the batch began, the WAL vclock does not move, and the writer (thread or
tx inline, the same code) refuses every later batch until tx has seen the failure of the
last entry it had submitted
(the "rollback anchor"). Then all failed entries complete at once, newest first, with
ER_WAL_IO, and writing resumes — so a transaction that saw a failed one's changes can
never reach the disk.

WAL watchers (wal_set_watcher, wal_clear_watcher: the relays' in-memory tail) are
called in tx with each batch written, in the order of the file.
"""
from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from spindle.core import log
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogWriter

from .journal import JournalEntry, assign_lsn, sign_entry
from .wal_dir import WalDir, WalIO

MODES = ("none", "write", "fsync")
DEFAULT_MAX_SIZE = 256 * 1024 * 1024
# A WAL watcher's callback: the rows of one batch written, each row's bytes (or None).
WalWatcher = Callable[[list[XRow], "list[bytes] | None"], None]


@dataclass
class _Control:
    kind: str
    arg: object = None
    result: object = None
    error: BaseException | None = None
    event: threading.Event = field(default_factory=threading.Event)
    fiber: object = None
    done: bool = False


class WalWriter(WalDir):
    """The WAL: the tx side (write, submit, rotate, sync, ...), the inline writer and
    the writer thread (see the module doc); the file operations are WalDir's."""

    def __init__(self, sched, wal_dir: str, instance_uuid: str, vclock: VClock, *,
                 mode: str = "write", max_size: int = DEFAULT_MAX_SIZE,
                 instance_id: int = 0, io: WalIO | None = None, compress: bool = True):
        if mode not in MODES:
            raise ValueError(f"wal_mode must be one of {MODES}, got {mode!r}")
        self.sched = sched
        self.wal_dir = wal_dir
        self.instance_uuid = instance_uuid
        self.mode = mode
        self.max_size = max_size
        self.instance_id = instance_id   # changes when the instance registers
        self.compress = compress
        self.io = io or WalIO()
        self.vclock = vclock.copy()      # the tx view: what is known to be written
        # WAL watchers (wal_set_watcher): called in tx with the rows of each batch
        # written and each row's bytes as written (None when nothing is written:
        # wal_mode 'none'), for relays forwarding them without encoding them again
        self.watchers: list[WalWatcher] = []
        self.batches = 0                 # batches completed (tests, stats)
        # tx-side rollback state (see the module doc)
        self._last_entry: JournalEntry | None = None
        self._rollback_anchor: JournalEntry | None = None
        self._rollback_queue: list[JournalEntry] = []
        self._stopped = False
        # writer-thread state
        self._wal_vclock = vclock.copy()
        self._file: XlogWriter | None = None
        self._in_rollback = False
        self._index: list[VClock] = []   # header vclocks of the xlogs in the dir
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()    # the queue's lock (tx takes it bare: cheaper)
        self._cv = threading.Condition(self._lock)
        self._busy = False               # the thread, or tx inline, owns the writer state
        # Batches the thread wrote (counted under the lock) and those tx completed:
        # tx writes inline only when they are equal, so that tx sees every batch,
        # its vclock and its rows (the watchers: the relays' WAL tail) in the
        # order of the file. Without this an inline batch written before tx ran the
        # completion of the thread's previous batch reached the watchers first, the
        # WAL vclock went back when that completion ran, and relays skipped the
        # thread's batch as already sent: rows lost on replicas (issue 21).
        self._thread_batches = 0
        self._completed_batches = 0
        # entries tx writes itself at the next loop iteration ('write' mode, idle thread)
        self._inline: list[JournalEntry] | None = None
        self._thread: threading.Thread | None = None
        if mode != "none":
            os.makedirs(wal_dir, exist_ok=True)
            self._scan_index()
            self._file = self._open_current()
            self._thread = threading.Thread(target=self._thread_main, name="wal", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ tx side

    def write(self, rows: Iterable[XRow], at_once: bool = False) -> VClock:
        """Write one transaction; the calling fiber yields and returns once it is
        written. Returns the vclock right after it; raises ClientError(ER_WAL_IO) on
        failure. `at_once`: not behind the fibers ready now, and without the yield
        after an inline write, for a row whose effect they must see when they run
        (a new leader's PROMOTE: it is read-only until that row is written)."""
        sched = self.sched
        if self.mode != "none" and (sched is None or sched.current is None):
            raise RuntimeError("WalWriter.write() must be called from a fiber")
        # Alone: no other fiber runs before the next iteration, so nothing could join
        # this entry's batch; it is written now instead of in a hub callback.
        entry = self.submit(rows, write_now=at_once or (sched is not None
                                                         and not sched.has_ready()))
        if entry.done:
            if self.mode != "none" and not at_once:
                sched.yield_turn()    # written now; a commit yields, as a WAL wait does
        else:
            entry.fiber = sched.current
            while not entry.done:
                sched.wait()
        if entry.error is not None:
            raise entry.error
        assert entry.vclock is not None   # (a written entry has the vclock after it)
        return entry.vclock

    def submit(self, rows: Iterable[XRow],
               on_done: Callable[[JournalEntry], None] | None = None,
               write_now: bool = False) -> JournalEntry:
        """Queue a transaction without waiting (txn_commit_async); `on_done(entry)` runs
        in tx when it completes. `write_now`: if it would start an inline batch, tx
        writes and completes it before returning (the caller is a fiber that no other
        fiber could join in a batch)."""
        rows = list(rows)
        if not rows:
            raise ValueError("a journal entry needs at least one row")
        if self._stopped or self._rollback_anchor is not None:
            if self._rollback_anchor is not None:
                log.error("Aborting transaction %d during cascading rollback",
                          self.vclock.signature)
            raise ClientError(ErrorCode.ER_WAL_IO)
        entry = JournalEntry(rows, self.instance_id, on_done)
        if self.mode == "none":
            self._write_none(entry)
            return entry
        self._last_entry = entry
        if self._inline is not None:
            self._inline.append(entry)
            return entry
        with self._lock:
            inline = (self.mode == "write" and self.sched is not None and not self._queue
                      and not self._busy
                      and self._thread_batches == self._completed_batches)
            if inline:
                self._busy = True        # the thread waits until tx has written
            else:
                self._queue.append(entry)
                self._cv.notify()
        if inline:
            if write_now:
                self._write_alone(entry)
            else:
                self._inline = [entry]
                self.sched.call_soon(self._flush_inline)
        return entry

    def rotate(self) -> VClock:
        """Close the current xlog if it has rows (the next write opens a new one) and
        return the WAL vclock after everything queued before: a checkpoint's vclock."""
        if self.mode == "none":
            return self.vclock.copy()
        if self._rollback_anchor is not None:
            raise ClientError(ErrorCode.ER_CHECKPOINT_ROLLBACK)
        return self._call("rotate")

    def sync(self) -> VClock:
        """Wait until everything queued so far is written; the WAL vclock then."""
        if self.mode == "none":
            return self.vclock.copy()
        return self._call("sync")

    def collect_garbage(self, vclock: VClock) -> list[str]:
        """Delete xlogs not needed to read rows after `vclock` (wal_collect_garbage):
        everything older than the newest file whose vclock <= `vclock`. Runs in the WAL
        thread so the file being written is never touched. Returns removed paths."""
        if self.mode == "none":
            return []
        return self._call("gc", vclock.copy())

    def xlog_vclocks(self) -> list[VClock]:
        """Header vclocks of the known xlogs, oldest first (relays, gc)."""
        if self.mode == "none":
            return []
        return self._call("index")

    @property
    def current_path(self) -> str | None:
        current = self._file
        return current.path if current is not None else None

    def stop(self) -> None:
        """Write what is queued, close the current xlog with its EOF marker, leave the
        empty next xlog, join the thread."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread is None:
            return
        self._call("stop")
        self._thread.join()
        self._thread = None

    # -- tx internals

    def _write_none(self, entry: JournalEntry) -> None:
        vclock = self.vclock.copy()
        try:
            assign_lsn(entry.rows, vclock, entry.instance_id, time.time())
        except (BoxError, ValueError) as exc:
            entry.error = exc if isinstance(exc, BoxError) else ClientError(ErrorCode.ER_WAL_IO)
        else:
            self.vclock = vclock
            entry.vclock = vclock.copy()
        self.batches += 1
        self._finish(entry)
        if entry.error is None and self.watchers:
            self._notify_watchers(entry.rows, None)

    def _call(self, kind: str, arg: object = None):
        if self._stopped and kind != "stop":
            raise ClientError(ErrorCode.ER_WAL_IO)
        ctrl = _Control(kind, arg)
        in_fiber = self.sched is not None and self.sched.current is not None
        if in_fiber:
            ctrl.fiber = self.sched.current
        with self._cv:
            inline, self._inline = self._inline, None
            if inline is not None:
                # Not written yet and must come first: the thread writes it now.
                self._queue.extend(inline)
                self._busy = False
            self._queue.append(ctrl)
            self._cv.notify()
        if in_fiber:
            while not ctrl.done:
                self.sched.wait()
        else:
            ctrl.event.wait()
        if ctrl.error is not None:
            raise ctrl.error
        return ctrl.result

    def _flush_inline(self) -> None:
        """Hub callback: write the inline batch in tx and complete it."""
        entries, self._inline = self._inline, None
        if entries is None:
            return          # handed to the thread meanwhile
        try:
            vclock, failed = self._write_entries(entries)
        finally:
            self._end_inline()
        self._complete_batch(entries, vclock, failed)

    def _end_inline(self) -> None:
        """tx is done with the writer state it took for an inline batch: the thread
        owns it again (and writes what queued meanwhile)."""
        with self._lock:
            self._busy = False
            if self._queue:
                self._cv.notify()

    def _write_alone(self, entry: JournalEntry) -> None:
        """An inline batch of this one entry, written and completed now (tx owns the
        writer state: `_busy` is set). The usual case — the current file has room, no
        rollback — runs here in one frame, the work of _write_entries, _write_batch
        and _complete_batch without their layers: a 1-row autocommit crosses every
        one of them. Anything else goes the general way."""
        current = self._file
        if (current is None or current.offset >= self.max_size or self._in_rollback
                or self._rollback_anchor is not None):
            self._inline = [entry]
            self._flush_inline()
            return
        start = current.offset
        try:
            data = sign_entry(entry, self._wal_vclock, time.time())
            if data is not None:
                current.write_block(data)
                assert entry.vclock is not None   # (sign_entry set it with the bytes)
                self._wal_vclock = entry.vclock
        except Exception as exc:
            self._cut_back(current, start, exc, (entry,))
            self._fail_batch((entry,))
        finally:
            self._end_inline()
        if entry.failed_in_batch:
            self._complete_batch([entry], self._wal_vclock, True)
            return
        self.vclock = self._wal_vclock
        self.batches += 1
        self._complete_entry(entry)

    def _control_done(self, ctrl: _Control) -> None:
        ctrl.done = True
        if ctrl.fiber is not None:
            self.sched.wakeup(ctrl.fiber)

    def _complete_batch(self, entries: list[JournalEntry], vclock: VClock,
                        failed: bool) -> None:
        """tx: the writer thread finished a batch."""
        self.vclock = vclock
        self.batches += 1
        if len(entries) == 1 and not failed and self._rollback_anchor is None:
            self._complete_entry(entries[0])
            return
        written: list[XRow] = []
        encoded: list[bytes] = []
        if failed and self._rollback_anchor is None:
            self._rollback_anchor = self._last_entry
        for entry in entries:
            if entry.failed_in_batch:
                self._rollback_queue.append(entry)
            else:
                if entry.error is None:
                    written.extend(entry.rows)
                    assert entry.encoded is not None   # (signed: sign_entry set it)
                    encoded.extend(entry.encoded)
                self._finish(entry)
        anchor = self._rollback_anchor
        if anchor is not None and any(entry is anchor for entry in entries):
            # Every entry sent before the failure became known is back: roll them all
            # back, newest first, then let the WAL thread write again.
            # The anchor stays set while callbacks run: what they submit is refused,
            # as 2.6.0 refuses writes until the rollback is over.
            queue, self._rollback_queue = self._rollback_queue, []
            for entry in reversed(queue):
                self._finish(entry)
            self._rollback_anchor = None
            with self._cv:
                self._queue.append(_Control("end_rollback"))
                self._cv.notify()
        if written and self.watchers:
            self._notify_watchers(written, encoded)

    def _complete_entry(self, entry: JournalEntry) -> None:
        """_complete_batch of the usual batch: one entry, written or refused alone,
        no rollback going on. The watchers get the entry's own lists (never changed)."""
        self._finish(entry)
        if entry.error is None and self.watchers:
            self._notify_watchers(entry.rows, entry.encoded)

    def _finish(self, entry: JournalEntry) -> None:
        entry.done = True
        if entry.fiber is not None:
            self.sched.wakeup(entry.fiber)
        if entry.on_done is not None:
            try:
                entry.on_done(entry)
            except Exception as exc:   # one txn's callback must not lose the others
                log.error("journal entry completion failed: %s", exc)

    def _notify_watchers(self, rows: list[XRow], encoded: list[bytes] | None) -> None:
        """wal_notify_watchers(): a batch is written. (A copy of the list: a watcher
        may clear itself; one watcher's failure must not keep the others from
        running.)"""
        for watcher in list(self.watchers):
            try:
                watcher(rows, encoded)
            except Exception as exc:
                log.error("WAL watcher %r failed: %s", watcher, exc)

    # ------------------------------------------------------------ writer thread

    def _thread_main(self) -> None:
        while True:
            with self._cv:
                while not self._queue or self._busy:
                    self._cv.wait()
                items = list(self._queue)
                self._queue.clear()
                self._busy = True
            written = 0
            try:
                stop, written = self._process_items(items)
                if stop:
                    return
            finally:
                with self._cv:
                    self._thread_batches += written
                    self._busy = False

    def _process_items(self, items: list) -> tuple[bool, int]:
        """Write the batches and run the controls, in order: whether `stop` came,
        and how many batches were written (their completions posted to tx)."""
        batch: list[JournalEntry] = []
        written = 0
        for item in items:
            if isinstance(item, JournalEntry):
                batch.append(item)
                continue
            if batch:
                self._process_batch(batch)
                written += 1
                batch = []
            if self._process_control(item):
                return True, written
        if batch:
            self._process_batch(batch)
            written += 1
        return False, written

    def _process_control(self, ctrl: _Control) -> bool:
        stop = False
        try:
            if ctrl.kind == "rotate":
                if self._in_rollback:
                    # The snapshot could hold changes that are being rolled back.
                    raise ClientError(ErrorCode.ER_CHECKPOINT_ROLLBACK)
                if self._file is not None and self._file.has_rows:
                    self._close_file()
                ctrl.result = self._wal_vclock.copy()
            elif ctrl.kind == "sync":
                ctrl.result = self._wal_vclock.copy()
            elif ctrl.kind == "gc":
                assert isinstance(ctrl.arg, VClock)   # (collect_garbage's)
                ctrl.result = self._collect_garbage(ctrl.arg)
            elif ctrl.kind == "index":
                ctrl.result = [clock.copy() for clock in self._index]
            elif ctrl.kind == "end_rollback":
                self._in_rollback = False
                return False
            elif ctrl.kind == "stop":
                stop = True
                self._shutdown()
        except Exception as exc:   # reported to the caller, the thread lives on
            log.error("WAL %s failed: %s", ctrl.kind, exc)
            ctrl.error = exc
        ctrl.event.set()
        if self.sched is not None:
            self.sched.call_soon_threadsafe(self._control_done, ctrl)
        return stop

    def _process_batch(self, entries: list[JournalEntry]) -> None:
        vclock, failed = self._write_entries(entries)
        self.sched.call_soon_threadsafe(self._complete_thread_batch, entries, vclock, failed)

    def _complete_thread_batch(self, entries: list[JournalEntry], vclock: VClock,
                               failed: bool) -> None:
        """tx: a batch the thread wrote is complete (in the order they were written:
        the thread posts them in order, and tx writes no batch of its own while one
        is posted and not completed yet)."""
        self._completed_batches += 1
        self._complete_batch(entries, vclock, failed)

    def _write_entries(self, entries: list[JournalEntry]) -> tuple[VClock, bool]:
        """Write a batch (by the owner of the writer state): the vclock after it and
        whether it failed; on failure every entry carries its error."""
        vclock = self._wal_vclock
        failed = self._in_rollback
        if not failed:
            try:
                vclock = self._write_batch(entries)
            except Exception:   # logged where it happened
                failed = True
                vclock = self._wal_vclock
        if failed:
            self._fail_batch(entries)
        else:
            self._wal_vclock = vclock
        # No copy: the writer never changes a vclock once it is the WAL's (see
        # _write_batch), so tx may share it with the last entry's.
        return vclock, failed

    def _fail_batch(self, entries: Iterable[JournalEntry]) -> None:
        """A batch could not be written: its entries fail with ER_WAL_IO (those not
        refused alone already) and every later batch is refused until tx has seen
        the failure (the cascading rollback)."""
        self._in_rollback = True
        for entry in entries:
            if entry.error is None:
                entry.error = ClientError(ErrorCode.ER_WAL_IO)
                entry.failed_in_batch = True


    def _write_batch(self, entries: list[JournalEntry]) -> VClock:
        """Write every entry of the batch or none of them; returns the new vclock."""
        try:
            current = self._prepare_file()
        except Exception as exc:
            log.error("failed to open the next xlog in %s: %s", self.wal_dir, exc)
            raise
        start = current.offset
        # Never changed in place: each entry is signed on a copy (_sign_entry), so the
        # writer's vclock and those handed out stay as they were.
        vclock = self._wal_vclock
        now = time.time()
        try:
            if len(entries) == 1:       # the usual batch: its own block, nothing to buffer
                entry = entries[0]
                data = sign_entry(entry, vclock, now)
                if data is not None:
                    assert entry.vclock is not None   # (sign_entry set it with the bytes)
                    vclock = entry.vclock
                    current.write_block(data)
            else:
                vclock = self._write_entries_in_blocks(current, entries, vclock, now)
            if self.mode == "fsync" and current.offset != start:
                current.sync()
        except Exception as exc:
            self._cut_back(current, start, exc, entries)
            raise
        return vclock

    def _write_entries_in_blocks(self, current: XlogWriter, entries: list[JournalEntry],
                                 vclock: VClock, now: float) -> VClock:
        """Sign and write the entries, a block whenever 128 KiB are buffered (at an
        entry's end: the writer's add_data); returns the vclock after the last one."""
        for entry in entries:
            data = sign_entry(entry, vclock, now)
            if data is None:
                continue
            assert entry.vclock is not None   # (sign_entry set it with the bytes)
            vclock = entry.vclock
            current.add_data(data)
        current.flush()
        return vclock


def wal_set_watcher(wal: WalWriter, watcher_cb: WalWatcher) -> None:
    """Call `watcher_cb(rows, encoded)` in tx after every batch the WAL writes
    (wal_set_watcher of seeds/relay.txt, where each relay thread sets one and
    relay_process_wal_event reads the new rows from the file; here one in-memory
    tail, wal_tail.py, watches for every relay)."""
    wal.watchers.append(watcher_cb)


def wal_clear_watcher(wal: WalWriter, watcher_cb: WalWatcher) -> None:
    """The watcher set by wal_set_watcher() is called no more."""
    if watcher_cb in wal.watchers:
        wal.watchers.remove(watcher_cb)
