"""box.ctl.promote() as Tarantool 2.6.3 has it (box_promote), and the PROMOTE row.

A PROMOTE (type 31) is a global row of its writer, body {REPLICA_ID: the former
limbo owner, LSN: the last of the owner's entries a quorum has, TERM: the writer's
Raft term}: whoever reads it confirms the owner's entries up to that LSN, rolls
back the rest and takes the writer as the limbo's owner (TxnLimbo, PROMOTE).

By election_mode:
* voter: refused; candidate: only on the leader (a no-op once its PROMOTE for
  this term is processed) — the raft worker calls it itself after each election;
* manual: a candidate for one election (a term bump without a vote, then wait
  until some leader is known); refused when another won (ER_INTERFERING_PROMOTE)
  or election was turned off meanwhile (ER_RAFT_DISABLED);
* off: first let the former owner's CONFIRM/ROLLBACK arrive for
  2 × replication_synchro_timeout.
Then, with entries pending, wait up to replication_synchro_timeout for a quorum of
the former owner's last synchronous LSN (ER_QUORUM_WAIT otherwise), and write the
PROMOTE. The error codes 222-224 are 2.6.3's; 2.6.0's box.error table does not
have them, so they are raised by number, not added to it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from spindle.core import log
from spindle.core.box.limbo import PROMOTE
from spindle.core.fiber import Cond
from spindle.core.iproto.errors import (
    ER_INTERFERING_PROMOTE, ER_QUORUM_WAIT, ER_RAFT_DISABLED, ClientError, ErrorCode,
    FiberIsCancelled, LaterClientError,
)
from spindle.core.iproto.replication import encode_promote
from spindle.core.iproto.xrow import XRow
from spindle.core.raft.raft import RaftState
from spindle.core.replication.replica import RelayState

from .limbo_txn import synchro_quorum_of, synchro_timeout_of

if TYPE_CHECKING:
    from .box import Box

PromoteError = LaterClientError       # (2.6.3's codes, raised by number)


def quorum_wait_error(quorum: int, reason: str) -> PromoteError:
    return PromoteError(ER_QUORUM_WAIT, f"Couldn't wait for quorum {quorum}: {reason}")


def promote_row(owner_id: int, lsn: int, term: int) -> XRow:
    return encode_promote(owner_id, lsn, term)


class Promoter:
    """One instance's box.ctl.promote (not re-entrant, as in 2.6.3)."""

    def __init__(self, box: Box):
        self.box = box
        self.in_promote = False
        self._acks = Cond(box.sched)
        box.replicaset.on_relay_ack.append(lambda replica, vclock: self._acks.broadcast())

    def promote(self) -> None:
        if self.in_promote:
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "box.ctl.promote",
                              "simultaneous invocations")
        box = self.box
        if not box.configured or box.wal is None or box.status == "loading":
            return
        self.in_promote = True
        try:
            self._promote()
        finally:
            self.in_promote = False

    def _promote(self) -> None:
        box = self.box
        box_raft, raft, limbo = box.box_raft, box.raft, box.limbo
        mode = box_raft.mode
        try_wait = run_elections = False
        if mode == "off":
            try_wait = True
        elif mode == "voter":
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "election_mode='voter'",
                              "manual elections")
        elif mode == "manual":
            if raft.state == RaftState.LEADER:
                return
            run_elections = True
        else:
            if raft.state != RaftState.LEADER:
                raise ClientError(ErrorCode.ER_UNSUPPORTED, "election_mode='candidate'",
                                  "manual elections")
            if limbo.promote_term_map.get(box.instance_id, 0) == raft.term:
                return
        former = limbo.owner_id
        wait_lsn = limbo.confirmed_lsn
        quorum = synchro_quorum_of(box)
        if run_elections:
            box_raft.run_manual_election()
            if not raft.is_enabled:
                raise PromoteError(ER_RAFT_DISABLED, "Elections were turned off while "
                                   "running box.ctl.promote()")
            if raft.state != RaftState.LEADER:
                raise PromoteError(ER_INTERFERING_PROMOTE, "Instance with replica id "
                                   f"{raft.leader} was promoted first")
        if limbo.queue:
            if try_wait:
                deadline = box.sched.clock() + 2 * synchro_timeout_of(box)
                while limbo.queue and box.sched.clock() <= deadline:
                    try:
                        box.sched.sleep(0.001)
                    except FiberIsCancelled:
                        break       # the quorum wait reports it (2.6.3 waits on)
                if former != limbo.owner_id:
                    raise PromoteError(ER_INTERFERING_PROMOTE, "Instance with replica id "
                                       f"{limbo.owner_id} was promoted first")
            last = _last_synchro_lsn(limbo)
            if last is not None:
                wait_lsn = last
                self._wait_quorum(former, wait_lsn, quorum, synchro_timeout_of(box))
                if quorum < synchro_quorum_of(box):
                    raise quorum_wait_error(quorum, "quorum was increased while waiting")
                newest = _last_synchro_lsn(limbo)
                if newest is not None and wait_lsn < newest:
                    raise quorum_wait_error(quorum, "new synchronous transactions appeared")
        self.write_promote(former, wait_lsn, raft.term)

    def write_promote(self, former: int, lsn: int, term: int) -> None:
        """txn_limbo_write_promote, then the row's effect on this limbo.

        The row is written at once (`at_once`), not in a batch at the end of the
        loop's iteration as wal.write() puts it while other fibers are ready: a new
        leader stays read-only until this row is processed (BoxRaft.is_ro), and the fibers
        ready then are those its election woke — the relays it has just pushed its
        state to (each sends it, reads again from its replica's ACK, sends what it
        finds), the applier's ACK writer, clients refused as read-only. Behind them
        the leader stayed read-only 0.5-2 ms longer per election (measured with
        scripts/bench/failover.py and a trace), for a batch nothing joins. The
        relays still send the state first: a pushed Raft message goes before any
        row at their next turn."""
        box = self.box
        wal = box.wal
        assert wal is not None
        # (2.6.3 logs nothing here: verbose, not in its log at the default level)
        log.verbose("RAFT: promote {replica_id: %s, lsn: %s, term: %s}", former, lsn, term)
        wal.write([promote_row(former, lsn, term)], at_once=True)
        box.limbo.txn_limbo_process(PROMOTE, former, lsn, origin=box.instance_id, term=term)
        box.box_raft.update_read_only()      # the queue is the leader's: writable now

    def _wait_quorum(self, owner: int, lsn: int, quorum: int, timeout: float) -> None:
        """box_wait_quorum: `quorum` instances (this one and the followers with
        a relay in follow state) have the owner's rows up to `lsn`. A cancelled
        fiber gets ER_QUORUM_WAIT, quorum or not, as in 2.6.3 (which goes no
        further: finishing the limbo would take two WAL writes more)."""
        sched = self.box.sched
        fiber = sched.current
        deadline = sched.clock() + timeout
        acks = self._count_acks(owner, lsn)
        while acks < quorum and not fiber.cancelled:
            left = deadline - sched.clock()
            if left <= 0:
                break
            try:
                self._acks.wait(left)
            except FiberIsCancelled:
                break
            acks = self._count_acks(owner, lsn)
        if fiber.cancelled:
            raise quorum_wait_error(quorum, "fiber is canceled")
        if acks < quorum:
            raise quorum_wait_error(quorum, f"timeout after {timeout:.2f} seconds, "
                                    f"collected {acks} acks")

    def _count_acks(self, owner: int, lsn: int) -> int:
        box = self.box
        count = 1 if box.vclock.get(owner) >= lsn else 0
        for replica in box.replicaset.replicas():
            relay = replica.relay
            if (replica.id and not replica.anon and replica.uuid != box.instance_uuid
                    and relay is not None and relay.state == RelayState.FOLLOW
                    and relay.vclock.get(owner) >= lsn):
                count += 1
        return count

    def promote_as_leader(self) -> None:
        """box_raft_update_synchro_queue: right after an election a candidate
        leader finishes the former owner's entries and writes its PROMOTE,
        retrying while the quorum cannot be waited for — unless the fiber was
        cancelled (a cancelled quorum wait is an ER_QUORUM_WAIT too): the
        worker then ends."""
        box = self.box
        while box.raft.state == RaftState.LEADER and box.box_raft.mode == "candidate":
            try:
                self.promote()
                return
            except FiberIsCancelled:
                raise
            except ClientError as exc:
                log.error("%s", exc.message)
                if exc.code != ER_QUORUM_WAIT:
                    return
                box.sched.current.testcancel()


def _last_synchro_lsn(limbo) -> int | None:
    for entry in reversed(limbo.queue):
        if entry.wait_ack and entry.lsn > 0:
            return entry.lsn
    return None
