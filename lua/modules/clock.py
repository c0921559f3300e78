"""Tarantool's `clock` module: wall, monotonic, process and thread clocks."""
from __future__ import annotations

import time

from ..runtime import LuaRuntime

_BENCH = """
local clock = ...
clock.bench = function(fn, ...)
    local started = clock.proc()
    local result = {fn(...)}
    table.insert(result, 1, clock.proc() - started)
    return result
end
return clock
"""


def build(runtime: LuaRuntime):
    clocks = {
        "time": time.time, "realtime": time.time,
        "monotonic": time.monotonic, "proc": time.process_time,
        "thread": time.thread_time,
        "time64": time.time_ns, "realtime64": time.time_ns,
        "monotonic64": time.monotonic_ns, "proc64": time.process_time_ns,
        "thread64": time.thread_time_ns,
    }
    table = runtime.table({name: runtime.bridge(fn) for name, fn in clocks.items()})
    return runtime.load(_BENCH, "=clock")(table)
