"""box.stat().ERROR against 2.6.0: every ClientError the box makes counts once (a
duplicate key, a key or field of the wrong type, a bad update), a plain Lua error and
a successful statement do not. (box.error.new() in Lua is not counted by Spindle yet:
its error objects are Lua tables until they cross into Python.)"""
from __future__ import annotations

from .oracle import both

SCRIPT = """
box.cfg{log_level = 1}
local s = box.schema.space.create('s') s:create_index('pk')
s:insert{1}
local function total() return box.stat().ERROR.total end
local t = {}
local function step(name, fn)
    local before = total()
    pcall(fn)
    table.insert(t, name .. '=' .. (total() - before))
end
step('dup', function() s:insert{1} end)
step('nospace', function() box.space.nope:select() end)
step('lua', function() error('plain') end)
step('keytype', function() s:get{'a'} end)
step('fieldtype', function() s:insert{'a'} end)
step('update', function() s:update({1}, {{'=', 5, 1}}) end)
step('ok', function() s:replace{2} end)
print(table.concat(t, ' '))
os.exit(0)
"""


def test_error_counter_as_2_6_0(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert (ours.returncode, ours.stdout) == (0, real.stdout), ours.stderr
    assert "dup=1" in real.stdout
