"""Checkpoints: writing a .snap from a read view, box.snapshot(), the checkpoint daemon.

`write_snapshot()` consumes an iterable the caller made consistent (a read view of the
memtx spaces: it must not change while tx goes on writing) in a thread of its own, so
fibers keep running. Items are `(space_id, tuple_msgpack)`, `(space_id, tuple_msgpack,
group_id)` or XRows (their body and group id are used). The file is written as 2.6.0
writes it: `<signature>.snap.inprogress`, INSERT rows whose LSN is their ordinal (the
first row has none), SPACE_ID as a 5-byte uint, one TIMESTAMP for every row, blocks of
~128 KiB (zstd when >= 2 KiB), the EOF marker, fsync, rename (core/xlog/files.XlogWriter
writes the file; the rows are encoded here, where they come from). Logs "saving snapshot
`<path>.inprogress'" and "done" like the oracle's snapshot thread.

`Checkpointer.checkpoint()` is gc_do_checkpoint(): make the read view, rotate the WAL
(both in one tx step, so the WAL vclock covers exactly the changes the view holds),
write the snapshot unless one with that vclock exists, then hand the checkpoint to the
garbage collector. The daemon fiber follows checkpoint_schedule.c: the first checkpoint
comes `interval` plus a random part of `interval` after configuration, then every
`interval`; it logs "scheduled next checkpoint for <%c time>".
"""
from __future__ import annotations

import os
import random
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from spindle.core import log
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import mp_encode_uint, tuple_packer
from spindle.core.iproto.request import SNAPSHOT_BODY_HEAD, TUPLE_KEY
from spindle.core.iproto.xrow import XRow, encode_header
from spindle.core.vclock import VClock
from spindle.core.xlog.files import INPROGRESS_SUFFIX, SyncPolicy, XlogWriter, format_filename
from spindle.core.xlog.format import AUTOCOMMIT_THRESHOLD, FIXHEADER_SIZE, SNAP, XlogMeta

SNAP_EXT = ".snap"
_pack_u32 = struct.Struct(">I").pack


@dataclass(frozen=True)
class SnapshotInfo:
    path: str
    vclock: VClock
    rows: int
    size: int


def snapshot_path(memtx_dir: str, vclock: VClock) -> str:
    return os.path.join(memtx_dir, format_filename(vclock.signature, SNAP_EXT))


def _encode_rows(items: Iterable, timestamp: float) -> Iterable[tuple[int, bytes]]:
    """Yield (rows in chunk, encoded chunk) of about AUTOCOMMIT_THRESHOLD bytes.

    A row is `<header up to LSN> <LSN> <TIMESTAMP and body up to the tuple> <tuple>`:
    everything but the LSN and the tuple is the same for all rows of a space, so it
    is made once per space and a row costs a few list appends (the hot loop of a
    checkpoint of millions of rows)."""
    limit = AUTOCOMMIT_THRESHOLD - FIXHEADER_SIZE
    pack = tuple_packer()   # box's encoding of a stored tuple (uuid, decimal as ext)
    small = _SMALL_UINT
    parts: list[bytes] = []
    append = parts.append
    size = 0
    lsn = 0
    first_rows = 0
    consts: dict = {}       # (space_id, group) -> (header before LSN, after LSN, first row)
    for item in items:
        if isinstance(item, XRow):      # (the Raft state ends a snapshot)
            row = encode_header(XRow(item.type, None, 0, lsn, timestamp, item.group_id)) \
                + (item.body or b"")
            append(row)
            size += len(row)
        else:
            space_id, tuple_data = item[0], item[1]
            group = item[2] if len(item) > 2 else 0
            key = (space_id, group)
            const = consts.get(key)
            if const is None:
                const = consts[key] = _row_consts(space_id, group, timestamp)
            if not isinstance(tuple_data, (bytes, bytearray, memoryview)):
                tuple_data = pack(tuple_data)
            if lsn:
                before, after, _ = const
                encoded = small[lsn] if lsn < 0x80 else mp_encode_uint(lsn)
                append(before)
                append(encoded)
                append(after)
                size += len(before) + len(encoded) + len(after) + len(tuple_data)
            else:
                append(const[2])
                size += len(const[2]) + len(tuple_data)
            append(tuple_data)
        lsn += 1
        if size >= limit:
            yield lsn - first_rows, b"".join(parts)
            parts.clear()
            size = 0
            first_rows = lsn
    if parts:
        yield lsn - first_rows, b"".join(parts)


_SMALL_UINT = [bytes((i,)) for i in range(0x80)]


def _row_consts(space_id: int, group: int, timestamp: float) -> tuple[bytes, bytes, bytes]:
    """The fixed parts of a snapshot row of `space_id`: the header up to its LSN,
    the rest up to the tuple, and the whole prefix of the first row (no LSN). Cut
    out of what encode_header writes for the rows of LSN 1 and 2 (where they first
    differ is the LSN's one byte), so the layout stays xrow's."""
    body_head = SNAPSHOT_BODY_HEAD + _pack_u32(space_id) + TUPLE_KEY
    one, two = (encode_header(XRow(IprotoType.INSERT, None, 0, lsn, timestamp, group))
                for lsn in (1, 2))
    at = next(i for i, (a, b) in enumerate(zip(one, two)) if a != b)
    first = encode_header(XRow(IprotoType.INSERT, None, 0, 0, timestamp, group)) + body_head
    return one[:at], one[at + 1:] + body_head, first


def write_snapshot_file(memtx_dir: str, instance_uuid: str, vclock: VClock, rows: Iterable,
                        *, timestamp: float | None = None, fsync: bool = True,
                        compress: bool = True,
                        cancelled: threading.Event | None = None) -> SnapshotInfo:
    """Write the snapshot in the calling thread (see the module doc) with the xlog
    writer; the rows come encoded in chunks of about a block. Between blocks the GIL
    is handed over explicitly, so the tx thread's loop keeps its pace."""
    path = snapshot_path(memtx_dir, vclock)
    if os.path.exists(path):
        raise FileExistsError(f"file '{path}' already exists")
    log.info("saving snapshot `%s'", path + INPROGRESS_SUFFIX)
    # exclusive=False: an .inprogress left by a crash during the last checkpoint
    # is written over
    writer = XlogWriter.create(memtx_dir, XlogMeta(SNAP, instance_uuid, vclock.copy()),
                               sync=SyncPolicy.CLOSE if fsync else SyncPolicy.NEVER,
                               compress=compress, exclusive=False)
    count = 0
    try:
        ts = time.time() if timestamp is None else timestamp
        for nrows, data in _encode_rows(rows, ts):
            writer.write_block(data)
            count += nrows
            if cancelled is not None and cancelled.is_set():
                raise InterruptedError("snapshot cancelled")
            time.sleep(0)   # let the tx thread take the GIL between blocks
        writer.close()
    except BaseException:
        writer.discard()
        raise
    log.info("done")
    return SnapshotInfo(writer.path, vclock.copy(), count, writer.offset)


def write_snapshot(memtx_dir: str, instance_uuid: str, vclock: VClock, rows: Iterable, *,
                   sched=None, **kwargs) -> SnapshotInfo:
    """Write a snapshot in a "snapshot" thread while the calling fiber waits (the loop
    goes on). Without a scheduler or outside a fiber it runs in the calling thread."""
    if sched is None or sched.current is None:
        return write_snapshot_file(memtx_dir, instance_uuid, vclock, rows, **kwargs)
    fiber = sched.current
    outcome: dict = {}

    def done() -> None:
        outcome["done"] = True
        sched.wakeup(fiber)

    def work() -> None:
        try:
            outcome["info"] = write_snapshot_file(memtx_dir, instance_uuid, vclock, rows,
                                                  **kwargs)
        except BaseException as exc:   # noqa: BLE001 - handed to the waiting fiber
            outcome["error"] = exc
        sched.call_soon_threadsafe(done)

    # Named like 2.6.0's snapshot cord so its log lines read the same.
    thread = threading.Thread(target=work, name="snapshot/101/main", daemon=True)
    thread.start()
    while "done" not in outcome:
        sched.wait()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["info"]


def _close(view: object) -> None:
    close = getattr(view, "close", None)
    if close is not None:
        close()


class CheckpointSchedule:
    """checkpoint_schedule.c: when the next scheduled checkpoint is due."""

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random()
        self.interval = 0.0
        self.start_time = 0.0

    def configure(self, now: float, interval: float) -> None:
        self.interval = interval
        self.start_time = now + interval
        if interval > 0:
            # Instances started together must not all checkpoint at once.
            self.start_time += self.rng.uniform(0, interval)

    def reset(self, now: float) -> None:
        self.start_time = now + self.interval

    def timeout(self, now: float) -> float:
        """Seconds to the next checkpoint; 0 means periodic checkpoints are off."""
        if self.interval <= 0:
            return 0.0
        if now < self.start_time:
            return self.start_time - now
        return self.interval - (now - self.start_time) % self.interval


class Checkpointer:
    """box.snapshot() and the checkpoint daemon.

    `read_view()` is called in tx and must return the consistent iterable
    write_snapshot() consumes (anything with close() is closed when unused).
    """

    def __init__(self, sched, wal, memtx_dir: str, instance_uuid: str,
                 read_view: Callable[[], Iterable], gc=None, *,
                 checkpoint_interval: float = 3600.0, rng: random.Random | None = None,
                 snapshot_kwargs: dict | None = None):
        self.sched = sched
        self.wal = wal
        self.memtx_dir = memtx_dir
        self.instance_uuid = instance_uuid
        self.read_view = read_view
        self.gc = gc
        self.in_progress = False
        self.last: SnapshotInfo | None = None
        self.schedule = CheckpointSchedule(rng)
        self.schedule.configure(sched.clock(), checkpoint_interval)
        self.snapshot_kwargs = snapshot_kwargs or {}
        self._pending = False
        self._daemon = None

    # -- box.snapshot()

    def checkpoint(self, is_scheduled: bool = False) -> VClock:
        if self.in_progress:
            raise ClientError(ErrorCode.ER_CHECKPOINT_IN_PROGRESS)
        if not is_scheduled:
            # A manual snapshot re-randomizes the schedule (gh-4432 in 2.x).
            self.schedule.configure(self.sched.clock(), self.schedule.interval)
            self._wake_daemon()
        vclock = self._do_checkpoint()
        if self.gc is not None:
            self.gc.wait_cleanup()
        return vclock

    def _do_checkpoint(self) -> VClock:
        self.in_progress = True
        if self.gc is not None:
            self.gc.checkpoint_is_in_progress = True
        view = None
        try:
            # No yield between the read view and the rotation request: every change the
            # view holds was queued to the WAL before the rotation, and no other.
            view = self.read_view()
            vclock = self.wal.rotate()
            if os.path.exists(snapshot_path(self.memtx_dir, vclock)):
                _close(view)     # nothing was written since that checkpoint
            else:
                self.last = write_snapshot(self.memtx_dir, self.instance_uuid, vclock, view,
                                           sched=self.sched, **self.snapshot_kwargs)
                _close(view)
            view = None
            if self.gc is not None:
                self.gc.add_checkpoint(vclock)
            return vclock
        except BaseException:
            if view is not None:
                _close(view)
            raise
        finally:
            self.in_progress = False
            if self.gc is not None:
                self.gc.checkpoint_is_in_progress = False

    # -- the daemon

    def start_daemon(self) -> None:
        if self._daemon is None or self._daemon.status == "dead":
            self._daemon = self.sched.spawn(self._daemon_main, name="checkpoint_daemon",
                                            start=False)

    def stop_daemon(self) -> None:
        if self._daemon is not None and self._daemon.status != "dead":
            self.sched.cancel(self._daemon)
        self._daemon = None

    def set_interval(self, interval: float) -> None:
        self.schedule.configure(self.sched.clock(), interval)
        if not self.in_progress:
            self._wake_daemon()

    def trigger(self) -> None:
        """Checkpoint as soon as possible (the WAL size threshold was reached)."""
        if self.in_progress or self._pending:
            return
        self._pending = True
        self.schedule.reset(self.sched.clock())
        self._wake_daemon()

    def _wake_daemon(self) -> None:
        daemon = self._daemon
        if daemon is not None and daemon.status != "dead" and daemon is not self.sched.current:
            self.sched.wakeup(daemon)

    def _daemon_main(self) -> None:
        sched = self.sched
        me = sched.current
        while not me.cancelled:
            timeout = self.schedule.timeout(sched.clock())
            if timeout > 0:
                when = time.localtime(time.time() + timeout)
                log.info("scheduled next checkpoint for %s", time.strftime("%c", when))
            woken = sched.wait(timeout if timeout > 0 else None)
            if me.cancelled:
                return
            if woken and not self._pending:
                continue      # the schedule changed: compute the next time again
            self._pending = False
            if self.in_progress:
                continue      # a box.snapshot() is running: skip this one
            try:
                self._do_checkpoint()
            except Exception as exc:
                log.error("%s", exc)
