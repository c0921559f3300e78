"""Failover under load (issue 25): a replica set that elects its leader
(election_mode = 'candidate' everywhere), writers on a sync space through
whichever node leads (workloads.SetWorkload with follow_leader), and the leader
killed with -9 again and again, each time started again as a follower.

`run_failover` does one such run from a seed: before each kill it waits for one
leader agreed by every node and for a seeded number of new acknowledged writes
(so every leader takes writes before it dies); after the kill it waits for the
survivors to elect a new leader, and starts the old one again — before or after
that election, by the seed. At the end: every node up, one leader agreed by all,
then the invariants of invariants.py (equal data and vclocks, every acknowledged
write on every node, no upstream `stopped`, the xlogs of every author alike),
with the leader as the reference node.

Every wait is a condition with a deadline; nothing is asserted on time.
"""
from __future__ import annotations

import collections
import random
from dataclasses import dataclass, field

from spindle.core.vclock import VClock

from ..integration.cluster import Cluster, wait_for
from ..integration.election import add_nodes, election, start_all, wait_leader
from .invariants import Report, check
from .nemesis import kill9, restart_node
from .qsync_support import SYNC_SPACE
from .workloads import SetOutcome, SetWorkload

ELECTION_TIMEOUT = 60.0       # a new leader after a kill: seconds of waiting, at most
SURVIVORS_TIMEOUT = 30.0      # ... by the survivors alone, before their vclocks are looked at
PROGRESS_TIMEOUT = 60.0       # new acknowledged writes through a leader


@dataclass
class FailoverResult:
    kinds: list[str]
    seed: int
    kills: int
    outcome: SetOutcome
    report: Report
    log: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return "\n".join([f"{'+'.join(self.kinds)} seed {self.seed}, {self.kills} kills: "
                          f"{self.outcome.describe()}", *self.log, self.report.describe()])


def wait_acked(workload: SetWorkload, count: int, what: str) -> None:
    """Until the clients have `count` acknowledged writes in all (a leader is
    taking writes); fails with the clients' errors so far."""
    try:
        wait_for(lambda: workload.acked_count() >= count, PROGRESS_TIMEOUT, what)
    except AssertionError as exc:
        errors = collections.Counter()
        for writer in workload.writers:
            errors.update(writer.errors)
        raise AssertionError(f"{exc}; client errors: {dict(errors)}") from None


def run_failover(tmp_path, kinds: list[str], kills: int = 3, seed: int = 1,
                 writers: int = 4, rate: float = 50, writes: tuple[int, int] = (20, 80),
                 **cfg) -> FailoverResult:
    """kinds: one 'spindle' or 'tarantool-2.6.3' per node. `rate`: writes a
    second per writer (a bounded amount of data); `writes`: how many new
    acknowledged writes, at random in that range, each leader takes before it
    is killed."""
    rng = random.Random(f"failover:{seed}")
    log: list[str] = []
    with Cluster(tmp_path) as cluster:
        nodes = add_nodes(cluster, kinds, **cfg)
        start_all(nodes)
        leader = wait_leader(nodes)
        wait_for(lambda: leader.eval("return box.info.ro") is False, 30,
                 f"the leader {leader.name} to be writable")
        leader.eval(SYNC_SPACE)
        wait_for(lambda: all(node.eval("return box.space.sync ~= nil and "
                                       "box.space.sync.index.pk ~= nil") for node in nodes),
                 30, "the sync space on every node")
        workload = SetWorkload(nodes, "sync", writers, rate, follow_leader=True).start()
        try:
            for number in range(1, kills + 1):
                leader = wait_leader(nodes, ELECTION_TIMEOUT)
                term = election(leader)["term"]
                wait_acked(workload, workload.acked_count() + rng.randint(*writes),
                           f"writes through {leader.name} (leader {number})")
                restart_at_once = rng.random() < 0.5
                kill9(leader)
                survivors = [node for node in nodes if node is not leader]
                if restart_at_once:
                    restart_node(leader)
                    new_leader = wait_leader(nodes, ELECTION_TIMEOUT)
                else:
                    new_leader = _survivors_elect(survivors, leader, nodes, log)
                new_term = election(new_leader)["term"]
                if not leader.alive():          # (started already if they needed it)
                    restart_node(leader)
                log.append(f"kill {number}: {leader.name} (term {term}) killed, "
                           f"{new_leader.name} elected in term {new_term}, the old leader "
                           f"started {'at once' if restart_at_once else 'after the election'}")
                assert new_term > term, log[-1]
            leader = wait_leader(nodes, ELECTION_TIMEOUT)
            wait_acked(workload, workload.acked_count() + writes[0],
                       f"writes through the last leader {leader.name}")
        finally:
            outcome = workload.stop()
        leader = wait_leader(nodes, ELECTION_TIMEOUT)
        log.append(f"after heal: {leader.name} leads in term {election(leader)['term']}")
        others = [node for node in nodes if node is not leader]
        report = check([leader, *others], {"sync": outcome.acked}, allow_tails=True)
        return FailoverResult(kinds, seed, kills, outcome, report, log)


def _survivors_elect(survivors: list, killed, nodes: list, log: list[str]):
    """The leader the survivors elect, without the killed node. They cannot when
    their vclocks are incomparable (each holds rows the other lacks: a deposed
    leader's unrelayed tail on one, the killed leader's last rows on the other):
    neither grants the other its vote, and data from a non-leader is dropped, so
    2.6.3's rules keep them candidates until a third node votes. Then, and only
    then, the killed node is started and the three elect."""
    try:
        return wait_leader(survivors, SURVIVORS_TIMEOUT)
    except AssertionError:
        clocks = [node.vclock() for node in survivors]
        if VClock(clocks[0]).compare(clocks[1], ignore0=True) is not None:
            raise           # nothing in the protocol stops them: a real failure
    log.append(f"survivors' vclocks {clocks} are incomparable: {killed.name} started "
               "for its vote")
    restart_node(killed)
    return wait_leader(nodes, ELECTION_TIMEOUT)


def assert_failover(result: FailoverResult) -> None:
    print(result.describe())
    assert result.report.ok, result.describe()
    assert result.outcome.acked, result.describe()
