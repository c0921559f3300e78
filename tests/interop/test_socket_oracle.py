"""The socket module against Tarantool 2.6.0: the same Lua on both, the same output.

Cases print pcall's results (tables with sorted keys; ports, which differ, left out)
and, after calls that fail, the socket's errno and error text. Then a server under a
few hundred concurrent clients, and fibers blocked in socket calls while others run.
"""
from __future__ import annotations

from . import module_oracle

PRELUDE = r"""
socket = require('socket')
fiber = require('fiber')
errno = require('errno')
local function describe(v)
    if type(v) ~= 'table' then
        return type(v) == 'string' and string.format('%q', v) or tostring(v)
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local out = {}
    for _, k in ipairs(keys) do
        if k ~= 'port' then out[#out + 1] = tostring(k) .. '=' .. describe(v[k]) end
    end
    return '{' .. table.concat(out, ', ') .. '}'
end
"""


def assert_same_output(script: str, tmp_path, lines: int = 10) -> str:
    return "\n".join(module_oracle.assert_same_output(script, tmp_path, lines,
                                                      prelude=PRELUDE + module_oracle.SHOW))


def test_sockets_options_and_bad_input(tmp_path):
    assert_same_output(r"""
local names = {}
for k, v in pairs(socket) do names[#names + 1] = k .. ':' .. type(v) end
table.sort(names)
print(table.concat(names, ' '), type(getmetatable(socket).__call))
show('gai', socket.getaddrinfo, '127.0.0.1', 80, {type = 'SOCK_STREAM'})
show('gai service', socket.getaddrinfo, 'localhost', 'http', {type = 'SOCK_STREAM', family = 'AF_INET'})
show('gai unknown host', function() return socket.getaddrinfo('nosuchhost.invalid', 80), errno() end)
show('gai udp', socket.getaddrinfo, '127.0.0.1', nil, {type = 'SOCK_DGRAM'})
show('gai bad type', function() return socket.getaddrinfo('127.0.0.1', 80, {type = 'BAD'}), errno() end)
show('gai bad family', function() return socket.getaddrinfo('127.0.0.1', 80, {family = 'BAD'}), errno() end)
show('gai bad flags', function() return socket.getaddrinfo('127.0.0.1', 80, {flags = 'AI_FOO'}), errno() end)
show('gai flags', socket.getaddrinfo, '127.0.0.1', 80, {flags = {'AI_PASSIVE', 'AI_NUMERICHOST'}, protocol = 'tcp'})
show('gai loopback', socket.getaddrinfo)
local s = socket('AF_INET', 'SOCK_STREAM', 'tcp')
show('new', type(s), tostring(s):match('^fd %d+$') ~= nil)
show('bad domain', function() return socket('AF_FOO', 'SOCK_STREAM', 'tcp'), errno() end)
show('bad type', function() return socket('AF_INET', 'SOCK_FOO', 'tcp'), errno() end)
show('bad proto', function() return socket('AF_INET', 'SOCK_STREAM', 'foo'), errno() end)
show('bad proto type', function() return socket('AF_INET', 'SOCK_STREAM', {}), errno() end)
show('bind', s.bind, s, '127.0.0.1', 0)
show('listen', s.listen, s, 128)
show('name', s.name, s)
show('peer', function() return s:peer(), s:errno(), s:error() end)
show('nonblock', s.nonblock, s)
show('getsockopt', s.getsockopt, s, 'SOL_SOCKET', 'SO_REUSEADDR')
show('setsockopt', s.setsockopt, s, 'SOL_SOCKET', 'SO_REUSEADDR', true)
show('getsockopt', s.getsockopt, s, 'SOL_SOCKET', 'SO_REUSEADDR')
show('getsockopt type', s.getsockopt, s, 'SOL_SOCKET', 'SO_TYPE')
show('setsockopt unknown', s.setsockopt, s, 'SOL_SOCKET', 'SO_FOO', 1)
show('setsockopt read-only', s.setsockopt, s, 'SOL_SOCKET', 'SO_TYPE', 1)
show('setsockopt bad level', function() return s:setsockopt('SOL_FOO', 'SO_REUSEADDR', 1), s:errno() end)
show('getsockopt unknown', s.getsockopt, s, 'SOL_SOCKET', 'SO_FOO')
show('linger via setsockopt', s.setsockopt, s, 'SOL_SOCKET', 'SO_LINGER', 1)
show('linger via getsockopt', s.getsockopt, s, 'SOL_SOCKET', 'SO_LINGER')
show('linger', s.linger, s)
show('linger set', function() s:linger(true, 3) return s:linger() end)
show('accept none', function() return s:accept(), s:errno(), s:error() end)
show('readable now', function() return s:readable(0), s:errno() end)
show('writable now', s.writable, s, 0)
show('sysread unconnected', function() return s:sysread(5), s:errno() end)
show('syswrite number', s.syswrite, s, 5)
show('sysread negative', s.sysread, s, -1)
show('read usage', s.read, s, true)
show('read negative', s.read, s, -1)
show('send nil', s.send, s, nil)
show('recv string size', s.recv, s, 'x')
show('sysread string size', s.sysread, s, 'x')
show('listen string backlog', s.listen, s, 'x')
show('setsockopt string value', s.setsockopt, s, 'SOL_SOCKET', 'SO_REUSEADDR', 'x')
show('bind nil', function() local t = socket('AF_INET', 'SOCK_STREAM', 'tcp') return t:bind(nil, nil), t:errno() end)
show('connect nil', function() return socket.tcp_connect(nil), errno() end)
show('gai table port', function() return #socket.getaddrinfo(5, {}), errno() end)
show('write nil', s.write, s, nil)
show('read string chunk', s.read, s, {chunk = 'x'})
show('readable string timeout', s.readable, s, 'x')
show('shutdown unconnected', function() return s:shutdown('XX'), s:errno() end)
show('serialize', function() local t = require('json').decode(require('json').encode(s)) return type(t.fd), describe(t.name) end)
show('iowait', socket.iowait, s:fd(), 'R', 0.01)
show('iowait number', socket.iowait, s:fd(), 2, 0.1)
show('iowait usage', socket.iowait)
show('close', s.close, s)
show('closed tostring', tostring, s)
show('closed errno', s.errno, s)
show('close twice', s.close, s)
show('closed write', s.write, s, 'a')
show('non-socket', s.close, {})
show('no socket', s.close)
show('nodelay', function()
    local t = socket('AF_INET', 'SOCK_STREAM', 'tcp')
    return t:setsockopt('SOL_TCP', 'TCP_NODELAY', true), t:getsockopt('IPPROTO_TCP', 'TCP_NODELAY')
end)
show('nonblock switch', function()
    local t = socket('AF_INET', 'SOCK_STREAM', 'tcp')
    return t:nonblock(false), t:nonblock(), t:nonblock(true), t:nonblock()
end)
show('bind unresolved', function()
    local t = socket('AF_INET', 'SOCK_STREAM', 'tcp')
    return t:bind('localhost', 0), t:errno()
end)
show('bind used', function()
    local a = socket('AF_INET', 'SOCK_STREAM', 'tcp') a:bind('127.0.0.1', 0) a:listen()
    local b = socket('AF_INET', 'SOCK_STREAM', 'tcp')
    return b:bind('127.0.0.1', a:name().port), b:errno(), b:error()
end)
show('listen udp', function()
    local a = socket('AF_INET', 'SOCK_DGRAM', 'udp') return a:listen(), a:errno()
end)
show('connect refused', function() return socket.tcp_connect('127.0.0.1', 1), errno() end)
show('connect unknown host', function() return socket.tcp_connect('nosuchhost.invalid', 1), errno() end)
show('connect timeout 0', function() return socket.tcp_connect('127.0.0.1', 1, 0), errno() end)
show('sysconnect refused', function()
    local t = socket('AF_INET', 'SOCK_STREAM', 'tcp')
    return t:sysconnect('127.0.0.1', 1), t:errno()
end)
show('tcp_server no handler', socket.tcp_server, '127.0.0.1', 0)
show('tcp_server empty opts', socket.tcp_server, '127.0.0.1', 0, {})
show('tcp_server bad prepare', socket.tcp_server, '127.0.0.1', 0, {handler = print, prepare = 1})
show('tcp_server unknown host', function() return socket.tcp_server('nosuch.invalid', 0, print), errno() end)
""", tmp_path)


def test_streams_udp_and_unix(tmp_path):
    assert_same_output(r"""
-- a server answering each line upper-cased
local server = socket.tcp_server('127.0.0.1', 0, function(s, from)
    while true do
        local line = s:read('\n')
        if line == nil or line == '' then break end
        s:write(line:upper())
    end
end)
local port = server:name().port
show('server', type(server), tostring(server):match('^fd %d+, aka 127.0.0.1:%d+$') ~= nil)
local c = socket.tcp_connect('127.0.0.1', port)
show('tostring', tostring(c):match('^fd %d+, aka 127.0.0.1:%d+, peer 127.0.0.1:%d+$') ~= nil)
show('peer', c.peer, c)
show('write', c.write, c, 'hello\nworld\n')
show('read line', c.read, c, '\n')
show('read 3', c.read, c, 3)
show('read chunk or line', c.read, c, {chunk = 10, delimiter = '\n'})
show('read timeout', function() return c:read(5, 0.05), c:errno(), c:error() end)
c:write('a;b|c\n')
show('read delimiters', c.read, c, {delimiter = {'|', ';'}})
show('read delimiters 2', c.read, c, {delimiter = {'|', ';'}})
show('read line size', c.read, c, {line = '\n', size = 1})
show('read rest', c.read, c, '\n', 1)
show('read 0', c.read, c, 0)
show('readable', c.readable, c, 0.01)
show('wait', c.wait, c, 0.01)
show('writable', c.writable, c, 0.5)
c:write('x\n')
show('wait data', function() return c:wait(1) end)
show('read', c.read, c, '\n')
show('sysread none', function() return c:sysread(100), c:errno() end)
show('syswrite from a pointer', function()
    local ffi = require('ffi')
    local p = require('buffer').ibuf():reserve(16)
    ffi.copy(p, 'ptr\n', 4)
    local sent = c:syswrite(p, 4)
    c:readable(5)
    fiber.sleep(0.05)
    local n = c:sysread(p, 16)
    return sent, n, ffi.string(p, n)
end)
show('recv none', function() return c:recv(), c:errno() end)
c:write('yz\n')
show('readable', c.readable, c, 5)
fiber.sleep(0.01)
show('recv peek', c.recv, c, 10, 'MSG_PEEK')
show('recv bad flags', function() return c:recv(10, 'MSG_FOO'), c:errno() end)
show('recv 2', c.recv, c, 2)
show('recv', c.recv, c)
show('send', c.send, c, 'q\n')
show('send flags', c.send, c, 'r\n', {'MSG_NOSIGNAL'})
show('read', c.read, c, 4)
show('shutdown W', c.shutdown, c, 'W')
show('read at eof', c.read, c, 10)
show('read eof again', c.read, c, '\n')
show('close', c.close, c)
show('server close', server.close, server)
show('connect closed server', function() return socket.tcp_connect('127.0.0.1', port), errno() end)
-- a handler's prepare and options
local prepared
local s2 = socket.tcp_server('127.0.0.1', 0, {handler = function(s) s:write('hi') end,
    prepare = function(s) prepared = type(s) return 5 end, name = 'hello'})
show('prepared', function() return prepared end)
local c2 = socket.tcp_connect('127.0.0.1', s2:name().port)
show('greeting', c2.read, c2, 10, 1)
c2:close() s2:close()
-- unix sockets
os.remove('./sock')
local us = socket.tcp_server('unix/', './sock', function(s) s:write(s:read(5)) end)
show('unix name', us.name, us)
local uc = socket.tcp_connect('unix/', './sock')
show('unix connect', uc ~= nil)
uc:write('12345')
show('unix read', uc.read, uc, 5)
show('unix peer', uc.peer, uc)
uc:close()
show('unix server busy', function() return socket.tcp_server('unix/', './sock', print), errno() end)
us:close()
show('unix file gone', io.open('./sock') == nil)
show('unix connect missing', function() return socket.tcp_connect('unix/', './sock'), errno() end)
-- a stale unix socket file is replaced
local stale = socket('AF_UNIX', 'SOCK_STREAM', 0)
stale:bind('unix/', './sock2')
stale:close()
show('stale file', io.open('./sock2') ~= nil)
local us2 = socket.tcp_server('unix/', './sock2', print)
show('over stale', us2 ~= nil)
us2:close()
-- UDP
local u1 = socket('AF_INET', 'SOCK_DGRAM', 'udp')
local u2 = socket('AF_INET', 'SOCK_DGRAM', 'udp')
show('udp bind', u1.bind, u1, '127.0.0.1', 0)
local uport = u1:name().port
show('udp name', u1.name, u1)
show('sendto', u2.sendto, u2, '127.0.0.1', uport, 'datagram one')
show('sendto empty', u2.sendto, u2, '127.0.0.1', uport, '')
show('sendto two', u2.sendto, u2, '127.0.0.1', uport, 'two')
show('readable', u1.readable, u1, 1)
show('recvfrom', function()
    local d, from = u1:recvfrom()
    return d, from, from.port == u2:name().port
end)
show('recv', u1.recv, u1)
show('recv none', function() return u1:recv(), u1:errno() end)
show('recvfrom none', function() return u1:recvfrom(), u1:errno() end)
show('recvfrom size', function()
    u2:sendto('127.0.0.1', uport, 'abcdef') u1:readable(1) return u1:recvfrom(3)
end)
show('sendto unresolved', function() return u2:sendto('nosuch.invalid', uport, 'x'), u2:errno() end)
show('sendto bad flags', function() return u2:sendto('127.0.0.1', uport, 'x', 'MSG_FOO'), u2:errno() end)
show('udp connected', function()
    u2:sysconnect('127.0.0.1', uport)
    u2:send('connected')
    u1:readable(1)
    return u1:recv()
end)
u1:close() u2:close()
-- the documentation's UDP example: bind without a port (atoi of 'nil' is 0)
local d1 = socket('AF_INET', 'SOCK_DGRAM', 'udp')
show('bind no port', function() return d1:bind('127.0.0.1'), d1:errno(), d1:name().port ~= 0 end)
local d2 = socket('AF_INET', 'SOCK_DGRAM', 'udp')
show('bind named port', function() return d2:bind('127.0.0.1', 'http'), d2:name().port ~= 80 end)
show('docs sendto', d2.sendto, d2, '127.0.0.1', d1:name().port, 'X')
d1:readable(1)
show('docs recvfrom', function() local m, from = d1:recvfrom() return m, from end)
d1:close() d2:close()
""", tmp_path)


def test_a_server_under_hundreds_of_connections(tmp_path):
    out = assert_same_output(r"""
local N = 300
local served, open_now, most_open = 0, 0, 0
local server = socket.tcp_server('127.0.0.1', 0, function(s)
    open_now = open_now + 1
    most_open = math.max(most_open, open_now)
    local line = s:read('\n')
    served = served + 1
    s:write('echo ' .. line)
    s:read(1)            -- until the client closes
    open_now = open_now - 1
end)
local port = server:name().port
local replies, done = {}, fiber.channel(N)
for i = 1, N do
    fiber.create(function()
        local c = socket.tcp_connect('127.0.0.1', port)
        if c == nil then done:put('connect failed ' .. errno()) return end
        c:write(i .. '\n')
        local reply = c:read('\n', 30)
        replies[i] = reply == 'echo ' .. i .. '\n'
        done:put(c)
    end)
end
local clients = {}
for i = 1, N do clients[i] = done:get(30) end
local good = 0
for i = 1, N do if replies[i] then good = good + 1 end end
print('replies', good, 'served', served, 'all open at once', most_open == N)
for i = 1, N do if type(clients[i]) ~= 'string' then clients[i]:close() end end
while open_now > 0 do fiber.sleep(0.01) end
print('closed', open_now)
server:close()
print(1) print(2) print(3) print(4) print(5) print(6) print(7) print(8) print(9)
""", tmp_path)
    assert "replies\t300\tserved\t300\tall open at once\ttrue" in out


def test_a_fiber_blocked_in_a_socket_does_not_block_the_others(tmp_path):
    # The reader waits in read() for data only the main fiber sends after counting
    # its own steps; the events, in order, must be the same as on 2.6.0.
    out = assert_same_output(r"""
local events = {}
local function event(e) events[#events + 1] = e end
local a = socket('AF_UNIX', 'SOCK_STREAM', 0)
os.remove('./pair')
local server = socket.tcp_server('unix/', './pair', function(s)
    event('server reading')
    event('server got ' .. tostring(s:read('\n')))
    s:write('done\n')
end)
local c = socket.tcp_connect('unix/', './pair')
local reader = fiber.create(function()
    event('client waits')
    event('client got ' .. tostring(c:read('\n')))
end)
for i = 1, 5 do event('tick ' .. i) fiber.sleep(0.01) end
c:write('ping\n')
event('written')
while reader:status() ~= 'dead' do fiber.sleep(0.01) end
local at = {}
for i, e in ipairs(events) do at[e] = i end
print('ticks while both wait', at['tick 5'] > at['client waits'] and at['tick 5'] > at['server reading'])
print('server got data after write', at['server got ping\n'] > at['written'])
print('client got answer', at['client got done\n'] ~= nil)
print('waiting readable with a timeout', c:readable(0.05), c:errno())
server:close() c:close() a:close()
print(1) print(2) print(3) print(4) print(5) print(6) print(7) print(8)
""", tmp_path)
    assert "server got data after write\ttrue" in out


def test_luasocket_emulation(tmp_path):
    # socket.tcp(), socket.connect(), socket.bind(): 2.6.0's LuaSocket-style objects
    assert_same_output(r"""
show('tcp', function() local t = socket.tcp() return type(t), tostring(t):gsub('%d+', 'N') end)
local srv = socket.bind('127.0.0.1', 0, 5)
show('bind', function() return tostring(srv):gsub('%d+', 'N') end)
local host, port, family = srv:getsockname()
show('getsockname f', function() return host, type(port), family end)
show('peer of server', srv.getpeername, srv)
show('settimeout', srv.settimeout, srv, 0.05)
show('accept timeout', srv.accept, srv)
fiber.create(function()
    srv:settimeout(nil)
    local c = srv:accept()
    c:send('line one\nline two\nrest')
    c:close()
end)
local c = socket.connect('127.0.0.1', port)
show('connect', function() return tostring(c):gsub('%d+', 'N') end)
show('peername', function() local h, p, f = c:getpeername() return h, p == port, f end)
show('receive line', c.receive, c)
show('receive *l prefix', c.receive, c, '*l', 'P:')
show('receive 2', c.receive, c, 2)
show('receive *a', c.receive, c, '*a')
show('receive at end', c.receive, c, '*a')
show('receive line at end', c.receive, c)
show('receive n at end', c.receive, c, 5)
show('receive bad', c.receive, c, '*x')
show('setoption', c.setoption, c, 'tcp-nodelay', true)
show('setoption keepalive', c.setoption, c, 'keepalive', true)
show('setoption linger', c.setoption, c, 'linger', {on = true, timeout = 1})
show('setoption bad', c.setoption, c, 'foo', 1)
show('send', c.send, c, 'abcdef', 2, 4)
show('shutdown', c.shutdown, c, 'both')
show('close', c.close, c)
show('close again', c.close, c)
show('connect refused', socket.connect, '127.0.0.1', 1)
show('connect usage', socket.connect, '127.0.0.1')
show('bind usage', socket.bind, '127.0.0.1')
show('bind used', socket.bind, '127.0.0.1', port)
local m = socket.tcp()
show('master bind', m.bind, m, '127.0.0.1', 0)
show('master listen', m.listen, m, 4)
show('now server', function() return tostring(m):gsub('%d+', 'N') end)
local m2 = socket.tcp()
show('master connect', m2.connect, m2, '127.0.0.1', select(2, m:getsockname()))
show('master connect refused', function() local x = socket.tcp() return x:connect('127.0.0.1', 1) end)
show('master connect bad host', function() local x = socket.tcp() return x:connect('nosuch.invalid', 1) end)
show('master serialize', function() return require('json').encode({socket.tcp()}):gsub('%d+', 'N') end)
show('pairs', function() local n = {} for k in pairs(socket) do n[#n+1] = k end table.sort(n) return table.concat(n, ' ') end)
""", tmp_path)


def test_collected_objects_release_their_descriptors(tmp_path):
    # (Spindle only: 2.6.0 closes a collected fio handle later, in a worker fiber)
    from .oracle import SPINDLE, run_script
    out = run_script(SPINDLE, r"""
local socket, fio, popen = require('socket'), require('fio'), require('popen')
local function fds() return #fio.listdir('/proc/self/fd') end
local before = fds()
for _ = 1, 300 do socket('AF_INET', 'SOCK_STREAM', 'tcp') end
collectgarbage() collectgarbage()
socket('AF_INET', 'SOCK_STREAM', 'tcp'):close()
print('sockets', fds() - before)
before = fds()
for _ = 1, 30 do popen.new({'/bin/true'}, {stdout = 'pipe'}) end
collectgarbage() collectgarbage()
popen.new({'/bin/true'}):close()
print('popen', fds() - before)
before = fds()
for _ = 1, 300 do fio.open('probe.lua') end
collectgarbage() collectgarbage()
print('fio', fds() - before)
os.exit(0)
""", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["sockets", "0", "popen", "0", "fio", "0"]
