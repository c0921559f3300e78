"""One fault scenario from start to verdict: a replica set (topology.py), a workload
(workloads.py), a seeded schedule of faults (nemesis.py) for `seconds`, heal, then
every invariant (invariants.py). The pytest scenarios and the reliability runner
(scripts/bench/reliability.py) both call `run`.

Which faults may hit what (`fault_targets`):
* link faults (cut, stall, delay): every proxied link, and all of them at once;
* pause (SIGSTOP/SIGCONT): every node;
* kill -9: every node — except the master of a sync workload: 2.6.0 recovers its
  unconfirmed transactions into the limbo, where nothing but the replicas' ACKs or
  box.ctl.clear_synchro_queue() decides them (an operator's step, not a fault);
* torn and flipped xlog tails: replicas only. A master's torn tail takes back writes
  it has acknowledged and relayed (its replicas then hold LSNs it reuses): that loss
  is what the damage is, not something a replica set can heal.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..integration.cluster import Cluster
from .invariants import Report, check, rows_of
from .nemesis import ALL_LINKS, FILE_FAULTS, LINK_FAULTS, Event, Nemesis, make_schedule
from .topology import Topology, master_master, master_replicas
from .workloads import RegisterOutcome, RegisterWorkload, SetOutcome, SetWorkload

WORKLOADS = ("set", "register", "master-master")
# How long the schedule may run on after the workload's time, not counting the waits
# for restarted nodes to recover (Nemesis.wait_finished: each has its own deadline,
# and a recovery of the ~1.5M rows a 60 s run of 16 writers leaves took up to 128 s on
# the busy machine, which made matrix runs overrun a bound that counted it).
SCHEDULE_TIMEOUT = 180.0
SCHEDULE_TIMEOUT_PER_SECOND = 4.0      # more for each second of workload


@dataclass(frozen=True)
class Scenario:
    workload: str = "set"                  # one of WORKLOADS
    space: str = "async"                   # the set's space: async or sync
    writers: int = 4
    seconds: float = 3.0
    faults: tuple[str, ...] = ()           # fault kinds (nemesis.py); () = no fault
    kinds: tuple[str, ...] = ("spindle", "spindle", "spindle")   # master first
    seed: int = 1
    synchro_timeout: float = 2.0
    rate: float = 0                        # writes/s per set writer; 0 = unpaced

    @property
    def sync(self) -> bool:
        return self.workload == "register" or self.space == "sync"

    def describe(self) -> str:
        if self.workload == "register":
            what = "register on reg (sync), 1 writer + 1 reader"
        else:
            what = f"{self.workload} on {self.space}, {self.writers} writers"
            if self.rate:
                what += f" at {self.rate:g}/s each"
        return (f"{what}, {self.seconds:g} s, "
                f"kinds {'/'.join(self.kinds)}, faults {','.join(self.faults) or 'none'}, "
                f"seed {self.seed}")


@dataclass
class Result:
    scenario: Scenario
    report: Report
    outcome: SetOutcome | RegisterOutcome
    events: list[Event]
    log: list[str]
    link_stats: dict[str, dict] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [self.scenario.describe(), f"workload: {self.outcome.describe()}",
                 f"faults ({len(self.log)} of {len(self.events)} done):"]
        lines += [f"  {line}" for line in self.log]
        lines += [f"link {name}: {dict(stats)}" for name, stats in self.link_stats.items()]
        lines.append(f"verdict: {self.report.describe()}")
        return "\n".join(lines)


def fault_targets(scenario: Scenario, topology: Topology) -> dict[str, list[str]]:
    names = [node.name for node in topology.nodes]
    masters = {node.name for node in topology.masters}
    replicas = [name for name in names if name not in masters]
    targets: dict[str, list[str]] = {}
    for fault in scenario.faults:
        if fault in LINK_FAULTS:
            targets[fault] = sorted(topology.links) + [ALL_LINKS]
        elif fault == "pause":
            targets[fault] = names
        elif fault == "kill":
            targets[fault] = replicas + ([] if scenario.sync else sorted(masters))
        elif fault in FILE_FAULTS:
            targets[fault] = replicas
        else:
            raise ValueError(f"unknown fault {fault}")
        if not targets[fault]:
            raise ValueError(f"no node for {fault} in {scenario.describe()}")
    return targets


def build(scenario: Scenario, cluster: Cluster) -> Topology:
    if scenario.workload == "master-master":
        return master_master(cluster, tuple(scenario.kinds[:2]),
                             timeout=scenario.synchro_timeout)
    return master_replicas(cluster, tuple(scenario.kinds),
                           synchro_timeout=scenario.synchro_timeout)


def run(scenario: Scenario, workdir: Path) -> Result:
    assert scenario.workload in WORKLOADS, scenario.workload
    with Cluster(workdir) as cluster:
        topology = build(scenario, cluster)
        try:
            return _run(scenario, topology)
        finally:
            topology.close()


def _run(scenario: Scenario, topology: Topology) -> Result:
    if scenario.workload == "register":
        workload = RegisterWorkload(topology.masters[0], "reg")
        space = "reg"
    else:
        space = scenario.space
        workload = SetWorkload(topology.masters, space, scenario.writers, scenario.rate)
    events = (make_schedule(scenario.seed, scenario.seconds,
                            fault_targets(scenario, topology)) if scenario.faults else [])
    nemesis = Nemesis(topology.by_name, topology.links, events)
    workload.start()
    nemesis.start()
    try:
        # the workload runs for its time (a length, never a check), and on until
        # every scheduled fault has been done (restarts can make the schedule late)
        threading.Event().wait(scenario.seconds)
        bound = SCHEDULE_TIMEOUT + SCHEDULE_TIMEOUT_PER_SECOND * scenario.seconds
        finished = nemesis.wait_finished(bound)
    finally:
        nemesis.stop()             # the current fault undone, everything healed
        outcome = workload.stop()
    assert finished, f"the schedule did not finish in {bound} s: {nemesis.log}"
    acked = {space: outcome.acked} if isinstance(outcome, SetOutcome) else {}
    # a Tarantool 2.6.0 master of sync writes: its gh-5185 is told apart
    reference_bugs = scenario.sync and topology.masters[0].kind == "tarantool"
    report = check(topology.nodes, acked, reference_bugs=reference_bugs)
    if isinstance(outcome, RegisterOutcome):
        check_register(topology, outcome, report)
    stats = {name: dict(proxy.stats) for name, proxy in topology.links.items()}
    return Result(scenario, report, outcome, events, list(nemesis.log), stats)


def check_register(topology: Topology, outcome: RegisterOutcome, report: Report) -> None:
    """No read older than the last acknowledged write; every node's final value at
    least the last acknowledged one and at most the last one sent."""
    report.acked += 1 if outcome.last_acked else 0
    for floor, value in outcome.stale_reads[:10]:
        report.problems.append(f"register: read {value} after {floor} was acknowledged")
    for node in topology.nodes:
        rows = rows_of(node, "reg")
        value = rows[0][1] if rows else 0
        lost = value < outcome.last_acked
        report.missing[node.name] = report.missing.get(node.name, 0) + int(lost)
        if lost or value > outcome.attempted:
            report.problems.append(
                f"register: {node.name} holds {value}; acknowledged {outcome.last_acked}, "
                f"sent up to {outcome.attempted}")
