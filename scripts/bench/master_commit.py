"""CPU per row of a Spindle master's commit path, in one process.

    .venv/bin/python scripts/bench/master_commit.py [--rows N] [--per-txn K ...]
        [--repeat R] [--tail | --replica] [--profile [FILE]]

A fresh instance (wal_mode 'write', in a temporary directory) runs the Lua loop of
scripts/bench/replication.py: `box.begin()`, K `box.space.t:insert{k}`, `box.commit()`,
for N rows. Reported: process CPU time (time.process_time, every thread) per row,
the collector's share of it (gc.callbacks), and rows per second. Alone, this is the
master's side of the live replication benchmark without its relay: the Lua calls,
the transaction, the WAL write. `--tail` attaches the in-memory WAL tail a relay
reads (wal_tail.py) as the first SUBSCRIBE does, to measure what keeping the rows
for relays costs the writer. `--replica` starts a Spindle replica process of this
instance instead: each run then lasts until the replica has ACKed every row, and
the CPU per row is the master's live share with a real relay (reading the tail,
framing, sending, ACKs). A warm-up of 20,000 rows precedes the measured runs. The
collector runs with the server's thresholds (shell/launcher.py).
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
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replication import INSERT_LOOP  # noqa: E402
from spindle.lua.instance import Instance  # noqa: E402
from spindle.shell.launcher import COLLECTOR_THRESHOLDS  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from integration.cluster import REP_PASSWORD, REP_USER, Node, free_port  # noqa: E402

WARM_UP_ROWS = 20_000
SETUP = ("box.cfg{wal_mode = 'write', log_level = 2} "
         "box.schema.space.create('t') box.space.t:create_index('pk')")
MASTER_SETUP = f"""
    box.cfg{{listen = ..., replication_timeout = 1}}
    box.schema.user.create('{REP_USER}', {{password = '{REP_PASSWORD}'}})
    box.schema.user.grant('{REP_USER}', 'replication')"""
# Until the replica (id 2) follows and has ACKed every row of this instance (id 1).
WAIT_FOR_REPLICA = """
    local fiber = require('fiber')
    local deadline = fiber.clock() + 120
    while true do
        local peer = box.info.replication[2]
        local down = peer and peer.downstream
        if down and down.status == 'follow' and down.vclock
                and (down.vclock[1] or 0) >= box.info.vclock[1] then
            return
        end
        if fiber.clock() > deadline then error('the replica did not catch up') end
        fiber.sleep(0.001)
    end"""


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


def measure(per_txn: int, rows: int, repeat: int, tail: bool, replica: bool,
            profile: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            run_instance(per_txn, rows, repeat, tail, replica, profile)
        finally:
            os.chdir(cwd)


def start_replica(instance: Instance) -> tuple[Node, Callable[[], None]]:
    """A Spindle replica process of `instance` (which starts listening), and what
    waits until it has every row."""
    port = free_port()
    instance.runtime.call(instance.runtime.load(MASTER_SETUP, "=master"),
                          f"127.0.0.1:{port}")
    node = Node("spindle", Path(os.getcwd()), "replica",
                {"replication_timeout": 1, "wal_mode": "write",
                 "replication": [f"{REP_USER}:{REP_PASSWORD}@127.0.0.1:{port}"]})
    node.start(wait=False)
    wait = instance.runtime.load(WAIT_FOR_REPLICA, "=wait_for_replica")
    return node, lambda: instance.runtime.call(wait)


def run_instance(per_txn: int, rows: int, repeat: int, tail: bool, replica: bool,
                 profile: str | None) -> None:
    instance = Instance()
    collector = CollectorClock()
    node = None

    def main():
        nonlocal node
        try:
            instance.run_chunk(SETUP, "=setup")
            if tail:
                attach_tail(instance)
            caught_up = lambda: None   # noqa: E731
            if replica:
                node, caught_up = start_replica(instance)
                caught_up()
            loop = instance.runtime.load(INSERT_LOOP, "=insert_loop")
            first = 1
            instance.runtime.call(loop, first, WARM_UP_ROWS, per_txn)
            caught_up()
            first += WARM_UP_ROWS
            for run in range(repeat):
                profiler = (cProfile.Profile() if profile is not None and run == repeat - 1
                            else None)
                collector.take()
                start, wall_start = time.process_time(), time.perf_counter()
                if profiler:
                    profiler.enable()
                instance.runtime.call(loop, first, rows, per_txn)
                caught_up()
                if profiler:
                    profiler.disable()
                cpu = time.process_time() - start
                wall = time.perf_counter() - wall_start
                first += rows
                extra = " + tail" if tail else " + replica" if replica else ""
                print(f"{per_txn:3} row(s)/txn{extra}: "
                      f"{cpu / rows * 1e6:6.2f} µs CPU per row "
                      f"(collector {collector.take() / rows * 1e6:.2f}), "
                      f"{rows / wall:,.0f} rows/s")
                if profiler:
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
                    if profile:       # a file to read with pstats (callers, ...)
                        profiler.dump_stats(profile)
        finally:
            instance.sched.stop()

    try:
        instance.sched.run(main, name="main")
        instance.sched.shutdown(timeout=2.0)
    finally:
        if node is not None:
            node.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--per-txn", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--repeat", type=int, default=3)
    follower = parser.add_mutually_exclusive_group()
    follower.add_argument("--tail", action="store_true",
                          help="attach the WAL tail relays read "
                               "(as a subscribed replica does)")
    follower.add_argument("--replica", action="store_true",
                          help="run until a Spindle replica process has every row")
    parser.add_argument("--profile", nargs="?", const="", metavar="FILE",
                        help="cProfile the last run of each size (and save the stats "
                             "in FILE, if given)")
    args = parser.parse_args()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    for per_txn in args.per_txn:
        measure(per_txn, args.rows, args.repeat, args.tail, args.replica, args.profile)


if __name__ == "__main__":
    main()
