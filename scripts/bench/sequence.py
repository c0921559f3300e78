#!/usr/bin/env python3
"""Sequences: Spindle and real Tarantool 2.6.0 side by side.

    .venv/bin/python scripts/bench/sequence.py [--rows N] [--reps K]

Measures inserts/s into a space whose primary key auto-increments (`sequence =
true`, the key given as box.NULL), from Lua at 1 and 100 rows per transaction and
through the official `tarantool` connector (IPROTO INSERT with a nil key), next to
the same inserts with explicit keys into a space without a sequence (what the
sequence costs), and box.sequence.x:next() calls/s (each one a `_sequence_data`
REPLACE), 100 per transaction.

Each figure is the median of `--reps` runs; the two servers run in alternation
(this VM's speed drifts within seconds), each run in a fresh temporary work dir with
`wal_mode = 'write'`. Rates: higher is better; the ratio is Spindle / Tarantool.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench_setup import SPINDLE, compile_bytecode, print_side_by_side, run_lua

SPINDLE = os.environ.get("SPINDLE_BIN", SPINDLE)

LUA = """
box.cfg{{wal_mode = 'write', log_level = 2}}
local clock = require('clock')
local s = box.schema.space.create('bench')
s:create_index('pk', {{sequence = {sequence}}})
local seq = box.schema.sequence.create('counter')
local n, per_txn, kind = {rows}, {per_txn}, '{kind}'
local t = clock.monotonic()
for i = 1, n, per_txn do
    box.begin()
    for j = i, math.min(i + per_txn - 1, n) do
        if kind == 'auto' then
            s:insert{{box.NULL, 'value'}}
        elseif kind == 'explicit' then
            s:insert{{j, 'value'}}
        else
            seq:next()
        end
    end
    box.commit()
end
print(n / (clock.monotonic() - t))
os.exit(0)
"""

SERVER = """
box.cfg{{wal_mode = 'write', log_level = 2}}
box.schema.user.grant('guest', 'read,write,execute', 'universe')
box.schema.space.create('auto'):create_index('pk', {{sequence = true}})
box.schema.space.create('explicit'):create_index('pk')
box.cfg{{listen = '127.0.0.1:{port}'}}
"""

CASES = [  # (label, kind, per_txn, sequence option)
    ("Lua auto-increment inserts/s, 1 row/txn", "auto", 1, "true"),
    ("Lua explicit-key inserts/s, 1 row/txn", "explicit", 1, "nil"),
    ("Lua auto-increment inserts/s, 100 rows/txn", "auto", 100, "true"),
    ("Lua explicit-key inserts/s, 100 rows/txn", "explicit", 100, "nil"),
    ("Lua seq:next() calls/s, 100 per txn", "next", 100, "nil"),
]

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(binary: str, cwd: str) -> tuple[subprocess.Popen, int]:
    import tarantool
    port = free_port()
    script = Path(cwd) / "server.lua"
    script.write_text(SERVER.format(port=port))
    proc = subprocess.Popen([binary, str(script)], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            tarantool.Connection("127.0.0.1", port, connect_now=True).close()
            return proc, port
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{binary} did not answer") from None
            time.sleep(0.01)


def connector_rates(binaries: dict[str, str], rows: int, reps: int) -> dict[str, dict]:
    """IPROTO inserts/s with a nil key (auto) and with explicit keys, the servers
    alternating in `reps` slices."""
    import tarantool
    spent = {name: {"auto": 0.0, "explicit": 0.0} for name in binaries}
    with tempfile.TemporaryDirectory() as base:
        procs, conns = [], {}
        try:
            for name, binary in binaries.items():
                os.mkdir(os.path.join(base, name))
                proc, port = serve(binary, os.path.join(base, name))
                procs.append(proc)
                conns[name] = tarantool.Connection("127.0.0.1", port)
            bounds = [rows * i // reps for i in range(reps + 1)]
            for lo, hi in zip(bounds, bounds[1:]):
                for kind in ("auto", "explicit"):
                    for name, conn in conns.items():
                        space = conn.space(kind)
                        t = time.perf_counter()
                        for i in range(lo + 1, hi + 1):
                            space.insert((None if kind == "auto" else i, "value"))
                        spent[name][kind] += time.perf_counter() - t
        finally:
            for conn in conns.values():
                conn.close()
            for proc in procs:
                proc.terminate()
                proc.wait(15)
    return {name: {f"connector {kind} inserts/s": rows / seconds
                   for kind, seconds in kinds.items()} for name, kinds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    compile_bytecode()
    binaries = {"spindle": SPINDLE, "tarantool": "tarantool"}
    results: dict[str, dict[str, float]] = {name: {} for name in binaries}
    for label, kind, per_txn, sequence in CASES:
        runs: dict[str, list[float]] = {name: [] for name in binaries}
        code = LUA.format(rows=args.rows, per_txn=per_txn, kind=kind, sequence=sequence)
        for _ in range(args.reps):
            for name, binary in binaries.items():
                runs[name].append(run_lua(binary, code))
        for name in binaries:
            results[name][label] = statistics.median(runs[name])
    for name, rates in connector_rates(binaries, min(args.rows, 20000), args.reps).items():
        results[name].update(rates)
    print_side_by_side(results)


if __name__ == "__main__":
    main()
