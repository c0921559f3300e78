"""Leader election on one instance: the Raft state machine (core/raft) put to work,
as 2.6.3's box/raft.c and the election parts of box.cc do it.

`BoxRaft` owns the instance's `Raft` and carries out what it asks for:

* a worker fiber (`raft_worker`) writes the term/vote the machine wants persisted
  as one IPROTO_RAFT row — GROUP_ID LOCAL, so the WAL signs it with component 0
  of the vclock and no relay ever sends it — and tells the machine once the WAL
  has it (only then is it announced); it pushes each new state to the relays of
  the registered replicas (relay_push_raft keeps only the newest per relay), and
  it calls `on_timer` when the machine's timer is due;
* box.cfg: election_mode (off / voter / manual / candidate) and election_timeout,
  applied last at the first box.cfg, once recovery has restored term and vote; the
  election quorum min(replication_synchro_quorum, max(1, #_cluster)) and the
  leader death timeout 4 × replication_timeout follow their options;
* the read-only rule: with election on, only the leader is writable;
* what persists: raft rows found by recovery in the WAL or a snapshot restore
  term and vote (`recover_row`); a checkpoint ends with one raft row
  (`checkpoint_row`) — but only once election has been used, so that an instance
  that never turned it on keeps writing snapshots a 2.6.0 can read.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from spindle.core import log
from spindle.core.fiber import Cond
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import FiberIsCancelled
from spindle.core.iproto.replication import decode_raft, encode_raft
from spindle.core.iproto.xrow import XRow
from spindle.core.raft.raft import Raft, RaftMsg, RaftState, raft_state_str
from spindle.core.replication.relay import relay_push_raft
from spindle.core.replication.replica import RelayState

from .promote import Promoter

if TYPE_CHECKING:
    from .box import Box

_RAFT = int(IprotoType.RAFT)


class BoxRaft:
    """The instance's election: its Raft node, the worker fiber and the options."""

    def __init__(self, box: Box):
        self.box = box
        self.raft = Raft(clock=box.sched.clock, schedule_async=self._wake)
        self.raft.cfg_vclock(lambda: box.vclock)
        self.raft.on_update.append(lambda raft: self.update_read_only())
        self.mode = "off"
        self.started = False
        self._cond = Cond(box.sched)
        self._worker = None
        self._leader_known = Cond(box.sched)    # box.ctl.promote waits on it
        self.raft.on_update.append(lambda raft: self._leader_known.broadcast())
        self.promoter = Promoter(box)
        self._promoted_term = 0                 # the term the worker promoted for

    # ------------------------------------------------------------ start-up

    def start(self) -> None:
        """The end of the first box.cfg (box_cfg_xc of 2.6.3): recovery is over and
        the WAL runs, so the machine gets the instance id and vclock, then the
        election timeout, and the mode last."""
        box, raft = self.box, self.raft
        if not box.cfg.get("replication_anon"):
            raft.cfg_instance_id(box.instance_id)
        self.update_death_timeout()
        self.update_quorum()
        raft.cfg_election_timeout(float(box.cfg.get("election_timeout") or 5))
        self._worker = box.sched.spawn(self._worker_f, name="raft_worker")
        self.started = True
        self.set_mode(box.cfg.get("election_mode") or "off")

    def start_first_term(self) -> None:
        """The bootstrap leader starts a term at once, after "ready to accept
        requests" (nobody else can be leader of a replica set that did not exist)."""
        self.raft.new_term()
        self._wake()

    def stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and worker.status != "dead" and worker is not self.box.sched.current:
            worker.cancel()

    # --------------------------------------------------------- configuration

    def set_mode(self, mode: str) -> None:
        """box_set_election_mode: candidate first, then enabled (2.6.3's order)."""
        self.mode = mode
        if not self.started:
            return              # the first box.cfg applies it at the end (start)
        raft = self.raft
        raft.cfg_is_candidate(mode == "candidate")
        raft.cfg_is_enabled(mode != "off")
        self.update_read_only()
        self.box._update_synchro_ro()       # (2.6.2's limbo rule: with election on)
        self._wake()

    def run_manual_election(self) -> None:
        """box.ctl.promote in manual mode: a candidate for one election, begun
        at once with a new term (no vote: the others start competing too), until
        some leader is known; then no candidate again, without resigning."""
        raft = self.raft
        raft.start_candidate()
        raft.new_term()
        self._wake()
        try:
            while raft.is_enabled and not raft.leader:
                self._leader_known.wait()
                fiber = self.box.sched.current
                if fiber is not None:
                    fiber.testcancel()
        finally:
            if self.mode == "manual":
                raft.stop_candidate(demote=False)
                self._wake()

    def set_election_timeout(self, timeout: float) -> None:
        if self.started:
            self.raft.cfg_election_timeout(float(timeout))
            self._wake()

    def update_death_timeout(self) -> None:
        """replication_disconnect_timeout: 4 × replication_timeout."""
        self.raft.cfg_death_timeout(4 * float(self.box.cfg.get("replication_timeout") or 1))
        self._wake()

    def update_quorum(self) -> None:
        """The synchro quorum, but never more than the registered instances (at
        least 1): the first instance of a new replica set elects itself."""
        from .limbo_txn import synchro_quorum_of
        box = self.box
        quorum = min(synchro_quorum_of(box), max(1, len(box.schema.cluster)))
        self.raft.cfg_election_quorum(quorum)
        self._wake()

    # ------------------------------------------------------------- read-only

    @property
    def is_ro(self) -> bool:
        """raft_is_ro: election on and this instance not the leader — or not yet
        the owner of the synchronous queue: an elected leader stays read-only
        until its PROMOTE of this term is written and processed (a later
        Tarantool's rule; 2.6.3 is writable at once). A transaction let in
        before that enters the limbo ahead of the PROMOTE's processing but lands
        after it in the WAL: the PROMOTE then rolled it back here while the
        followers, reading the WAL in order, committed it."""
        raft = self.raft
        if not raft.is_enabled:
            return False
        if raft.state != RaftState.LEADER:
            return True
        return self.box.limbo.promote_term_map.get(self.box.instance_id, 0) < raft.term

    def update_read_only(self) -> None:
        self.box.set_read_only("election", self.is_ro)

    def info(self) -> dict[str, Any]:
        """box.info.election: the volatile term and vote (what the node decided,
        maybe not on disk yet), the state, and the known leader (0: none)."""
        raft = self.raft
        return {"state": raft_state_str(raft.state), "term": raft.volatile_term,
                "vote": raft.volatile_vote, "leader": raft.leader}

    # ------------------------------------------------------------- persistence

    def recover_row(self, row: XRow) -> None:
        """A raft row of the snapshot or the WAL: its term and vote are the
        persisted state again."""
        self.raft.process_recovery(decode_raft(row))

    def checkpoint_row(self) -> XRow | None:
        """The raft row a snapshot ends with, or None while election was never
        used here (mode off, term 1, no vote: what a fresh instance has), which
        keeps the snapshot readable by 2.6.0 (it refuses request type 30)."""
        msg = self.raft.checkpoint_local()
        if self.mode == "off" and msg.term <= 1 and not msg.vote:
            return None
        return encode_raft(msg)

    # ----------------------------------------------------------------- worker

    def _wake(self) -> None:
        """schedule_async: there is work, or the timer may have moved earlier."""
        self._cond.signal()

    def _worker_f(self) -> None:
        """box_raft_worker_f: persist, broadcast, and run the timer."""
        raft, sched = self.raft, self.box.sched
        try:
            while True:
                msg = raft.pending_write()
                if msg is not None:
                    self._write(msg)
                    raft.write_done(msg)
                    continue
                state = raft.take_broadcast()
                if state is not None:
                    self._broadcast(state)
                    continue
                if self._promote_due():
                    self._promoted_term = raft.term
                    self.promoter.promote_as_leader()
                    continue
                deadline = raft.timer_deadline
                if deadline is not None and sched.clock() >= deadline:
                    raft.on_timer()
                    continue
                if raft.has_work():
                    continue
                # (an election_timeout of math.huge or nan never ends a wait)
                finite = deadline is not None and math.isfinite(deadline)
                self._cond.wait(deadline - sched.clock() if finite else None)
        except FiberIsCancelled:
            return

    def _promote_due(self) -> bool:
        """A candidate that became leader writes its PROMOTE (once a term)."""
        raft = self.raft
        return (raft.state == RaftState.LEADER and self.mode == "candidate"
                and self._promoted_term != raft.term and raft.volatile_term == raft.term
                and not self.promoter.in_promote)

    def _write(self, msg: RaftMsg) -> None:
        """One {term[, vote]} row to the WAL, a local row (component 0). 2.6.3
        stops the instance when it cannot be written: a node must never act on a
        term or vote it has not persisted.

        Written at once (`at_once`): in a batch at the end of the loop's
        iteration it waited for the fibers an election makes ready (the ACK
        writer, relays, refused clients), and only then could the vote be
        announced — 0.2-0.45 ms a write on each side of a vote in the traces of
        scripts/bench/failover.py, 0.1-0.15 ms written at once."""
        row = encode_raft(RaftMsg(msg.term, msg.vote))
        wal = self.box.wal
        try:
            assert wal is not None      # (the worker starts with the WAL running)
            wal.write([row], at_once=True)
        except FiberIsCancelled:
            raise
        except Exception as exc:   # noqa: BLE001 - whatever it is, the node must stop
            log.error("%s", exc)
            log.say(log.FATAL, "Could not write a raft request to WAL")
            import os
            os._exit(1)

    def _broadcast(self, msg: RaftMsg) -> None:
        """box_raft_broadcast: every registered replica's relay (anonymous ones
        are never told)."""
        for replica in self.box.replicaset.replicas():
            relay = replica.relay
            if replica.id and relay is not None and relay.state == RelayState.FOLLOW:
                relay_push_raft(relay, msg)


def is_raft_row(row: XRow) -> bool:
    return row.type == _RAFT and row.group_id == GroupId.LOCAL
