"""CPU per row of the master's relay, in one process.

    .venv/bin/python scripts/bench/relay.py [--rows N] [--per-txn K ...] [--repeat R]
        [--modes files|tail ...] [--behind SHARE] [--sync N] [--profile]

A WAL of N INSERT rows (K per transaction, bodies as box writes them for
`box.space.t:insert{k}`) is written with the WAL writer; then a relay streams all of
it to a socket that swallows everything, as it does for a replica that reconnects far
behind (`files`: xlog blocks read and decoded in the helper thread, rows filtered and
framed) and for one that is close behind (`tail`: the in-memory tail of recent rows).
Reported: process CPU time (time.process_time: every thread) per row sent, the best of
R runs. `--behind 0.5`: the replica has the first half already (as after a reconnect:
the relay reads past those rows of the file first). `--sync 5`: the rows carry that sync,
as they do for a replica's SUBSCRIBE (0, the default: framed without one).
`--profile` prints a cProfile of one run of each part (with the file blocks read in a
helper thread, whose time it does not see).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.unit.test_relay_wire import Box, Stream  # noqa: E402
from spindle.core.fiber import Scheduler  # noqa: E402
from spindle.core.iproto.constants import IprotoType  # noqa: E402
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.xrow import XRow  # noqa: E402
from spindle.core.replication import relay as relay_module  # noqa: E402
from spindle.core.replication.replica import Replica  # noqa: E402
from spindle.core.vclock import VClock  # noqa: E402
from spindle.core.wal.writer import WalWriter  # noqa: E402

UUID = "11111111-1111-4111-8111-111111111111"
REPLICA_UUID = "22222222-2222-4222-8222-222222222222"


def write_wal(sched, wal, rows: int, per_txn: int) -> None:
    key = 1
    while key <= rows:
        wal.write([XRow(type=IprotoType.INSERT,
                        body=encode_dml_body(IprotoType.INSERT, 512, tuple=[k]))
                   for k in range(key, min(rows, key + per_txn - 1) + 1)])
        key += per_txn


def stream_all(box, start: VClock, sync: int = 0) -> int:
    """A relay of a replica at `start` until it has sent everything; rows sent."""
    sched = box.sched
    replica = Replica(REPLICA_UUID, 2)
    relay = relay_module.Relay(sched, box, replica, Stream(), sync)
    relay.local_vclock_at_subscribe = box.wal.vclock.copy()
    relay.cursor = relay_module.relay_cursor(box, start, relay.sync)
    try:
        while relay_module.relay_send_ready(relay):
            pass
    finally:
        relay.cursor.close()
    return relay.rows_sent


def measure(rows: int, per_txn: int, mode: str, repeat: int, profile: bool,
            behind: float = 1.0, sync: int = 0) -> float:
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler()

        def main():
            nonlocal best
            wal = WalWriter(sched, str(Path(tmp) / mode), UUID, VClock(), instance_id=1)
            try:
                # the tail exists before the writes: `tail` mode reads it all from memory
                tail = relay_module.wal_tail_of(wal, sched)
                tail.max_rows = rows + 1 if mode == "tail" else 1
                tail.max_bytes = 1 << 40
                write_wal(sched, wal, rows, per_txn)
                box = Box(sched, wal)
                lacking = int(rows * behind)
                start_vclock = VClock({1: rows - lacking})
                for _ in range(repeat):
                    start = time.process_time()
                    sent = stream_all(box, start_vclock, sync)
                    best = min(best, (time.process_time() - start) / sent)
                    assert sent == lacking, (sent, lacking)
                if profile:
                    prof = cProfile.Profile()
                    prof.runcall(stream_all, box, start_vclock, sync)
                    pstats.Stats(prof).sort_stats("tottime").print_stats(14)
            finally:
                wal.stop()
        try:
            sched.run(main)
        finally:
            sched.shutdown(timeout=1.0)
            sched.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--per-txn", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--modes", nargs="+", choices=("files", "tail"),
                        default=["files", "tail"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--behind", type=float, default=1.0,
                        help="the share of the rows the replica lacks (it has the first "
                             "ones; the relay reads past those in the file)")
    parser.add_argument("--sync", type=int, default=0,
                        help="the SUBSCRIBE's sync, which every row sent carries (a "
                             "replica sends a nonzero one)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for per_txn in args.per_txn:
        for mode in args.modes:
            cost = measure(args.rows, per_txn, mode, args.repeat, args.profile, args.behind,
                           args.sync)
            print(f"relay from {mode:5}, {per_txn:3} row(s)/txn: "
                  f"{cost * 1e6:6.2f} µs CPU/row")


if __name__ == "__main__":
    main()
