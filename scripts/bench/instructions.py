"""Instructions per row of the master's commit path or the replica's apply path,
counted by valgrind (callgrind), not timed.

    .venv/bin/python scripts/bench/instructions.py master|replica [--per-txn K] [--tail]
        [--first-lsn L]

Timings on a small VM move by ±1.5 µs per transaction from one process to the
next, more than most single changes save. An instruction count does not: the same
code and input give the same count (the master's within ±0.01%; the replica's
within ±0.5% at 100 rows/txn and ±1.5% at 1 row/txn, as how many transactions one
WAL write takes depends on timing) whatever else the machine does. It
runs master_commit.py (no replica; `--tail`: with the WAL tail a relay reads
attached, the master's per-transaction share of a replica following — a real
replica cannot be counted so, as its relay's wakeups depend on timing) or
replica_apply.py (`--first-lsn`: its option, the LSN of the first row the replica
receives) under callgrind twice, with
10,000 and 30,000 measured rows, PYTHONHASHSEED=0, and prints the difference per
row: start-up, warm-up and the prepared stream cancel out. Cache misses are not
counted, so a change that only moves memory around shows here as nothing; confirm
what this finds with the timed benchmarks. Takes ~1-2 minutes per count.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = (10_000, 30_000)


def command(target: str, rows: int, per_txn: int, tail: bool,
            first_lsn: int | None) -> list[str]:
    if target == "master":
        return [sys.executable, str(HERE / "master_commit.py"), "--rows", str(rows),
                "--per-txn", str(per_txn), "--repeat", "1", *(["--tail"] if tail else [])]
    return [sys.executable, str(HERE / "replica_apply.py"), "--rows", str(rows),
            "--per-txn", str(per_txn), "--repeat", "1", "--stream-rows", str(max(ROWS)),
            *(["--first-lsn", str(first_lsn)] if first_lsn is not None else [])]


def instructions(cmd: list[str]) -> int:
    """The total instructions callgrind counted for `cmd`."""
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or found is None:
        sys.exit(f"valgrind failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target", choices=("master", "replica"))
    parser.add_argument("--per-txn", type=int, default=100)
    parser.add_argument("--tail", action="store_true",
                        help="master: with the WAL tail a relay reads attached")
    parser.add_argument("--first-lsn", type=int,
                        help="replica: the LSN of the first row it receives")
    args = parser.parse_args()
    if args.tail and args.target != "master":
        parser.error("--tail counts the master")
    if args.first_lsn is not None and args.target != "replica":
        parser.error("--first-lsn is the replica's")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install -y valgrind)")
    low, high = (instructions(command(args.target, rows, args.per_txn, args.tail,
                                      args.first_lsn))
                 for rows in ROWS)
    per_row = (high - low) / (ROWS[1] - ROWS[0])
    what = args.target + (" + tail" if args.tail else "") + (
        f" from LSN {args.first_lsn}" if args.first_lsn is not None else "")
    print(f"{what}, {args.per_txn} row(s)/txn: {per_row:,.0f} instructions per row")


if __name__ == "__main__":
    main()
