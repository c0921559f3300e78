"""CPU per row of a Spindle master's commit path, in one process.

    .venv/bin/python scripts/bench/master_commit.py [--rows N] [--per-txn K ...]
        [--repeat R] [--tail] [--profile]

A fresh instance (wal_mode 'write', in a temporary directory) runs the Lua loop of
scripts/bench/replication.py: `box.begin()`, K `box.space.t:insert{k}`, `box.commit()`,
for N rows. Reported: process CPU time (time.process_time, every thread) per row, and
the collector's share (gc.callbacks). This is the master's side of the live
replication benchmark without a replica: the Lua calls, the transaction, the WAL
write. `--tail` attaches the in-memory WAL tail a relay reads (wal_tail.py) as the
first SUBSCRIBE does, to measure what keeping the rows for relays costs the writer.
A warm-up of 20,000 rows precedes the measured runs. The collector runs with the
server's thresholds (shell/launcher.py).
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replication import INSERT_LOOP  # noqa: E402
from spindle.lua.instance import Instance  # noqa: E402
from spindle.shell.launcher import COLLECTOR_THRESHOLDS  # noqa: E402

WARM_UP_ROWS = 20_000
SETUP = ("box.cfg{wal_mode = 'write', log_level = 2} "
         "box.schema.space.create('t') box.space.t:create_index('pk')")


class CollectorClock:
    """CPU seconds the cyclic collector took since the last `take()`."""

    def __init__(self):
        self.seconds = 0.0
        self._start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def attach_tail(instance: Instance) -> None:
    """What the first relay's cursor does to the WAL (relay.relay_cursor)."""
    from spindle.core.replication.relay import synchro_pending
    from spindle.core.replication.wal_tail import wal_tail_of
    box = instance.storage.box
    wal_tail_of(box.wal, instance.sched).urgent = synchro_pending(box)


def measure(per_txn: int, rows: int, repeat: int, tail: bool, profile: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            run_instance(per_txn, rows, repeat, tail, profile)
        finally:
            os.chdir(cwd)


def run_instance(per_txn: int, rows: int, repeat: int, tail: bool, profile: bool) -> None:
    instance = Instance()
    collector = CollectorClock()

    def main():
        try:
            instance.run_chunk(SETUP, "=setup")
            if tail:
                attach_tail(instance)
            loop = instance.runtime.load(INSERT_LOOP, "=insert_loop")
            first = 1
            instance.runtime.call(loop, first, WARM_UP_ROWS, per_txn)
            first += WARM_UP_ROWS
            for run in range(repeat):
                profiler = cProfile.Profile() if profile and run == repeat - 1 else None
                collector.take()
                start = time.process_time()
                if profiler:
                    profiler.enable()
                instance.runtime.call(loop, first, rows, per_txn)
                if profiler:
                    profiler.disable()
                cpu = time.process_time() - start
                first += rows
                print(f"{per_txn:3} row(s)/txn{' + tail' if tail else ''}: "
                      f"{cpu / rows * 1e6:6.2f} µs CPU per row "
                      f"(collector {collector.take() / rows * 1e6:.2f})")
                if profiler:
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        finally:
            instance.sched.stop()

    instance.sched.run(main, name="main")
    instance.sched.shutdown(timeout=2.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--per-txn", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tail", action="store_true",
                        help="attach the WAL tail relays read (as a subscribed replica does)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the last run of each size")
    args = parser.parse_args()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    for per_txn in args.per_txn:
        measure(per_txn, args.rows, args.repeat, args.tail, args.profile)


if __name__ == "__main__":
    main()
