"""Election failover (issue 25): Spindle and Tarantool 2.6.3 side by side in one run.

    .venv/bin/python scripts/bench/failover.py [--kills N] [--scenario S] [--only KIND]

For each kind, three nodes of that kind, all election_mode = 'candidate',
replication_timeout = 0.25 and election_timeout = 1 (tests/integration/election.py's
settings), a sync space (replication_synchro_quorum = 2). Then N times: with one
leader agreed by all and every node following every other, the leader is killed
with -9, and the clock runs from just before the kill until a synchronous insert
is accepted by one of the survivors (each is tried in turn over a connection
opened before the kill; a follower answers ER_READONLY at once, and an accepted
insert has its quorum). The old leader is then started again and the set settles
before the next kill. Printed: median, p90, min and max of the N times per kind,
their ratio, and the load average before and after (the time is death detection
— 4 × replication_timeout of silence — plus the vote round, the WAL writes of
term and vote, the new leader's PROMOTE and its first write).

Death detection depends on the heartbeat phase at the kill: a survivor starts an
election 4 × replication_timeout after the last message it heard from the leader,
and the first survivor to start decides. So right after each kill the survivors'
`upstream.idle` of the leader is read (nothing comes from it any more, and a
failed reconnection does not restart the idle time, in either kind), and the time
from the earliest of those last messages to the accepted write is printed too
("from the last message"): the mechanism without the phase.

What comes before each kill (`--scenario`), the same for both kinds:

* `in-use` (the default): the leader is in use: a sync write through it, then the
  kill at a random moment within a death timeout (4 periods) after it. A write
  goes to every follower at once, which puts 2.6.3's relays in step (each
  heartbeats a period after its last send), so its survivors' phase is one and
  uniform; Spindle's relays heartbeat at slots of their own with election on
  (core/replication/relay.py, heartbeat_deadline).
* `load`: a writer on the leader (an asynchronous replace every 5 ms, in a fiber
  of its own), the kill a random time between one period and a death timeout later.
  Rows go to every follower at once and no heartbeat is needed: the survivors
  heard the leader last at the same moment, in both kinds. A killed leader's
  rows not sent yet stay in its WAL, and after its restart the others never get
  them (data comes only from the leader): one day the two survivors each hold
  rows the other lacks, and neither votes for the other (2.6.3's rules, both
  kinds). Then, as an operator would, the killed node is started at once for
  its vote (the time counts, and the kill says so).
* `rejoin`: the kill as soon as the set has settled after the old leader's
  restart (the default before 2026-12-06). The phase is then not chance: the kill
  follows the restarted node's SUBSCRIBE (whose relay heartbeats at once, then a
  period later in 2.6.3) by the settle step's polls, a time set by each kind's
  speed: 2.6.3's survivor of the restarted node had heard the leader 0.20-0.22 s
  before most kills (measured), near the best phase there is.
* `rejoin-random`: as `rejoin` with a random wait within one period before each
  kill and before each restart (the former `--random-phase`).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import tarantool
from bench_setup import ROOT, compile_bytecode, print_side_by_side

from spindle.core.vclock import VClock

sys.path.insert(0, str(ROOT / "tests"))
from integration.cluster import Cluster, Node, wait_for  # noqa: E402
from integration.election import (  # noqa: E402
    ORACLE_2_6_3, add_nodes, agreed_leader, election_cfg, full_mesh, start_all, wait_leader,
)

PROBE_PAUSE = 0.002       # between two rounds of tries over the survivors
REPLICATION_TIMEOUT = election_cfg([])["replication_timeout"]    # the heartbeat period
SETTLE_TIMEOUT = 120.0
STUCK_AFTER = 3.0         # a failover not done by then: are the survivors' vclocks comparable?
SCENARIOS = ("in-use", "load", "rejoin", "rejoin-random")
# in-use: the kill comes this long at most after the leader's last write: after a
# death timeout (4 periods) the write no longer shows in the survivors' timers
IN_USE_SPAN = 4 * REPLICATION_TIMEOUT
SPACES = ("box.schema.space.create('sync', {is_sync = true, if_not_exists = true}) "
          "box.space.sync:create_index('pk', {if_not_exists = true}) "
          "box.schema.space.create('load', {if_not_exists = true}) "
          "box.space.load:create_index('pk', {if_not_exists = true})")


# a writer on the leader until it dies: a replace every LOAD_PAUSE. Asynchronous:
# the rows the leader wrote but did not send before the kill must not stop it
# from following the new leader when it is back (a synchronous one would be in
# its limbo, and 2.6.3 cannot rejoin then: seen)
LOAD_PAUSE = 0.005
LOAD = f"""local key = ...
require('fiber').create(function()
    while true do
        box.space.load:replace{{key, 'load'}}
        require('fiber').sleep({LOAD_PAUSE})
    end
end)"""


def connect(node: Node) -> tarantool.Connection:
    return tarantool.Connection("127.0.0.1", node.port, socket_timeout=10,
                                reconnect_max_attempts=0, connect_now=True)


def first_accepted_write(survivors: list[Node], key: int, started: float,
                         stuck: Callable[[], None] | None = None) -> float:
    """Seconds from `started` until a survivor accepts a sync insert of `key`.
    `stuck()` is called once if the survivors' vclocks are found incomparable
    (looked at after STUCK_AFTER s, then every second): neither will ever vote
    for the other, in either kind, until a third node does."""
    conns = {node.name: connect(node) for node in survivors}
    try:
        deadline = started + SETTLE_TIMEOUT
        look_at = started + STUCK_AFTER
        while time.monotonic() < deadline:
            for node in survivors:
                try:
                    conns[node.name].insert("sync", (key, node.name))
                except tarantool.error.DatabaseError:
                    continue           # ER_READONLY: not (yet) the writable leader
                return time.monotonic() - started
            if stuck is not None and time.monotonic() >= look_at:
                look_at += 1.0
                one, other = (VClock(node.vclock()) for node in survivors)
                if one.compare(other, ignore0=True) is None:
                    stuck()
                    stuck = None
            time.sleep(PROBE_PAUSE)
        raise AssertionError(f"no write accepted within {SETTLE_TIMEOUT} s")
    finally:
        for conn in conns.values():
            conn.close()


IDLE = """local r = box.info.replication[...]
return r and r.upstream and r.upstream.idle"""


def last_heard(survivors: list[Node], leader_id: int) -> list[float]:
    """When each survivor last heard from the (killed) leader, in seconds since
    the epoch: its upstream.idle of the leader, taken from the middle of the
    eval's round trip."""
    heard = []
    for node in survivors:
        asked = time.time()
        idle = node.eval(IDLE, leader_id)
        if idle is None:
            raise AssertionError(f"{node.name} has no upstream from the leader")
        heard.append((asked + time.time()) / 2 - idle)
    return heard


def log_times(node: Node, since: float, marks: tuple[str, ...]) -> dict[str, float]:
    """The wall-clock time of the first line with each mark in the node's log
    after `since` (seconds since the epoch; the log's stamps are local time)."""
    found: dict[str, float] = {}
    for line in node.output().splitlines():
        mark = next((m for m in marks if m in line and m not in found), None)
        if mark is None:
            continue
        try:
            stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            stamp += float(line[19:23])
        except ValueError:
            continue
        if stamp >= since:
            found[mark] = stamp
    return found


BEGIN, LEADER = "RAFT: begin new election round", "RAFT: enter leader state"


def breakdown(survivors: list[Node], killed_at: float, total: float) -> str:
    """Where the time went, from the survivors' logs: until the first one began
    an election round (death detection), until one became leader (the vote),
    and the rest (the leader writable, its first write accepted)."""
    begins, leaders = [], []
    for node in survivors:
        times = log_times(node, killed_at, (BEGIN, LEADER))
        begins += [times[BEGIN]] if BEGIN in times else []
        leaders += [times[LEADER]] if LEADER in times else []
    if not begins or not leaders:
        return "(no election round in the logs)"
    began, led = min(begins) - killed_at, max(leaders) - killed_at
    return (f"detection {began:.3f} s, vote {led - began:.3f} s, "
            f"first write {total - led:.3f} s")


def settle(nodes: list[Node]) -> Node:
    """Until every node runs, follows every other and names one same leader."""
    wait_for(lambda: all(full_mesh(node, len(nodes)) for node in nodes), SETTLE_TIMEOUT,
             "every node running and following every other")
    leader = wait_leader(nodes, SETTLE_TIMEOUT)
    wait_for(lambda: leader.eval("return box.info.ro") is False, SETTLE_TIMEOUT,
             f"the leader {leader.name} to be writable")
    wait_for(lambda: agreed_leader(nodes) is leader, SETTLE_TIMEOUT, "one leader agreed")
    return leader


def measure(cluster: Cluster, kind: str, kills: int, scenario: str
            ) -> tuple[list[float], list[float]]:
    """Per kill: from the kill, and from the last message a survivor heard from
    the leader, to the first accepted write."""
    nodes = add_nodes(cluster, [kind] * 3)
    start_all(nodes)
    settle(nodes).eval(SPACES)
    times, since_heard = [], []
    for number in range(1, kills + 1):
        leader = settle(nodes)
        leader_id = leader.info("id")
        survivors = [node for node in nodes if node is not leader]
        if scenario == "in-use":
            leader.eval("box.space.sync:replace{0, ...}", number)
            time.sleep(random.uniform(0, IN_USE_SPAN))
        elif scenario == "load":
            leader.eval(LOAD, number)
            time.sleep(random.uniform(REPLICATION_TIMEOUT, IN_USE_SPAN))
        elif scenario == "rejoin-random":
            time.sleep(random.uniform(0, REPLICATION_TIMEOUT))
        killed_at, started = time.time(), time.monotonic()
        leader.kill()
        heard = last_heard(survivors, leader_id)
        rescued = []

        def rescue(leader=leader):
            # what an operator does: the killed node back, for its vote
            rescued.append(time.monotonic() - started)
            leader.start(wait=False)
        times.append(first_accepted_write(survivors, number, started, rescue))
        since_heard.append(killed_at + times[-1] - min(heard))
        phase = "/".join(f"{killed_at - one:.3f}" for one in heard)
        print(f"  {kind} kill {number}: {leader.name} killed, a write accepted after "
              f"{times[-1]:.3f} s: {breakdown(survivors, killed_at, times[-1])}; "
              f"leader last heard {phase} s before the kill, "
              f"{since_heard[-1]:.3f} s from then"
              + (f"; survivors' vclocks incomparable, {leader.name} started "
                 f"{rescued[0]:.3f} s after the kill" if rescued else ""), flush=True)
        if scenario == "rejoin-random":
            time.sleep(random.uniform(0, REPLICATION_TIMEOUT))
        if not rescued:
            leader.start(wait=False)
        leader.wait_ready(SETTLE_TIMEOUT)
    for node in nodes:
        node.stop()
    return times, since_heard


def p90(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def summary(times: list[float], since_heard: list[float]) -> dict[str, float]:
    ordered, heard = sorted(times), sorted(since_heard)
    return {"median, s": statistics.median(ordered), "p90, s": p90(ordered),
            "min, s": ordered[0], "max, s": ordered[-1],
            "from the last message: median, s": statistics.median(heard),
            "from the last message: p90, s": p90(heard)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--scenario", choices=SCENARIOS, default="in-use",
                        help="what comes before each kill (see the module doc)")
    parser.add_argument("--only", choices=("spindle", "tarantool"),
                        help="measure one kind (no ratio)")
    args = parser.parse_args()
    if not os.access(os.environ.get("TARANTOOL_2_6_3") or ORACLE_2_6_3, os.X_OK):
        sys.exit(f"Tarantool 2.6.3 is not at {ORACLE_2_6_3} (set TARANTOOL_2_6_3)")
    compile_bytecode()
    load_before = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, column in (("tarantool-2.6.3", "tarantool"), ("spindle", "spindle")):
            if args.only not in (None, column):
                continue
            (Path(tmp) / kind).mkdir()
            with Cluster(Path(tmp) / kind) as cluster:
                results[column] = summary(*measure(cluster, kind, args.kills,
                                                   args.scenario))
    load_after = os.getloadavg()
    print(f"kill -9 of the leader to the first accepted sync write, {args.kills} kills "
          f"(Tarantool = 2.6.3), scenario {args.scenario}")
    if args.only:
        for name, value in results[args.only].items():
            print(f"{name:40} {value:8.3f}")
    else:
        print_side_by_side(results, ",.3f")
    print("load average before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}".format(
        *load_before, *load_after))


if __name__ == "__main__":
    main()
