"""The fun module and the fun iterators of space/index/tuple pairs(): the same script
on Tarantool 2.6.0 and on Spindle prints the same lines (tables as sorted key=value
lists, so no hash order shows)."""
from __future__ import annotations

from .module_oracle import assert_same_output
from .oracle import both

FUN = r"""
local fun = require('fun')
local function sq(x) return x * x end
show('exports', function()
    local t = {} for k in pairs(fun) do t[#t + 1] = k end
    table.sort(t) return table.concat(t, ' ')
end)
show('methods', function()
    local t = {} for k in pairs(getmetatable(fun.range(1)).__index) do t[#t + 1] = k end
    table.sort(t) return table.concat(t, ' ')
end)
show('range', function() return fun.range(5):totable() end)
show('range2', function() return fun.range(2, 10, 3):totable() end)
show('range neg', function() return fun.range(-3):totable() end)
show('range down', function() return fun.range(5, 1):totable() end)
show('range frac', function() return fun.range(1, 2, 0.5):totable() end)
show('range 0', function() return type(fun.range(0)), select('#', fun.range(0)) end)
show('range step 0', fun.range, 1, 2, 0)
show('tostring', function() return tostring(fun.range(3)), select('#', fun.range(3)) end)
show('map', function() return fun.range(4):map(sq):totable() end)
show('map fn', function() return fun.map(sq, {1, 2, 3}):totable() end)
show('filter', function() return fun.range(10):filter(function(x) return x % 3 == 0 end):totable() end)
show('remove_if', function() return fun.remove_if(function(x) return x > 2 end, {1, 2, 3}):totable() end)
show('grep', function() return fun.grep('^b', {'ab', 'ba', 'bb'}):totable() end)
show('grep fn', function() return fun.iter({1, 2, 3}):grep(function(x) return x ~= 2 end):totable() end)
show('reduce', fun.reduce, function(acc, x) return acc + x end, 0, fun.range(4))
show('foldl', function() return fun.range(4):foldl(function(acc, x) return acc * x end, 1) end)
show('length', function() return fun.length({1, 2, 3}), fun.length('abcd'), fun.range(7):length() end)
show('head', function() return fun.head({5, 6}), fun.range(3):head(), fun.car('xyz') end)
show('head empty', fun.head, {})
show('tail', function() return fun.tail({5, 6, 7}):totable(), fun.cdr({}):totable() end)
show('nth', function() return fun.nth(2, 'abc'), fun.nth(5, {1}), fun.range(3):nth(3) end)
show('nth 0', fun.nth, 0, {1})
show('take', function() return fun.take(2, {1, 2, 3}):totable(), fun.take_n(0, {1}):totable() end)
show('take_n neg', fun.take_n, -1, {1})
show('take_while', function() return fun.range(10):take_while(function(x) return x < 4 end):totable() end)
show('drop', function() return fun.drop(2, {1, 2, 3}):totable(), fun.drop_n(5, {1}):totable() end)
show('drop_n neg', fun.drop_n, -1, {1})
show('drop_while', function() return fun.range(6):drop_while(function(x) return x < 4 end):totable() end)
show('span', function()
    local a, b = fun.span(function(x) return x < 3 end, fun.range(5))
    return a:totable(), b:totable()
end)
show('split_at', function()
    local a, b = fun.split_at(2, fun.range(5))
    return a:totable(), b:totable()
end)
show('partition', function()
    local a, b = fun.range(6):partition(function(x) return x % 2 == 0 end)
    return a:totable(), b:totable()
end)
show('index', function() return fun.index(3, {1, 2, 3}), fun.index_of(9, {1}), fun.range(5):elem_index(4) end)
show('indexes', function() return fun.indexes('a', {'a', 'b', 'a'}):totable() end)
show('enumerate', function()
    return fun.enumerate({'x', 'y'}):map(function(i, v) return i .. v end):totable()
end)
show('zip', function()
    return fun.zip({1, 2, 3}, {'a', 'b'}):map(function(a, b) return a .. b end):totable()
end)
show('zip method', function() return fun.iter({1, 2, 3}):zip(fun.range(3)):map(function(a, b) return a + b end):sum() end)
show('chain', function() return fun.chain({1, 2}, 'xy', fun.range(2)):totable() end)
show('cycle', function() return fun.cycle({1, 2}):take(5):totable(), fun.cycle({}):length() end)
show('duplicate', function() return fun.duplicate('a'):take(3):totable(), fun.xrepeat(1):take(2):totable() end)
show('tabulate', function() return fun.tabulate(sq):take(4):totable() end)
show('zeros ones', function() return fun.zeros():take(2):totable(), fun.ones():take(2):totable() end)
show('rands', function() return fun.rands(5):take(20):all(function(x) return x >= 0 and x < 5 end) end)
show('rands bad', fun.rands, 'a')
show('rands empty', fun.rands, 5, 2)
show('intersperse', function() return fun.intersperse('x', {'a', 'b', 'c'}):totable() end)
show('sum product', function() return fun.sum({}), fun.product({}), fun.range(4):sum(), fun.range(4):product() end)
show('min max', function() return fun.min({3, 1, 2}), fun.max({'b', 'c', 'a'}), fun.minimum({2, 5}), fun.maximum({2, 5}) end)
show('min empty', fun.min, {})
show('max empty', fun.max, {})
show('min_by', fun.min_by, function(a, b) if a > b then return b end return a end, {3, 1, 2})
show('max_by', fun.max_by, function(a, b) if a > b then return a end return b end, {3, 1, 2})
show('max_by empty', fun.max_by, function(a) return a end, {})
show('all any', function()
    return fun.all(function(x) return x > 0 end, {1, 2}), fun.any(function(x) return x > 1 end, {1}),
           fun.every(function(x) return x end, {}), fun.some(function(x) return x end, {})
end)
show('is_null', function() return fun.is_null({}), fun.is_null({1}), fun.range(3):is_null() end)
show('is_prefix_of', function()
    return fun.is_prefix_of({1, 2}, {1, 2, 3}), fun.is_prefix_of({1, 3}, {1, 2}),
           fun.is_prefix_of(fun.range(20), fun.range(30))
end)
show('tomap', function() return fun.zip({'a', 'b'}, {1, 2}):tomap() end)
show('iter map', function() return fun.iter({a = 1}):totable(), fun.iter({a = 1}):tomap() end)
show('iter string', function() return fun.iter('abc'):totable(), fun.iter(''):length() end)
show('iter nil', fun.iter, nil)
show('iter number', fun.iter, 5)
show('op', function()
    local op = fun.op
    return op.add(1, 2), op.sub(5, 3), op.mul(2, 3), op.div(7, 2), op.mod(7, 3), op.pow(2, 3),
           op.concat('a', 'b'), op.len('abc'), op.truth(nil), op.lnot(1), op.neq(4), op.unm(4),
           op.lt(1, 2), op.eq(1, 1), op.floordiv(7, 2), fun.operator.intdiv(-7, 2)
end)
show('op keys', function()
    local t = {} for k in pairs(fun.op) do t[#t + 1] = k end
    table.sort(t) return table.concat(t, ' ')
end)
show('for loop', function()
    local out = {}
    for _, x in fun.range(3):map(sq) do out[#out + 1] = x end
    return out
end)
show('each', function()
    local out = {}
    fun.range(3):each(function(x) out[#out + 1] = x end)
    fun.for_each(function(x) out[#out + 1] = x end, {9})
    return out
end)
show('unwrap', function() return select('#', fun.range(2):unwrap()) end)
show('wrap', function() return fun.wrap(ipairs({4, 5})):totable() end)
"""

PAIRS = r"""
box.cfg{log_level = 1}
local fun = require('fun')
local s = box.schema.space.create('s')
s:create_index('pk')
s:create_index('sk', {parts = {2, 'string'}, unique = false})
for i = 1, 5 do s:insert{i, 'v' .. (i % 2), i * 10} end
print(select('#', s:pairs()), type(s:pairs()), tostring(s:pairs()))
for k, t in s:pairs() do print(k, t) end
print(#s:pairs():totable(), s:pairs():map(function(t) return t[3] end):sum())
print(s:pairs({2}, {iterator = 'GE'}):map(function(t) return t[1] end):totable()[1])
print(s.index.sk:pairs('v1'):length(), s.index.pk:pairs():nth(2))
print(s:pairs():filter(function(t) return t[1] % 2 == 0 end):totable()[2])
local t = s:get(3)
print(select('#', t:pairs()), tostring(t:pairs()))
for k, v in t:pairs() do print(k, v) end
for k, v in t:ipairs() do print(k, v) end
print(t:pairs():totable()[2], t:pairs():length())
for k, v in t:pairs(1) do print(k, v) end
print(box.tuple.new{1, 2}:pairs():sum())
print(pcall(fun.iter, box.tuple.new{1, 2}))
os.exit(0)
"""


def test_fun_module_as_tarantool(tmp_path):
    lines = assert_same_output(FUN, tmp_path, min_lines=60)
    assert any(line.startswith("map | true") for line in lines)


def test_pairs_are_fun_iterators_as_tarantool(tmp_path):
    real, ours = both(PAIRS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    assert "<iterator state>" in ours.stdout
