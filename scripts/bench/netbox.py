#!/usr/bin/env python3
"""net.box clients: Spindle's and Tarantool 2.6.0's, side by side against the same server.

    .venv/bin/python scripts/bench/netbox.py [--calls N] [--reps K] [--server tarantool|spindle|both]

The same Lua client runs in `spindle` and in `tarantool` against one server (a
Tarantool 2.6.0 one, and with --server both also a Spindle one), each measuring
calls/s of a function that returns its argument:

* round trips: one fiber, `conn:call('echo', {i})` after `conn:call`;
* pipelined, is_async: batches of 100 futures sent, then waited for;
* pipelined, 50 fibers: fifty fibers doing synchronous calls on one connection.

Each figure is the median of `--reps` runs, the two clients in alternation (the
machine's speed drifts). Rates: higher is better; the ratio is Spindle / Tarantool.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_setup import SPINDLE, compile_bytecode, print_side_by_side

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
from box_process import BoxProcess  # noqa: E402

SERVER = """
box.cfg{log_level = 2}
box.schema.user.grant('guest', 'execute', 'universe')
function echo(x) return x end
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""

CLIENT = """
local net, fiber, clock = require('net.box'), require('fiber'), require('clock')
local c = net.connect('127.0.0.1:' .. arg[1])
local n = tonumber(arg[2])
for i = 1, 200 do c:call('echo', {i}) end          -- warm up
local t = clock.monotonic()
for i = 1, n do c:call('echo', {i}) end
print('round', n / (clock.monotonic() - t))
t = clock.monotonic()
local batch = 100
for i = 1, n, batch do
    local futures = {}
    for j = 1, batch do futures[j] = c:call('echo', {j}, {is_async = true}) end
    for j = 1, batch do futures[j]:wait_result() end
end
print('async', n / (clock.monotonic() - t))
local fibers, per = 50, math.floor(n / 50)
local done = fiber.channel(fibers)
t = clock.monotonic()
for f = 1, fibers do
    fiber.create(function()
        for i = 1, per do c:call('echo', {i}) end
        done:put(true)
    end)
end
for f = 1, fibers do done:get() end
print('fibers', fibers * per / (clock.monotonic() - t))
os.exit(0)
"""

NAMES = {"round": "sync call round trips/s (1 fiber)",
         "async": "pipelined calls/s (is_async, 100 in flight)",
         "fibers": "pipelined calls/s (50 fibers)"}


def run_client(binary: str, port: int, calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "client.lua").write_text(CLIENT)
        out = subprocess.run([binary, "client.lua", str(port), str(calls)], cwd=cwd,
                             capture_output=True, text=True, timeout=600,
                             stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} failed: {out.stderr[-800:]}")
    figures = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition("\t")
        if key in NAMES:
            figures[NAMES[key]] = float(value)
    return figures


def measure(server: str, calls: int, reps: int) -> dict[str, dict[str, float]]:
    runs: dict[str, list[dict[str, float]]] = {"spindle": [], "tarantool": []}
    with tempfile.TemporaryDirectory() as work:
        node = BoxProcess(server, SERVER, Path(work))
        try:
            node.wait_ready()
            for _ in range(reps):
                runs["spindle"].append(run_client(SPINDLE, node.port, calls))
                runs["tarantool"].append(run_client("tarantool", node.port, calls))
        finally:
            node.stop()
    return {client: {name: statistics.median(run[name] for run in results)
                     for name in NAMES.values()}
            for client, results in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--server", choices=("tarantool", "spindle", "both"),
                        default="both")
    args = parser.parse_args()
    compile_bytecode()
    servers = ["tarantool", "spindle"] if args.server == "both" else [args.server]
    for server in servers:
        binary = "tarantool" if server == "tarantool" else SPINDLE
        print(f"\nagainst a {'Tarantool 2.6.0' if server == 'tarantool' else 'Spindle'} "
              f"server, {args.calls} calls per figure, median of {args.reps}:")
        print_side_by_side(measure(binary, args.calls, args.reps), ",.0f")


if __name__ == "__main__":
    main()
