"""Replication benchmarks: Spindle and Tarantool 2.6.0 side by side in one run.

    .venv/bin/python scripts/bench/replication.py [--rows N] [--join-rows N] [--overload S]

For each kind (a Tarantool master with a Tarantool replica, a Spindle master with a
Spindle replica) it measures
  * async replication throughput at 1 and 100 rows per transaction, live (the
    master inserts N rows while the replica follows: N / time until the replica's
    vclock equals the master's, bound by the master's commit rate) and catch-up
    (N rows written while the replica was detached: N / time from re-attaching
    until it has them, the relay and applier alone);
  * JOIN: a fresh replica of a master holding --join-rows rows, from launch until
    its box.cfg returned;
  * overload: the master writes as fast as it can for --overload seconds while the
    replica applies; counts how often the replica's applier ended in `stopped`
    (permanent) and how often it had to reconnect.
Prints one table with the ratios (Spindle / Tarantool; higher is better for rates).
`--only rates|join|overload` and `--kinds spindle|tarantool` measure a part; `--cpu`
adds each process's CPU time per row in the live phases and the catch-ups (from /proc).
`--rounds R` measures everything R times, the two kinds in alternating order, prints
each round's table and then, per benchmark, the ratios of the rounds and their
median: Tarantool's own rates on this VM move by up to 2x from one run to the next,
so one round says little about a ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_setup import ROOT, compile_bytecode, print_side_by_side

sys.path.insert(0, str(ROOT / "tests"))
from integration.cluster import Cluster, same_vclocks, wait_for  # noqa: E402

KINDS = ("tarantool", "spindle")
FAST = {"replication_timeout": 1, "wal_mode": "write"}
SPACE = ("box.schema.space.create('t', {if_not_exists = true}) "
         "box.space.t:create_index('pk', {if_not_exists = true})")


INSERT_LOOP = """
    local first, rows, per_txn = ...
    local k = first
    while k < first + rows do
        box.begin()
        for _ = 1, per_txn do box.space.t:insert{k} k = k + 1 end
        box.commit()
    end"""


def cpu_seconds(node) -> float:
    """User + system CPU time a node's process has used so far (/proc)."""
    fields = Path(f"/proc/{node.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replicated_rates(cluster: Cluster, kind: str, rows: int, per_txn: int,
                     cpu: dict | None = None) -> tuple[float, float]:
    """(live, catch-up) rows/s. Live: the master writes while the replica follows,
    timed until the replica has everything (bound by the master's own commit
    rate). Catch-up: the replica is detached while the master writes, then
    attached again and timed until it has everything (the relay and the applier
    alone). `cpu`, if given, gets the replica's and the master's CPU time per row
    in each phase."""
    master = cluster.add(kind, f"{kind}-m{per_txn}", FAST).start()
    master.eval(SPACE)
    replica = cluster.add(kind, f"{kind}-r{per_txn}",
                          {**FAST, "replication": [master.rep_uri]}).start()
    wait_for(lambda: replica.upstream_status(1) == "follow", 60, "replica to follow")
    start = time.perf_counter()
    live_cpu = (cpu_seconds(replica), cpu_seconds(master))
    master.eval(INSERT_LOOP, 1, rows, per_txn)
    wait_for(lambda: same_vclocks(master, replica), 600, "replica to catch up",
             interval=0.005)
    live = rows / (time.perf_counter() - start)
    if cpu is not None:
        cpu["live replica"] = (cpu_seconds(replica) - live_cpu[0]) / rows
        cpu["live master"] = (cpu_seconds(master) - live_cpu[1]) / rows
    replica.eval("box.cfg{replication = {}}")
    master.eval(INSERT_LOOP, rows + 1, rows, per_txn)
    start = time.perf_counter()
    cpu_before = (cpu_seconds(replica), cpu_seconds(master))
    replica.eval("box.cfg{replication = {...}}", master.rep_uri)
    wait_for(lambda: same_vclocks(master, replica), 600, "replica to catch up",
             interval=0.005)
    catch_up = rows / (time.perf_counter() - start)
    if cpu is not None:
        cpu["catch-up replica"] = (cpu_seconds(replica) - cpu_before[0]) / rows
        cpu["catch-up master"] = (cpu_seconds(master) - cpu_before[1]) / rows
    master.stop()
    replica.stop()
    return live, catch_up


def join_seconds(cluster: Cluster, kind: str, rows: int) -> float:
    master = cluster.add(kind, f"{kind}-jm", FAST).start()
    master.eval(SPACE)
    for first in range(1, rows + 1, 100_000):      # evals short enough for the socket timeout
        master.eval("""
            local first, last = ...
            local k = first
            while k <= last do
                box.begin()
                for _ = 1, 1000 do box.space.t:insert{k, 'payload'} k = k + 1 end
                box.commit()
            end""", first, min(rows, first + 99_999))
    replica = cluster.add(kind, f"{kind}-jr", {**FAST, "replication": [master.rep_uri]})
    start = time.perf_counter()
    replica.start(wait=False)
    replica.wait_ready(timeout=600)
    elapsed = time.perf_counter() - start
    assert replica.eval("return box.space.t:count()") == rows
    master.stop()
    replica.stop()
    return elapsed


def overload(cluster: Cluster, kind: str, seconds: float) -> tuple[int, int]:
    """(permanent applier stops, reconnects) of a replica under a write storm."""
    master = cluster.add(kind, f"{kind}-om", FAST).start()
    master.eval(SPACE)
    replica = cluster.add(kind, f"{kind}-or", {**FAST, "replication": [master.rep_uri]}).start()
    master.eval("""
        local fiber, seconds = require('fiber'), ...
        for w = 1, 4 do
            fiber.create(function()
                local deadline, k = fiber.clock() + seconds, w * 1e9
                while fiber.clock() < deadline do
                    box.begin()
                    for _ = 1, 100 do box.space.t:replace{k, string.rep('x', 100)} k = k + 1 end
                    box.commit()
                end
            end)
        end""", seconds)
    deadline = time.monotonic() + seconds
    stops = 0
    while time.monotonic() < deadline:
        if replica.upstream_status(1) == "stopped":
            stops += 1
            replica.eval("box.ctl.replication_restart()" if kind == "spindle" else
                         "local r = box.cfg.replication box.cfg{replication = {}} "
                         "box.cfg{replication = r}")
        time.sleep(0.5)
    reconnects = replica.output().count("subscribed") - 1
    master.stop()
    replica.stop()
    return stops, max(reconnects, 0)


PARTS = ("rates", "join", "overload")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--join-rows", type=int, default=1_000_000)
    parser.add_argument("--overload", type=float, default=60.0)
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS),
                        help="measure these parts only (default: all)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="measure these kinds only (default: both, side by side)")
    parser.add_argument("--cpu", action="store_true",
                        help="also show each process's CPU time per row, live and "
                             "in catch-up")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure everything this many times, the kinds alternating, "
                             "and print the median ratio of each benchmark")
    args = parser.parse_args()
    compile_bytecode()
    rounds = [measure_round(args, args.kinds if i % 2 == 0 else args.kinds[::-1])
              for i in range(args.rounds)]
    for results in rounds:
        print_round(results)
    if len(rounds) > 1 and len(rounds[0]) == len(KINDS):
        print_medians(rounds)


def measure_round(args, kinds) -> dict[str, dict[str, float]]:
    """One measurement of every part asked for, kind by kind in `kinds` order."""
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, Cluster(Path(tmp)) as cluster:
        for kind in kinds:
            r = results[kind] = {}
            if "rates" in args.only:
                for per_txn, rows in ((1, args.rows), (100, args.rows * 5)):
                    cpu: dict[str, float] | None = {} if args.cpu else None
                    live, catch_up = replicated_rates(cluster, kind, rows, per_txn, cpu)
                    r[f"live rows/s, {per_txn} row(s)/txn"] = live
                    r[f"catch-up rows/s, {per_txn} row(s)/txn"] = catch_up
                    for role, seconds in (cpu or {}).items():
                        r[f"{role} CPU µs/row, {per_txn} row(s)/txn"] = seconds * 1e6
            if "join" in args.only:
                r[f"JOIN of {args.join_rows:,} rows, s"] = join_seconds(cluster, kind,
                                                                       args.join_rows)
            if "overload" in args.only:
                stops, reconnects = overload(cluster, kind, args.overload)
                r["overload: permanent applier stops"] = stops
                r["overload: reconnects"] = reconnects
    return results


def print_round(results: dict[str, dict[str, float]]) -> None:
    if len(results) == len(KINDS):
        print_side_by_side(results)
    else:
        for kind, values in results.items():
            for name, value in values.items():
                print(f"{kind:10} {name:45} {value:14,.1f}")


def print_medians(rounds: list[dict[str, dict[str, float]]]) -> None:
    """Per benchmark: the Spindle / Tarantool ratio of each round and the median."""
    print(f"\nratios over {len(rounds)} rounds (Spindle / Tarantool)")
    for name in rounds[0]["spindle"]:
        ratios = [r["spindle"][name] / r["tarantool"][name]
                  for r in rounds if r["tarantool"][name]]
        if ratios:
            listed = " / ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"{name:45} {listed}   median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
