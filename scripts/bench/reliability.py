"""Issue 21's "nothing lost" matrix: the set workload on a master and two replicas,
run after run, with the invariants of tests/fault checked after each.

    .venv/bin/python scripts/bench/reliability.py [--kind spindle,tarantool]
        [--writers 1,4,16] [--seconds 60] [--runs 10] [--space async,sync]
        [--faults off,on] [--seed 1] [--keep DIR]
        [--first-run N] [--results FILE.jsonl]
    .venv/bin/python scripts/bench/reliability.py --summary FILE.jsonl

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

The matrix takes longer than one sitting, so it can be run in parts: --first-run
starts at a later run number (its seed follows), --results appends one JSON line per
finished run to a file, and --summary prints the table of every run recorded there
(a configuration and seed recorded twice counts once, the newest).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
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


def record(result: Result, kind: str, faults: bool, seconds: float) -> dict:
    """One run as the JSON line --results keeps and the table sums."""
    report, scenario = result.report, result.scenario
    return {
        "kind": kind, "space": scenario.space, "writers": scenario.writers,
        "faults": "on" if faults else "off", "seed": scenario.seed,
        "workload_seconds": scenario.seconds, "acked": report.acked,
        "unknown": len(result.outcome.unknown),
        "missing": {name: report.missing.get(name, 0) for name in NODES},
        "holes": sum(report.holes.values()), "stopped": report.stopped,
        "ok": report.ok, "known": sum(report.known.values()),
        "problems": report.problems[:20], "faults_done": len(result.log),
        "elapsed": round(seconds), "commit": _commit(),
    }


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def configuration_row(records: list[dict]) -> str:
    first = records[0]
    acked = sum(r["acked"] for r in records)
    unknown = sum(r["unknown"] for r in records)
    missing = "/".join(str(sum(r["missing"].get(name, 0) for r in records))
                       for name in NODES)
    holes = sum(r["holes"] for r in records)
    stopped = sum(r["stopped"] for r in records)
    failed = sum(1 for r in records if not r["ok"])
    known = sum(r["known"] for r in records)
    return (f"| {first['kind']} | {first['space']} | {first['writers']} | {first['faults']} "
            f"| {len(records)} | {acked:,} | {unknown:,} | {missing} | {holes} | {stopped} "
            f"| {failed} | {known} |")


def summary(path: Path) -> list[str]:
    """The table of every run in a --results file, one row per configuration."""
    runs: dict[tuple, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            runs[(entry["kind"], entry["space"], entry["writers"], entry["faults"],
                  entry["workload_seconds"], entry["seed"])] = entry
    groups: dict[tuple, list[dict]] = {}
    for key in sorted(runs):
        groups.setdefault(key[:5], []).append(runs[key])
    return [configuration_row(records) for records in groups.values()]


def one_run(scenario: Scenario, keep: Path | None, label: str):
    workdir = Path(tempfile.mkdtemp(prefix="reliability-"))
    started = time.monotonic()
    try:
        result = run(scenario, workdir)
    except Exception as exc:      # noqa: BLE001 - a run that could not even finish
        print(f"{label}: the run failed: {exc!r}", file=sys.stderr)
        _keep(workdir, keep, label)
        return Result(scenario, Report(list(NODES), problems=[f"run failed: {exc!r}"]),
                      SetOutcome(), [], []), time.monotonic() - started
    elapsed = time.monotonic() - started
    verdict = "ok" if result.report.ok else "FAILED"
    print(f"{label}: {verdict} in {elapsed:.0f} s; {result.outcome.describe()}; "
          f"{len(result.log)} faults", file=sys.stderr)
    if not result.report.ok:
        print(result.describe(), file=sys.stderr)
        _keep(workdir, keep, label)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return result, elapsed


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
    parser.add_argument("--first-run", type=int, default=1,
                        help="the number of the first run (the seed is seed*1000+number)")
    parser.add_argument("--results", type=Path, default=None,
                        help="append one JSON line per finished run to this file")
    parser.add_argument("--summary", type=Path, default=None,
                        help="only print the table of the runs recorded in this file")
    args = parser.parse_args()
    if args.summary is not None:
        rows = summary(args.summary)
        print(HEADER)
        print("|" + "---|" * (HEADER.count("|") - 1))
        print("\n".join(rows))
        return 0 if all(row.split("|")[-3].strip() == "0" for row in rows) else 1
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
                    records = []
                    for number in range(args.first_run, args.first_run + args.runs):
                        seed = args.seed * 1000 + number
                        scenario = Scenario(
                            space=space, writers=count, seconds=args.seconds,
                            faults=ALL_FAULTS if fault == "on" else (),
                            kinds=(kind,) * 3, seed=seed)
                        label = f"{kind} {space} {count}w faults-{fault} seed {seed}"
                        result, elapsed = one_run(scenario, args.keep, label)
                        entry = record(result, kind, fault == "on", elapsed)
                        records.append(entry)
                        if args.results is not None:
                            with args.results.open("a") as out:
                                out.write(json.dumps(entry) + "\n")
                    row = configuration_row(records)
                    rows.append(row)
                    print(row, flush=True)
    return 0 if all(row.split("|")[-3].strip() == "0" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
