"""box.stat().ERROR against 2.6.0: every ClientError the box makes counts once (a
duplicate key, a key or field of the wrong type, a bad update), a plain Lua error and
a successful statement do not. So does an error Lua makes with box.error.new or raises
with box.error(code, ...) / box.error{...} (2.6.0's ClientError constructor counts it),
not one raised again with box.error(err) or box.error()."""
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


LUA_MADE = """
box.cfg{log_level = 1}
local function total() return box.stat().ERROR.total end
local t = {}
local function step(name, fn)
    local before = total()
    pcall(fn)
    table.insert(t, name .. '=' .. (total() - before))
end
local kept
step('new_table', function() kept = box.error.new{code = 1, reason = 'x'} end)
step('new_code', function() box.error.new(box.error.NO_SUCH_USER, 'u') end)
step('new_custom', function() box.error.new{reason = 'z', type = 'MyErr'} end)
step('new_custom_fmt', function() box.error.new('MyErr', 'n=%d', 5) end)
step('new_usage', function() box.error.new() end)
step('raise_code', function() box.error(box.error.NO_SUCH_USER, 'u') end)
step('raise_table', function() box.error{code = 5, reason = 'y'} end)
step('raise_custom', function() box.error{reason = 'z', type = 'MyErr'} end)
step('raise_again', function() box.error(kept) end)
step('raise_last', function() box.error() end)
step('set', function() box.error.set(kept) end)
step('last', function() return box.error.last() end)
step('custom_caught', function()
    local ok, e = pcall(box.error, {reason = 'z', type = 'MyErr'})
    box.error.set(e) return tostring(box.error.last())
end)
print(table.concat(t, ' '))
os.exit(0)
"""


def test_errors_made_in_lua_count_as_2_6_0(tmp_path):
    real, ours = both(LUA_MADE, tmp_path)
    assert real.returncode == 0, real.stderr
    assert (ours.returncode, ours.stdout) == (0, real.stdout), ours.stderr
    assert "new_table=1" in real.stdout and "raise_again=0" in real.stdout
