"""Stress scenario for the Lua binding rule: run as `python lua_fibers.py SEED`.

1000 Lua fibers with random sleeps, nested fibers created from Lua, errors, cancels,
tables and functions kept across switches (in upvalues, channels and fiber storage),
and forced GC of Lua and Python while everything runs. Prints one JSON line with the
tallies; any corruption shows up as a wrong tally or a crash (run it under
MALLOC_PERTURB_ to make use-after-free loud).
"""
from __future__ import annotations

import gc
import json
import sys

from spindle.lua.instance import Instance

SCENARIO = r"""
local fiber = require('fiber')
local seed, count = ...
math.randomseed(seed)
local results = {ok = 0, failed = 0, cancelled = 0, nested = 0, checksum = 0}
local done = fiber.channel(count)
local kept = {}

local function worker(i)
    local mine = {index = i, fn = function(x) return x + i end}   -- lives across switches
    fiber.self().storage.mine = mine
    fiber.sleep(math.random() * 0.01)
    if i % 7 == 0 then
        local child = fiber.new(function(v) fiber.sleep(0) return v * 2 end, i)
        child:set_joinable(true)
        local ok, doubled = child:join()
        assert(ok and doubled == i * 2)
        results.nested = results.nested + 1
    end
    if i % 11 == 0 then
        error('planned failure ' .. i)
    end
    local co = coroutine.wrap(function() fiber.yield(); coroutine.yield(mine.fn(1)) end)
    assert(co() == i + 1)
    assert(fiber.self().storage.mine.index == i)
    kept[i % 50] = mine
    return mine.fn(0)
end

local fibers = {}
for i = 1, count do
    local f = fiber.new(worker, i)
    f:set_joinable(true)
    fibers[i] = f
end
for i = 13, count, 13 do
    fibers[i]:cancel()
end
for i = 1, count do
    if i % 100 == 0 then
        collectgarbage('collect')
        gc_python()
    end
    local ok, value = fibers[i]:join()
    if ok then
        results.ok = results.ok + 1
        results.checksum = results.checksum + value
    elseif tostring(value) == 'fiber is cancelled' then
        results.cancelled = results.cancelled + 1
    else
        assert(tostring(value):find('planned failure'), tostring(value))
        results.failed = results.failed + 1
    end
end
collectgarbage('collect')
return results
"""


def main(seed: int, count: int = 1000) -> dict:
    instance = Instance()
    runtime = instance.runtime
    runtime.globals[b"gc_python"] = runtime.bridge(gc.collect)

    def body():
        results = instance.run_chunk(SCENARIO, "=stress", [seed, count])
        return runtime.to_py(results[0])

    results = instance.sched.run(body)
    # (No stall count here: the forced collections of the scenario take as long as
    # the machine lets them; the tallies are what shows corruption.)
    results["leftover_fibers"] = len(instance.sched.fibers)
    instance.sched.shutdown(timeout=2.0)
    gc.collect()
    return results


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1000)))
