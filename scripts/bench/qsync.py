"""Synchronous replication benchmarks: Spindle and Tarantool 2.6.0 side by side in one run.

    .venv/bin/python scripts/bench/qsync.py [--txns N] [--fibers F]

For each kind, a master and one replica of the same kind, an `is_sync` space and
replication_synchro_quorum = 2 (every commit needs the replica's ACK):
  * 1 fiber: latency of each sync insert, measured in Lua on the master around the
    insert (p50, p99);
  * F fibers inserting at once: committed transactions per second;
  * CONFIRM batching: how many CONFIRM rows the master wrote for those
    transactions (its LSN grew by transactions + CONFIRMs; one CONFIRM covers
    every entry up to its LSN, so fewer CONFIRMs than transactions is the effect).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench_setup import ROOT, compile_bytecode, print_side_by_side

sys.path.insert(0, str(ROOT / "tests"))
from integration.cluster import Cluster, wait_for  # noqa: E402

CFG = {"replication_timeout": 1, "replication_synchro_quorum": 2,
       "replication_synchro_timeout": 30, "wal_mode": "write"}

LATENCIES = """
    local n = ...
    local clock = require('clock')
    local s = box.space.sync
    local out = {}
    for k = 1, n do
        local t0 = clock.monotonic()
        s:insert{k}
        out[k] = clock.monotonic() - t0
    end
    table.sort(out)
    return {out[math.floor(n * 0.5)], out[math.floor(n * 0.99)]}
"""

THROUGHPUT = """
    local n, fibers, base = ...
    local fiber, clock = require('fiber'), require('clock')
    local s = box.space.sync
    local lsn0 = box.info.lsn
    local done = fiber.channel(fibers)
    local t0 = clock.monotonic()
    for f = 1, fibers do
        fiber.create(function()
            for k = f, n, fibers do s:insert{base + k} end
            done:put(true)
        end)
    end
    for _ = 1, fibers do done:get() end
    local elapsed = clock.monotonic() - t0
    return {n / elapsed, box.info.lsn - lsn0 - n}
"""


def measure(cluster: Cluster, kind: str, txns: int, fibers: int) -> dict[str, float]:
    master = cluster.add(kind, f"{kind}-master", CFG).start()
    master.eval("box.schema.space.create('sync', {is_sync = true}) "
                "box.space.sync:create_index('pk')")
    replica = cluster.add(kind, f"{kind}-replica",
                          {**CFG, "replication": [master.rep_uri]}).start()
    wait_for(lambda: replica.upstream_status(1) == "follow", 60, "replica to follow")
    p50, p99 = master.eval(LATENCIES, txns)
    rate, confirms = master.eval(THROUGHPUT, txns * 5, fibers, 10 ** 7)
    master.stop()
    replica.stop()
    return {"1 fiber p50, ms": p50 * 1000, "1 fiber p99, ms": p99 * 1000,
            f"{fibers} fibers, txn/s": rate,
            f"{fibers} fibers, CONFIRM rows per 1000 txns": confirms * 1000 / (txns * 5)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--txns", type=int, default=2000)
    parser.add_argument("--fibers", type=int, default=100)
    args = parser.parse_args()
    compile_bytecode()
    results = {}
    with tempfile.TemporaryDirectory() as tmp, Cluster(Path(tmp)) as cluster:
        for kind in ("tarantool", "spindle"):
            results[kind] = measure(cluster, kind, args.txns, args.fibers)
    print_side_by_side(results, ",.3f")


if __name__ == "__main__":
    main()
