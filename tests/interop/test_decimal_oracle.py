"""The decimal module against Tarantool 2.6.0: the same Lua on both, the same output.

Each script prints one line per case: pcall's results through tostring, and for a
decimal its precision, scale, MsgPack bytes and decNumber fields as well, so the
exact representation (1E+2 is not 100) is compared, not just the text. Then decimals
in tuples and the console (YAML and Lua output), and over IPROTO with the official
connector (ext 1 <-> decimal.Decimal).
"""
from __future__ import annotations

import decimal

from .oracle import both, console_both, serve_both

PRELUDE = r"""
decimal = require('decimal')
msgpack = require('msgpack')
D = decimal.new
local function hex(s)
    return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end
local function describe(v)
    if decimal.is_decimal(v) then
        return string.format('%s p%d s%d %s [%d %d %d]', tostring(v), decimal.precision(v),
                             decimal.scale(v), hex(msgpack.encode(v)), v.digits, v.exponent,
                             v.bits)
    end
    return type(v) .. ' ' .. tostring(v)
end
function show(label, f, ...)
    local r = {pcall(f, ...)}
    local out = {label, tostring(r[1])}
    for i = 2, table.maxn(r) do out[#out + 1] = describe(r[i]) end
    print(table.concat(out, ' | '))
end
"""


def assert_same_output(script: str, tmp_path) -> None:
    real, ours = both(PRELUDE + script, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert real.stdout.count("\n") > 5
    assert ours.stdout.splitlines() == real.stdout.splitlines()


def test_new_from_strings_numbers_and_cdata(tmp_path):
    assert_same_output(r"""
local ffi = require('ffi')
for _, v in ipairs({'1.5', '-0', '0.00', '1E+2', '0e5', '-0e-5', '+5', '.5', '5.', '-.5',
                    '00012', '1.5E+3', '1e+37', '1e+38', '1e40', '1e-38', '1e-40',
                    '1e-1000000', '1e99999999999', '0.000000000000000000000000000000000000015',
                    '12345678901234567890123456789012345678',
                    '123456789012345678901234567890123456789',
                    '12345678901234567890123456789012345678.5',
                    '1.234567890123456789012345678901234567850',
                    '1.234567890123456789012345678901234567950',
                    'abc', '', ' 2', '2 ', '0x10', 'inf', 'nan', 'Infinity', '1_000', '1e',
                    '1e+', '--1', '1.2.3', 'e5', '.', '-', '1\0002'}) do
    show('new ' .. v, D, v)
end
for _, v in ipairs({0.1, 1/3, 2^53, 2^53 - 1, 1e15, 1e16, 123456789012345678, 1e37, 1e38,
                    1e308, -12345.678, 1e-5, 1e-20, 1.5e-30, 1e-40, 123.456e20, 0/0, 1/0,
                    -1/0}) do
    show('new ' .. tostring(v), D, v)
end
show('new int64', D, 12345678901234567LL)
show('new uint64', D, -1ULL)
show('new int cdata', D, ffi.new('int', 5))
show('new double cdata', D, ffi.new('double', 1.5))
show('new float cdata', D, ffi.new('float', 1.5))
show('new void*', D, ffi.cast('void *', 0))
show('new box.NULL', D, box.NULL)
show('new decimal', D, D('-1.50'))
show('new nil', D, nil)
show('new none', D)
show('new table', D, {})
show('new boolean', D, true)
show('new extra', D, 1, 2)
show('new not tail', function() local x = D('x') return x end)
show('is_decimal', decimal.is_decimal, D(1))
show('is_decimal number', decimal.is_decimal, 1)
show('is_decimal string', decimal.is_decimal, '1')
show('is_decimal none', decimal.is_decimal)
local d = D('-123456.789')
print(type(d), ffi.sizeof(d), tostring(ffi.typeof(d)), d.lsu[0], d.lsu[1], d.lsu[2])
show('#d', function() return #d end)
show('d()', function() return d() end)
show('d.foo', function() return d.foo end)
show('d:round', function() return d:round(1) end)
show('d[1]', function() return d[1] end)
show('d .. s', function() return d .. 'x' end)
show('tonumber', tonumber, d)
""", tmp_path)


def test_arithmetic_and_its_errors(tmp_path):
    assert_same_output(r"""
local ffi = require('ffi')
local a, b = D('1.5'), D('0.25')
local ops = {
    ['+'] = function(x, y) return x + y end, ['-'] = function(x, y) return x - y end,
    ['*'] = function(x, y) return x * y end, ['/'] = function(x, y) return x / y end,
    ['%'] = function(x, y) return x % y end, ['^'] = function(x, y) return x ^ y end,
}
local pairs_ = {{a, b}, {a, 1}, {1, a}, {a, '2'}, {'2', a}, {a, 0.1}, {a, 1LL}, {2ULL, a},
                {a, ffi.new('int', 5)}, {a, 0}, {D(0), D(0)}, {a, 'x'}, {'x', a}, {a, {}},
                {{}, a}, {a, true}, {a, 1/0}, {a, 1e308}, {a, 1e38}, {a, ' 2'}, {a, '0x10'},
                {D(10), D('0.5')}, {D(100), D(4)}, {D(1), D(3)}, {D(2), D(3)}, {D(1), 7},
                {D(22), 7}, {D('1e37'), 3}, {D(7), D(-3)}, {D(-7), D(3)}, {D(1), D('0.3')},
                {D(10), D('0.0003')}, {D('1e37'), D('0.0003')}, {D('1e-38'), 10},
                {D('1e-38'), D('1e-38')}, {D('1e-20'), D('-1e-20')},
                {D('99999999999999999999999999999999999999'), 1},
                {D('9999999999999999999999999999999999999.9'), 1},
                {D('12345678901234567890123456789012345678'), D('0.1')},
                {D(10), 37}, {D(10), 38}, {D(2), 126}, {D(2), 200}, {D(2), -2},
                {D(2), 0.5}, {D(4), 0.5}, {D(-2), 0.5}, {D(-8), 1/3}, {D(0), 0}, {D(0), -1},
                {D(-2), 3}, {D(-2), -3}, {D('0.1'), 40}, {D('0.5'), 100},
                {D(2), 1000000000}, {D('0.5'), 1000000000}, {D(-1), 1000000001},
                {D(3), D('3.5')}, {D('1.5'), D('0.25')}, {D('-0.000'), D('-1')},
                {D('1E+2'), 0}, {D('0E+3'), D('1E+2')}, {D(0.1), D(0.2)}}
for i, p in ipairs(pairs_) do
    for _, op in ipairs({'+', '-', '*', '/', '%', '^'}) do
        show(i .. ' ' .. op, ops[op], p[1], p[2])
    end
end
for _, v in ipairs({'5', '-0', '0', '-0.000', '1E+2', '0E+3'}) do
    show('unm ' .. v, function() return -D(v) end)
end
show('string + table', function() return 'x' + {} end)
show('not tail', function() local x = D(1) / 0 return x end)
""", tmp_path)


def test_math_functions(tmp_path):
    assert_same_output(r"""
local values = {'2.675', '-2.50', '0', '-0', '100', '0.001', '0.5', '0.9', '1.1', '1.5', '2',
                '3', '7', '10', '0.123', '12.5', '100.7', '0.0003', '123456.789', '1.0000001',
                '0.99999', '5e-30', '1e-38', '12345678901234567890', '-1', '1E+2', '0E+3',
                '-0.000', '2.7182818284590452353602874713526624978', '85', '87', '-1000000'}
for _, name in ipairs({'abs', 'sqrt', 'ln', 'log10', 'exp'}) do
    local f = decimal[name]
    for _, v in ipairs(values) do
        show(name .. ' ' .. v, f, D(v))
    end
    show(name .. ' number', f, 5)
    show(name .. ' string', f, '5')
    show(name .. ' float', f, 2.5)
    show(name .. ' int64', f, -5LL)
    show(name .. ' none', f)
    show(name .. ' table', f, {})
    show(name .. ' bad string', f, 'x')
    show(name .. ' not tail', function() local x = f('x') return x end)
end
for _, name in ipairs({'precision', 'scale', 'trim'}) do
    local f = decimal[name]
    for _, v in ipairs({'2.675', '-2.50', '0', '100', '0.001', '-0.000', '1.500', '1E+2',
                        '0E+3', '-0E+3', '1.0E+1', '1e-38'}) do
        show(name .. ' ' .. v, f, D(v))
    end
    show(name .. ' number', f, 5)
    show(name .. ' string', f, '5')
    show(name .. ' int64', f, 5LL)
    show(name .. ' none', f)
    show(name .. ' extra', f, D(1), 2)
end
""", tmp_path)


def test_round_and_rescale(tmp_path):
    assert_same_output(r"""
local values = {'0.1', '0.5', '0.05', '0.005', '0.999', '9.99', '99.99', '99.95', '2.675',
                '2.665', '-2.675', '12.675', '-0.001', '-0.000', '0.000', '-0.5', '0.0001234',
                '123.456', '9999999999999999999999999999999999999.9', '0.45', '0.55', '2.5',
                '-0.00', '-0', '0', '25', '125', '1E+2', '-0E+3', '0.0999', '999.9999',
                '99999999999999999999999999999999999999', '5.5E-37'}
for _, name in ipairs({'round', 'rescale'}) do
    local f = decimal[name]
    for _, v in ipairs(values) do
        for _, n in ipairs({0, 1, 2, 3, 5, -1, 36, 37, 38, 39}) do
            show(name .. ' ' .. v .. ' ' .. n, f, D(v), n)
        end
    end
    for _, n in ipairs({2.7, '2', 'x', D(2), 2^31, -2^31, 1/0, 0/0, '0x2', 2^40 + 2}) do
        show(name .. ' scale ' .. tostring(n), f, D('2.675'), n)
    end
    show(name .. ' nil scale', f, D('2.675'), nil)
    show(name .. ' no scale', f, D('2.675'))
    show(name .. ' number', f, 2.675, 2)
    show(name .. ' string', f, '2.675', 2)
    show(name .. ' int64', f, 5LL, 2)
    show(name .. ' table', f, {}, 2)
    show(name .. ' extra', f, D('1.55'), 1, 2)
end
""", tmp_path)


def test_comparisons(tmp_path):
    assert_same_output(r"""
local ffi = require('ffi')
local a = D('1.5')
local cmp = {
    ['=='] = function(x, y) return x == y end, ['~='] = function(x, y) return x ~= y end,
    ['<'] = function(x, y) return x < y end, ['<='] = function(x, y) return x <= y end,
    ['>'] = function(x, y) return x > y end, ['>='] = function(x, y) return x >= y end,
}
local others = {D('0.25'), D('1.50'), 1.5, 1, 2, '1.5', '2', 'x', 5LL, 1ULL,
                ffi.new('int', 5), box.NULL, {}, true, D('-0'), ' 1.5'}
for i, b in ipairs(others) do
    for _, op in ipairs({'==', '~=', '<', '<=', '>', '>='}) do
        show(i .. ' a ' .. op, cmp[op], a, b)
        show(i .. ' ' .. op .. ' a', cmp[op], b, a)
    end
end
show('nil == a', function() return nil == a end)
show('a == nil', function() return a == nil end)
show('a < nil', function() return a < nil end)
show('nil <= a', function() return nil <= a end)
show('-0 == 0', function() return D('-0') == D('0') end)
show('0.1 + 0.2 == 0.3', function() return D(0.1) + D(0.2) == D(0.3) end)
local t = {}
t[D(1)] = 1
t[D(1)] = 2
local n = 0
for _ in pairs(t) do n = n + 1 end
print('distinct keys', n, rawequal(a, a), rawequal(D(1), D(1)))
""", tmp_path)


def test_serializers(tmp_path):
    assert_same_output(r"""
local json, yaml = require('json'), require('yaml')
local function hex(s)
    return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end
for _, v in ipairs({'1.5', '-1.5', '-0', '0', '100', '0.001', '1E+2', '0e5', '-0e-5', '-0.00',
                    '12345678901234567890123456789012345678', '1e-38', '123', '-2E+3'}) do
    local d = D(v)
    print(v, json.encode(d), json.encode({d, {x = d}}), yaml.encode(d), yaml.encode({a = d}),
          hex(msgpack.encode(d)), hex(msgpack.encode({d})))
    local back = msgpack.decode(msgpack.encode(d))
    print(type(back), back, back == d, decimal.precision(back), decimal.scale(back))
end
print(hex(msgpack.encode(decimal.round(D('9999999999999999999999999999999999999.9'), 0))))
print(json.decode('1.5'), type(json.decode('1.5')))
""", tmp_path)


def test_msgpack_decode_of_decimal_extensions(tmp_path):
    assert_same_output(r"""
local function ext(data) return '\xc7' .. string.char(#data) .. '\x01' .. data end
for _, data in ipairs({'\x00\x1c', '\x00\xff', '\x00\x1a', '\x00\x1b', '\x00\x1e', '\x00\x1f',
                       '\x00\x01\x0c', '\x00\x00\x0c', '\x00\x00\x00\x1c', '\x05\x00\x00\x1c',
                       '\x26\x1c', '\x27\x1c', '\xff\x1c', '\xfe\x1c', '\xdb\x1c', '\xda\x1c',
                       '\xd0\xda\x1c', '\xd0\xdb\x1c', '\xd0\x80\x1c', '\xd1\x00\x05\x1c',
                       '\xcc\x05\x1c', '\xcc\x27\x1c', '\xcd\x00\x05\x1c',
                       '\xce\x00\x00\x00\x05\x1c', '\xd3\x00\x00\x00\x00\x00\x00\x00\x01\x1c',
                       '\xcf\x00\x00\x00\x00\x00\x00\x00\x01\x1c', '\xa1\x1c', '\xc0\x1c',
                       '\x00', '\x00\x12\x34', '\x00\xc1', '\x00\x1c\x1c', '\x00\xcd',
                       '\x00' .. string.rep('\x01\x23\x45\x67\x89', 4):sub(1, -2) .. '\x8c',
                       '\x00' .. string.rep('\x12\x34\x56\x78\x90', 4):sub(1, -2) .. '\x9c',
                       '\x26' .. string.rep('\x12\x34\x56\x78\x90', 4):sub(1, -2) .. '\x9c',
                       '\x00' .. string.rep('\x00', 22) .. '\x1c'}) do
    show('decode ' .. data:gsub('.', function(c) return string.format('%02x', c:byte()) end),
         msgpack.decode, ext(data))
end
show('fixext', msgpack.decode, '\xd5\x01\x00\x1c')
show('fixext trailing', msgpack.decode, '\xd5\x01\x00\x1c\x01')
show('unchecked', msgpack.decode_unchecked, '\xd5\x01\x01\x1c')
show('in array', function()
    local t = msgpack.decode('\x92\xd5\x01\x01\x1c\xd6\x01\xff\x00\x01\x5d')
    return t[1], t[2]
end)
""", tmp_path)


CONSOLE = """\
box.cfg{log_level = 1}
decimal = require('decimal')
d = decimal.new('1.5')
d
{d, decimal.new('-0.00'), decimal.new('1E+2'), decimal.new('0e3')}
s = box.schema.space.create('t', {format = {{'id', 'unsigned'}, {'n', 'number'}}})
_ = s:create_index('pk')
s:insert{1, d}
s:insert{2, decimal.new('100')}
s:insert{3, decimal.new('1E+2')}
t = s:get(1)
type(t[2]), t[2] == d, tostring(t[2]), decimal.is_decimal(t[2]), decimal.precision(s:get(3)[2])
s:select()
s2 = box.schema.space.create('t2', {format = {{'id', 'unsigned'}, {'d', 'decimal'}}})
_ = s2:create_index('pk')
s2:insert{1, d}
s2:insert{2, 1.5}
s2:insert{3, '1.5'}
_ = s2:create_index('dk', {parts = {2, 'decimal'}})
s2:insert{4, decimal.new('-7.25')}
s2.index.dk:select()
s2.index.dk:select(decimal.new('1.50'))
s3 = box.schema.space.create('t3', {format = {{'id', 'unsigned'}, {'d', 'scalar'}, {'a', 'any'}}})
_ = s3:create_index('pk')
_ = s3:create_index('sk', {parts = {2, 'scalar'}, unique = false})
s3:insert{1, decimal.new('2.5'), decimal.new('-3')}
s3:insert{2, 2, {decimal.new('0.1')}}
s3:insert{3, 3.5, {x = decimal.new('7')}}
s3.index.sk:select()
s3.index.sk:select(decimal.new('2.5'))
s3.index.sk:select(2.5)
s3:get(1)[3], s3:get(2)[3][1] + 1
\\set output lua
d
{d, decimal.new('-0.00')}
s3:select()
\\set output lua,block
{d}
\\set output yaml
t[2] + 1
decimal.new(1) / 0
t:update({{'+', 2, 1}})
s:update(1, {{'+', 2, decimal.new('0.25')}})
require('json').encode(s:select())
require('msgpack').encode(d):byte(1, -1)
box.tuple.new{d, {d}}
box.tuple.new{d}:totable()
"""


def test_decimals_in_tuples_and_the_console(tmp_path):
    theirs, ours = console_both(CONSOLE, tmp_path)
    assert ours == theirs


SERVER = """\
box.cfg{log_level = 2}
decimal = require('decimal')
box.schema.user.grant('guest', 'read,write,execute,create', 'universe')
local s = box.schema.space.create('d', {format = {{'id', 'unsigned'}, {'v', 'decimal'},
                                                  {'n', 'number'}}})
s:create_index('pk')
function echo(...) return ... end
function kinds(...)
    local out = {}
    for i = 1, select('#', ...) do
        local v = select(i, ...)
        out[i] = type(v) .. ':' .. tostring(v)
    end
    return out
end
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""


def iproto_scenario(port: int) -> list:
    import tarantool
    from tarantool.error import DatabaseError
    conn = tarantool.Connection("127.0.0.1", port)
    log = []

    def step(name, fn):
        try:
            log.append((name, "ok", repr(list(fn().data))))   # Decimal('1E+2') != '100'
        except DatabaseError as exc:
            log.append((name, "error", exc.code, exc.message))

    try:
        values = [decimal.Decimal("1.5"), decimal.Decimal("-0.00"), decimal.Decimal("1E+2"),
                  decimal.Decimal("12345678901234567890123456789012345678")]
        step("eval", lambda: conn.eval(
            "return decimal.new('1.25'), {decimal.new('-3')}, decimal.new('1E+2')"))
        step("eval arithmetic", lambda: conn.eval(
            "local a, b = ... return a + b, a / b, a < b", (values[0], decimal.Decimal("0.25"))))
        step("eval error", lambda: conn.eval("return decimal.new(1) / 0"))
        step("echo", lambda: conn.call("echo", values))
        step("kinds", lambda: conn.call("kinds", *values))
        step("insert", lambda: conn.insert("d", (1, values[0], decimal.Decimal("2.5"))))
        step("insert exponent", lambda: conn.insert("d", (2, values[2], 3)))
        step("insert lua", lambda: conn.eval(
            "return box.space.d:insert{3, decimal.new('-0.001'), decimal.new('7')}"))
        step("insert wrong", lambda: conn.insert("d", (4, 1.5, 1)))
        step("select", lambda: conn.select("d"))
        step("update", lambda: conn.update("d", 1, [("+", 2, decimal.Decimal("0.5"))]))
        step("lua sees", lambda: conn.eval(
            "local t = box.space.d:get(2) return decimal.is_decimal(t[2]), tostring(t[2]),"
            " decimal.precision(t[2])"))
    finally:
        conn.close()
    return log


def test_decimals_over_iproto_with_the_connector(tmp_path):
    logs = serve_both(SERVER, tmp_path, iproto_scenario)
    assert len(logs[0]) == 12
    assert logs[1] == logs[0]
