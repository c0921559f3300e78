"""The Raft state machine of leader election, as Tarantool 2.6.3 runs it.

A pure state machine: no I/O and no clock of its own. What goes in: messages of
the other instances (`process_msg`), heartbeats of their connections
(`process_heartbeat`), the expiry of its timer (`on_timer`), the completion of its
WAL writes (`write_done`), recovered state (`process_recovery`) and configuration
(`cfg_*`, `new_term`). What comes out, for the instance's raft worker to carry out:
`pending_write()` (the term/vote row to persist), `take_broadcast()` (the state to
send to every replica), `timer_deadline` (when to call `on_timer`), and the state
itself (`state`, `leader`, `term`, `vote`...), with `on_update` callbacks run on
every visible change. The worker is told there is work by the `schedule_async`
callback; the clock (`clock`) and the randomness of the election timeout (`rand`)
are given, so tests drive time and chance.

The rules (raft.md §3, from 2.6.3's src/lib/raft): a term or a vote is first
*volatile*; it becomes the persisted one once its WAL write completes, and only
the persisted one is ever sent (nothing is announced before it is on disk). While
a write is in flight the node is a follower and heartbeats do not move its timer.
A vote goes to a candidate whose vclock is not behind ours in any component
(component 0 aside), once per term, while no leader is known. A candidate waits
the election timeout plus up to a tenth of it at random, then starts a new term;
a follower candidate starts one when the leader is silent for the death timeout.
There is no pre-vote, no lease and no step-down: a leader stays one until a higher
term, a reconfiguration or resignation.

One rule is Spindle's own (`_contest`, docs/ELECTION.md): 2.6.3 loses a term to a
split vote whenever two candidates start together (a leader that dies while
writing: its last row reached every follower at once) or one starts that a peer
will not vote for (its vclock is behind); every node then waits the election
timeout. Here a candidate that refuses a competing candidate settles the contest
at once in the next term: it stands itself when the other is behind it (which
can vote for it), or votes for the other when that one is ahead, or as far
along with a lower id. A node that voted for a candidate announces the vote again
when that candidate asks (it may have missed the first announcement).
"""
from __future__ import annotations

import enum
import math
import random
from dataclasses import dataclass
from typing import Callable, Mapping

from spindle.core import log
from spindle.core.vclock import VClock

# Maximal random share of the election timeout added to each wait.
RANDOM_ELECTION_FACTOR = 0.1


class RaftState(enum.IntEnum):
    FOLLOWER = 1
    CANDIDATE = 2
    LEADER = 3


_FOLLOWER, _CANDIDATE, _LEADER = RaftState.FOLLOWER, RaftState.CANDIDATE, RaftState.LEADER


def raft_state_str(state: int) -> str:
    """A state as box.info.election and the log name it (raft_state_str)."""
    if state == 0:
        return "invalid (0)"
    if 1 <= state <= 3:
        return RaftState(state).name.lower()
    return "invalid (x)"


class RaftError(Exception):
    """A Raft message that breaks the protocol: the applier that got it stops
    (2.6.3's RaftError, whose message is just this text)."""


@dataclass
class RaftMsg:
    """A Raft request: the body of an IPROTO_RAFT row (0 and None: absent)."""

    term: int
    vote: int = 0
    state: int = 0
    vclock: Mapping[int, int] | None = None

    def __str__(self) -> str:
        parts = [f"term: {self.term}"]
        if self.vote:
            parts.append(f"vote: {self.vote}")
        if self.state:
            parts.append(f"state: {raft_state_str(self.state)}")
        if self.vclock is not None:
            parts.append(f"vclock: {VClock(self.vclock)}")
        return "{" + ", ".join(parts) + "}"


class Raft:
    """One instance's Raft node (struct raft)."""

    def __init__(self, *, clock: Callable[[], float],
                 schedule_async: Callable[[], None] = lambda: None,
                 rand: Callable[[int], int] | None = None):
        self.clock = clock
        self.schedule_async = schedule_async
        # rand(n): an integer in [0, n] (2.6.3: rand() % (n + 1))
        self.rand = rand or (lambda n: random.randint(0, n))
        self.self_id = 0
        # the instance's vclock, read not owned (a function: the instance may
        # replace its vclock object)
        self._vclock_of: Callable[[], VClock | None] = lambda: None
        self.state = _FOLLOWER
        self.leader = 0
        self.term = 1                              # persisted
        self.vote = 0
        self.volatile_term = 1                     # decided, maybe not on disk yet
        self.volatile_vote = 0
        self.is_enabled = False
        self.is_cfg_candidate = False
        self.is_candidate = False                  # cfg, or for box.ctl.promote's while
        self.is_write_in_progress = False
        self._write_handed_out = False             # pending_write() gave the row out
        self.is_broadcast_scheduled = False
        self.vote_mask: set[int] = set()
        self.vote_count = 0
        self.election_quorum = 1
        self.election_timeout = 5.0
        self.death_timeout = 5.0
        # the one timer: its deadline (None: stopped) and the timeout it was set
        # with (a reconfiguration shifts a running wait by the difference)
        self.timer_deadline: float | None = None
        self._timer_timeout = 0.0
        self.on_update: list[Callable[[Raft], None]] = []

    # ------------------------------------------------------------ configuration

    def cfg_instance_id(self, instance_id: int) -> None:
        self.self_id = instance_id

    def cfg_vclock(self, vclock: VClock | Callable[[], VClock]) -> None:
        """The instance's vclock, or a function giving the current one."""
        self._vclock_of = vclock if callable(vclock) else (lambda: vclock)

    @property
    def vclock(self) -> VClock | None:
        return self._vclock_of()

    def cfg_is_enabled(self, is_enabled: bool) -> None:
        if is_enabled == self.is_enabled:
            return
        if is_enabled:
            self._sm_start()
        else:
            self._sm_stop()

    def cfg_is_candidate(self, is_candidate: bool) -> None:
        self.is_cfg_candidate = is_candidate
        if is_candidate and self.is_enabled:
            self.start_candidate()
        else:
            self.stop_candidate(demote=True)

    def start_candidate(self) -> None:
        if self.is_candidate:
            return
        self.is_candidate = True
        if self.state == _LEADER:
            return          # (still the leader after stop_candidate(demote=False))
        if self.is_write_in_progress:
            pass            # the write's end decides
        elif self.leader:
            self._sm_wait_leader_dead()
        else:
            self._sm_wait_leader_found()

    def stop_candidate(self, demote: bool) -> None:
        if not self.is_candidate and self.state != _LEADER:
            return
        self.is_candidate = False
        if self.state != _LEADER:
            self._timer_stop()                 # a voter waits for nothing
        if self.state != _FOLLOWER:
            if self.state == _LEADER:
                if not demote:
                    return                     # leader until someone starts an election
                self.leader = 0
            self.state = _FOLLOWER
            self._schedule_broadcast()

    def cfg_election_timeout(self, timeout: float) -> None:
        if timeout == self.election_timeout:
            return
        self.election_timeout = timeout
        if self.vote and not self.leader and self.is_candidate:
            self._timer_shift(timeout)

    def cfg_election_quorum(self, quorum: int) -> None:
        self.election_quorum = max(1, quorum)      # self is always in the quorum
        if self.state == _CANDIDATE and self.vote_count >= self.election_quorum:
            self._sm_become_leader()

    def cfg_death_timeout(self, timeout: float) -> None:
        self.death_timeout = timeout
        if self.state == _FOLLOWER and self.is_candidate and self.leader:
            self._timer_shift(timeout)

    def new_term(self) -> None:
        """A term bump without a vote (box.ctl.promote in manual mode)."""
        if self.is_enabled:
            self._sm_schedule_new_term(self.volatile_term + 1)

    # ------------------------------------------------------------------- inputs

    def process_recovery(self, msg: RaftMsg) -> None:
        """The term/vote of a snapshot or WAL row, while recovering (never a state
        or a vclock: those are not persisted)."""
        if msg.term:
            if msg.term > self.term:
                # a term is written with no vote until there is one (2.6.3 keeps the
                # older term's vote here, and so announces it in the newer term)
                self.vote = self.volatile_vote = 0
            self.term = self.volatile_term = msg.term
        if msg.vote:
            self.vote = self.volatile_vote = msg.vote

    def process_msg(self, msg: RaftMsg, source: int) -> None:
        """A Raft message of instance `source`; RaftError when it breaks the rules."""
        log.info("RAFT: message %s from %s", msg, source)
        if msg.term == 0 or msg.state == 0 or msg.state > _LEADER:
            raise RaftError("Invalid term or state")
        if msg.state == _CANDIDATE and (msg.vote != source or msg.vclock is None):
            raise RaftError("Candidate should always vote for self and provide its vclock")
        if msg.term < self.volatile_term:
            log.info("RAFT: the message is ignored due to outdated term - "
                     "current term is %s", self.volatile_term)
            return
        if msg.term > self.volatile_term:
            self._sm_schedule_new_term(msg.term)
        if msg.vote:
            if self.state == _CANDIDATE:
                self._count_vote(msg, source)
            else:
                self._consider_vote(msg)
        if msg.state != _LEADER:
            if source == self.leader:
                log.info("RAFT: the node %s has resigned from the leader role", source)
                self.leader = 0
                if self.is_candidate:
                    self._sm_schedule_new_election()
            return
        if source == self.leader:
            return
        if self.leader:
            log.warn("RAFT: conflicting leader detected in one term - known is %s, "
                     "received %s", self.leader, source)
            return
        self._sm_follow_leader(source)

    def _consider_vote(self, msg: RaftMsg) -> None:
        """A vote seen by a follower or the leader: granted to a candidate asking
        for it, when nothing forbids it."""
        why, contest = None, False
        if not self.is_enabled:
            why = "RAFT is disabled"
        elif self.leader:
            why = f"the leader is already known - {self.leader}"
        elif msg.vote == self.self_id:
            why = "can't accept vote for self if not a candidate"
        elif msg.state != _CANDIDATE:
            why = "this is a notification about a vote for a third node, not a request"
        elif self.volatile_vote:
            why = "already voted in this term"
            if self.vote == msg.vote and self.term == self.volatile_term:
                self._schedule_broadcast()      # the candidate asks again: tell it
        elif not self._can_vote_for(msg.vclock):
            why, contest = "the vclock is not acceptable", True
        if why is not None:
            log.info("RAFT: vote request is skipped - %s", why)
            if contest:
                self._contest(msg)
            return
        self._sm_schedule_new_vote(msg.vote)

    def _count_vote(self, msg: RaftMsg, source: int) -> None:
        if msg.vote != self.self_id:
            log.info("RAFT: vote request is skipped - competing candidate")
            if msg.state == _CANDIDATE:
                self._contest(msg)
            return
        if source not in self.vote_mask:
            self.vote_mask.add(source)
            self.vote_count += 1
        if self.vote_count < self.election_quorum:
            log.info("RAFT: accepted vote for self, vote count is %s/%s",
                     self.vote_count, self.election_quorum)
            return
        self._sm_become_leader()

    def _contest(self, msg: RaftMsg) -> None:
        """A candidate's request this node refused, in the candidate's term: this
        term is lost to a split vote whenever the refusal leaves no one a quorum
        (2.6.3 then waits the election timeout, up to 1.1 × election_timeout). A
        candidate node settles it in the next term at once: it stands itself if
        the other's vclock is behind its own (the other can vote for it), or
        votes for the other if it is a competing candidate and the other is
        ahead, or as far along with a lower id. Incomparable vclocks: nothing
        (a third node decides). A term never gets two votes: the new one is a
        new term."""
        if not self.is_candidate or self.leader or msg.vclock is None:
            return
        ours = self.vclock or VClock()
        order = VClock(msg.vclock).compare(ours, ignore0=True)
        if order == -1:
            log.info("RAFT: the candidate %s is behind this node, begin new election "
                     "round", msg.vote)
            self._sm_schedule_new_term(self.volatile_term + 1)
            self._sm_schedule_new_vote(self.self_id)
        elif self.state == _CANDIDATE and (order == 1 or (order == 0
                                                          and msg.vote < self.self_id)):
            log.info("RAFT: split vote with candidate %s, vote for it in a new term",
                     msg.vote)
            self._sm_schedule_new_term(self.volatile_term + 1)
            self._sm_schedule_new_vote(msg.vote)

    def _can_vote_for(self, vclock: Mapping[int, int] | None) -> bool:
        """The candidate's vclock is not behind ours in any component (0 aside)."""
        if vclock is None:
            return False
        ours = self.vclock or VClock()
        return VClock(vclock).compare(ours, ignore0=True) in (0, 1)

    def process_heartbeat(self, source: int) -> None:
        """Anything heard from instance `source`'s connection: the leader's keeps
        a follower candidate's death timer from expiring."""
        if (source == 0 or not self.is_candidate or self.state == _LEADER
                or self.leader != source or self.is_write_in_progress):
            return
        self._timer_stop()
        self._sm_wait_leader_dead()

    def on_timer(self) -> None:
        """The timer expired (the worker calls this at `timer_deadline`): a new
        election. A call before the deadline (a timer moved meanwhile) does
        nothing."""
        if self.timer_deadline is None or self.clock() < self.timer_deadline:
            return
        self._timer_stop()
        self._sm_schedule_new_election()

    # ------------------------------------------------ the worker's side (async)

    def pending_write(self) -> RaftMsg | None:
        """The row to persist now ({term[, vote]}: volatile values), once per
        write; None when nothing is to be written or the row is out already."""
        if not self.is_write_in_progress or self._write_handed_out:
            return None
        if self._fully_on_disk():
            self._end_dump()
            return None
        self._write_handed_out = True
        return RaftMsg(term=self.volatile_term, vote=self.volatile_vote)

    def write_done(self, msg: RaftMsg) -> None:
        """The row pending_write() gave is on disk: it is the persisted state now."""
        self._write_handed_out = False
        log.info("RAFT: persisted state %s", msg)
        self.term = msg.term
        self.vote = msg.vote
        self._schedule_broadcast()
        if self._fully_on_disk():
            self._end_dump()
        # else: newer volatile values came meanwhile: pending_write() has them

    def take_broadcast(self) -> RaftMsg | None:
        """The persisted state to send to every replica, once per change (the
        newest only); None when there is nothing new."""
        if not self.is_broadcast_scheduled:
            return None
        self.is_broadcast_scheduled = False
        return self.checkpoint_remote()

    def has_work(self) -> bool:
        return ((self.is_write_in_progress and not self._write_handed_out)
                or self.is_broadcast_scheduled)

    # ------------------------------------------------------------- checkpoints

    def checkpoint_remote(self) -> RaftMsg:
        """The state as peers see it: persisted term and vote, the role, and the
        vclock only from a candidate."""
        vclock = None
        ours = self.vclock
        if self.state == _CANDIDATE and ours is not None:
            vclock = ours.to_dict()
        return RaftMsg(self.term, self.vote, int(self.state), vclock)

    def checkpoint_local(self) -> RaftMsg:
        """What a snapshot keeps: the persisted term and vote."""
        return RaftMsg(self.term, self.vote)

    # ----------------------------------------------------------- state machine

    def _fully_on_disk(self) -> bool:
        return self.volatile_term == self.term and self.volatile_vote == self.vote

    def _end_dump(self) -> None:
        """The state is on disk: where to go from here (raft_worker_handle_io)."""
        self.is_write_in_progress = False
        if not self.is_candidate:
            return                          # a voter just stays a follower
        if self.leader:
            self._sm_wait_leader_dead()
        elif self.vote == self.self_id:
            if self.election_quorum == 1:
                self._sm_become_leader()
            else:
                self._sm_become_candidate()
        elif self.vote:
            self._sm_wait_election_end()
        else:
            # no leader, no vote: compete in this term without bumping it
            self._sm_schedule_new_vote(self.self_id)

    def _sm_pause_and_dump(self) -> None:
        if self.is_write_in_progress:
            return
        self._timer_stop()
        self.is_write_in_progress = True
        self.schedule_async()

    def _sm_become_leader(self) -> None:
        log.info("RAFT: enter leader state with quorum %s", self.election_quorum)
        self.state = _LEADER
        self.leader = self.self_id
        self._timer_stop()
        self._schedule_broadcast()

    def _sm_follow_leader(self, leader: int) -> None:
        log.info("RAFT: leader is %s, follow", leader)
        self.state = _FOLLOWER
        self.leader = leader
        if not self.is_write_in_progress and self.is_candidate:
            self._timer_stop()
            self._sm_wait_leader_dead()
        self._schedule_broadcast()

    def _sm_become_candidate(self) -> None:
        log.info("RAFT: enter candidate state with 1 self vote")
        self.state = _CANDIDATE
        self.vote_count = 1
        self.vote_mask = {self.self_id}
        self._sm_wait_election_end()
        self._schedule_broadcast()

    def _sm_schedule_new_term(self, term: int) -> None:
        log.info("RAFT: bump term to %s, follow", term)
        self.volatile_term = term
        self.volatile_vote = 0              # a new term is a new state altogether
        self.leader = 0
        self.state = _FOLLOWER
        self._sm_pause_and_dump()
        self._schedule_broadcast()

    def _sm_schedule_new_vote(self, vote: int) -> None:
        log.info("RAFT: vote for %s, follow", vote)
        self.volatile_vote = vote
        self._sm_pause_and_dump()           # nothing visible changed: no broadcast

    def _sm_schedule_new_election(self) -> None:
        log.info("RAFT: begin new election round")
        # everyone is a follower until its vote for itself is on disk
        self._sm_schedule_new_term(self.term + 1)
        self._sm_schedule_new_vote(self.self_id)

    def _sm_wait_leader_dead(self) -> None:
        self._timer_start(self.death_timeout)

    def _sm_wait_leader_found(self) -> None:
        # not an election at once: a restarted node gives the leader time to speak
        self._timer_start(self.death_timeout)

    def _sm_wait_election_end(self) -> None:
        self._timer_start(self.election_timeout + self.rand(self._random_share()) / 1000.0)

    def _random_share(self) -> int:
        """raft_new_random_election_shift's bound, in ms: a tenth of the election
        timeout as a uint32 (at least 1). box.cfg accepts any timeout above 0,
        math.huge and nan included: those have no share but 1."""
        share = self.election_timeout * RANDOM_ELECTION_FACTOR * 1000
        if not math.isfinite(share):
            return 1
        return (int(share) & 0xFFFFFFFF) or 1

    def _sm_start(self) -> None:
        log.info("RAFT: start state machine")
        self.is_enabled = True
        self.is_candidate = self.is_cfg_candidate
        if self.is_write_in_progress or not self.is_candidate:
            pass
        elif self.leader:
            self._sm_wait_leader_dead()
        else:
            self._sm_wait_leader_found()
        # this node's term may be ahead of every other: share it
        self._schedule_broadcast()

    def _sm_stop(self) -> None:
        log.info("RAFT: stop state machine")
        self.is_enabled = False
        self.is_candidate = False
        if self.state == _LEADER:
            self.leader = 0
        self.state = _FOLLOWER
        self._timer_stop()
        self._schedule_broadcast()

    def _schedule_broadcast(self) -> None:
        for callback in list(self.on_update):
            callback(self)
        self.is_broadcast_scheduled = True
        self.schedule_async()

    # ------------------------------------------------------------------ timer

    def _timer_start(self, timeout: float) -> None:
        self._timer_timeout = timeout
        self.timer_deadline = self.clock() + timeout

    def _timer_stop(self) -> None:
        self.timer_deadline = None

    def _timer_shift(self, timeout: float) -> None:
        """A running wait set with the old timeout now lasts `timeout` from its
        start (never less than nothing)."""
        if self.timer_deadline is None:
            return
        started = self.timer_deadline - self._timer_timeout
        remaining = max(0.0, started + timeout - self.clock())
        self._timer_start(remaining)
