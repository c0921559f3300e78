"""What 2.6.0 adds to Lua's string, table, os and debug libraries, against Tarantool
2.6.0: the same Lua on both, the same output. string.split/startswith/endswith/
ljust/rjust/center/hex/fromhex/strip/lstrip/rstrip over a grid of inputs and
bounds, and their argument errors (texts and the positions they are raised at);
table.copy/deepcopy with metatables, __copy, cycles and shared tables; os.setenv/
environ; debug.sourcefile/sourcedir at each level."""
from __future__ import annotations

from .module_oracle import assert_same_output


def test_string_functions_and_their_errors(tmp_path):
    assert_same_output(r"""
local cases = {
 {'split', 'a b  c'}, {'split', ' a b '}, {'split', 'a,b,,c', ','}, {'split', 'a,b,,c', ',', 1},
 {'split', 'a,b,,c', ',', 0}, {'split', 'a,b,,c', ',', 2}, {'split', 'a b c', nil, 1}, {'split', ''},
 {'split', '', ','}, {'split', 'abc', ''}, {'split', 'a.b', '.'}, {'split', 'a%b', '%'}, {'split', 'aXYbXYc', 'XY'},
 {'split', 5}, {'split', nil}, {'split', 'a', 5}, {'split', 'a', {}}, {'split', 'a b', ' ', 'x'}, {'split', 'a b', ' ', -1},
 {'split', '  '}, {'split', 'a\tb\nc'}, {'split', 'a b', nil, 0}, {'split', 'a,b,c', ',', 1.5},
 {'startswith', 'abc', 'ab'}, {'startswith', 'abc', ''}, {'startswith', 'abc', 'abcd'}, {'startswith', 'abc', 'b', 2},
 {'startswith', 'abc', 'b', 2, 2}, {'startswith', 'abc', 'bc', 2, 2}, {'startswith', 'abc', 'a', -3}, {'startswith', 'abc', 'c', -1},
 {'startswith', 5, 'a'}, {'startswith', 'abc', 5}, {'startswith', 'abc'}, {'startswith', 'abc', 'a', 'x'}, {'startswith', 'abc', 'a', 1, 'y'},
 {'startswith', 'abc', 'a', 0}, {'startswith', 'abc', 'a', 10}, {'startswith', '', ''}, {'startswith', 'abc', 'a', 1, 0},
 {'endswith', 'abc', 'bc'}, {'endswith', 'abc', ''}, {'endswith', 'abc', 'xabc'}, {'endswith', 'abc', 'b', 1, 2},
 {'endswith', 'abc', 'a', 1, 1}, {'endswith', 'abc', 'c', -1}, {'endswith', 5, 'a'}, {'endswith', 'abc', nil}, {'endswith', 'abc', 'c', 'x'},
 {'endswith', 'abc', 'c', 1, -1}, {'endswith', 'abc', 'b', 1, -2}, {'endswith', 'abc', 'c', 5},
 {'ljust', 'ab', 5}, {'ljust', 'ab', 5, '*'}, {'ljust', 'abcdef', 3}, {'ljust', 'ab', 5, '*-'}, {'ljust', 'ab', 5, ''},
 {'ljust', 5, 5}, {'ljust', 'ab'}, {'ljust', 'ab', 'x'}, {'ljust', 'ab', 5, 5}, {'ljust', 'ab', -1}, {'ljust', 'ab', 4.5},
 {'rjust', 'ab', 5}, {'rjust', 'ab', 5, '*'}, {'rjust', 'ab', 1}, {'rjust', 'ab', 5, '**'}, {'rjust', nil, 5}, {'rjust', 'ab', nil},
 {'center', 'ab', 5}, {'center', 'ab', 6, '*'}, {'center', 'abc', 6, '*'}, {'center', 'a', 4}, {'center', 'ab', 1}, {'center', 'ab', 5, '--'},
 {'center', 5, 5}, {'center', 'ab'}, {'center', 'ab', 'x'},
 {'hex', 'abc'}, {'hex', ''}, {'hex', '\0\255'}, {'hex', 5}, {'hex', nil}, {'hex', {}},
 {'fromhex', '616263'}, {'fromhex', ''}, {'fromhex', 'ABcd'}, {'fromhex', 'abc'}, {'fromhex', 'zz'}, {'fromhex', 5}, {'fromhex', nil}, {'fromhex', '61 62'}, {'fromhex', '0g'},
 {'strip', '  ab  '}, {'strip', 'xxabxx', 'x'}, {'strip', 'xyabyx', 'xy'}, {'strip', ''}, {'strip', '   '}, {'strip', ' \t\nab\r\n '}, {'strip', 5}, {'strip', 'ab', 5}, {'strip', 'ab', ''},
 {'strip', 'a%b%', '%'}, {'strip', '..ab..', '.'}, {'strip', ']]ab[[', '[]'}, {'strip', '^^ab^^', '^'}, {'strip', '--ab--', '-'}, {'strip', nil},
 {'lstrip', '  ab  '}, {'lstrip', 'xxabxx', 'x'}, {'lstrip', 5}, {'lstrip', 'ab', {}},
 {'rstrip', '  ab  '}, {'rstrip', 'xxabxx', 'x'}, {'rstrip', 5}, {'rstrip', 'ab', true},
}
for i, c in ipairs(cases) do
  local name = c[1]
  local args = {}
  for j = 2, table.maxn(c) do args[j - 1] = c[j] end
  local label = {name}
  for j = 1, table.maxn(c) - 1 do label[#label+1] = type(args[j]) == 'table' and 'tbl' or (tostring(args[j]):gsub('[^%w%p ]', '?')) end
  show(table.concat(label, ' '), string[name], unpack(args, 1, table.maxn(c) - 1))
end
show('method split', function() return ('a b'):split() end)
show('method strip', function() return (' a '):strip() end)
show('method hex', function() return ('ab'):hex() end)
show('method startswith', function() return ('abc'):startswith('a') end)

""", tmp_path)


def test_string_errors_point_at_the_caller(tmp_path):
    assert_same_output(r"""
local function try(f)
  local ok, e = pcall(f)
  print(e)
end
try(function()
  string.split('abc', '')
end)
try(function()
  string.split(5)
end)
try(function()
  string.ljust('ab', 5, '**')
end)
try(function()
  string.fromhex('abc')
end)
try(function()
  string.startswith('abc', 'a', 'x')
end)
try(function()
  string.strip(5)
end)
try(function()
  string.hex(5)
end)
try(function()
  string.endswith(5, 'a')
end)
try(function()
  local x = ('abc'):split('')
end)

""", tmp_path)


def test_split_and_bounds_grid(tmp_path):
    assert_same_output(r"""
local s = {'', ' ', 'a', ' a b  c ', 'abc', 'a,b,c,', ',,', 'aXbXc'}
for _, inp in ipairs(s) do
  for _, sep in ipairs({false, ',', 'X', ' '}) do
    for _, m in ipairs({false, 0, 1, 2, 5}) do
      show(('split [%s] [%s] [%s]'):format(inp, tostring(sep), tostring(m)), string.split, inp, sep or nil, m or nil)
    end
  end
end
for _, b in ipairs({false, -5, -3, -1, 0, 1, 2, 3, 4}) do
  for _, e in ipairs({false, -5, -1, 0, 1, 2, 3, 4}) do
    for _, h in ipairs({'', 'a', 'ab', 'bc', 'c', 'abc'}) do
      show(('sw [%s] [%s] [%s]'):format(h, tostring(b), tostring(e)), string.startswith, 'abc', h, b or nil, e or nil)
      show(('ew [%s] [%s] [%s]'):format(h, tostring(b), tostring(e)), string.endswith, 'abc', h, b or nil, e or nil)
    end
  end
end
for _, w in ipairs({0, 1, 2, 3, 4, 5, 6, 7, 2.5}) do
  for _, inp in ipairs({'', 'a', 'ab'}) do
    show('ljust ' .. inp .. ' ' .. w, string.ljust, inp, w, '.')
    show('rjust ' .. inp .. ' ' .. w, string.rjust, inp, w, '.')
    show('center ' .. inp .. ' ' .. w, string.center, inp, w, '.')
  end
end
show('strip utf8', string.strip, '\t\v\f\rab\v ')
show('strip all', string.strip, 'aaaa', 'a')
show('lstrip all', string.lstrip, 'aaaa', 'a')
show('strip classes', string.strip, '%a%ab%a', '%a')
show('fromhex mixed', string.fromhex, 'fFaA09')

""", tmp_path)


def test_table_os_debug(tmp_path):
    assert_same_output(r"""
local t = {1, 2, {3, 4, {5}}, a = {b = 'c'}}
local c = table.copy(t)
show('copy', function() return c, c[3] == t[3], c.a == t.a, c ~= t end)
local d = table.deepcopy(t)
show('deepcopy', function() return d, d[3] == t[3], d[3][3] == t[3][3], d.a == t.a end)
show('copy nontable', table.copy, 5)
show('copy nil', table.copy)
show('copy string', table.copy, 'abc')
show('deepcopy nontable', table.deepcopy, 5)
show('deepcopy nil', table.deepcopy)
local mt = {__index = function() return 'dflt' end}
local withmt = setmetatable({x = 1}, mt)
show('copy keeps mt', function() local x = table.copy(withmt) return getmetatable(x) == mt, x.y end)
show('deepcopy keeps mt', function() local x = table.deepcopy(withmt) return getmetatable(x) == mt, x.y end)
local copymt = {__copy = function(self) return {copied = true, n = self.n} end}
local wc = setmetatable({n = 7}, copymt)
show('copy __copy', function() local x = table.copy(wc) return x, getmetatable(x) == copymt end)
show('deepcopy __copy', function() local x = table.deepcopy(wc) return x, getmetatable(x) == copymt end)
show('nested __copy', function() local x = table.deepcopy({inner = wc}) return x end)
show('copy nested __copy', function() local x = table.copy({inner = wc}) return x.inner == wc end)
local cyc = {} cyc.self = cyc
show('deepcopy cycle', function() local x = table.deepcopy(cyc) return x.self == x, x.self == cyc end)
local shared = {1}
show('deepcopy shared', function() local x = table.deepcopy({a = shared, b = shared}) return x.a == x.b end)
show('copy keys tables', function() local k = {} local x = table.deepcopy({[k] = 1}) return next(x) == k end)
show('copy __copy nonfunc', function() return table.copy(setmetatable({1}, {__copy = 5})) end)
show('deepcopy cdata', function() local ffi = require('ffi') local x = table.deepcopy({ffi.new('int[1]', 5)}) return x[1][0] end)
show('copy empty', table.copy, {})
show('copy 2 args', table.copy, {1}, {2})
show('os.setenv', os.setenv, 'SPX_TEST', 'val')
show('os.getenv', os.getenv, 'SPX_TEST')
show('os.environ', function() return os.environ().SPX_TEST end)
show('os.setenv nil', os.setenv, 'SPX_TEST', nil)
show('os.getenv after', os.getenv, 'SPX_TEST')
show('os.setenv num', os.setenv, 'SPX_TEST', 5)
show('os.getenv num', os.getenv, 'SPX_TEST')
show('os.setenv numname', os.setenv, 5, 'x')
show('os.getenv 5', os.getenv, '5')
show('os.setenv noargs', os.setenv)
show('os.setenv tbl', os.setenv, 'SPX_T2', {})
show('os.setenv bool', os.setenv, 'SPX_T2', true)
show('os.setenv empty', os.setenv, 'SPX_T3', '')
show('os.getenv empty', os.getenv, 'SPX_T3')
show('os.setenv eq', os.setenv, 'A=B', 'x')
show('os.environ type', function() local e = os.environ() return type(e), e.PATH ~= nil, getmetatable(e) end)
show('os.environ arg', function() return type(os.environ(5)) end)
show('sourcefile', debug.sourcefile)
show('sourcedir', debug.sourcedir)
show('sourcefile direct', function() return debug.sourcefile() end)
show('sourcefile level', function() return debug.sourcefile(1), debug.sourcefile(2), debug.sourcefile(3), debug.sourcefile(10) end)
show('sourcedir level', function() return debug.sourcedir(1), debug.sourcedir(2), debug.sourcedir(10) end)
show('sourcefile str', function() return debug.sourcefile('x') end)
show('sourcefile loadstring', loadstring('return debug.sourcefile(), debug.sourcedir()'))
show('sourcefile loadstring named', loadstring('return debug.sourcefile(), debug.sourcedir()', '@/a/b/c.lua'))
show('sourcefile loadstring rel', loadstring('return debug.sourcefile(), debug.sourcedir()', '@x/y.lua'))
show('table.new', function() return type(table.new), #table.new(10, 0) end)
show('table.clear', function() return type(table.clear) end)

""", tmp_path)


def test_debug_levels_and_copy_details(tmp_path):
    assert_same_output(r"""
print(pcall(debug.sourcedir, 'x'))
print(pcall(debug.sourcefile, 'x'))
print(pcall(debug.sourcefile, 0))
print(pcall(debug.sourcedir, 0))
print(pcall(debug.sourcefile, -1))
print(pcall(debug.sourcefile, 1.5))
local function f() local a = debug.sourcefile() return a end
print(f())
local function g() local a = debug.sourcedir() return a end
print(g())
print(debug.sourcefile(), debug.sourcedir())
print(pcall(table.deepcopy, setmetatable({1}, {__copy = 5})))
print(pcall(function() return table.copy(setmetatable({1}, {__copy = function(a, b) return {a == nil, b} end}), 'x')[1] end))
print(type(table.new), table.new == require('table.new'), type(require('table.clear')), table.clear)
print(#string.split('a b', ' ', nil))
print(pcall(string.ljust, 'ab', 0), pcall(string.ljust, 'ab', 2^31))
print(pcall(string.center, 'ab', 3.7, 'x'))
print(pcall(string.startswith, 'abc', 'a', 1.5), pcall(string.startswith, 'abc', 'b', 1.5))
print(pcall(string.strip, 'abc', nil), pcall(string.strip, 'aXXa', 'a'))
local env = os.environ()
local n = 0 for k, v in pairs(env) do n = n + 1 end print(n > 0)

""", tmp_path)
