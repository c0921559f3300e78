"""Issue 21's "nothing lost" matrix: the set workload on a master and two replicas,
run after run, with the invariants of tests/fault checked after each.

    .venv/bin/python scripts/bench/reliability.py [--kind spindle,tarantool]
        [--writers 1,4,16] [--seconds 60] [--runs 10] [--space async,sync]
        [--faults off,on] [--seed 1] [--keep DIR]

Every node is of the --kind (spindle: Spindle everywhere; tarantool: Tarantool 2.6.0
everywhere, the reference). With --faults on each run gets a schedule of every
fault of tests/fault/nemesis.py (link cut/stall/delay, SIGSTOP, kill -9, torn and
flipped replica tails; no kill of a sync master, see scenario.py), seeded by
--seed and the run's number, so a run can be replayed exactly.

One table row per configuration (Markdown): runs; acknowledged rows (all runs);
writes of unknown outcome; acknowledged rows missing per node (master/r1/r2, all
runs); LSN holes (an author's LSN absent from another node's xlogs); upstreams found
`stopped`; runs that broke any invariant; keys put down to a known 2.6.0 bug
(tests/fault/known_bugs.py — a Tarantool master only). A run that fails has its
problems printed on stderr, and its data directories kept under --keep.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_setup import ROOT, compile_bytecode

sys.path.append(str(ROOT))
from tests.fault.nemesis import FILE_FAULTS, LINK_FAULTS  # noqa: E402
from tests.fault.invariants import Report  # noqa: E402
from tests.fault.scenario import Result, Scenario, run  # noqa: E402
from tests.fault.workloads import SetOutcome  # noqa: E402

ALL_FAULTS = LINK_FAULTS + ("pause", "kill") + FILE_FAULTS
NODES = ("master", "r1", "r2")
HEADER = ("| kind | space | writers | faults | runs | acknowledged | unknown "
          "| missing master/r1/r2 | LSN holes | stopped | failed runs | 2.6.0 bugs |")


def csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def configuration_row(kind: str, space: str, writers: int, faults: bool,
                      results: list) -> str:
    acked = sum(r.report.acked for r in results)
    unknown = sum(len(r.outcome.unknown) for r in results)
    missing = "/".join(str(sum(r.report.missing.get(name, 0) for r in results))
                       for name in NODES)
    holes = sum(sum(r.report.holes.values()) for r in results)
    stopped = sum(r.report.stopped for r in results)
    failed = sum(1 for r in results if not r.report.ok)
    known = sum(sum(r.report.known.values()) for r in results)
    return (f"| {kind} | {space} | {writers} | {'on' if faults else 'off'} | {len(results)} "
            f"| {acked:,} | {unknown:,} | {missing} | {holes} | {stopped} | {failed} "
            f"| {known} |")


def one_run(scenario: Scenario, keep: Path | None, label: str):
    workdir = Path(tempfile.mkdtemp(prefix="reliability-"))
    started = time.monotonic()
    try:
        result = run(scenario, workdir)
    except Exception as exc:      # noqa: BLE001 - a run that could not even finish
        print(f"{label}: the run failed: {exc!r}", file=sys.stderr)
        _keep(workdir, keep, label)
        return Result(scenario, Report(list(NODES), problems=[f"run failed: {exc!r}"]),
                      SetOutcome(), [], [])
    elapsed = time.monotonic() - started
    verdict = "ok" if result.report.ok else "FAILED"
    print(f"{label}: {verdict} in {elapsed:.0f} s; {result.outcome.describe()}; "
          f"{len(result.log)} faults", file=sys.stderr)
    if not result.report.ok:
        print(result.describe(), file=sys.stderr)
        _keep(workdir, keep, label)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def _keep(workdir: Path, keep: Path | None, label: str) -> None:
    if keep is None:
        print(f"{label}: data left in {workdir}", file=sys.stderr)
        return
    target = keep / label.replace(" ", "_").replace("/", "-")
    shutil.rmtree(target, ignore_errors=True)
    shutil.move(str(workdir), target)
    print(f"{label}: data kept in {target}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", default="spindle", help="spindle, tarantool or both")
    parser.add_argument("--writers", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--space", default="async,sync")
    parser.add_argument("--faults", default="off,on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None,
                        help="where to move the data of failed runs")
    args = parser.parse_args()
    kinds, spaces, faults = csv(args.kind), csv(args.space), csv(args.faults)
    writers = [int(w) for w in csv(args.writers)]
    assert set(kinds) <= {"spindle", "tarantool"}, kinds
    assert set(spaces) <= {"async", "sync"}, spaces
    assert set(faults) <= {"on", "off"}, faults
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    compile_bytecode()
    rows = []
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for kind in kinds:
        for space in spaces:
            for count in writers:
                for fault in faults:
                    results = []
                    for number in range(1, args.runs + 1):
                        seed = args.seed * 1000 + number
                        scenario = Scenario(
                            space=space, writers=count, seconds=args.seconds,
                            faults=ALL_FAULTS if fault == "on" else (),
                            kinds=(kind,) * 3, seed=seed)
                        label = f"{kind} {space} {count}w faults-{fault} seed {seed}"
                        results.append(one_run(scenario, args.keep, label))
                    row = configuration_row(kind, space, count, fault == "on", results)
                    rows.append(row)
                    print(row, flush=True)
    return 0 if all(row.split("|")[-3].strip() == "0" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
