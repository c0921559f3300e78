"""The Raft state machine (core/raft/raft.py) in a seeded, deterministic simulation:
3 and 5 nodes on a fake clock and a fake network that delays, drops and
partitions messages, WAL writes that take a random time, and nodes that crash
(an unfinished write lands or not) and restart from what their WAL holds; the
leaders write data, which reaches followers late or not at all, so candidates'
vclocks differ (some are refused, some split votes are contested). Each seed is
one reproducible run: a failure names it.

Checked after every event, whatever the network does (safety):
* at most one leader per term, ever;
* a node announces only the term and vote its WAL holds (nothing is sent before
  it is persisted);
* a node's WAL never holds two different votes in one term, across restarts too;
* a candidate or leader has its vote for itself on disk in its term.
Checked once the network is healed and every node runs again (liveness): within
a bounded simulated time all nodes agree on one leader of one term, and it stays
the leader (its heartbeats keep every death timer from firing).
"""
from __future__ import annotations

import heapq
import itertools
import math
import random
from typing import Callable

import pytest

from spindle.core.raft.raft import Raft, RaftMsg, RaftState
from spindle.core.vclock import VClock

HEARTBEAT = 0.1                 # a relay's period (replication_timeout)
ELECTION_TIMEOUT = 0.5
MAX_DELAY = 0.03                # a message takes 0..MAX_DELAY
MAX_WRITE = 0.02                # a WAL write takes 0..MAX_WRITE
CHAOS = 6.0                     # simulated seconds of partitions and crashes
SETTLE = 20.0                   # then, at most this long to agree on a leader
STABLE = 3.0                    # which then stays the leader at least this long


class Sim:
    def __init__(self, seed: int, size: int):
        self.rng = random.Random(seed)
        self.now = 0.0
        self._events: list = []
        self._seq = itertools.count()
        self.cut: set[tuple[int, int]] = set()       # links that drop everything
        self._link_free: dict[tuple[int, int], float] = {}   # last delivery per link
        self.drop = 0.0                              # chance of losing a message
        self.leaders: dict[int, int] = {}            # term -> its leader, ever
        self.nodes = {i: SimNode(self, i, size // 2 + 1) for i in range(1, size + 1)}

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._events, (when, next(self._seq), action))

    def send(self, src: int, deliver: Callable[["SimNode"], None]) -> None:
        for dst in self.nodes:
            if dst == src or (src, dst) in self.cut or self.rng.random() < self.drop:
                continue
            # in order on each link, as over TCP: a message never overtakes an
            # earlier one (an old candidate's request after its leader message
            # would read as a resignation)
            when = max(self.now + self.rng.uniform(0, MAX_DELAY),
                       self._link_free.get((src, dst), 0.0))
            self._link_free[(src, dst)] = when
            self.at(when, lambda dst=dst: self._deliver(src, dst, deliver))

    def _deliver(self, src: int, dst: int, deliver: Callable[["SimNode"], None]) -> None:
        node = self.nodes[dst]
        if node.up and (src, dst) not in self.cut:
            deliver(node)

    def run_until(self, end: float, stop: Callable[[], bool] = lambda: False) -> bool:
        """Events and timers in time order until `end` or until `stop()`."""
        while True:
            due = min((node.raft.timer_deadline for node in self.nodes.values()
                       if node.up and node.raft.timer_deadline is not None), default=math.inf)
            event = self._events[0][0] if self._events else math.inf
            when = min(due, event)
            if when > end:
                self.now = end
                return False
            self.now = when
            if event <= due:
                heapq.heappop(self._events)[2]()
            else:
                for node in self.nodes.values():
                    if node.up and node.raft.timer_deadline is not None \
                            and node.raft.timer_deadline <= self.now:
                        node.raft.on_timer()
                        node.work()
            self.check()
            if stop():
                return True

    def check(self) -> None:
        for node in self.nodes.values():
            raft = node.raft
            if not node.up:
                continue
            if raft.state == RaftState.LEADER:
                leader = self.leaders.setdefault(raft.term, node.id)
                assert leader == node.id, f"two leaders in term {raft.term}: {leader}, {node.id}"
            if raft.state != RaftState.FOLLOWER:
                assert node.persisted() == (raft.term, node.id), (node.id, raft.state)

    def agreed(self) -> bool:
        states = [node.raft for node in self.nodes.values()]
        leaders = {raft.leader for raft in states}
        return (len(leaders) == 1 and 0 not in leaders
                and len({raft.term for raft in states}) == 1
                and sum(raft.state == RaftState.LEADER for raft in states) == 1)


class SimNode:
    def __init__(self, sim: Sim, node_id: int, quorum: int):
        self.sim, self.id, self.quorum = sim, node_id, quorum
        self.wal: list[RaftMsg] = []
        self.up = True
        self.generation = 0               # a restart forgets the writes in flight
        self.writing: RaftMsg | None = None
        # the data's vclock, kept across crashes: a leader writes rows, a follower
        # takes rows only from the leader it knows (as appliers do), so the nodes'
        # vclocks lag, and an old leader keeps rows nobody else got
        self.vclock = VClock()
        self.raft = self._new_raft()
        sim.at(sim.rng.uniform(0, HEARTBEAT), self._heartbeat)

    def _new_raft(self) -> Raft:
        sim = self.sim
        raft = Raft(clock=lambda: sim.now, rand=lambda n: sim.rng.randint(0, n))
        raft.cfg_instance_id(self.id)
        raft.cfg_vclock(lambda: self.vclock)
        for row in self.wal:
            raft.process_recovery(row)
        raft.cfg_election_timeout(ELECTION_TIMEOUT)
        raft.cfg_death_timeout(4 * HEARTBEAT)
        raft.cfg_election_quorum(self.quorum)
        raft.cfg_is_candidate(True)
        raft.cfg_is_enabled(True)
        return raft

    def persisted(self) -> tuple[int, int]:
        term, vote = 1, 0                 # a new instance's: term 1, no vote
        for row in self.wal:
            term, vote = row.term, row.vote
        return term, vote

    def work(self) -> None:
        """The worker: one WAL write at a time, then the broadcasts."""
        raft, sim = self.raft, self.sim
        while True:
            if self.writing is None:
                row = raft.pending_write()
                if row is not None:
                    self.writing = row
                    generation = self.generation
                    sim.at(sim.now + sim.rng.uniform(0, MAX_WRITE),
                           lambda: self._written(row, generation))
                    continue
            msg = raft.take_broadcast()
            if msg is None:
                return
            assert (msg.term, msg.vote) == self.persisted(), "announced before written"
            sim.send(self.id, lambda node, msg=msg, src=self.id: node.receive(msg, src))

    def _written(self, row: RaftMsg, generation: int) -> None:
        if generation != self.generation:
            return                        # the process died meanwhile
        for old in self.wal:
            assert not (old.term == row.term and old.vote and row.vote
                        and old.vote != row.vote), f"two votes in term {row.term}"
        self.wal.append(row)
        self.writing = None
        self.raft.write_done(row)
        self.work()

    def receive(self, msg: RaftMsg, src: int) -> None:
        self.raft.process_heartbeat(src)
        self.raft.process_msg(msg, src)
        self.work()

    def _heartbeat(self) -> None:
        if self.up:
            src = self.id
            if self.raft.state == RaftState.LEADER and self.sim.rng.random() < 0.5:
                self.vclock.inc(src)                  # a row written
            rows = self.vclock.copy()
            self.sim.send(src, lambda node: node.replicate(src, rows))
        self.sim.at(self.sim.now + HEARTBEAT, self._heartbeat)

    def replicate(self, src: int, rows: VClock) -> None:
        self.raft.process_heartbeat(src)
        if self.raft.leader == src:
            self.vclock = VClock.max(self.vclock, rows)
        self.work()

    def crash(self) -> None:
        if self.writing is not None and self.sim.rng.random() < 0.5:
            self.wal.append(self.writing)            # it reached the disk
        self.writing = None
        self.generation += 1
        self.up = False

    def restart(self) -> None:
        self.up = True
        self.raft = self._new_raft()
        self.work()


def chaos(sim: Sim) -> None:
    """Every ~0.3 s: new cut links, a drop rate, a crash or a restart."""
    rng, nodes = sim.rng, sim.nodes
    sim.cut = {(a, b) for a in nodes for b in nodes if a != b and rng.random() < 0.2}
    sim.drop = rng.choice([0.0, 0.05, 0.3])
    node = nodes[rng.choice(list(nodes))]
    down = sum(not n.up for n in nodes.values())
    if node.up and down < len(nodes) // 2 and rng.random() < 0.3:
        node.crash()
    elif not node.up and rng.random() < 0.5:
        node.restart()
    if sim.now < CHAOS:
        sim.at(sim.now + rng.uniform(0.1, 0.5), lambda: chaos(sim))


@pytest.mark.parametrize("size", [3, 5])
@pytest.mark.parametrize("seed", range(25))
def test_safety_under_chaos_and_a_leader_once_healed(seed, size):
    sim = Sim(seed, size)
    for node in sim.nodes.values():
        node.work()
    sim.at(0.0, lambda: chaos(sim))
    sim.run_until(CHAOS + 0.5)
    sim.cut, sim.drop = set(), 0.0
    for node in sim.nodes.values():
        if not node.up:
            node.restart()
    healed = sim.now
    assert sim.run_until(healed + SETTLE, sim.agreed), (
        f"seed {seed}: no agreed leader {SETTLE} s after healing: "
        + ", ".join(f"{n.id}: {n.raft.state.name} term {n.raft.term} leader {n.raft.leader}"
                    for n in sim.nodes.values()))
    # and it stays: a leader that heartbeats is never deposed on a healthy network
    leader, term = next(iter(sim.nodes.values())).raft.leader, sim.nodes[1].raft.term
    sim.run_until(sim.now + STABLE)
    assert sim.agreed() and (sim.nodes[1].raft.leader, sim.nodes[1].raft.term) == (leader, term), (
        f"seed {seed}: leader {leader} of term {term} did not stay")
