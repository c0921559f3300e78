"""CPU per replicated row on a Spindle replica, in one process.

    .venv/bin/python scripts/bench/replica_apply.py [--rows N] [--per-txn K ...]
        [--recovery] [--repeat R] [--profile] [--stream-rows N] [--first-lsn L]

A replica joins the fake master of the applier tests (a replay of a real Tarantool
2.6.0 capture), starts its WAL (wal_mode 'write') and subscribes; the master then
sends N INSERT rows, K per transaction, as one stream. Reported: the process CPU time
(time.process_time) from the first row sent until the replica's vclock has the last
one, per row: frame reading, decoding, applying, the WAL writes (in tx or in the WAL
thread: process time counts every thread) and the ACKs. The fake master's own share
(sending the prepared bytes, reading ACKs) is included and small.
`--recovery`: also time the local recovery of the xlogs written (into a fresh box),
per row. `--profile` prints a cProfile of each measured part. The collector runs with
the thresholds a server sets (shell/launcher.py), Python's defaults with
`--gc-default`. `--first-lsn`: the LSN of the first row sent (default right after
the capture's vclock, small LSNs; 65536 or more gives the uint32 LSNs a master sends
once past its first 65535 rows, those of most rows in a long benchmark). The rows
between the capture's vclock and it are sent first, as NOPs, and applied before the
measured stream starts: the applier refuses a stream with an LSN hole. (`--recovery`
then also reads and skips those NOPs: their cost is in its figure.)
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.unit.applier_fake_master import Capture, FakeMaster, row_frame  # noqa: E402
from tests.unit.test_applier import joined_replica  # noqa: E402
from spindle.core import log  # noqa: E402
from spindle.core.instance.box import Box  # noqa: E402
from spindle.core.box.index import IndexDef  # noqa: E402
from spindle.core.fiber import Scheduler  # noqa: E402
from spindle.core.iproto.constants import IprotoType  # noqa: E402
from spindle.core.vclock import VClock  # noqa: E402
from spindle.core.wal.recovery import _Recovery  # noqa: E402
from spindle.core.xlog.format import XLOG  # noqa: E402
from spindle.shell.launcher import COLLECTOR_THRESHOLDS  # noqa: E402

CAPTURE_LSN = 14        # the capture's joined vclock is {1: 14}
FIRST_LSN = CAPTURE_LSN + 1
SPACE = 512             # the capture's user space (unsigned primary key)


def profiled(enabled: bool):
    """A started cProfile.Profile, or None."""
    if not enabled:
        return None
    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def report(profiler) -> None:
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)


def stream_bytes(rows: int, per_txn: int, prepared: int | None = None) -> bytes:
    """The first `rows` rows of a stream of `prepared` (default `rows`) rows."""
    frames = []
    for i in range(max(rows, prepared or 0)):
        lsn = FIRST_LSN + i
        tsn = FIRST_LSN + i - i % per_txn
        commit = (i % per_txn == per_txn - 1) or i == rows - 1
        frames.append(row_frame(IprotoType.INSERT, lsn, space=SPACE,
                                tuple=[1000 + i, "payload"], tsn=tsn, commit=commit))
    return b"".join(frames[:rows])


def nop_prefix(per_txn: int = 100) -> bytes:
    """NOP rows from right after the capture's vclock up to FIRST_LSN - 1, in
    transactions of `per_txn`: what brings the replica to a later --first-lsn."""
    frames = []
    for lsn in range(CAPTURE_LSN + 1, FIRST_LSN):
        i = lsn - CAPTURE_LSN - 1
        frames.append(row_frame(IprotoType.NOP, lsn, tsn=lsn - i % per_txn,
                                commit=i % per_txn == per_txn - 1 or lsn == FIRST_LSN - 1))
    return b"".join(frames)


def wait_applied(sched, box, lsn: int, timeout: float = 600.0) -> None:
    """Until the replica's vclock has the master's `lsn` (idle sleeps: they add no
    CPU time to what is measured); an error after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while box.vclock.get(1) < lsn:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the replica did not reach LSN {lsn} in {timeout:g} s "
                               f"(vclock {box.vclock.get(1)})")
        sched.sleep(0.01)


def replicate(tmp: Path, rows: int, per_txn: int, profile: bool,
              stream_rows: int | None = None) -> float:
    sched = Scheduler()
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    data = stream_bytes(rows, per_txn, stream_rows)
    prefix = nop_prefix()
    last_lsn = FIRST_LSN + rows - 1
    measured = {}
    replica = {}

    def stream(session):
        if prefix:
            session.send(prefix)
            wait_applied(sched, replica["box"], FIRST_LSN - 1)
        measured["start"] = time.process_time()
        session.send(data)
        master.heartbeats(session)
    master.subscribe_stream = stream

    def main():
        try:
            box, applier = joined_replica(sched, tmp, master)
            replica["box"] = box
            profiler = profiled(profile)
            applier.applier_resume()
            wait_applied(sched, box, last_lsn)
            measured["cpu"] = time.process_time() - measured["start"]
            report(profiler)
            applier.applier_stop()
            box.wal.stop()
            master.close()
        finally:
            sched.stop()

    sched.run(main)
    sched.shutdown(timeout=2.0)
    sched.close()
    return measured["cpu"] / rows


def recover_rows(tmp: Path, rows: int, profile: bool) -> float:
    """Recover the xlog rows written by `replicate` into a fresh box's engine."""
    sched = Scheduler()
    box = Box(sched)
    applied = {}

    def main():
        try:
            # the capture's snapshot is not on disk here: create the user space the
            # rows go to, then replay the xlogs alone
            space = box.engine.create_space(SPACE, "t")
            space.create_index(IndexDef(0, "pk"))
            start = time.process_time()
            profiler = profiled(profile)
            result = recover_xlogs_only(box, tmp)
            report(profiler)
            applied["cpu"] = time.process_time() - start
            applied["rows"] = result
        finally:
            sched.stop()

    sched.run(main)
    sched.shutdown(timeout=2.0)
    sched.close()
    return applied["cpu"] / max(applied["rows"], 1)


def recover_xlogs_only(box, wal_dir: Path) -> int:
    recovery = _Recovery(str(wal_dir), str(wal_dir), box._apply_snapshot_row,
                         box._apply_wal_tx, False, None, None)
    recovery.result.vclock = VClock({1: FIRST_LSN - 1})
    xlogs = recovery._scan(str(wal_dir), XLOG, None)
    recovery.recover_xlogs(xlogs, 0)
    return recovery.result.rows_applied


def main() -> None:
    global FIRST_LSN
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--per-txn", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--recovery", action="store_true")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each measurement; the best and the median are shown")
    parser.add_argument("--gc-default", action="store_true",
                        help="Python's collector thresholds, not the server's")
    parser.add_argument("--first-lsn", type=int, default=FIRST_LSN,
                        help="LSN of the first row sent (past the capture's vclock)")
    parser.add_argument("--stream-rows", type=int,
                        help="prepare a stream of this many rows and send the first "
                             "--rows of it (instructions.py: runs of different --rows "
                             "then differ only in what the replica does)")
    args = parser.parse_args()
    FIRST_LSN = args.first_lsn
    log.set_level(log.WARN)
    if not args.gc_default:
        gc.set_threshold(*COLLECTOR_THRESHOLDS)
    results: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for per_txn in args.per_txn:
            with tempfile.TemporaryDirectory() as tmp:
                per_row = replicate(Path(tmp), args.rows, per_txn, args.profile,
                                    args.stream_rows)
                results.setdefault(f"replicated, {per_txn} row(s)/txn", []).append(per_row)
                if args.recovery:
                    per_row = recover_rows(Path(tmp), args.rows, args.profile)
                    results.setdefault(f"recovered, {per_txn} row(s)/txn", []).append(per_row)
    for name, values in results.items():
        print(f"{name}: {min(values) * 1e6:.1f} µs CPU per row (best of {len(values)}; "
              f"median {statistics.median(values) * 1e6:.1f})")


if __name__ == "__main__":
    main()
