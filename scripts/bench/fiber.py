#!/usr/bin/env python3
"""Fiber and Lua-binding benchmark: Spindle and real Tarantool 2.6 side by side.

    .venv/bin/python scripts/bench/fiber.py [--rounds N]

Each figure is measured by the same Lua snippet in both (`spindle -e` and
`tarantool -e`), except the Lua->Python and wait-request figures, which have no
Tarantool counterpart and run in-process. Cold start: launch until the console
prompt appears on a pty (pexpect), best of 5. Prints a table with the ratio
Spindle / Tarantool (lower is better) and the goals from the issue.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from bench_setup import SPINDLE, compile_bytecode, run_lua

LUA_BENCHES = {
    "fiber.sleep(0) round trip": """
        local fiber, clock = require('fiber'), require('clock')
        local n = {n}
        local t = clock.monotonic()
        for i = 1, n do fiber.sleep(0) end
        print((clock.monotonic() - t) / n * 1e6)
        os.exit(0)""",
    "fiber create+join from Lua": """
        local fiber, clock = require('fiber'), require('clock')
        local n = math.floor({n} / 10)
        local body = function() return 1 end
        local t = clock.monotonic()
        for i = 1, n do
            local f = fiber.new(body)
            f:set_joinable(true)
            f:join()
        end
        print((clock.monotonic() - t) / n * 1e6)
        os.exit(0)""",
    # Switches by the process's CPU time (clock.proc), which a busy machine moves
    # far less than the wall clock (and fiber.sleep(0) so, below).
    "10 fibers' sleep(0), CPU per yield": """
        local fiber, clock = require('fiber'), require('clock')
        local n = math.floor({n} / 10)
        local done = fiber.channel(10)
        local t = clock.proc()
        for f = 1, 10 do
            fiber.create(function()
                for i = 1, n do fiber.sleep(0) end
                done:put(true)
            end)
        end
        for f = 1, 10 do done:get() end
        print((clock.proc() - t) / (n * 10) * 1e6)
        os.exit(0)""",
    "fiber.cond ping-pong round, CPU": """
        local fiber, clock = require('fiber'), require('clock')
        local n = math.floor({n} / 2)
        local ping, pong = fiber.cond(), fiber.cond()
        fiber.create(function()
            for i = 1, n do ping:wait() pong:signal() end
        end)
        local t = clock.proc()
        for i = 1, n do ping:signal() pong:wait() end
        print((clock.proc() - t) / n * 1e6)
        os.exit(0)""",
}
LUA_BENCHES["fiber.sleep(0), CPU"] = LUA_BENCHES["fiber.sleep(0) round trip"].replace(
    "clock.monotonic()", "clock.proc()")


def in_process(rounds: int) -> dict[str, float]:
    """Lua->Python call and a blocking call through a wait-request (Spindle only)."""
    from spindle.lua.instance import Instance
    instance = Instance()
    runtime = instance.runtime
    runtime.globals[b"noop"] = runtime.bridge(lambda: None, convert_args=False)
    runtime.globals[b"wait_noop"] = runtime.wait
    runtime.globals[b"py_noop"] = lambda: None
    code = f"""
        local clock = require('clock')
        local n = {rounds}
        local t = clock.monotonic()
        for i = 1, n do noop() end
        local call = (clock.monotonic() - t) / n * 1e6
        t = clock.monotonic()
        for i = 1, n do wait_noop(py_noop) end
        return call, (clock.monotonic() - t) / n * 1e6"""

    def body():
        return instance.run_chunk(code, "=bench")

    call, wait = instance.sched.run(body)
    instance.sched.shutdown()
    return {"Lua->Python call (bridged)": call, "blocking call via wait-request": wait}


def cold_start(command: list[str], prompt: str) -> float:
    import pexpect
    best = float("inf")
    env = dict(os.environ, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm",
               SPINDLE_HISTORY=os.devnull)
    for _ in range(5):
        with tempfile.TemporaryDirectory() as cwd:
            started = time.perf_counter()
            child = pexpect.spawn(command[0], command[1:], cwd=cwd, env=env,
                                  encoding="utf-8", timeout=30, dimensions=(24, 120))
            try:
                child.expect_exact(prompt)
                best = min(best, time.perf_counter() - started)
            finally:
                child.terminate(force=True)
    return best * 1000


def main() -> None:
    compile_bytecode()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200_000)
    args = parser.parse_args()
    tarantool = shutil.which("tarantool")
    rows = []
    for name, template in LUA_BENCHES.items():
        code = template.replace("{n}", str(args.rounds))
        ours = run_lua(SPINDLE, code)
        theirs = run_lua(tarantool, code) if tarantool else None
        rows.append((name, "µs", ours, theirs))
    for name, value in in_process(args.rounds).items():
        rows.append((name, "µs", value, None))
    tarantool_prompt = cold_start([tarantool, "-i"], "tarantool>") if tarantool else None
    rows.append(("cold start to console prompt", "ms",
                 cold_start([SPINDLE], "spindle>"), tarantool_prompt))

    print(f"{'benchmark':38} {'unit':4} {'spindle':>10} {'tarantool':>10} {'ratio':>7}")
    for name, unit, ours, theirs in rows:
        ratio = f"{ours / theirs:7.1f}" if theirs else "      -"
        theirs_text = f"{theirs:10.2f}" if theirs is not None else "         -"
        print(f"{name:38} {unit:4} {ours:10.2f} {theirs_text} {ratio}")
    print("goals: fiber.sleep(0) round trip <= 5 µs; cold start to prompt <= 400 ms")


if __name__ == "__main__":
    main()
