#!/usr/bin/env python3
"""Storage and IPROTO benchmark: Spindle and real Tarantool 2.6.0 side by side.

    .venv/bin/python scripts/bench/box.py [--rows N]

Every figure is measured the same way for both servers: the same Lua startup
script, the same client code (the official `tarantool` connector), fresh temporary
work dirs. Prints one table with the ratio Spindle / Tarantool (for rates, higher is
better) and the goals from the storage issue.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from bench_setup import SPINDLE, compile_bytecode

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


def run_lua(binary: str, code: str, cwd: str) -> float:
    proc = subprocess.run([binary, "-e", code], cwd=cwd, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary}: {proc.stderr[-800:]}")
    return float(proc.stdout.strip().splitlines()[-1])


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


def connector_rates(port: int, rows: int) -> tuple[float, float]:
    import tarantool
    conn = tarantool.Connection("127.0.0.1", port)
    space = conn.space("bench")
    t = time.perf_counter()
    for i in range(1, rows + 1):
        space.insert((i, "value"))
    inserts = rows / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(1, rows + 1):
        space.select(i)
    selects = rows / (time.perf_counter() - t)
    conn.close()
    return inserts, selects


def measure(binary: str, rows: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cwd:
        proc, port, startup = start_server(binary, cwd)
        try:
            out["cold start to PING (ms)"] = startup * 1000
            out["connector inserts/s"], out["connector selects/s"] = \
                connector_rates(port, min(rows, 20000))
        finally:
            proc.terminate()
            proc.wait(10)
    for per_txn in (1, 100):
        with tempfile.TemporaryDirectory() as cwd:
            out[f"Lua inserts/s, {per_txn} row/txn"] = run_lua(
                binary, LUA_INSERTS.format(rows=rows, per_txn=per_txn), cwd)
    with tempfile.TemporaryDirectory() as cwd:
        out["snapshot rows/s"] = run_lua(binary, FILL_LUA.format(rows=rows), cwd)
        out["recovery rows/s"] = run_lua(binary, RECOVER_LUA.format(rows=rows), cwd)
    return out


def main() -> None:
    compile_bytecode()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    ours = measure(SPINDLE, args.rows)
    theirs = measure(shutil.which("tarantool"), args.rows)
    print(f"{'benchmark':32} {'spindle':>12} {'tarantool':>12} {'ratio':>7}")
    for name, value in ours.items():
        print(f"{name:32} {value:12.1f} {theirs[name]:12.1f} {value / theirs[name]:7.2f}")
    print("goals: connector inserts and selects >= 0.9x; cold start to PING <= 3x")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
