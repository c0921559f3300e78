"""The box: one instance's database, from the first box.cfg to shutdown.

Box ties the pure parts together on the tx thread: the memtx engine and its schema
(catalogue from system spaces), the WAL writer as the engine's journal, recovery at
start, checkpoints and WAL garbage collection. It is the single entry for DML from
Lua and from IPROTO, so the read-only rule and the journal apply to both alike.
Bootstrap of a fresh instance follows server-startup-with-replication.txt for an
empty `replication`: load the built-in schema rows, register self as replica 1 in
`_cluster`, put the replica set UUID in `_schema`, and write the first checkpoint
with those rows (vclock {}), so the WAL starts empty.

Below the instance, replication and the request executor see a Box only as the
protocols of core/instance_api.py and core/replication/instance_api.py: what they
use is declared there, and set here.
"""
from __future__ import annotations

import functools
import itertools
import os
import time
import uuid as uuid_module
from typing import Any, Callable, Iterable

from spindle.core import log
from spindle.core.box.limbo import TxnLimbo
from spindle.core.box.row_apply import (
    abandon, adopt, execute_logged, execute_unobserved, unobserved,
)
from spindle.core.box.schema import Schema, load_bootstrap_rows
from spindle.core.box.txn import Engine, Statement, Txn
from spindle.core.fiber import Cond
from spindle.core.fiber.timeslice import RECOVERY_SLICE, TimeSlice
from spindle.core.iproto.constants import is_synchro
from spindle.core.iproto.errors import ClientError, ErrorCode, TimedOut, read_only_error
from spindle.core.iproto.msgpack import ext_hook
from spindle.core.iproto.request import DML_WRITE_TYPES, decode_dml_body
from spindle.core.iproto.xrow import XRow
from spindle.core.replication.replicaset import ReplicaSet, replicaset_follow, replicaset_sync
from spindle.core.vclock import VClock
from spindle.core.version import VERSION_STRING
from spindle.core.wal.checkpoint import Checkpointer
from spindle.core.wal.gc import GarbageCollector
from spindle.core.wal.recovery import RecoveryProgress, recover
from spindle.core.wal.writer import WalWriter
from spindle.core.xlog.files import list_files, read_meta

from . import limbo_checkpoint, limbo_txn, startup, synchro
from .limbo_checkpoint import CheckpointGate
from .raft import BoxRaft, is_raft_row


# read-only reasons that refuse a commit too (Box._journal)
_LEADERSHIP_REASONS = frozenset({"election", "synchro"})


class Box:
    def __init__(self, sched):
        self.sched = sched
        self.engine = Engine(journal=None, fiber_key=txn_key(sched))
        sched.on_yield = self.engine.txns.abort_on_yield
        self.schema = Schema(self.engine)
        self._bootstrap_rows = load_bootstrap_rows()
        self.schema.create_system_spaces(self._bootstrap_rows)
        self.replicaset: ReplicaSet = ReplicaSet(sched, self)
        self.schema.on_cluster_change.append(self.replicaset.on_cluster_change)
        # synchronous replication (limbo_txn.py): the limbo, the gate a checkpoint
        # closes to drain it (limbo_checkpoint.py), and its hooks: the relays' ACKs
        # (synchro.py) and `_cluster` changes for a formula quorum. The commit path
        # is installed with the WAL.
        self.limbo: TxnLimbo = limbo_txn.make_limbo(self)
        self.limbo.on_ro_change = self._update_synchro_ro
        self.checkpoint_gate = CheckpointGate(sched)
        # leader election (raft.py): the state machine is `raft`, for replication
        self.box_raft = BoxRaft(self)
        self.raft = self.box_raft.raft
        self.schema.on_cluster_change.append(lambda *_: self.box_raft.update_quorum())
        self.replicaset.on_relay_ack.append(
            lambda replica, vclock: synchro.limbo_on_relay_ack(self, replica, vclock))
        self.schema.on_cluster_change.append(
            lambda *_: limbo_txn.limbo_on_cluster_change(self))
        self.cfg: dict[str, Any] = {}
        self.wal: WalWriter | None = None
        self.gc: GarbageCollector | None = None
        self.checkpointer: Checkpointer | None = None
        self.instance_uuid: str | None = None
        self._expected_uuid: str | None = None    # expected_instance_uuid(), once known
        self.status = "unconfigured"     # box.info.status: loading, running, orphan
        self.read_only_reasons: set[str] = set()
        # orphan from a normal start's replicaset_connect until the replica set is
        # synced; a bootstrapping instance is not orphan (its first SUBSCRIBE after
        # JOIN carries ID_FILTER, as 2.6.0's does)
        self.orphan = False
        self.is_bootstrap_leader = False
        self.ro_cond = Cond(sched)       # box.ctl.wait_ro / wait_rw
        self.started_at = time.monotonic()
        # fn(RecoveryProgress) after every recovered block: the console draws a bar
        self.on_recovery_progress: list[Callable[[RecoveryProgress], None]] = []
        self._recovery_slice: TimeSlice | None = None     # while start() recovers
        self._recovering: RecoveryProgress | None = None  # the newest report of it

    # ------------------------------------------------------------ start-up

    @property
    def configured(self) -> bool:
        return self.status != "unconfigured"

    @property
    def greeting_uuid(self) -> str | None:
        """The instance UUID, or the one expected_instance_uuid() found it will be."""
        return self.instance_uuid or self._expected_uuid

    def expected_instance_uuid(self, cfg: dict) -> str:
        """The instance UUID this box has once started, known before it starts: a
        socket bound during the first box.cfg greets peers with it, as 2.6.0's does
        (a peer that saw another one would take this instance for someone else;
        a 2.6.0 applier stops on ER_INSTANCE_UUID_MISMATCH when it reconnects).
        box.cfg's instance_uuid, else the newest snapshot's (recovery keeps it),
        else a new one, which bootstrap then takes."""
        if self.instance_uuid is not None:
            return self.instance_uuid
        if self._expected_uuid is None:
            self._expected_uuid = (cfg.get("instance_uuid") or _snapshot_uuid(cfg)
                                   or str(uuid_module.uuid4()))
        return self._expected_uuid

    def start(self, cfg: dict[str, Any]) -> None:
        """The storage and replication part of the first box.cfg: local recovery
        or bootstrap (server-startup-with-replication.txt), the WAL, GC and the
        checkpoint daemon, then following the upstreams. Runs in the configuring
        fiber; returns when the instance is running or orphan."""
        self.cfg = cfg
        work_dir = cfg.get("work_dir")
        if work_dir:        # it must exist, as in 2.6.0 (box.cfg checked it first)
            os.chdir(work_dir)          # Tarantool too: every other dir is relative to it
        memtx_dir, wal_dir = cfg.get("memtx_dir") or ".", cfg.get("wal_dir") or "."
        for directory in (memtx_dir, wal_dir):
            os.makedirs(directory, exist_ok=True)
        self.status = "loading"
        # As 2.6.0 while it loads: requests are served between the recovery's time
        # slices (_recovery_progress), and writes refused as read-only (there is
        # no WAL to take them yet), until the WAL starts.
        self.set_read_only("loading", True)
        self._recovery_slice = TimeSlice(self.sched, RECOVERY_SLICE)
        result = recover(memtx_dir, wal_dir, self._apply_snapshot_row, self._apply_wal_tx,
                         bool(cfg.get("force_recovery")),
                         instance_uuid=cfg.get("instance_uuid"),
                         progress=self._recovery_progress)
        if result.bootstrap_needed:
            self.instance_uuid = self.expected_instance_uuid(cfg)
            log.info("instance uuid %s", self.instance_uuid)
            vclock, self.is_bootstrap_leader = startup.bootstrap(self, memtx_dir)
            checkpoints: list[VClock] = []
        else:
            self.instance_uuid = result.instance_uuid
            vclock, checkpoints = result.vclock, result.checkpoints
            log.info("recovered %d rows to vclock %s", result.rows_applied, vclock)
            wanted = cfg.get("replicaset_uuid")
            if wanted and self.schema.replicaset_uuid and wanted != self.schema.replicaset_uuid:
                raise ClientError(ErrorCode.ER_REPLICASET_UUID_MISMATCH, wanted,
                                  self.schema.replicaset_uuid)
            startup.box_sync_replication(self, False)
        self._start_wal(wal_dir, memtx_dir, vclock, checkpoints)
        # read-only until the end: "box.cfg.read_only is not read yet" (2.6's
        # is_ro starts true)
        self.set_read_only("config", True)
        self.set_read_only("loading", False)
        limbo_txn.limbo_after_recovery(self)
        self.status = "orphan" if self.orphan else "running"
        replicaset_follow(self.replicaset)
        # election last, before "ready" as in 2.6.3: term and vote are recovered
        self.box_raft.start()
        log.info("ready to accept requests")
        if self.is_bootstrap_leader:
            self.box_raft.start_first_term()
            self.set_orphan(False, quiet=True)
        else:
            replicaset_sync(self.replicaset)
        # As box_cfg_xc ends: still read-only, wake whoever waits for that and
        # yield once — a box.ctl.wait_ro() begun before box.cfg returns now, and
        # a new bootstrap leader's raft worker writes its first term and vote
        # (a candidate alone is elected by the time box.cfg returns); then
        # box.cfg.read_only applies.
        self.ro_cond.broadcast()
        self.sched.sleep(0)
        self.set_read_only("config", bool(cfg.get("read_only")))

    def load_bootstrap_rows(self) -> None:
        """The rows a fresh 2.6.0 instance starts with (bootstrap.snap), space by space
        in id order; their on_replace triggers build the catalogue. No transaction is
        open and the WAL is not started: load_rows() gives what replace() per row did."""
        rows_by_space: dict[int, list] = {}
        for space_id, tup in self._bootstrap_rows:
            rows_by_space.setdefault(space_id, []).append(tup)
        for space_id in sorted(rows_by_space):
            self.engine.space(space_id).load_rows(rows_by_space[space_id])

    def _start_wal(self, wal_dir: str, memtx_dir: str, vclock: VClock,
                   checkpoints: list[VClock]) -> None:
        cfg = self.cfg
        uuid = self.instance_uuid
        assert uuid is not None   # recovery or bootstrap set it (start(), above)
        self.wal = WalWriter(self.sched, wal_dir, uuid, vclock,
                             mode=cfg.get("wal_mode", "write"),
                             max_size=int(cfg.get("wal_max_size") or 268435456),
                             instance_id=self.instance_id)
        self.engine.txns.journal = self._journal
        self.engine.txns.limbo_commit = functools.partial(limbo_txn.limbo_commit, self)
        self.gc = GarbageCollector(memtx_dir, self.wal,
                                   checkpoint_count=int(cfg.get("checkpoint_count", 2)),
                                   sched=self.sched)
        self.gc.load_checkpoints(checkpoints or [vclock])
        self.checkpointer = Checkpointer(self.sched, self.wal, memtx_dir, uuid,
                                         self._checkpoint_view,
                                         self.gc,
                                         checkpoint_interval=float(
                                             cfg.get("checkpoint_interval", 3600)))
        self.checkpointer.start_daemon()

    # ------------------------------------------------------------- recovery

    def _recovery_progress(self, progress: RecoveryProgress) -> None:
        """After every block recovered (never inside a transaction): the hooks, and
        a yield once the slice is used, as 2.6.0 yields every 32000 WAL rows."""
        for hook in self.on_recovery_progress:
            hook(progress)
        self._recovering = progress
        if self.instance_uuid is None:
            self.instance_uuid = progress.instance_uuid
        if self._recovery_slice is not None:
            self._recovery_slice.maybe_yield()

    def _checkpoint_view(self) -> Iterable:
        """What a checkpoint writes: the spaces, then the Raft state (when election
        was ever used here: BoxRaft.checkpoint_row)."""
        view = limbo_checkpoint.checkpoint_read_view(self)
        raft_row = self.box_raft.checkpoint_row()
        return view if raft_row is None else itertools.chain(view, (raft_row,))

    def _apply_snapshot_row(self, row: XRow) -> None:
        if is_raft_row(row):            # (2.6.3 ends every snapshot with one)
            self.box_raft.recover_row(row)
            return
        request = decode_dml_body(row.body, row.type, ext_hook)
        self.engine.space(request.space_id).recover_replace(request.tuple)

    def _apply_wal_tx(self, rows: list[XRow]) -> None:
        recover_wal_tx(self, rows)

    # -------------------------------------------------------------- journal

    def _journal(self, rows: list[XRow]) -> None:
        """The engine's commit. 2.6 checks read-only per statement only: a
        transaction begun while writable commits after box.cfg{read_only = true}
        or an orphan state. Not after its instance stopped leading (or its limbo
        became another instance's): its rows would come from no leader, which the
        others' appliers drop, and behind a PROMOTE that decided the queue
        without them (2.6.3 commits them; docs/ELECTION.md). CONFIRM/ROLLBACK go
        to the WAL whatever the state, as the limbo writes them."""
        reasons = self.read_only_reasons
        if reasons and not reasons.isdisjoint(_LEADERSHIP_REASONS) and any(
                not _is_local_row(row) and not is_synchro(row.type) for row in rows):
            raise read_only_error()
        wal = self.wal
        assert wal is not None   # (the journal is installed with the WAL: _start_wal)
        wal.write(rows)

    journal_write = _journal     # the limbo's commit path writes through it

    @property
    def instance_id(self) -> int:
        if self.instance_uuid is None:
            return 0
        return self.schema.replica_id_by_uuid(self.instance_uuid) or 0

    def on_own_id_changed(self) -> None:
        """`_cluster` gave this instance an id (or took it): local writes sign with it."""
        if self.wal is not None:
            self.wal.instance_id = self.instance_id

    @property
    def vclock(self) -> VClock:
        if self.wal is not None:
            return self.wal.vclock
        # while it loads, what recovery has reached (2.6.0's instance_vclock then)
        return self._recovering.vclock if self._recovering is not None else VClock()

    # ------------------------------------------------------------- read-only

    def set_read_only(self, reason: str, on: bool) -> None:
        was = self.read_only
        if on:
            self.read_only_reasons.add(reason)
        else:
            self.read_only_reasons.discard(reason)
        if was != self.read_only:
            self.ro_cond.broadcast()

    def _update_synchro_ro(self) -> None:
        """2.6.2: read-only while the limbo holds another instance's entries (its
        CONFIRM/ROLLBACK, or a new leader's PROMOTE, decides them). Only with
        election on: with it off Spindle is 2.6.0, which lets such a write fail
        on the limbo instead (ER_UNCOMMITTED_FOREIGN_SYNC_TXNS)."""
        limbo = self.limbo
        self.set_read_only("synchro", self.box_raft.mode != "off" and bool(limbo.queue)
                           and limbo.owner_id != self.instance_id)

    def set_orphan(self, orphan: bool, quiet: bool = False) -> None:
        """box_set_orphan: an orphan is read-only until enough upstreams are synced.
        2.6.0 logs every call (a replica logs "leaving orphan mode" twice)."""
        self.orphan = orphan
        self.set_read_only("orphan", orphan)
        if self.status in ("running", "orphan"):
            self.status = "orphan" if orphan else "running"
        if not quiet:
            log.crit("%s orphan mode", "entering" if orphan else "leaving")

    @property
    def ro_reason(self) -> str | None:
        """box.info.ro_reason (2.10's field): why writes are refused, nil when they
        are not. 2.10 names election before synchro, then config, then orphan;
        here synchro comes first, since Spindle applies the synchro rule only
        with election on (_update_synchro_ro), where election would hide it."""
        for reason in ("synchro", "election", "config", "orphan"):
            if reason in self.read_only_reasons:
                return reason
        return None

    def wait_ro(self, want_ro: bool, timeout: float | None) -> None:
        """box.ctl.wait_ro / wait_rw: block until read_only == want_ro."""
        deadline = None if timeout is None else self.sched.clock() + timeout
        while self.read_only != want_ro or not self.configured or self.status == "loading":
            remaining = None if deadline is None else deadline - self.sched.clock()
            if remaining is not None and remaining <= 0:
                raise TimedOut()
            self.ro_cond.wait(remaining)

    @property
    def read_only(self) -> bool:
        return bool(self.read_only_reasons)

    def check_writable(self, space) -> None:
        """box_process1's rule, before any access check: ER_READONLY for a write to
        `space` while the instance is read-only, unless the space is temporary or
        local. (Hot paths ask `read_only_reasons` first.)"""
        if self.read_only_reasons and not space.is_temporary and not space.is_local:
            raise read_only_error()

    # ---------------------------------------------------------- checkpoints

    def read_view(self) -> Iterable:
        """A consistent view for a snapshot. In tx only each space's primary key is
        copied (a list of references: tuples are immutable, so later writes cannot
        change what it holds); the rows are produced lazily in the snapshot thread."""
        captured = []
        for space in sorted(self.engine.spaces.values(), key=lambda s: s.id):
            if space.is_temporary or space.primary is None or space.engine != "memtx":
                continue
            captured.append((space.id, space.group_id, space.primary.snapshot_tuples()))
        return _view_rows(captured)

    def snapshot(self) -> None:
        if self.checkpointer is None:
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "Spindle", "snapshot before box.cfg")
        with limbo_checkpoint.checkpoint_gate(self):
            self.checkpointer.checkpoint()

    # ----------------------------------------------------------------- info

    def info(self) -> dict[str, Any]:
        vclock = self.vclock
        return {
            "id": self.instance_id or (0 if self.cfg.get("replication_anon") else None),
            "uuid": self.instance_uuid,
            "lsn": vclock.get(self.instance_id) if self.instance_id else -1,
            "vclock": vclock.to_dict(),
            "signature": vclock.signature,
            "status": self.status,
            "ro": self.read_only,
            **({"ro_reason": self.ro_reason} if self.read_only else {}),   # (nil, not null)
            "uptime": int(time.monotonic() - self.started_at),
            "pid": os.getpid(),
            "version": VERSION_STRING,
            "cluster": {"uuid": self.schema.replicaset_uuid},
            "election": self.box_raft.info(),
        }

    def stop(self) -> None:
        for replica in list(self.replicaset.hash.values()) + list(self.replicaset.anon):
            if replica.applier is not None:
                try:
                    replica.applier.applier_stop()
                except Exception as exc:   # noqa: BLE001 - stopping the rest matters more
                    log.error("stopping applier %s: %s", replica.applier, exc)
        self.box_raft.stop()
        if self.checkpointer is not None:
            self.checkpointer.stop_daemon()
        if self.wal is not None:
            self.wal.stop()

    # ---- replica side: applying replicated rows
    # The engine's side of core/replication/apply.py (the applier's transactions).

    def submit_replicated(self, rows: list[XRow],
                          done: Callable[[BaseException | None], None]) -> None:
        """The journal of replicated transactions (TxnManager.commit_async calls it):
        rows keep their master's REPLICA_ID/LSN. A read-only replica (config, orphan)
        still applies what its masters send, so this path has no read-only check;
        only the applier uses it, local writes keep going through `_journal`.
        Without a WAL (JOIN and REGISTER before the WAL starts) nothing is logged:
        as 2.6.0's recovery journal, the rows only move replicaset.vclock, and the
        checkpoint written after the join makes them durable."""
        if self.wal is None:
            vclock = self.replicaset.vclock
            for row in rows:
                if row.lsn and row.lsn > vclock.get(row.replica_id):
                    vclock.reset(row.replica_id, row.lsn)
            done(None)
            return
        self.wal.submit(rows, lambda entry: done(entry.error))

    def apply_synchro_row(self, row: XRow) -> None:
        """A CONFIRM/ROLLBACK row from a master, before it goes to the WAL as it came:
        the limbo decides its pending transactions. Runs inside the applier's
        transaction: it must not yield (and may raise, e.g. ER_SYNC_MASTER_MISMATCH,
        to refuse the row)."""
        limbo_txn.apply_synchro_row(self, row)

    def limbo_enter_replicated(self, txn: Txn, rows: list[XRow]) -> None:
        """A replicated transaction that is synchronous, or behind pending ones,
        enters the limbo before its asynchronous write (txn_commit_try_async).
        Raises ER_UNCOMMITTED_FOREIGN_SYNC_TXNS / ER_SYNC_ROLLBACK: the applier
        rolls the transaction back."""
        limbo_txn.limbo_enter_replicated(self, txn, rows)


def recover_wal_tx(box: Box, rows: list[XRow]) -> None:
    """One transaction read from an xlog at start-up, applied unlogged (the WAL
    does not run yet), then into the limbo as at its first commit.

    Nothing runs beside recovery, so as long as no trigger, no limbo and no
    synchronous space can see the transaction, none is made: the statements
    only keep what undoes them. The first row that needs more adopts them into
    a real transaction, which goes on as a transaction would have from the start."""
    engine = box.engine
    txn = None
    statements: list[Statement] = []      # statements run without a transaction
    try:
        for row in rows:
            rtype = row.type
            if rtype in DML_WRITE_TYPES:
                request = decode_dml_body(row.body, rtype, ext_hook)
                space = engine.space(request.space_id)
                if txn is None and unobserved(box.limbo, space):
                    execute_unobserved(statements, space, request)
                    continue
                if txn is None:
                    txn = adopt(engine, statements)
                execute_logged(txn, space, request)
            elif is_synchro(rtype):
                if txn is None:
                    txn = adopt(engine, statements)
                limbo_txn.recover_synchro_row(box, row)
            elif is_raft_row(row):
                box.box_raft.recover_row(row)
            # NOP and anything else: nothing to apply
    except BaseException:
        abandon(engine, txn, statements)
        raise
    if txn is None:
        return
    engine.txns.commit()
    if box.limbo.queue or txn.is_sync:      # else the limbo has nothing to do with it
        limbo_txn.recover_tx(box, txn, rows)


def _view_rows(captured):
    for space_id, group, tuples in captured:
        for tup in tuples:
            yield space_id, tup, group


def txn_key(sched) -> Callable[[], Any]:
    """A transaction belongs to its fiber, unless the fiber names another owner in
    its storage under "txn_key" (console statements run in fibers of their own but
    share the console session's transaction, as one console fiber would)."""
    def key():
        fiber = sched.current
        return fiber.storage.get("txn_key", fiber) if fiber is not None else None
    return key


def _is_local_row(row: XRow) -> bool:
    return row.group_id == 1


def _snapshot_uuid(cfg: dict) -> str | None:
    """The instance UUID in the header of the newest snapshot the configuration
    points at (None without one, or when it cannot be read: recovery says why)."""
    memtx_dir = cfg.get("memtx_dir") or "."
    work_dir = cfg.get("work_dir")
    if work_dir and not os.path.isabs(memtx_dir):
        memtx_dir = os.path.join(work_dir, memtx_dir)
    try:
        snapshots = list_files(memtx_dir, ".snap")
        return read_meta(snapshots[-1].path).instance_uuid if snapshots else None
    except Exception:   # noqa: BLE001 - any defect is recovery's to report
        return None
