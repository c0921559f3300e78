"""The limbo (limbo.py) wired into one box: fibers, the WAL, transactions, recovery.

* Commit (txn_commit of the seed): a transaction that changes an `is_sync` space
  enters the limbo with WAIT_SYNC|WAIT_ACK before its WAL write; one committed while
  the queue is not empty enters with WAIT_SYNC only. After the write the committing
  fiber counts its own ACK and waits in `txn_limbo_wait_complete`. The wait cannot
  be cancelled: the rows are in the WAL already and only CONFIRM/ROLLBACK decide.
* Replica (txn_commit_try_async): replicated transactions enter with their
  master's id and LSN, before their asynchronous write; CONFIRM/ROLLBACK rows from
  the master are applied when they arrive (`apply_synchro_row`), before their own
  write, as 2.6.0's applier does.
* Recovery: xlog transactions enter the limbo the same way, CONFIRM/ROLLBACK rows in
  the xlog decide them; what stays undecided stays in the limbo after the restart,
  with no ACK counted — not even the owner's own write, as in 2.6.0: the restart
  writes no CONFIRM or ROLLBACK. ACKs that arrive later count as for any entry (an
  ACK of a newer LSN, the owner's own write of a new transaction included, covers
  it), and a quorum of them confirms it.
* A rolled-back transaction is undone in the engine at once (newest first) and its
  rows, in the WAL already, are cancelled by the ROLLBACK row that follows them.
* Checkpoints: limbo_checkpoint.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spindle.core import log
from spindle.core.iproto.constants import GroupId
from spindle.core.iproto.errors import ClientError, ErrorCode, FiberIsCancelled
from spindle.core.iproto.request import decode_synchro_body, synchro_row
from spindle.core.iproto.xrow import XRow

from spindle.core.box.limbo import CONFIRM, PROMOTE, ROLLBACK, LimboEntry, TxnLimbo
from spindle.core.box.limbo_quorum import synchro_quorum

if TYPE_CHECKING:
    from .box import Box

DEFAULT_SYNCHRO_TIMEOUT = 5.0
SYNCHRO_TYPES = frozenset((int(CONFIRM), int(ROLLBACK), int(PROMOTE)))   # iproto_type_is_synchro


class LimboWaiters:
    """The limbo's wait_cond. Unlike fiber.cond, a wait here ignores cancellation
    (fiber_set_cancellable(false) in the seed): a committer cannot give up on rows
    that are in the WAL already — unless the whole process is exiting.

    A committer waiting for its own entry parks on the entry (`wait_entry`), so
    the entry's decision wakes that fiber alone; `broadcast` wakes the fibers
    parked by `wait` (a dict: insertion order, O(1) removal)."""

    def __init__(self, sched):
        self.sched = sched
        self._waiters: dict = {}

    def wait(self, timeout: float | None) -> bool:
        me = self.sched.current
        self._waiters[me] = None
        try:
            woken = self.sched.wait(timeout)
        finally:
            self._waiters.pop(me, None)
        self._check_exiting(me)
        return woken

    def broadcast(self) -> None:
        waiters, self._waiters = self._waiters, {}
        for fiber in waiters:
            self.sched.wakeup(fiber)

    def wait_entry(self, entry: LimboEntry, timeout: float | None) -> bool:
        me = self.sched.current
        entry.waiter = me
        try:
            woken = self.sched.wait(timeout)
        finally:
            entry.waiter = None
        self._check_exiting(me)
        return woken

    def wake_entry(self, entry: LimboEntry) -> None:
        fiber = entry.waiter
        if fiber is not None:
            entry.waiter = None
            self.sched.wakeup(fiber)

    def _check_exiting(self, me) -> None:
        if me.cancelled and getattr(self.sched, "_stopping", False):
            # The process is exiting (the scheduler cancels every fiber): give up
            # instead of holding the exit; the restart finds the rows in the limbo.
            raise FiberIsCancelled()


# ---------------------------------------------------------------- options

def synchro_quorum_of(box: Box) -> int:
    """replication_synchro_quorum in force (a formula counts `_cluster`)."""
    value = box.cfg.get("replication_synchro_quorum", 1) if box.cfg else 1
    return synchro_quorum(1 if value is None else value, len(box.schema.cluster))


def synchro_timeout_of(box: Box) -> float:
    value = box.cfg.get("replication_synchro_timeout") if box.cfg else None
    if value is None:
        return DEFAULT_SYNCHRO_TIMEOUT
    try:
        value = float(value)
    except (TypeError, ValueError):
        return DEFAULT_SYNCHRO_TIMEOUT
    return value if value > 0 else DEFAULT_SYNCHRO_TIMEOUT


# ------------------------------------------------------------------ setup

def make_limbo(box: Box) -> TxnLimbo:
    waiters = LimboWaiters(box.sched)
    return TxnLimbo(
        instance_id=lambda: box.instance_id,
        quorum=lambda: synchro_quorum_of(box),
        synchro_timeout=lambda: synchro_timeout_of(box),
        clock=box.sched.clock,
        wait=waiters.wait,
        broadcast=waiters.broadcast,
        wait_entry=waiters.wait_entry,
        wake_entry=waiters.wake_entry,
        write_synchro=lambda kind, owner, lsn: write_synchro(box, kind, owner, lsn),
        on_complete=lambda entry: on_entry_complete(box, entry))


def limbo_on_cluster_change(box: Box) -> None:
    """A formula quorum follows the replica count (2.7+); this runs inside a
    `_cluster` trigger, so the (maybe blocking) re-check gets a fiber of its own."""
    if not isinstance(box.cfg.get("replication_synchro_quorum") if box.cfg else None,
                      (str, bytes)):
        return
    if box.wal is None or not box.limbo.queue:
        return
    box.sched.spawn(box.limbo.txn_limbo_on_parameters_change, name="synchro_quorum")


def on_synchro_option_changed(box: Box) -> None:
    """box.cfg changed replication_synchro_quorum/_timeout (may write CONFIRM)."""
    if box.wal is not None:
        box.limbo.txn_limbo_on_parameters_change()


# ------------------------------------------------------------- I/O for it

def write_synchro(box: Box, kind: int, owner_id: int, lsn: int) -> None:
    """txn_limbo_write_synchro: the row goes to the WAL directly, read-only or not
    (the limbo owner must be able to finish what it started)."""
    if box.wal is None:
        raise ClientError(ErrorCode.ER_WAL_IO)
    box.wal.write([synchro_row(kind, owner_id, lsn)])


def on_entry_complete(box: Box, entry: LimboEntry) -> None:
    """txn_complete_success / txn_complete_fail. A committed entry's transaction
    is finished by its own committer (or was committed by its asynchronous write:
    replicated and recovered ones); a rolled-back one is undone here and now, so
    the undo goes newest first across the whole queue."""
    if entry.is_rollback and entry.txn is not None:
        box.engine.txns.rollback_sync(entry.txn)


# ------------------------------------------------------------ local commit

def _limbo_lsn(rows: list[XRow]) -> int:
    """The transaction's LSN in the limbo: its last row of the owner's component
    (rows of local spaces count in component 0)."""
    for row in reversed(rows):
        if row.group_id != GroupId.LOCAL:
            return row.lsn
    return rows[-1].lsn


def limbo_commit(box: Box, txn: Any, rows: list[XRow]) -> None:
    """TxnManager.limbo_commit: txn_commit's journal write with the limbo around it.
    Raises the journal's error, ER_SYNC_QUORUM_TIMEOUT or ER_SYNC_ROLLBACK (the
    transaction is undone by then)."""
    limbo = box.limbo
    is_sync = txn.is_sync
    if not is_sync and not limbo.queue:
        box.journal_write(rows)           # asynchronous, nothing pending: no limbo
        return
    if box.checkpoint_gate.closed:
        box.checkpoint_gate.pass_()       # a checkpoint is draining the limbo
    entry = limbo.txn_limbo_append(0, txn, wait_ack=is_sync)
    try:
        box.journal_write(rows)
    except BaseException:
        limbo.txn_limbo_abort(entry)
        raise
    if entry.is_rollback:
        # A rollback took it while it was being written; it is undone already.
        raise ClientError(ErrorCode.ER_SYNC_ROLLBACK)
    if entry.wait_ack:
        lsn = _limbo_lsn(rows)
        limbo.txn_limbo_assign_local_lsn(entry, lsn)
        limbo.txn_limbo_ack(limbo.owner_id, lsn)    # the own WAL write: the first ACK
    limbo.txn_limbo_wait_complete(entry)


# ------------------------------------------------------------ replica side

def _enter(box: Box, txn: Any, rows: list[XRow]) -> LimboEntry | None:
    """Queue a transaction whose rows come with their LSNs (a master's, or the
    WAL's at recovery): synchronous, or behind a non-empty queue."""
    limbo = box.limbo
    is_sync = txn.is_sync
    if not is_sync and not limbo.queue:
        return None
    if len(rows) == 1:
        # The usual replicated transaction (once per row of the stream): its row
        # is its origin and LSN, whatever its group.
        row = rows[0]
        if row.type in SYNCHRO_TYPES:
            return None
        origin, lsn = row.replica_id, row.lsn
    else:
        if all(row.type in SYNCHRO_TYPES for row in rows):
            return None
        origin = next((row.replica_id for row in rows if row.group_id != GroupId.LOCAL),
                      rows[0].replica_id)
        lsn = _limbo_lsn(rows)
    entry = limbo.txn_limbo_append(origin, txn, wait_ack=is_sync)
    if is_sync:
        limbo.txn_limbo_assign_remote_lsn(entry, lsn)
    return entry


def limbo_enter_replicated(box: Box, txn: Any, rows: list[XRow]) -> None:
    """applier_apply_tx, before the asynchronous write (txn_commit_try_async).
    Raises ER_UNCOMMITTED_FOREIGN_SYNC_TXNS / ER_SYNC_ROLLBACK: the caller rolls the
    transaction back. During JOIN (no WAL yet) the rows are a snapshot's history
    and nothing waits."""
    if box.wal is None:
        return
    entry = _enter(box, txn, rows)
    if entry is None:
        return
    limbo = box.limbo

    def on_write_failed(txn_) -> None:
        if not txn_.sync_rollback:
            limbo.txn_limbo_abort(entry)
    txn.on_rollback.add(on_write_failed)


def apply_synchro_row(box: Box, row: XRow) -> None:
    """A CONFIRM/ROLLBACK from the master: decide the pending transactions now
    (must not yield: it runs inside the applier's transaction). Raises
    ER_SYNC_MASTER_MISMATCH for a foreign owner's pending entries."""
    if box.wal is None:
        return                  # final JOIN rows: the snapshot has the outcome
    request = decode_synchro_body(row.body)
    box.limbo.txn_limbo_process(row.type, request.replica_id, request.lsn,
                                origin=row.replica_id, term=request.term)


# --------------------------------------------------------------- recovery

def recover_synchro_row(box: Box, row: XRow) -> None:
    """A CONFIRM/ROLLBACK read from the xlog. The WAL is the truth of the past: a
    row that matches nothing is logged, not fatal."""
    request = decode_synchro_body(row.body)
    try:
        box.limbo.txn_limbo_process(row.type, request.replica_id, request.lsn,
                                    origin=row.replica_id, term=request.term)
    except ClientError as exc:
        log.warn("recovery: ignoring a synchro row {%d: %d}: %s", row.replica_id, row.lsn,
                 exc.message)


def recover_tx(box: Box, txn: Any, rows: list[XRow]) -> None:
    """A recovered xlog transaction: into the limbo as at its first commit."""
    try:
        _enter(box, txn, rows)
    except ClientError as exc:
        log.warn("recovery: transaction {%d: %d} left out of the limbo: %s",
                 rows[-1].replica_id, rows[-1].lsn, exc.message)


def limbo_after_recovery(box: Box) -> None:
    """The WAL runs. This instance's own entries left undecided by the xlog stay
    pending as they are: the restart decides nothing (2.6.0 neither counts its
    own write as their ACK nor writes CONFIRM/ROLLBACK for them), so a quorum 1
    at restart, or one replica's ACK with quorum 2, does not confirm what never
    had its quorum."""
    limbo = box.limbo
    own = box.instance_id
    if not limbo.queue or not own or limbo.owner_id != own:
        return
    log.info("%d synchronous transactions of this instance are not confirmed yet",
             sum(1 for entry in limbo.queue if entry.wait_ack))


def synchro_info(box: Box) -> dict:
    """box.info.synchro: {queue = {owner, len}, quorum} (the 2.7.3+ shape)."""
    return {"queue": box.limbo.info(), "quorum": synchro_quorum_of(box)}
