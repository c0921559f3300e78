#!/usr/bin/env python3
"""Storage and IPROTO benchmark: Spindle and real Tarantool 2.6.0 side by side.

    .venv/bin/python scripts/bench/box.py [--rows N] [--rounds K]
        [--pin-servers CPUS] [--pin-client CPUS] [--only cold [--reps N]]
        [--only lua|connector|recovery]

`--only cold` measures the cold start alone, `--reps` times per server (alternating),
and reports the median. `--only lua` runs the Lua insert loops alone, `--only
connector` the connector loops (and the cold start of their servers), `--only
recovery` the snapshot and the recovery of a filled directory.

SPINDLE_BIN=/path/to/spindle measures another build (e.g. a checkout of an older
commit) against the same Tarantool.

Every figure is measured the same way for both servers: the same Lua startup
script, the same client code (the official `tarantool` connector), fresh temporary
work dirs. Prints one table with the ratio Spindle / Tarantool (for rates, higher is
better) and the goals from the storage issue.

The two servers are measured in alternation, not one after the other: this VM's
speed drifts by 2-3x within seconds (other load, vCPU wakeup latency), so each
benchmark runs on Spindle, then on Tarantool, and the connector loops alternate in
`--rounds` slices over both live servers. A ratio then compares the same moments.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench_setup import SPINDLE, compile_bytecode, run_lua

SPINDLE = os.environ.get("SPINDLE_BIN", SPINDLE)

# listen comes last, so a PING answered means the setup is done
SERVER_LUA = """
box.cfg{{wal_mode = 'write', log_level = 2}}
box.schema.user.grant('guest', 'read,write,execute', 'universe', nil, {{if_not_exists = true}})
local s = box.schema.space.create('bench', {{if_not_exists = true}})
s:create_index('pk', {{if_not_exists = true}})
box.cfg{{listen = '127.0.0.1:{port}'}}
"""

LUA_INSERTS = """
box.cfg{{wal_mode = 'write', log_level = 2}}
local clock = require('clock')
local s = box.schema.space.create('bench')
s:create_index('pk')
local n, per_txn = {rows}, {per_txn}
local t = clock.monotonic()
for i = 1, n, per_txn do
    box.begin()
    for j = i, math.min(i + per_txn - 1, n) do s:insert{{j, 'value'}} end
    box.commit()
end
print(n / (clock.monotonic() - t))
os.exit(0)
"""

FILL_LUA = """
box.cfg{{wal_mode = 'write', log_level = 2}}
local s = box.schema.space.create('bench')
s:create_index('pk')
for i = 1, {rows}, 1000 do
    box.begin()
    for j = i, math.min(i + 999, {rows}) do s:insert{{j, 'value', i}} end
    box.commit()
end
local clock = require('clock')
local t = clock.monotonic()
box.snapshot()
print({rows} / (clock.monotonic() - t))
for i = 1, {rows}, 1000 do
    box.begin()
    for j = i, math.min(i + 999, {rows}) do s:replace{{j, 'again', j}} end
    box.commit()
end
os.exit(0)
"""

RECOVER_LUA = """
local clock = require('clock')
local t = clock.monotonic()
box.cfg{{log_level = 2}}
print({rows} * 2 / (clock.monotonic() - t))
os.exit(0)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def start_server(binary: str, cwd: str) -> tuple[subprocess.Popen, int, float]:
    """Start a server; return it, its port and the seconds until it answered PING."""
    import tarantool
    port = free_port()
    script = Path(cwd) / "server.lua"
    script.write_text(SERVER_LUA.format(port=port))
    started = time.perf_counter()
    proc = subprocess.Popen([binary, str(script)], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = started + 30
    while True:
        try:
            conn = tarantool.Connection("127.0.0.1", port, connect_now=True)
            conn.ping()
            conn.close()
            return proc, port, time.perf_counter() - started
        except Exception:
            if time.perf_counter() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{binary} did not answer PING")
            time.sleep(0.005)


def connector_rates(ports: dict[str, int], rows: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Inserts/s and selects/s per server; `rounds` alternating slices of the rows."""
    import tarantool
    spaces = {name: tarantool.Connection("127.0.0.1", port).space("bench")
              for name, port in ports.items()}
    spent = {name: [0.0, 0.0] for name in ports}
    bounds = [rows * i // rounds for i in range(rounds + 1)]
    for kind in (0, 1):                     # all inserts, then all selects
        for lo, hi in zip(bounds, bounds[1:]):
            for name, space in spaces.items():
                t = time.perf_counter()
                if kind == 0:
                    for i in range(lo + 1, hi + 1):
                        space.insert((i, "value"))
                else:
                    for i in range(lo + 1, hi + 1):
                        space.select(i)
                spent[name][kind] += time.perf_counter() - t
    for space in spaces.values():
        space.connection.close()
    return {name: (rows / ins, rows / sel) for name, (ins, sel) in spent.items()}


def pin(pid: int, cpus: str | None) -> None:
    """taskset -a -p: every thread of `pid` on `cpus` (e.g. "1" or "0,1")."""
    if cpus:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], check=True,
                       stdout=subprocess.DEVNULL)


def measure(binaries: dict[str, str], rows: int, rounds: int,
            pins: tuple[str | None, str | None] = (None, None),
            only: str | None = None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {name: {} for name in binaries}
    if only in (None, "connector"):
        measure_connector(out, binaries, rows, rounds, pins)
    if only in (None, "lua"):
        for per_txn in (1, 100):
            for name, binary in binaries.items():
                with tempfile.TemporaryDirectory() as cwd:
                    out[name][f"Lua inserts/s, {per_txn} row/txn"] = run_lua(
                        binary, LUA_INSERTS.format(rows=rows, per_txn=per_txn), cwd)
    if only in (None, "recovery"):
        for name, binary in binaries.items():
            with tempfile.TemporaryDirectory() as cwd:
                out[name]["snapshot rows/s"] = run_lua(binary, FILL_LUA.format(rows=rows), cwd)
                out[name]["recovery rows/s"] = run_lua(binary, RECOVER_LUA.format(rows=rows), cwd)
    return out


def measure_connector(out: dict[str, dict[str, float]], binaries: dict[str, str], rows: int,
                      rounds: int, pins: tuple[str | None, str | None]) -> None:
    with tempfile.TemporaryDirectory() as base:
        procs, ports = [], {}
        try:
            for name, binary in binaries.items():
                cwd = os.path.join(base, name)
                os.mkdir(cwd)
                proc, port, startup = start_server(binary, cwd)
                procs.append(proc)
                ports[name] = port
                out[name]["cold start to PING (ms)"] = startup * 1000
                pin(proc.pid, pins[0])
            pin(os.getpid(), pins[1])
            rates = connector_rates(ports, min(rows, 20000), rounds)
            for name, (inserts, selects) in rates.items():
                out[name]["connector inserts/s"] = inserts
                out[name]["connector selects/s"] = selects
        finally:
            pin(os.getpid(), "0-%d" % (os.cpu_count() - 1) if pins[1] else None)
            for proc in procs:
                proc.terminate()
                proc.wait(10)


def measure_cold_start(binaries: dict[str, str], reps: int) -> dict[str, dict[str, float]]:
    """Median cold start to PING over `reps` alternating starts of each server."""
    times: dict[str, list[float]] = {name: [] for name in binaries}
    for _ in range(reps):
        for name, binary in binaries.items():
            with tempfile.TemporaryDirectory() as cwd:
                proc, _port, startup = start_server(binary, cwd)
                proc.terminate()
                proc.wait(10)
                times[name].append(startup * 1000)
    return {name: {"cold start to PING (ms)": statistics.median(ms),
                   "cold start, min (ms)": min(ms)} for name, ms in times.items()}


def main() -> None:
    compile_bytecode()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4,
                        help="alternating slices of the connector loops (default 4)")
    parser.add_argument("--pin-servers", metavar="CPUS",
                        help="connector benchmarks: run both servers on these CPUs")
    parser.add_argument("--pin-client", metavar="CPUS",
                        help="connector benchmarks: run the client on these CPUs")
    parser.add_argument("--only", choices=["cold", "lua", "connector", "recovery"],
                        help="run only this benchmark (cold: cold start to PING; lua: "
                             "the Lua insert loops; connector: the connector loops; "
                             "recovery: a snapshot, and recovery from it and an xlog)")
    parser.add_argument("--reps", type=int, default=15,
                        help="--only cold: starts per server, median reported (default 15)")
    args = parser.parse_args()
    binaries = {"spindle": SPINDLE, "tarantool": shutil.which("tarantool")}
    if args.only == "cold":
        results = measure_cold_start(binaries, max(1, args.reps))
    else:
        results = measure(binaries, args.rows, max(1, args.rounds),
                          (args.pin_servers, args.pin_client), args.only)
    ours, theirs = results["spindle"], results["tarantool"]
    print(f"{'benchmark':32} {'spindle':>12} {'tarantool':>12} {'ratio':>7}")
    for name, value in ours.items():
        print(f"{name:32} {value:12.1f} {theirs[name]:12.1f} {value / theirs[name]:7.2f}")
    if args.only == "cold":
        print("goal: cold start to PING <= 3x")
    else:
        print("goals: connector inserts and selects >= 0.9x; cold start to PING <= 3x")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
