"""The fiber module's user-visible rules, printed by the same script in Tarantool
2.6.0 and in Spindle: argument errors, dead fibers, channels, names."""
from __future__ import annotations

from .oracle import both

SCRIPT = r"""
local fiber = require('fiber')
print(pcall(fiber.sleep, 'x'))
print(pcall(fiber.create, 1))
print(pcall(fiber.new, 1))
local f = fiber.create(function() end)
print(f:status(), pcall(f.cancel, f))
print(pcall(fiber.channel, -1))
print(fiber.find(99999), pcall(fiber.find, 'x'))
print(fiber.self() == fiber.self())
print(pcall(fiber.name, string.rep('x', 300)))
print(pcall(fiber.name, string.rep('y', 300), {truncate = true}))
print(#fiber.name())
local ch = fiber.channel(1)
print(ch:put(1, 0), ch:put(2, 0), ch:count(), ch:is_full(), ch:get(), ch:get(0))
ch:close()
print(ch:put(3), ch:get(), ch:is_closed())
local c = fiber.cond()
print(c:wait(0.01))
local j = fiber.new(function(a) fiber.sleep(0) return a * 2 end, 21)
j:set_joinable(true)
print(j:join())
os.exit(0)
"""


def test_fiber_module_prints_like_tarantool(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == real.stdout.splitlines()
