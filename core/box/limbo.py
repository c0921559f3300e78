"""The limbo of synchronous transactions (txn_limbo of seeds/qsync.rst) as a pure core.

A transaction that changes an `is_sync` space waits here, after its own WAL write,
until `replication_synchro_quorum` instances have it in their WAL (the master's own
write counts as one ACK); then the limbo owner writes CONFIRM and the transaction
commits. If the quorum does not come within `replication_synchro_timeout`, the owner
writes ROLLBACK for the first timed-out entry and everything queued after it is
undone, newest first. Any transaction — synchronous or not — that commits while the
queue is not empty waits behind it (flag WAIT_SYNC without WAIT_ACK): memtx has no
isolation, so it may have seen the pending changes.

Names follow the seed so it reads beside this file. Nothing here touches a fiber, a
socket, a file or the real clock. The glue (core/instance/limbo_txn.py and synchro.py)
injects:

* `clock()` and `synchro_timeout()` / `quorum()` (read at every use: both dynamic);
* `wait(timeout)` — park the calling fiber until `broadcast()` or the timeout,
  True when woken; `broadcast()` — wake every fiber parked by `wait`;
* `wait_entry(entry, timeout)` / `wake_entry(entry)` (optional) — the same for the
  committer of one entry: a decided entry wakes its own committer only, not the
  ~hundred others still waiting (a thundering herd of fiber switches per CONFIRM).
  Without them, committers wait in `wait` and every decision broadcasts;
* `write_synchro(type, owner_id, lsn)` — write a CONFIRM/ROLLBACK row to the WAL and
  return when it is there (it may yield; it raises when the write fails);
* `on_complete(entry)` — the entry's transaction is decided (`entry.is_commit` or
  `entry.is_rollback`): the glue undoes a rolled-back transaction in the engine.

Differences from the seed, each for a reason written where it happens: one CONFIRM
write at a time, covering every ACK that arrived while it was written (batching);
CONFIRM/ROLLBACK write failures are survived instead of panicking; an entry whose
LSN arrives after a CONFIRM already covers it is still confirmed; the owner's
`confirmed_lsn` restarts when the owner changes (it is an LSN of the owner's own
vclock component).
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Iterable

from spindle.core import log
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode

CONFIRM = IprotoType.CONFIRM
ROLLBACK = IprotoType.ROLLBACK
PROMOTE = IprotoType.PROMOTE
REPLICA_ID_NIL = 0


class LimboEntry:
    """txn_limbo_entry: one transaction waiting in the queue. `lsn` is -1 until the
    WAL (or the master, on a replica) gives it one. `wait_sync`/`wait_ack` are the
    transaction's TXN_WAIT_SYNC/TXN_WAIT_ACK flags; `txn` is opaque to the limbo."""

    __slots__ = ("txn", "lsn", "ack_count", "is_commit", "is_rollback", "wait_sync",
                 "wait_ack", "quorum_timeout", "waiter")

    def __init__(self, txn: Any, wait_ack: bool):
        self.txn = txn
        self.lsn = -1
        self.ack_count = 0
        self.is_commit = False
        self.is_rollback = False
        self.wait_sync = True
        self.wait_ack = wait_ack
        self.quorum_timeout = False     # rolled back by its own committer's timeout
        self.waiter = None              # the glue's handle of its parked committer

    def __repr__(self) -> str:
        state = "commit" if self.is_commit else "rollback" if self.is_rollback else "pending"
        kind = "sync" if self.wait_ack else "async"
        return f"<LimboEntry {kind} lsn={self.lsn} acks={self.ack_count} {state}>"

    @property
    def is_complete(self) -> bool:
        """txn_limbo_entry_is_complete."""
        return self.is_commit or self.is_rollback


def quorum_confirm_lsn(lsns: Iterable[int], quorum: int) -> int:
    """The greatest LSN that at least `quorum` of `lsns` (one per instance) reach;
    0 when there are fewer instances than the quorum (box_clear_synchro_queue)."""
    ordered = sorted(lsns)
    if quorum <= 0 or len(ordered) < quorum:
        return 0
    return ordered[len(ordered) - quorum]


class TxnLimbo:
    """struct txn_limbo (see the module doc for what is injected)."""

    def __init__(self, *, instance_id: Callable[[], int], quorum: Callable[[], int],
                 synchro_timeout: Callable[[], float], clock: Callable[[], float],
                 wait: Callable[[float | None], bool], broadcast: Callable[[], None],
                 write_synchro: Callable[[int, int, int], None],
                 on_complete: Callable[[LimboEntry], None],
                 wait_entry: Callable[[LimboEntry, float | None], bool] | None = None,
                 wake_entry: Callable[[LimboEntry], None] | None = None):
        self.instance_id = instance_id
        self.quorum = quorum
        self.synchro_timeout = synchro_timeout
        self.clock = clock
        self.wait = wait
        self.broadcast = broadcast
        self.wait_entry = wait_entry or (lambda entry, timeout: wait(timeout))
        self.wake_entry = wake_entry or (lambda entry: None)
        self.write_synchro = write_synchro
        self.on_complete = on_complete
        self.queue: collections.deque[LimboEntry] = collections.deque()
        self.owner_id = REPLICA_ID_NIL
        # replica id -> the greatest LSN of the owner it acked (the owner's own WAL
        # writes included): what a late entry counts its ACKs from
        self.vclock: dict[int, int] = {}
        self.confirmed_lsn = 0          # the greatest LSN a CONFIRM was issued for
        self.rollback_count = 0
        self.is_in_rollback = False
        # the greatest LSN a CONFIRM *on disk* covers (confirmed_lsn moves before
        # the write): an entry getting its LSN late is confirmed by it
        self._confirm_read_lsn = 0
        self._confirm_target = 0        # what the CONFIRM writer is asked to reach
        self._confirm_writing = False   # one CONFIRM write at a time (batching)
        # PROMOTE terms (2.6.3): the greatest each instance wrote, and of them all
        self.promote_term_map: dict[int, int] = {}
        self.promote_greatest_term = 0
        # called when the queue turns empty or non-empty, or the owner changes:
        # the instance is read-only while another instance's entries are pending
        # (2.6.2's txn_limbo_is_ro)
        self.on_ro_change: Callable[[], None] = lambda: None

    def __repr__(self) -> str:
        return (f"<TxnLimbo owner={self.owner_id} len={len(self.queue)} "
                f"confirmed={self.confirmed_lsn}>")

    # ------------------------------------------------------------- queries

    @property
    def len(self) -> int:
        return len(self.queue)

    def txn_limbo_is_empty(self) -> bool:
        return not self.queue

    def txn_limbo_first_entry(self) -> LimboEntry | None:
        return self.queue[0] if self.queue else None

    def txn_limbo_last_entry(self) -> LimboEntry | None:
        return self.queue[-1] if self.queue else None

    # ------------------------------------------------------- queue changes

    def txn_limbo_append(self, origin_id: int, txn: Any, wait_ack: bool) -> LimboEntry:
        """Queue a transaction before its WAL write. `origin_id` 0 means a local
        transaction (the instance's own id). Refused during a rollback (cascading:
        this transaction might have seen what is being undone, and could not be
        undone in order) and while another instance owns pending entries."""
        owner = origin_id or self.instance_id()
        if self.is_in_rollback:
            raise ClientError(ErrorCode.ER_SYNC_ROLLBACK)
        if owner != self.owner_id:
            if self.owner_id != REPLICA_ID_NIL and self.queue:
                raise ClientError(ErrorCode.ER_UNCOMMITTED_FOREIGN_SYNC_TXNS, self.owner_id)
            self._set_owner(owner)
        entry = LimboEntry(txn, wait_ack)
        self.queue.append(entry)
        if len(self.queue) == 1:
            self.on_ro_change()
        return entry

    def _set_owner(self, owner: int) -> None:
        # confirmed_lsn is an LSN of the owner's vclock component: meaningless for
        # another owner (a stale big value would stop its timeouts from firing).
        self.owner_id = owner
        self.confirmed_lsn = 0
        self._confirm_read_lsn = 0
        self._confirm_target = 0
        self.on_ro_change()

    def _remove(self, entry: LimboEntry) -> bool:
        try:
            self.queue.remove(entry)
        except ValueError:
            return False
        if not self.queue:
            self.on_ro_change()
        return True

    def txn_limbo_abort(self, entry: LimboEntry) -> None:
        """The entry's transaction is rolled back (WAL error, timeout, ROLLBACK).
        Rollbacks go newest first, so it is normally the last entry; a WAL failure
        cascades over every later entry anyway, so it is removed wherever it is."""
        entry.is_rollback = True
        if self._remove(entry):
            self.rollback_count += 1

    def txn_limbo_assign_remote_lsn(self, entry: LimboEntry, lsn: int) -> None:
        """A replicated transaction: the LSN is the master's, known before the write.
        ACKs are not counted: only the owner collects them."""
        entry.lsn = lsn

    def txn_limbo_assign_lsn(self, entry: LimboEntry, lsn: int) -> None:
        """The applier's call in the seed (txn_commit_try_async): remote LSN."""
        self.txn_limbo_assign_remote_lsn(entry, lsn)

    def txn_limbo_assign_local_lsn(self, entry: LimboEntry, lsn: int) -> None:
        """The WAL wrote the owner's own transaction at `lsn`. ACKs that arrived
        before (a relay faster than tx: the early-ACK race) are in `vclock`:
        count them now."""
        entry.lsn = lsn
        ack_count = 0
        for acked in self.vclock.values():
            if acked >= lsn:
                ack_count += 1
        entry.ack_count = ack_count
        if lsn <= self._confirm_read_lsn and not self._confirm_writing:
            # A CONFIRM for a later entry reached the disk while this one had no LSN
            # yet (its fiber woke late); that CONFIRM covers it too.
            self.txn_limbo_read_confirm(self._confirm_read_lsn)

    # ----------------------------------------------------------------- ACKs

    def txn_limbo_ack(self, replica_id: int, lsn: int) -> None:
        """Instance `replica_id` has the owner's rows up to `lsn` in its WAL (the
        owner's own write included). Entries reaching the quorum are confirmed: one
        CONFIRM for the greatest of them covers every one before it."""
        if not self.queue or self.is_in_rollback:
            return
        prev_lsn = self.vclock.get(replica_id, 0)
        if lsn <= prev_lsn:
            return                      # nothing new (vclocks never go back)
        self.vclock[replica_id] = lsn
        confirm_lsn = self._count_ack(prev_lsn, lsn, self.quorum())
        if confirm_lsn == -1 or confirm_lsn <= self.confirmed_lsn:
            return
        self._confirm_up_to(confirm_lsn)

    def _count_ack(self, prev_lsn: int, lsn: int, quorum: int) -> int:
        """One more ACK for the synchronous entries with an LSN in (prev_lsn, lsn];
        the greatest LSN of them that reaches the quorum, -1 if none does.

        The queue is walked from the newest entry: LSNs grow along the queue, so
        the walk stops at the first entry this replica had acked before, instead of
        going over every pending entry for each ACK (the owner's own ACK comes once
        per transaction)."""
        confirm_lsn = -1
        for entry in reversed(self.queue):
            entry_lsn = entry.lsn
            if entry_lsn > lsn or entry_lsn == -1 or not entry.wait_ack:
                continue                # not acked yet, not written yet, or async
            if entry_lsn <= prev_lsn:
                break                   # this one and all before it: counted before
            entry.ack_count += 1
            if confirm_lsn == -1 and entry.ack_count >= quorum:
                confirm_lsn = entry_lsn
        return confirm_lsn

    def _confirm_up_to(self, lsn: int) -> None:
        """Write CONFIRM and read it. While one CONFIRM is being written, ACKs that
        arrive only raise the target: the writing fiber writes one more CONFIRM for
        all of them when its write returns (with many committers, a handful of
        CONFIRMs instead of one per transaction)."""
        self._confirm_target = max(self._confirm_target, lsn)
        if self._confirm_writing:
            return
        self._confirm_writing = True
        try:
            while self._confirm_target > self.confirmed_lsn and not self.is_in_rollback:
                target = self._confirm_target
                try:
                    self.txn_limbo_write_confirm(target)
                except Exception as exc:   # noqa: BLE001 - the timeouts decide now
                    log.error("failed to write CONFIRM for lsn %d: %s", target, exc)
                    return
                self.txn_limbo_read_confirm(target)
        finally:
            self._confirm_writing = False

    def txn_limbo_write_confirm(self, lsn: int) -> None:
        """Write CONFIRM(lsn). `confirmed_lsn` moves first, so a timeout during the
        write does not roll back what is being confirmed; a failed write puts it
        back (2.6.0 panics instead)."""
        previous = self.confirmed_lsn
        self.confirmed_lsn = lsn
        try:
            self.write_synchro(CONFIRM, self.owner_id, lsn)
        except BaseException:
            self.confirmed_lsn = max(previous, self._confirm_read_lsn)
            self._confirm_target = self.confirmed_lsn
            self.broadcast()            # timed-out waiters may roll back now
            raise

    def txn_limbo_read_confirm(self, lsn: int) -> None:
        """CONFIRM(lsn) is in the WAL: commit entries from the head while they are
        synchronous with an LSN <= lsn, or asynchronous (which only waited for the
        ones before them — even when their own write is not over: they then end as
        plain transactions)."""
        self._confirm_read_lsn = max(self._confirm_read_lsn, lsn)
        if lsn > self.confirmed_lsn:
            self.confirmed_lsn = lsn    # a replica reading its master's CONFIRM
        completed = False
        queue, on_complete, wake_entry = self.queue, self.on_complete, self.wake_entry
        while queue:
            entry = queue[0]
            if entry.wait_ack and (entry.lsn == -1 or entry.lsn > lsn):
                break
            queue.popleft()
            entry.is_commit = True
            entry.wait_sync = entry.wait_ack = False
            completed = True
            on_complete(entry)
            wake_entry(entry)
        if completed:
            if not queue:
                self.on_ro_change()
            self.broadcast()            # limbo-wide waiters: JOIN, checkpoints, timeouts

    # ------------------------------------------------------------ rollback

    def txn_limbo_write_rollback(self, lsn: int) -> None:
        """Write ROLLBACK(lsn): `lsn` is the first rolled-back LSN. No ACK is taken
        and nothing is appended while it is written. A failed write is logged and
        the rollback goes on in memory (2.6.0 panics)."""
        self.is_in_rollback = True
        try:
            self.write_synchro(ROLLBACK, self.owner_id, lsn)
        except Exception as exc:   # noqa: BLE001 - see the docstring
            log.crit("failed to write ROLLBACK for lsn %d: %s", lsn, exc)
        finally:
            self.is_in_rollback = False

    def txn_limbo_read_rollback(self, lsn: int) -> None:
        """ROLLBACK(lsn) is in the WAL: undo, newest first, every entry down to the
        oldest synchronous one with an LSN >= lsn (asynchronous entries between
        go too: they might have seen it). A synchronous entry still without an LSN
        is being written now, so it will be after `lsn`."""
        last_rollback = None
        for entry in reversed(self.queue):
            if not entry.wait_ack:
                continue
            if entry.lsn != -1 and entry.lsn < lsn:
                break
            last_rollback = entry
        if last_rollback is None:
            return
        self._rollback_tail(last_rollback)

    def _rollback_tail(self, last: LimboEntry, quorum_timeout: bool = False) -> None:
        """Abort entries from the newest down to `last`, undoing each at once."""
        while self.queue:
            entry = self.queue[-1]
            self.txn_limbo_abort(entry)
            entry.wait_sync = entry.wait_ack = False
            entry.quorum_timeout = quorum_timeout and entry is last
            self.on_complete(entry)
            self.wake_entry(entry)
            if entry is last:
                break
        self.broadcast()

    # --------------------------------------------------------------- waits

    def _wait_until(self, done: Callable[[], bool], start: float,
                    wait: Callable[[float], bool]) -> bool:
        """Wait for `done()` until replication_synchro_timeout after `start` (read
        at every turn: it is dynamic), parking in `wait`. False on timeout."""
        while not done():
            timeout = start + self.synchro_timeout() - self.clock()
            woken = wait(timeout) if timeout > 0 else False
            if done():
                return True
            if not woken:
                return False
        return True

    def txn_limbo_wait_complete(self, entry: LimboEntry) -> None:
        """The committing fiber of `entry` waits for its fate. Returns on commit;
        raises ER_SYNC_ROLLBACK when it was rolled back, ER_SYNC_QUORUM_TIMEOUT when
        its own timeout rolled it back (then it writes ROLLBACK for itself and
        everything behind it). An entry that times out behind another one, or that a
        CONFIRM being written covers, waits for that one's outcome instead."""
        if not entry.is_complete and not self._wait_until(
                lambda: entry.is_complete, self.clock(),
                lambda timeout: self.wait_entry(entry, timeout)):
            # Timed out. Only the first entry rolls back, and not while a CONFIRM
            # covering it is being written; the others wait for the outcome of the
            # ones before them (re-checking when woken: once first, they decide).
            while not entry.is_complete:
                if (self.txn_limbo_first_entry() is entry and entry.wait_ack
                        and entry.lsn > self.confirmed_lsn):
                    self.txn_limbo_write_rollback(entry.lsn)
                    if not entry.is_complete:
                        self._rollback_tail(entry, quorum_timeout=True)
                        raise ClientError(ErrorCode.ER_SYNC_QUORUM_TIMEOUT)
                    break
                self.wait(None)
        if entry.is_rollback:
            raise ClientError(ErrorCode.ER_SYNC_ROLLBACK)

    def txn_limbo_wait_confirm(self) -> None:
        """JOIN waits for the entries pending now (the newest decides): returns
        once it commits; ER_SYNC_ROLLBACK if it is rolled back,
        ER_SYNC_QUORUM_TIMEOUT if neither happens in replication_synchro_timeout."""
        last = self.txn_limbo_last_entry()
        if last is None:
            return
        if not self._wait_until(lambda: last.is_complete, self.clock(), self.wait):
            raise ClientError(ErrorCode.ER_SYNC_QUORUM_TIMEOUT)
        if last.is_rollback:
            raise ClientError(ErrorCode.ER_SYNC_ROLLBACK)

    def txn_limbo_wait_empty(self, timeout: float) -> bool:
        """Wait until the queue is empty; False after `timeout` seconds."""
        deadline = self.clock() + timeout
        while self.queue:
            left = deadline - self.clock()
            if left <= 0:
                return False
            self.wait(left)
        return True

    # -------------------------------------------- replicas, recovery, admin

    def txn_limbo_process(self, request_type: int, origin_id: int, lsn: int, *,
                          origin: int = 0, term: int = 0) -> None:
        """A CONFIRM/ROLLBACK of `origin_id`'s transactions read from a master or
        from the WAL. With nothing pending there is nothing to decide (a joined
        snapshot has the transactions already); with another owner's entries
        pending it is ER_SYNC_MASTER_MISMATCH. A PROMOTE (2.6.3; written by
        instance `origin` in Raft term `term`) is handled as 2.6.3 does."""
        if request_type == PROMOTE or term:
            self._process_promote(request_type, origin_id, lsn, origin, term)
            return
        if origin_id != self.owner_id:
            if not self.queue:
                return
            raise ClientError(ErrorCode.ER_SYNC_MASTER_MISMATCH, origin_id, self.owner_id)
        if request_type == CONFIRM:
            self.txn_limbo_read_confirm(lsn)
        elif request_type == ROLLBACK:
            self.txn_limbo_read_rollback(lsn)
        else:
            raise ValueError(f"not a synchro request type: {request_type}")

    def _process_promote(self, request_type: int, owner_id: int, lsn: int, origin: int,
                         term: int) -> None:
        """2.6.3's txn_limbo_process for a row with a term: a term newer than
        its writer's last is recorded; a PROMOTE whose term is not the newest
        of all is outdated and ignored. A PROMOTE confirms the owner's entries
        up to `lsn`, rolls back the rest (all of them when it names another
        owner) and hands the limbo to its writer."""
        if self.promote_term_map.get(origin, 0) < term:
            self.promote_term_map[origin] = term
            if term > self.promote_greatest_term:
                self.promote_greatest_term = term
            elif request_type == PROMOTE:
                return
        if owner_id != REPLICA_ID_NIL and owner_id != self.owner_id:
            if request_type != PROMOTE:
                return          # a foreign owner's CONFIRM/ROLLBACK: outdated
            lsn = 0
        if request_type == CONFIRM:
            self.txn_limbo_read_confirm(lsn)
        elif request_type == ROLLBACK:
            self.txn_limbo_read_rollback(lsn)
        else:
            self.txn_limbo_read_confirm(lsn)
            self.txn_limbo_read_rollback(lsn + 1)
            self._set_owner(origin)

    def txn_limbo_is_replica_outdated(self, replica_id: int) -> bool:
        """Whether `replica_id`'s last PROMOTE term is behind the newest one."""
        return self.promote_term_map.get(replica_id, 0) < self.promote_greatest_term

    def txn_limbo_force_empty(self, confirm_lsn: int) -> None:
        """box.ctl.clear_synchro_queue: confirm the entries up to `confirm_lsn` (what
        a quorum has), roll back the rest. The rows are written in the name of the
        entries' owner (the body's REPLICA_ID), whoever writes them."""
        last_quorum = rollback = None
        for entry in self.queue:
            if not entry.wait_ack:
                continue
            if entry.lsn != -1 and entry.lsn <= confirm_lsn:
                last_quorum = entry
            else:
                rollback = entry
                break
        if last_quorum is not None:
            self.txn_limbo_write_confirm(last_quorum.lsn)
            self.txn_limbo_read_confirm(last_quorum.lsn)
        if rollback is not None and rollback.lsn != -1 and not rollback.is_complete:
            self.txn_limbo_write_rollback(rollback.lsn)
            self.txn_limbo_read_rollback(rollback.lsn)

    def txn_limbo_on_parameters_change(self) -> None:
        """replication_synchro_quorum or _timeout changed: entries that have the new
        quorum are confirmed now, and waiters re-read their timeout."""
        if self.queue and not self.is_in_rollback and self.owner_id == self.instance_id():
            quorum = self.quorum()
            confirm_lsn = -1
            for entry in self.queue:
                if not entry.wait_ack:
                    continue
                if entry.lsn == -1 or entry.ack_count < quorum:
                    break
                confirm_lsn = entry.lsn
            if confirm_lsn > self.confirmed_lsn:
                self._confirm_up_to(confirm_lsn)
        for entry in self.queue:
            self.wake_entry(entry)      # committers re-read their timeout too
        self.broadcast()

    def info(self) -> dict:
        """box.info.synchro.queue (2.7.3+ shape)."""
        return {"owner": self.owner_id, "len": len(self.queue)}
