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
Next to each rate the client's own CPU time per call (clock.proc()), which the
load of a busy machine moves less than the rates: lower is better, and its ratio is
Spindle / Tarantool too (so above 1 means Spindle spends more).
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
-- each figure: calls/s (wall clock) and the client's CPU microseconds per call
local function report(name, calls, t, cpu)
    print(name, calls / (clock.monotonic() - t), (clock.proc() - cpu) / calls * 1e6)
end
local t, cpu = clock.monotonic(), clock.proc()
for i = 1, n do c:call('echo', {i}) end
report('round', n, t, cpu)
t, cpu = clock.monotonic(), clock.proc()
local batch = 100
for i = 1, n, batch do
    local futures = {}
    for j = 1, batch do futures[j] = c:call('echo', {j}, {is_async = true}) end
    for j = 1, batch do futures[j]:wait_result() end
end
report('async', n, t, cpu)
local fibers, per = 50, math.floor(n / 50)
local done = fiber.channel(fibers)
t, cpu = clock.monotonic(), clock.proc()
for f = 1, fibers do
    fiber.create(function()
        for i = 1, per do c:call('echo', {i}) end
        done:put(true)
    end)
end
for f = 1, fibers do done:get() end
report('fibers', fibers * per, t, cpu)
os.exit(0)
"""

NAMES = {"round": "sync call round trips/s (1 fiber)",
         "async": "pipelined calls/s (is_async, 100 in flight)",
         "fibers": "pipelined calls/s (50 fibers)"}
CPU_NAMES = {"round": "client CPU us/call, round trips",
             "async": "client CPU us/call, is_async",
             "fibers": "client CPU us/call, 50 fibers"}


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
        key, *values = line.split("\t")
        if key in NAMES:
            figures[NAMES[key]] = float(values[0])
            figures[CPU_NAMES[key]] = float(values[1])
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
                     for name in (*NAMES.values(), *CPU_NAMES.values())}
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
