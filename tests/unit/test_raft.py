"""The Raft state machine (core/raft/raft.py) driven by a fake clock, a fake WAL
and a fake network, through the cases of 2.6.3's test/unit/raft.c: election,
recovery, bad messages, votes and every refusal, resignation, split brain,
heartbeats, the election and death timeouts, the election quorum, enabling and
disabling, a long WAL write, candidates started and stopped."""
from __future__ import annotations

import math

import pytest

from spindle.core.raft.raft import Raft, RaftError, RaftMsg, RaftState
from spindle.core.vclock import VClock

F, C, L = RaftState.FOLLOWER, RaftState.CANDIDATE, RaftState.LEADER


class Node:
    """A Raft with a clock, a WAL (a list of persisted rows) and an outbox that
    the test runs by hand: `run()` does the worker's job (writes complete at once
    unless `hold_writes`), `advance(dt)` moves time and fires the timer."""

    def __init__(self, self_id: int = 1, *, quorum: int = 1, candidate: bool = True,
                 enabled: bool = True, rand: int = 0, vclock: dict | None = None):
        self.now = 100.0
        self.wal: list[RaftMsg] = []
        self.sent: list[RaftMsg] = []
        self.hold_writes = False
        self.held: RaftMsg | None = None
        self.updates = 0
        self.raft = Raft(clock=lambda: self.now, rand=lambda n: min(rand, n))
        self.raft.on_update.append(self._updated)
        self.vclock = VClock(vclock or {})
        self.raft.cfg_instance_id(self_id)
        self.raft.cfg_vclock(self.vclock)
        self.raft.cfg_election_timeout(5)
        self.raft.cfg_death_timeout(5)
        self.raft.cfg_election_quorum(quorum)
        self.raft.cfg_is_candidate(candidate)
        self.raft.cfg_is_enabled(enabled)
        self.run()

    def _updated(self, raft: Raft) -> None:
        self.updates += 1

    def run(self) -> None:
        raft = self.raft
        while True:
            if self.held is None:
                row = raft.pending_write()
                if row is not None:
                    if self.hold_writes:
                        self.held = row
                        continue
                    self.wal.append(row)
                    raft.write_done(row)
                    continue
            msg = raft.take_broadcast()
            if msg is None:
                return
            self.sent.append(msg)

    def finish_write(self) -> None:
        row, self.held = self.held, None
        assert row is not None
        self.wal.append(row)
        self.raft.write_done(row)
        self.run()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        deadline = self.raft.timer_deadline
        if deadline is not None and self.now >= deadline:
            self.raft.on_timer()
        self.run()

    def msg(self, msg: RaftMsg, source: int) -> None:
        self.raft.process_msg(msg, source)
        self.run()

    def status(self) -> tuple:
        r = self.raft
        return (r.state, r.term, r.vote, r.leader)


def test_single_candidate_elects_itself_after_waiting_for_a_leader():
    node = Node(quorum=1)
    assert node.status() == (F, 1, 0, 0)
    assert node.raft.timer_deadline == pytest.approx(105)     # wait leader found
    node.advance(4.9)
    assert node.status() == (F, 1, 0, 0)
    node.advance(0.1)
    assert node.status() == (L, 2, 1, 1)
    assert node.wal == [RaftMsg(2, 1)]                        # one row: term and vote
    assert node.sent[-1] == RaftMsg(2, 1, int(L))
    assert node.raft.timer_deadline is None


def test_election_with_quorum_two_and_a_vote():
    node = Node(1, quorum=2, vclock={1: 5})
    node.advance(5)
    assert node.status() == (C, 2, 1, 0)
    assert node.sent[-1] == RaftMsg(2, 1, int(C), {1: 5})    # a candidate sends its vclock
    assert node.raft.timer_deadline == pytest.approx(node.now + 5)   # rand 0
    node.msg(RaftMsg(2, 1, int(F)), 2)                         # node 2 voted for us
    assert node.status() == (L, 2, 1, 1)
    node.msg(RaftMsg(2, 1, int(F)), 3)                         # a late vote changes nothing
    assert node.status() == (L, 2, 1, 1)


def test_failed_election_starts_a_new_term_after_the_randomized_timeout():
    node = Node(1, quorum=3, rand=400)
    node.advance(5)
    assert node.status() == (C, 2, 1, 0)
    assert node.raft.timer_deadline == pytest.approx(node.now + 5.4)   # + rand(500) ms
    node.msg(RaftMsg(2, 1, int(F)), 2)
    node.msg(RaftMsg(2, 1, int(F)), 2)                          # one vote per source
    assert node.raft.vote_count == 2 and node.status()[0] == C
    node.advance(5.4)
    assert node.status() == (C, 3, 1, 0)


@pytest.mark.parametrize("timeout, share", [
    (5, 500), (0.001, 1), (5e7, 5_000_000_000 - 2 ** 32),
    (math.inf, 1), (math.nan, 1),
])
def test_the_random_part_of_an_election_wait_for_any_accepted_timeout(timeout, share):
    """box.cfg accepts every election_timeout above 0, math.huge and nan included
    (2.6.3's check is `<= 0`): the random part's bound is a tenth of it in ms as
    2.6.3's uint32, at least 1, and 1 when there is no such number; the wait
    starts (it was an OverflowError that ended the raft worker)."""
    seen = []
    node = Node(1, quorum=2)
    node.raft.rand = lambda n: seen.append(n) or 0
    node.raft.cfg_election_timeout(timeout)
    node.advance(5)
    assert node.status()[0] == C and seen == [share]
    deadline = node.raft.timer_deadline
    assert deadline == node.now + timeout or (math.isnan(timeout) and math.isnan(deadline))


def test_recovery_restores_term_and_vote_never_the_role():
    raft = Raft(clock=lambda: 0.0)
    raft.process_recovery(RaftMsg(term=4))
    raft.process_recovery(RaftMsg(term=4, vote=2))
    assert (raft.term, raft.volatile_term, raft.vote, raft.state, raft.leader) == (4, 4, 2, F, 0)
    assert raft.checkpoint_local() == RaftMsg(4, 2)
    assert raft.checkpoint_remote() == RaftMsg(4, 2, int(F))


@pytest.mark.parametrize("msg, text", [
    (RaftMsg(term=0, vote=2, state=1), "Invalid term or state"),
    (RaftMsg(term=2, state=0), "Invalid term or state"),
    (RaftMsg(term=2, state=4), "Invalid term or state"),
    (RaftMsg(term=2, vote=3, state=2, vclock={}), "Candidate should always vote for self "
                                                   "and provide its vclock"),
    (RaftMsg(term=2, vote=2, state=2), "Candidate should always vote for self "
                                       "and provide its vclock"),
])
def test_bad_messages_are_raft_errors_and_change_nothing(msg, text):
    node = Node(1, quorum=2)
    before = node.status()
    with pytest.raises(RaftError, match=text):
        node.raft.process_msg(msg, 2)
    assert node.status() == before and node.wal == []


def test_vote_is_granted_to_a_candidate_with_a_newer_term():
    node = Node(1, quorum=2, vclock={1: 3, 2: 1})
    node.msg(RaftMsg(3, 2, int(C), {1: 3, 2: 4}), 2)
    assert node.status() == (F, 3, 2, 0)
    assert node.wal == [RaftMsg(3, 2)]                          # term and vote in one row
    assert node.sent[-1] == RaftMsg(3, 2, int(F))               # the "reply" is the state
    # then waits for the election's end (a candidate itself)
    assert node.raft.timer_deadline == pytest.approx(node.now + 5)


@pytest.mark.parametrize("case", ["disabled", "leader known", "vote for self",
                                  "not a request", "already voted", "vclock behind",
                                  "vclock incomparable", "outdated term"])
def test_vote_refusals(case):
    # voters: a candidate would go on to vote for itself in the new term
    node = Node(1, quorum=2, vclock={1: 5, 2: 5}, enabled=case != "disabled",
                candidate=False)
    good = {1: 5, 2: 6}
    if case == "leader known":
        node.msg(RaftMsg(2, 3, int(L)), 3)
    if case == "already voted":
        node.msg(RaftMsg(2, 3, int(C), good), 3)
        assert node.raft.vote == 3
    if case == "outdated term":
        node.msg(RaftMsg(5, 0, int(F)), 3)
    before_vote = node.raft.vote
    msg = {
        "vote for self": RaftMsg(2, 1, int(F)),
        "not a request": RaftMsg(2, 3, int(F)),
        "vclock behind": RaftMsg(2, 2, int(C), {1: 4, 2: 9}),
        "vclock incomparable": RaftMsg(2, 2, int(C), {1: 6, 2: 4}),
    }.get(case, RaftMsg(2, 2, int(C), good))
    node.msg(msg, 2)
    assert node.raft.vote == before_vote and node.raft.volatile_vote == before_vote


def test_vclock_component_zero_is_ignored():
    node = Node(1, quorum=2, vclock={0: 50, 1: 5})
    node.msg(RaftMsg(2, 2, int(C), {1: 5}), 2)
    assert node.raft.vote == 2


def test_a_higher_term_without_a_vote_makes_a_candidate_compete_in_it():
    node = Node(1, quorum=2)
    node.msg(RaftMsg(4, 0, int(F)), 2)
    # term 4 persisted alone, then (no leader, no vote) a vote for itself: two rows
    assert node.wal == [RaftMsg(4, 0), RaftMsg(4, 1)]
    assert node.status() == (C, 4, 1, 0)


def test_a_voter_only_persists_the_term():
    node = Node(1, quorum=2, candidate=False)
    node.msg(RaftMsg(4, 0, int(F)), 2)
    assert node.wal == [RaftMsg(4, 0)] and node.status() == (F, 4, 0, 0)
    assert node.raft.timer_deadline is None
    node.msg(RaftMsg(4, 2, int(C), {}), 2)                     # but it votes
    assert node.status() == (F, 4, 2, 0) and node.raft.timer_deadline is None


def test_a_disabled_node_still_learns_terms_and_leaders():
    node = Node(1, enabled=False)
    node.msg(RaftMsg(3, 2, int(L)), 2)
    assert node.status() == (F, 3, 0, 2)
    assert node.raft.timer_deadline is None


def test_leader_resign_starts_an_election_on_candidates():
    node = Node(1, quorum=2)
    node.msg(RaftMsg(2, 2, int(L)), 2)
    assert node.status() == (F, 2, 0, 2)
    assert node.raft.timer_deadline == pytest.approx(node.now + 5)   # death timer
    node.msg(RaftMsg(2, 2, int(F)), 2)                          # it resigns
    assert node.status() == (C, 3, 1, 0)


def test_leader_resign_on_a_voter_forgets_the_leader():
    node = Node(1, candidate=False)
    node.msg(RaftMsg(2, 2, int(L)), 2)
    node.msg(RaftMsg(2, 2, int(F)), 2)
    assert node.status() == (F, 2, 0, 0)


def test_split_brain_keeps_the_first_leader():
    node = Node(1, quorum=2)
    node.msg(RaftMsg(2, 2, int(L)), 2)
    node.msg(RaftMsg(2, 3, int(L)), 3)
    assert node.status() == (F, 2, 0, 2)


def test_heartbeats_of_the_leader_keep_the_death_timer_off():
    node = Node(1, quorum=2)
    node.msg(RaftMsg(2, 2, int(L)), 2)
    for _ in range(5):
        node.advance(4)
        node.raft.process_heartbeat(2)
        node.raft.process_heartbeat(3)                           # not the leader's: nothing
    assert node.status() == (F, 2, 0, 2)
    node.advance(5)                                              # silence: the leader is dead
    assert node.status() == (C, 3, 1, 0)


def test_a_heartbeat_during_a_write_does_not_move_the_timer():
    node = Node(1, quorum=2)
    node.msg(RaftMsg(2, 2, int(L)), 2)
    node.hold_writes = True
    node.msg(RaftMsg(3, 0, int(F)), 3)                            # a term bump to write
    node.raft.process_heartbeat(2)
    assert node.raft.timer_deadline is None and node.raft.is_write_in_progress


def test_election_timeout_change_shifts_the_running_wait():
    node = Node(1, quorum=2)
    node.advance(5)
    assert node.status()[0] == C
    start = node.now
    node.advance(2)
    node.raft.cfg_election_timeout(10)
    assert node.raft.timer_deadline == pytest.approx(start + 10)
    # (as 2.6.3: the shift counts from the wait's last setting, here 2 s ago)
    node.raft.cfg_election_timeout(1)
    assert node.raft.timer_deadline == pytest.approx(node.now + 1)
    node.advance(1)
    assert node.status() == (C, 3, 1, 0)
    node.advance(0.5)
    node.raft.cfg_election_timeout(0.1)                          # past already: at once
    assert node.raft.timer_deadline == pytest.approx(node.now)


def test_lowering_the_quorum_mid_election_makes_a_leader():
    node = Node(1, quorum=3)
    node.advance(5)
    node.msg(RaftMsg(2, 1, int(F)), 2)
    assert node.status()[0] == C
    node.raft.cfg_election_quorum(2)
    node.run()
    assert node.status() == (L, 2, 1, 1)


def test_death_timeout_change_shifts_the_death_timer():
    node = Node(1, quorum=2)
    node.msg(RaftMsg(2, 2, int(L)), 2)
    start = node.now
    node.advance(1)
    node.raft.cfg_death_timeout(2)
    assert node.raft.timer_deadline == pytest.approx(start + 2)
    node.advance(1)
    assert node.status() == (C, 3, 1, 0)


def test_disable_a_leader_resigns_and_enable_waits_for_a_leader():
    node = Node(1)
    node.advance(5)
    assert node.status() == (L, 2, 1, 1)
    node.raft.cfg_is_enabled(False)
    node.run()
    assert node.status() == (F, 2, 1, 0) and node.sent[-1] == RaftMsg(2, 1, int(F))
    node.raft.cfg_is_enabled(True)
    node.run()
    assert node.raft.timer_deadline == pytest.approx(node.now + 5)
    node.advance(5)
    assert node.status() == (L, 3, 1, 1)


def test_nothing_is_announced_before_it_is_on_disk():
    node = Node(1, quorum=2)
    node.hold_writes = True
    node.msg(RaftMsg(7, 2, int(C), {}), 2)
    assert node.raft.volatile_term == 7 and node.raft.term == 1
    assert all(msg.term == 1 for msg in node.sent)               # only the old term went out
    # more arrives while the write is in flight: one more row afterwards
    node.msg(RaftMsg(8, 0, int(F)), 3)
    node.finish_write()
    assert node.wal[0] == RaftMsg(7, 2)
    node.finish_write()
    assert node.wal[1] == RaftMsg(8, 0)
    assert node.sent[-1].term == 8


def test_stop_candidate_without_demote_keeps_the_leader():
    node = Node(1)
    node.advance(5)
    node.raft.stop_candidate(demote=False)
    assert node.status() == (L, 2, 1, 1)
    node.raft.start_candidate()
    assert node.status() == (L, 2, 1, 1)
    node.raft.cfg_is_candidate(False)                            # voter: demoted
    node.run()
    assert node.status() == (F, 2, 1, 0)
    assert node.raft.timer_deadline is None


def test_new_term_bumps_the_term_only():
    node = Node(1, quorum=2, candidate=False)
    node.raft.new_term()
    node.run()
    assert node.wal == [RaftMsg(2, 0)] and node.status() == (F, 2, 0, 0)


def test_three_nodes_elect_exactly_one_leader():
    nodes = {i: Node(i, quorum=2, rand=i * 100) for i in (1, 2, 3)}

    def deliver():
        moved = True
        while moved:
            moved = False
            for src, node in nodes.items():
                while node.sent:
                    msg = node.sent.pop(0)
                    moved = True
                    for dst, other in nodes.items():
                        if dst != src:
                            other.msg(msg, src)

    for _ in range(400):                 # 20 s in steps of 50 ms, messages between
        for node in nodes.values():
            node.advance(0.05)
            deliver()
    leaders = {n.raft.leader for n in nodes.values()}
    assert len(leaders) == 1 and 0 not in leaders
    assert sum(n.raft.state == L for n in nodes.values()) == 1
    assert len({n.raft.term for n in nodes.values()}) == 1


# ------------------------------------------------------------ Spindle's contest rule
# (core/raft/raft.py, Raft._contest; docs/ELECTION.md). 2.6.3 loses such a term to a
# split vote and waits the election timeout (5 s here) before the next one.

def exchange(*nodes: Node) -> None:
    """Deliver every sent message to every other node until none is left."""
    ids = {node.raft.self_id: node for node in nodes}
    while any(node.sent for node in nodes):
        for src, node in ids.items():
            while node.sent:
                msg = node.sent.pop(0)
                for dst, other in ids.items():
                    if dst != src:
                        other.msg(msg, src)


def survivors(vclock_2: dict, vclock_3: dict) -> tuple[Node, Node]:
    """Nodes 2 and 3 of three, quorum 2, following the leader 1 in term 2."""
    two, three = (Node(i, quorum=2, vclock=v) for i, v in ((2, vclock_2), (3, vclock_3)))
    for node in (two, three):
        node.msg(RaftMsg(2, 1, int(L)), 1)
        node.sent.clear()
    return two, three


def stand_together(*nodes: Node) -> None:
    """The leader's death noticed by every node at once: each one stands."""
    for node in nodes:
        node.advance(5)
        assert node.status() == (C, 3, node.raft.self_id, 0)


def test_a_follower_refusing_a_candidate_that_is_behind_stands_in_the_next_term():
    two, three = survivors({1: 10, 2: 3}, {1: 10, 2: 2})    # 3 lacks a row of 2's
    three.advance(5)                                          # 3 notices first
    assert three.status() == (C, 3, 3, 0)
    two.msg(three.sent.pop(), 3)
    # 2.6.3: term 3 and a vote for itself (two candidates in term 3, neither wins)
    assert two.wal[-1] == RaftMsg(4, 2) and two.status() == (C, 4, 2, 0)
    exchange(two, three)
    assert two.status() == (L, 4, 2, 2) and three.status() == (F, 4, 2, 2)


def test_two_candidates_as_far_along_the_higher_id_votes_for_the_lower_in_a_new_term():
    two, three = survivors({1: 10}, {1: 10})
    stand_together(two, three)                                # a split vote
    request_2, request_3 = two.sent.pop(), three.sent.pop()
    two.msg(request_3, 3)
    assert two.status() == (C, 3, 2, 0)                       # the lower id stays
    three.msg(request_2, 2)
    assert three.wal[-1] == RaftMsg(4, 2) and three.status() == (F, 4, 2, 0)
    exchange(two, three)
    assert two.status() == (L, 4, 2, 2) and three.status() == (F, 4, 2, 2)


def test_a_competing_candidate_that_is_ahead_gets_the_vote_in_a_new_term():
    two, three = survivors({1: 9}, {1: 10})
    stand_together(two, three)
    request_3 = three.sent.pop()
    two.msg(request_3, 3)                                     # 3 is ahead: 2 gives way
    assert two.wal[-1] == RaftMsg(4, 3) and two.status() == (F, 4, 3, 0)
    exchange(two, three)
    assert three.status() == (L, 4, 3, 3) and two.status() == (F, 4, 3, 3)


def test_incomparable_candidates_wait_for_the_election_timeout_as_in_2_6_3():
    two, three = survivors({1: 10, 2: 1}, {1: 10, 3: 1})
    stand_together(two, three)
    exchange(two, three)
    assert two.status() == (C, 3, 2, 0) and three.status() == (C, 3, 3, 0)
    assert two.raft.timer_deadline == pytest.approx(two.now + 5)


def test_a_voter_never_contests():
    node = Node(2, quorum=2, candidate=False, vclock={1: 10})
    node.msg(RaftMsg(3, 3, int(C), {1: 9}), 3)
    assert node.wal == [RaftMsg(3, 0)] and node.status() == (F, 3, 0, 0)


def test_a_candidate_that_asks_again_hears_the_vote_again():
    node = Node(2, quorum=2, candidate=False, vclock={1: 10})
    request = RaftMsg(3, 3, int(C), {1: 10})
    node.msg(request, 3)
    assert node.sent[-1] == RaftMsg(3, 3, int(F))
    node.sent.clear()
    node.msg(request, 3)
    assert node.sent == [RaftMsg(3, 3, int(F))] and node.wal == [RaftMsg(3, 3)]
    node.sent.clear()
    node.msg(RaftMsg(3, 4, int(C), {1: 10}), 4)               # another one: no
    assert node.sent == []


def test_recovery_of_a_newer_term_without_a_vote_has_no_vote():
    raft = Raft(clock=lambda: 0.0)
    for row in (RaftMsg(2, 2), RaftMsg(3, 0)):
        raft.process_recovery(row)
    assert (raft.term, raft.vote, raft.volatile_vote) == (3, 0, 0)
    assert raft.checkpoint_remote() == RaftMsg(3, 0, int(F))
