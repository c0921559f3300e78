"""Garbage collection of checkpoints (.snap) and WAL files (.xlog), as gc.c of 2.6.0.

State: the checkpoints (oldest first, each with the names of whoever holds it:
"backup" while box.backup pins it), the WAL consumers (a
replica: a name and the vclock it has read up to; see gc_consumer_register/advance/
unregister at the end) and `vclock`, the oldest vclock whose rows are still kept.

A cleanup round:
1. drop the oldest checkpoints while more than `checkpoint_count` remain and the oldest
   is not referenced; their .snap files are deleted ("removed <path>");
2. the oldest row to keep is the component-wise minimum (component 0 aside: consumers
   never read local rows) of the oldest checkpoint's vclock and every consumer's;
3. if that moved forward (by signature), the WAL writer deletes every xlog older than
   the newest one starting at or before it.

Rounds run in a short-lived "gc" fiber when the caller is a fiber (so a relay advancing
its consumer does not wait for file deletion), or right away otherwise.
"""
from __future__ import annotations

import collections
import functools
import os
from dataclasses import dataclass, field

from spindle.core import log
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.vclock import VClock
from spindle.core.xlog.files import list_files

REMOVED_KEPT = 1000          # GarbageCollector.removed: the newest deletions kept


@dataclass
class Checkpoint:
    vclock: VClock
    references: list[str] = field(default_factory=list)

    @property
    def signature(self) -> int:
        return self.vclock.signature


@dataclass
class Consumer:
    """A reader of the WAL (a replica): files it still needs are kept."""

    name: str
    vclock: VClock
    is_inactive: bool = False

    @property
    def signature(self) -> int:
        return self.vclock.signature


class GarbageCollector:
    def __init__(self, memtx_dir: str, wal=None, *, checkpoint_count: int = 2, sched=None):
        self.memtx_dir = memtx_dir
        self.wal = wal                     # WalWriter (or None: no WAL files to collect)
        self.sched = sched
        self.checkpoint_count = checkpoint_count
        self.vclock = VClock()
        self.checkpoints: list[Checkpoint] = []
        self.consumers: list[Consumer] = []    # kept in lexicographic vclock order
        self.checkpoint_is_in_progress = False
        # the newest files deleted (tests, logs; a long-lived instance deletes many)
        self.removed: collections.deque[str] = collections.deque(maxlen=REMOVED_KEPT)
        self._scheduled = 0
        self._completed = 0
        self._fiber = None
        self._waiters: list = []
        self.backup: Checkpoint | None = None      # pinned by box.backup.start()

    # ------------------------------------------------------------- checkpoints

    def load_checkpoints(self, vclocks) -> None:
        """Existing snapshots found at startup, oldest first; nothing is deleted."""
        for vclock in sorted(vclocks, key=lambda clock: clock.signature):
            if not self.checkpoints or self.checkpoints[-1].signature < vclock.signature:
                self.checkpoints.append(Checkpoint(vclock.copy()))

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None

    def add_checkpoint(self, vclock: VClock) -> None:
        """A checkpoint was written (gc_add_checkpoint). The same signature as the last
        one means box.snapshot() found nothing new: only rerun the cleanup."""
        last = self.last_checkpoint
        if last is None or last.signature != vclock.signature:
            if last is not None and last.signature > vclock.signature:
                raise ValueError(f"checkpoint {vclock} is older than the last one {last.vclock}")
            self.checkpoints.append(Checkpoint(vclock.copy()))
        self.schedule_cleanup()

    def set_checkpoint_count(self, count: int) -> None:
        self.checkpoint_count = count
        self.schedule_cleanup()

    # ----------------------------------------------------------------- cleanup

    def schedule_cleanup(self) -> None:
        """Run a cleanup round: in the "gc" fiber when called from a fiber, else now."""
        self._scheduled += 1
        sched = self.sched
        if sched is None or sched.current is None:
            self._run_rounds()
            return
        if self._fiber is None or self._fiber.status == "dead":
            # A short-lived fiber: it runs the rounds pending and ends, so nothing
            # lingers when the instance stops.
            self._fiber = sched.spawn(self._run_rounds, name="gc", start=False)

    def wait_cleanup(self) -> None:
        """Wait for the rounds scheduled so far (box.snapshot() returns after them)."""
        target = self._scheduled
        sched = self.sched
        if sched is None or sched.current is None:
            return
        me = sched.current
        while self._completed < target:
            self._waiters.append(me)
            sched.wait()
            if me in self._waiters:
                self._waiters.remove(me)

    def _run_rounds(self) -> None:
        while self._completed < self._scheduled:
            target = self._scheduled
            try:
                self.run_cleanup()
            except Exception as exc:
                log.error("garbage collection failed: %s", exc)
            self._completed = target
        waiters, self._waiters = self._waiters, []
        for fiber in waiters:
            self.sched.wakeup(fiber)

    def run_cleanup(self) -> None:
        """One round of gc_run_cleanup(); synchronous."""
        if not self.checkpoints:
            return
        run_engine_gc = False
        while (len(self.checkpoints) > max(self.checkpoint_count, 1)
               and not self.checkpoints[0].references):
            self.checkpoints.pop(0)
            run_engine_gc = True
        oldest = self.checkpoints[0]
        min_vclock = oldest.vclock.copy()
        for consumer in self.consumers:
            min_vclock.min_ignore0(consumer.vclock)
        run_wal_gc = min_vclock.signature > self.vclock.signature
        if run_wal_gc:
            self.vclock = min_vclock.copy()
        if run_engine_gc:
            self._collect_snapshots(oldest.vclock)
        if run_wal_gc and self.wal is not None:
            self.removed.extend(self.wal.collect_garbage(min_vclock))

    def _collect_snapshots(self, vclock: VClock) -> None:
        """Delete .snap files older than the oldest kept checkpoint."""
        if not os.path.isdir(self.memtx_dir):
            return
        for entry in list_files(self.memtx_dir, ".snap"):
            if entry.signature >= vclock.signature:
                break
            try:
                os.unlink(entry.path)
            except OSError as exc:
                log.error("error while removing %s: %s", entry.path, exc)
                continue
            log.info("removed %s", entry.path)
            self.removed.append(entry.path)

    # -------------------------------------------------------------------- info

    def info(self) -> dict:
        """box.info.gc() of 2.6.0."""
        return {
            "vclock": self.vclock.to_dict(),
            "signature": self.vclock.signature,
            "checkpoint_is_in_progress": self.checkpoint_is_in_progress,
            "checkpoints": [{"vclock": c.vclock.to_dict(), "signature": c.signature,
                             "references": list(c.references)} for c in self.checkpoints],
            "consumers": [{"name": c.name, "vclock": c.vclock.to_dict(),
                           "signature": c.signature} for c in self.consumers],
        }


# ------------------------------------------------------------------- consumers
# gc_consumer_register/advance/unregister of 2.6.0, as seeds/relay.txt shows them in
# box_process_join: a replica being joined, then subscribed, holds the WAL files it
# has not read yet.

def gc_consumer_register(gc: GarbageCollector, vclock: VClock, name: str) -> Consumer:
    """A new WAL consumer that has read everything before `vclock` (e.g. "replica <uuid>")."""
    consumer = Consumer(name, vclock.copy())
    gc.consumers.append(consumer)
    _sort_consumers(gc.consumers)
    return consumer


def gc_consumer_advance(gc: GarbageCollector, consumer: Consumer, vclock: VClock) -> None:
    """The consumer has read everything before `vclock`: older files may go."""
    if consumer.is_inactive or vclock.signature == consumer.signature:
        return
    if vclock.signature < consumer.signature:
        raise ValueError(f"consumer {consumer.name} cannot go back from "
                         f"{consumer.vclock} to {vclock}")
    consumer.vclock = vclock.copy()
    _sort_consumers(gc.consumers)
    gc.schedule_cleanup()


def gc_consumer_unregister(gc: GarbageCollector, consumer: Consumer) -> None:
    """The consumer is gone (its replica left or was deleted): it holds nothing more."""
    if consumer in gc.consumers:
        gc.consumers.remove(consumer)
        gc.schedule_cleanup()
    consumer.is_inactive = True


def _sort_consumers(consumers: list[Consumer]) -> None:
    consumers.sort(key=functools.cmp_to_key(lambda a, b: a.vclock.lex_compare(b.vclock)))


# -------------------------------------------------------------------- backups
# box.backup.start()/stop() of 2.6.0 (box_backup_start): a checkpoint is pinned with
# the reference "backup" until stop, so its snapshot and the WAL files after it stay.

def box_backup_start(gc: GarbageCollector, checkpoint_idx: int) -> list[str]:
    """Pin the checkpoint `checkpoint_idx` back from the newest (0: the newest);
    the files a backup copies: its snapshot (2.6.0 lists the engines' files, and
    memtx has the one .snap; the xlogs after it stay until stop)."""
    if gc.backup is not None:
        raise ClientError(ErrorCode.ER_BACKUP_IN_PROGRESS)
    if checkpoint_idx >= len(gc.checkpoints):
        raise ClientError(ErrorCode.ER_MISSING_SNAPSHOT)
    checkpoint = gc.checkpoints[-1 - checkpoint_idx]
    checkpoint.references.append("backup")
    gc.backup = checkpoint
    return [os.path.join(gc.memtx_dir, f"{checkpoint.signature:020d}.snap")]


def box_backup_stop(gc: GarbageCollector) -> None:
    """Unpin the backup's checkpoint; the next cleanup may take it."""
    checkpoint, gc.backup = gc.backup, None
    if checkpoint is not None:
        if "backup" in checkpoint.references:
            checkpoint.references.remove("backup")
        gc.schedule_cleanup()
