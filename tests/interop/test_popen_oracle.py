"""The popen module against Tarantool 2.6.0: the same Lua on both, the same output.

Errors print as their type and message; tables with sorted keys, pids left out.
Then a fiber blocked reading a child's output while other fibers run.
"""
from __future__ import annotations

from . import module_oracle

PRELUDE = r"""
popen = require('popen')
fiber = require('fiber')
local function describe(v)
    local kind = type(v)
    if kind == 'string' then return string.format('%q', v) end
    if kind == 'table' then
        local ok, base = pcall(function() return v.base_type end)
        if ok and base ~= nil then return 'error ' .. v.type .. ': ' .. v.message end
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = k end
        table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
        local out = {}
        for _, k in ipairs(keys) do
            if k ~= 'pid' then out[#out + 1] = tostring(k) .. '=' .. describe(v[k]) end
        end
        return '{' .. table.concat(out, ', ') .. '}'
    end
    if kind == 'cdata' then
        local ok, base = pcall(function() return v.base_type end)
        if ok and base ~= nil then return 'error ' .. v.type .. ': ' .. v.message end
    end
    if kind == 'userdata' then return 'userdata ' .. tostring(getmetatable(v)) end
    return tostring(v)
end
"""


def assert_same_output(script: str, tmp_path, lines: int = 10) -> str:
    return "\n".join(module_oracle.assert_same_output(script, tmp_path, lines,
                                                      prelude=PRELUDE + module_oracle.SHOW))


def test_popen_as_tarantool(tmp_path):
    assert_same_output(r"""
print(describe(popen.opts), describe(popen.state), describe(popen.stream))
print(describe(popen.signal))
local ph = popen.shell('echo hello; echo err >&2', 'rR')
show('type', function() return type(ph), getmetatable(ph) end)
show('fields', function() return type(ph.pid), ph.command, ph.stdin, ph.stdout, ph.stderr, ph.foo end)
show('opts', function() return ph.opts end)
show('serialized', function()
    local t = require('yaml').decode(require('yaml').encode(ph))
    return type(t.pid), t.command, t.opts, t.stdout
end)
show('read stderr', ph.read, ph, {stderr = true})
show('read', ph.read, ph)
show('read at eof', ph.read, ph)
show('wait', ph.wait, ph)
show('status', function() return ph.status, ph.pid end)
show('info', ph.info, ph)
show('read both', ph.read, ph, {stdout = true, stderr = true})
show('read bad opts', ph.read, ph, 5)
show('read bad timeout', ph.read, ph, {timeout = 'x'})
show('signal bad', ph.signal, ph, 'x')
show('signal nil', ph.signal, ph)
show('signal gone', ph.signal, ph, 9)
show('kill gone', ph.kill, ph)
show('close', ph.close, ph)
show('close again', ph.close, ph)
show('closed read', ph.read, ph)
show('closed info', ph.info, ph)
show('closed wait', ph.wait, ph)
show('closed field', function() return ph.pid end)
show('method on other', ph.read, {})
show('method without self', ph.wait)
local cat = popen.new({'/bin/cat'}, {stdin = popen.opts.PIPE, stdout = popen.opts.PIPE})
show('cat info', cat.info, cat)
show('write', cat.write, cat, 'abc')
show('write number', cat.write, cat, 5)
show('write bad opts', cat.write, cat, 'x', 5)
show('shutdown none', cat.shutdown, cat)
show('shutdown empty', cat.shutdown, cat, {})
show('shutdown not a pipe', cat.shutdown, cat, {stderr = true})
show('shutdown bad', cat.shutdown, cat, 5)
show('shutdown', cat.shutdown, cat, {stdin = true})
show('stdin', function() return cat.stdin end)
show('read', cat.read, cat)
show('write after shutdown', cat.write, cat, 'x')
show('wait', cat.wait, cat)
cat:close()
local p = popen.new({'/bin/sh', '-c', 'echo out; echo err 1>&2; exit 3'},
                    {stdout = 'pipe', stderr = 'pipe'})
show('read stderr', p.read, p, {stderr = true})
show('read stdout', p.read, p)
show('wait', p.wait, p)
show('command', function() return p.command end)
p:close()
for _, case in ipairs({{'kill', 'kill'}, {'terminate', 'terminate'}}) do
    local s = popen.new({'/bin/sleep', '100'})
    show(case[1], s[case[2]], s)
    show('wait', s.wait, s)
    s:close()
end
local s = popen.new({'/bin/sleep', '100'})
show('signal', s.signal, s, popen.signal.SIGINT)
show('wait', s.wait, s)
s:close()
local g = popen.shell('sleep 100')
show('group signal', g.signal, g, popen.signal.SIGUSR1)
show('wait', g.wait, g)
g:close()
show('missing program', function() local m = popen.new({'/nonexistent'}) local r = m:wait() m:close() return r end)
show('no path search', function() local m = popen.new({'true'}) local r = m:wait() m:close() return r end)
show('new string', popen.new, 'ls')
show('new nothing', popen.new)
show('argv number', popen.new, {'/bin/echo', 5})
show('argv table', popen.new, {'/bin/echo', {}})
show('opts number', popen.new, {'/bin/echo'}, 5)
show('bad stdin', popen.new, {'/bin/echo'}, {stdin = 'foo'})
show('bad env', popen.new, {'/bin/echo'}, {env = 5})
show('unknown opt', function() local m = popen.new({'/bin/true'}, {foo = 1}) local r = m:wait() m:close() return r end)
show('shell bad mode', popen.shell, 'ls', 'x')
show('shell mode type', popen.shell, 'ls', 5)
show('shell nothing', popen.shell)
show('shell number', popen.shell, 5)
show('shell no mode', function() local m = popen.shell('exit 7') local r = m:wait() m:close() return r end)
show('shell opts', function() local m = popen.shell('true', 'w') local r = m.opts m:close() return r end)
local sl = popen.shell('sleep 5', 'r')
show('read timeout', sl.read, sl, {timeout = 0.05})
show('read no pipe', sl.read, sl, {stderr = true})
show('write no pipe', sl.write, sl, 'x')
sl:close()
show('env', function()
    local m = popen.new({'/bin/sh', '-c', 'echo $FOO-$HOME'}, {stdout = 'pipe', env = {FOO = 'bar'}})
    local r = m:read() m:close() return r
end)
show('shell option', function()
    local m = popen.new({'echo hi'}, {shell = true, stdout = 'pipe'})
    local r = m:read() m:close() return r
end)
show('devnull', function()
    local m = popen.new({'/bin/echo', 'hi'}, {stdout = popen.opts.DEVNULL})
    local r = m:wait() m:close() return r
end)
show('quoting', function()
    local m = popen.new({'/bin/echo', 'a b', "it's", 'plain', ''}, {stdout = 'devnull'})
    local r = m.command m:close() return r
end)
show('big write and read', function()
    local m = popen.new({'/bin/cat'}, {stdin = 'pipe', stdout = 'pipe'})
    local got = {}
    local reader = fiber.create(function()
        while true do
            local chunk = m:read()
            if chunk == nil or chunk == '' then break end
            got[#got + 1] = chunk
        end
    end)
    local ok = m:write(string.rep('x', 300000))
    m:shutdown({stdin = true})
    while reader:status() ~= 'dead' do fiber.sleep(0.01) end
    m:close()
    return ok, #table.concat(got)
end)
show('write timeout', function()
    local m = popen.new({'/bin/sleep', '5'}, {stdin = 'pipe'})
    local r = {m:write(string.rep('x', 1000000), {timeout = 0.05})}
    m:close()
    return unpack(r)
end)
show('keep_child', function()
    local m = popen.new({'/bin/true'}, {keep_child = true}) m:wait() return m:close()
end)
show('collected', function()
    for _ = 1, 20 do popen.new({'/bin/true'}) end
    collectgarbage() collectgarbage()
    return true
end)
""", tmp_path)


def test_a_fiber_reading_a_child_does_not_block_the_others(tmp_path):
    out = assert_same_output(r"""
local events = {}
local function event(e) events[#events + 1] = e end
local child = popen.new({'/bin/cat'}, {stdin = 'pipe', stdout = 'pipe'})
local reader = fiber.create(function()
    event('reader waits')
    event('reader got ' .. tostring(child:read()))
end)
local waiter = fiber.create(function()
    event('waiter waits')
    event('child ' .. child:wait().state)
end)
for i = 1, 5 do event('tick ' .. i) fiber.sleep(0.01) end
child:write('data')
event('written')
while reader:status() ~= 'dead' do fiber.sleep(0.01) end
child:shutdown({stdin = true})
event('stdin closed')
while waiter:status() ~= 'dead' do fiber.sleep(0.01) end
child:close()
local at = {}
for i, e in ipairs(events) do at[e] = i end
print('ticks while both wait', at['tick 5'] > at['reader waits'] and at['tick 5'] > at['waiter waits'])
print('read after write', at['reader got data'] > at['written'])
print('exit after stdin closed', at['child exited'] > at['stdin closed'])
print(1) print(2) print(3) print(4) print(5) print(6) print(7) print(8) print(9)
""", tmp_path)
    assert "read after write\ttrue" in out
