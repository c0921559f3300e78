"""The tap module: the same test script on Tarantool 2.6.0 and on Spindle prints the same
TAP text, failures' YAML blocks (keys, their order, the trace) and subtests included."""
from __future__ import annotations

from .oracle import both

CHECKS = r"""
local tap = require('tap')
local test = tap.test('mytest')
test:plan(22)
print(test:ok(true, 'ok true'))
print(test:ok(false, 'ok false'))
test:ok(nil)
test:is(1, 1, 'is equal')
test:is(1, 2, 'is not equal')
test:is('a', 'b')
test:is(nil, 1, 'nil vs 1')
test:isnt(1, 2, 'isnt')
test:isnt(1, 1, 'isnt fail')
test:is_deeply({1, {a = 2}}, {1, {a = 2}}, 'deep ok')
test:is_deeply({1, {a = 2}}, {1, {a = 3}}, 'deep fail')
test:is_deeply(1, 2, 'deep scalar')
test:is_deeply({1, 2}, {1}, 'deep len')
test:is_deeply(nil, {}, 'deep nil')
test:like('hello', 'ell', 'like')
test:like('hello', 'xyz', 'like fail')
test:unlike('hello', 'ell', 'unlike fail')
test:isnil(1, 'isnil fail')
test:isnumber(1, 'isnumber')
test:isstring(1, 'isstring fail')
test:isudata(1, 'isudata fail')
test:iscdata(1, 'int', 'iscdata fail')
test:iscdata(require('ffi').new('int', 1), 'int', 'iscdata ok')
test:diag('a diag %s', 'x')
test:skip('skipped one')
print(pcall(tap.test('other').plan, tap.test('bad'), 'x'))
print(test:check())
print(test.planned, test.total, test.failed, test.level, test.name, test.strict, test.trace)
os.exit(0)
"""

SUBTESTS = r"""
local tap = require('tap')
local test = tap.test('top')
test:plan(6)
local function helper() test:ok(false, 'in helper') end
helper()
print(test:test('sub', function(t)
    t:plan(2)
    t:ok(true, 'inner ok')
    t:is(1, 2, 'inner fail')
    t:diag('inner diag')
end))
print(test:test('good', function(t) t:plan(1) t:ok(true, 'fine') end))
test:test('noplan', function(t) t:ok(true, 'no plan') end)
test:fail('explicit fail')
test.strict = true
test:is(box.NULL, nil, 'null is nil')
print(test:check())
print(tap.test('y', function(t) t:plan(2) t:ok(true, 'f')
    t:test('inner', function(s) s:plan(1) s:ok(true, 'deep') end) end))
local t3 = tap.test('t3')
t3:ok(true)
print(t3:check())
os.exit(0)
"""

IN_FIBERS = r"""
local tap = require('tap')
local fiber = require('fiber')
local test = tap.test('f')
test:plan(2)
fiber.create(function() test:ok(false, 'in fiber') end)
fiber.sleep(0.01)
pcall(function() test:is(1, 2, 'in pcall') end)
test:check()
os.exit(0)
"""


def _same(script, tmp_path):
    real, ours = both(script, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    return ours.stdout


def test_tap_checks_as_tarantool(tmp_path):
    out = _same(CHECKS, tmp_path)
    assert "not ok - deep fail\n  ---\n  path: //2/a\n" in out


def test_tap_subtests_as_tarantool(tmp_path):
    out = _same(SUBTESTS, tmp_path)
    assert "    # sub: end\nnot ok - failed subtests\n" in out


def test_tap_traces_in_fibers_and_pcall_as_tarantool(tmp_path):
    out = _same(IN_FIBERS, tmp_path)
    assert "    name: pcall\n" in out
