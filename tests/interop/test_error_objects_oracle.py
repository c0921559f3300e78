"""box.error objects (issue 23 item 7): box.error.new in its three forms, custom
types, :unpack(), :match(), :raise(), .prev and :set_prev() with 2.6.0's cycle
rules, box.error{...}, box.error.set/last/clear and their usage errors. The same
script prints the same lines in Tarantool 2.6.0 and in Spindle.

(Not compared: 2.6.0's errors are cdata, so type(), rawget() and pairs() on one
differ.)"""
from __future__ import annotations

from .oracle import both, console_both

SCRIPT = r"""
local function dump(tag, e)
    if e == nil then print(tag, 'nil') return end
    local keys = {}
    for k, v in pairs(e:unpack()) do
        if k == 'trace' then
            v = v[1] and (tostring(v[1].file) .. ':' .. tostring(v[1].line)) or '{}'
        elseif k == 'prev' then
            v = tostring(v)
        end
        table.insert(keys, k .. '=' .. tostring(v))
    end
    table.sort(keys)
    print(tag, table.concat(keys, ' '))
end
local function d(e)
    return table.concat({tostring(e.type), tostring(e.base_type), tostring(e.code),
                         tostring(e.message), tostring(e.custom_type), tostring(e.errno),
                         tostring(e.prev)}, '|')
end
dump('n1', box.error.new(1, 'x'))
dump('n42', box.error.new(42, 'Read', 'space', 'x', 'guest'))
dump('c', box.error.new{type = 'MyErr', reason = 'hello', code = 77})
dump('c0', box.error.new{type = 'MyErr', reason = 'hello'})
dump('c1', box.error.new{reason = 'hello'})
dump('c2', box.error.new{code = 3})
dump('s', box.error.new('MyT', 'fmt %s %d', 'a', 5))
print(d(box.error.new{type = '', reason = 'x'}))
print(d(box.error.new{type = 5, reason = 6, code = '12'}))
print(d(box.error.new{type = {}, reason = {}, code = {}}))
print(d(box.error.new(0)), d(box.error.new(999)), d(box.error.new(-1)))
print(pcall(box.error.new, 'MyT'))
print(pcall(box.error.new, 1))
print(pcall(box.error.new, 1.5))
print(pcall(box.error.new, true))
print(pcall(box.error.new))
print(pcall(box.error.new, 3, 'a'))
print(pcall(box.error.new, 37, 'x'))
print(pcall(box.error.new, 'T', 5))
print(pcall(box.error.new, 'T', 'a%'))
print(pcall(box.error.new, 'T', 'a%', 1))
print(pcall(box.error, 'T'))
print(pcall(box.error, 1.5))
print(pcall(box.error, {}))
print(pcall(box.error, nil))
print(pcall(box.error.last, 1))
print(pcall(box.error.clear, 1))
print(pcall(box.error.set))
print(pcall(box.error.set, 5))
local e = box.error.new(1, 'x')
print(e:match('Ill(%w+)'), e:match('(%d+)'))
print(pcall(e.match, 5))
print(pcall(e.unpack, 5))
print(pcall(e.raise, 5))
print(pcall(e.raise, e))
print(e.prev, e.errno, e.trace[1].file, e.trace[1].line, #e:unpack().trace)
print(e.trace == e.trace, e.nosuch, tostring(e), 'concat ' .. e, e .. ' concat')
local a, b, c = box.error.new(1, 'a'), box.error.new(1, 'b'), box.error.new(1, 'c')
a:set_prev(b) b:set_prev(c)
print(a.prev, a.prev.prev, a.prev.prev.prev)
print(pcall(c.set_prev, c, a))
print(pcall(a.set_prev, a, a))
print(pcall(a.set_prev, a, 5))
print(pcall(a.set_prev, 5, a))
a:set_prev(nil) print(a.prev, b.prev)
local x, y, z = box.error.new(1, 'x'), box.error.new(1, 'y'), box.error.new(1, 'z')
x:set_prev(z) y:set_prev(z)
print(x.prev, y.prev)
print(pcall(z.set_prev, z, y)) print(z.prev, y.prev)
print(pcall(y.set_prev, y, z)) print(y.prev)
dump('chain', y)
local ok, er = pcall(box.error, {code = 1, reason = 'r', type = 'T'}) dump('raised', er)
ok, er = pcall(box.error, 'Tt', 'msg %s', 'z') dump('raised2', er)
ok, er = pcall(box.error, 3, 'i', 's') dump('raised3', er)
print(box.error.last(), box.error.last() == er, box.error.last() == box.error.last())
box.error.set(a) print(box.error.last() == a)
ok, er = pcall(function() box.error(box.error.new{type = 'Ct', reason = 'q'}) end)
print(d(er), d(box.error.last()))
box.error.set(box.error.new{reason = 'set'}) print(box.error.last())
box.error.clear() print(box.error.last())
print(pcall(box.error))
local f = loadstring("return box.error.new(1, 'q')")
print(f().trace[1].line)
print(box.error.new(42, 'a', 'b', 'c', 'd').object_type)
print(getmetatable(box.error) ~= nil, rawget(box.error, 'new'), rawget(box.error, 'last'))
local names = {}
for k, v in pairs(box.error) do
    if type(v) ~= 'number' and k ~= 'injection' then table.insert(names, k) end
end
print(#names)
print(#box.error.new{reason = string.rep('a', 600)}.message, #box.error.new(1, string.rep('c', 600)).message)
local long = box.error.new(string.rep('t', 100), string.rep('\xc3\xa9', 300))
print(#long.message, #long.type, #long.custom_type, long.message:byte(-1))
os.exit(0)
"""


def test_same_output_as_tarantool(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == real.stdout.splitlines()


def test_the_console_keeps_the_last_error_between_statements(tmp_path):
    statements = ("box.error(box.error.new(1, 'a'))\nbox.error.last()\n"
                  "x = box.error.last()\npcall(box.error, 1, 'b')\nbox.error.last()\n"
                  "box.error.clear()\nbox.error.last()\n"
                  "box.error.new{type = 'MyErr', reason = 'r'}\n")
    real, ours = console_both(statements, tmp_path)
    assert ours == real
