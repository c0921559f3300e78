"""net.box (issue 24 item 1): the same Lua client script run by Tarantool 2.6.0 and
by Spindle, against a Tarantool 2.6.0 server and against a Spindle server; the four
outputs must be the same.

The client connects (and fails to: a wrong password, an unknown user, a closed
port, a missing unix socket), calls, evals, selects and changes data through
conn.space, meets the errors of each (no such procedure, a Lua error, a duplicate
key, wrong arguments, bad options), uses is_async futures (result before and after
the response, wait_result with a timeout, discard, pairs over box.session.push
messages), on_push, per-request timeouts, many
fibers on one connection answered out of order, a schema reload after DDL, the
triggers and close(). Another test restarts the server under a connection with
reconnect_after; another runs net.box.self. Bad peers are a small Python server:
an invalid greeting, garbage or a broken connection in the middle of a reply, no
reply at all: the waiting fibers get an error and nothing hangs.
"""
from __future__ import annotations

import base64
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgpack

from .oracle import SPINDLE, both, tarantool_binary

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
from box_process import BoxProcess  # noqa: E402

SERVER = r"""
box.cfg{log_level = 2}
box.schema.user.create('u', {password = 'p'})
box.schema.user.grant('u', 'read,write,execute,create,drop,alter', 'universe')
local s = box.schema.space.create('test', {format = {{name = 'id', type = 'unsigned'},
    {name = 'name', type = 'string'}, {name = 'n', type = 'unsigned', is_nullable = true}}})
s:create_index('pk')
s:create_index('byname', {parts = {2, 'string'}, unique = false})
box.schema.space.create('nopk')
function echo(...) return ... end
function sum(a, b) return a + b end
function slow(t) require('fiber').sleep(t) return 'done' end
function fail() error('failed here') end
function big() return 2^60, -2^62, 1e15, 18446744073709551615ULL end
function nulls() return box.NULL, {1, box.NULL, 3}, {a = box.NULL} end
function multi() return 1, 'two', {3}, {k = 'v'} end
function pusher() box.session.push(1) box.session.push({2, 'x'}) return 'final' end
box.schema.func.create('echo')
box.cfg{listen = arg[1]:find('/') and arg[1] or '127.0.0.1:' .. arg[1]}
"""

PRELUDE = r"""
io.stdout:setvbuf('no')
local net = require('net.box')
local json = require('json')
local fiber = require('fiber')
local addr = arg[1]:find('/') and arg[1] or '127.0.0.1:' .. arg[1]
local function try(tag, f, ...)
    local r = {pcall(f, ...)}
    if r[1] then
        table.remove(r, 1)
        print(tag, 'ok', json.encode(r))
    elseif type(r[2]) == 'string' then
        print(tag, 'err', r[2])
    else
        print(tag, 'err', r[2].type, r[2].code, r[2].message)
    end
end
"""

CLIENT = PRELUDE + r"""
local bad = net.connect('u:wrong@' .. addr)
print('badpw', bad.state, bad.error, bad:is_connected())
try('badpw-call', bad.call, bad, 'echo', {1})
local nouser = net.connect(addr, {user = 'nobody', password = 'x'})
print('nouser', nouser.state, nouser.error)
local refused = net.connect('127.0.0.1:1')
print('refused', refused.state, refused.error)
local nosock = net.connect('unix/:/nonexistent/sock')
print('nosock', nosock.state, nosock.error, nosock.host, nosock.port)
try('nouri', net.connect, 'nonsense')
try('nouser-pw', net.connect, addr, {password = 'x'})
local c = net.connect('u:p@' .. addr)
print('state', c.state, c.error, c:is_connected(), c.protocol, c.peer_version_id,
      type(c.schema_version), #c.peer_uuid)
print('ping', c:ping(), c:ping({timeout = 1}))
try('echo', c.call, c, 'echo', {1, 'a', {2, 3}, {x = 1}})
try('echo0', c.call, c, 'echo')
try('sum', c.call, c, 'sum', {2, 3})
try('big', function()
    local a, b, d, e = c:call('big')
    return tostring(a), tostring(b), tostring(d), tostring(e), type(a), type(d)
end)
try('nulls', function()
    local a, b, d = c:call('nulls')
    return a == nil, type(a), b[2] == nil, d.a == nil
end)
try('multi', c.call, c, 'multi')
try('noproc', c.call, c, 'no_such_function')
try('fail', c.call, c, 'fail')
try('badargs', c.call, c, 'echo', 1, 2)
try('dotcall', c.call, 'echo')
try('eval', c.eval, c, 'return 1 + ...', {41})
try('eval2', c.eval, c, 'return ...', {1, 2, 3})
try('evalerr', c.eval, c, 'error("boom")')
try('evalsyntax', c.eval, c, 'return +')
try('evalbox', c.eval, c, 'box.error(box.error.TUPLE_FOUND, "a", "b")')
try('evalargs', c.eval, c, 'return 1', 5)
local s = c.space.test
print('space', s.id, s.name, s.engine, s.field_count, s.enabled, s.temporary, s.is_sync,
      c.space[s.id] == s)
print('index', s.index.pk.id, s.index.pk.name, s.index.pk.type, s.index.pk.unique,
      s.index.byname.unique, s.index[1].name, s.index.pk.parts[1].fieldno,
      s.index.pk.parts[1].type, s.index.pk.parts[1].is_nullable,
      s.index.byname.parts[1].type, s.index.pk.space == s)
print('format', #s:format(), s:format()[3].name, s:format()[3].is_nullable)
try('setformat', s.format, s, {})
try('insert', s.insert, s, {1, 'one'})
try('insert2', s.insert, s, {2, 'two', 22})
try('dup', s.insert, s, {1, 'uno'})
try('insertbad', s.insert, s, 5)
try('insertfmt', s.insert, s, {'x', 'y'})
try('replace', s.replace, s, {3, 'three'})
local t = s:get(2)
print('get', t, t.id, t.name, t.n, t[3], #t, t:totable()[2])
try('get', s.get, s, 1)
try('getmiss', s.get, s, 99)
try('select', s.select, s)
try('selectkey', s.select, s, 2)
try('selectit', s.select, s, {1}, {iterator = 'GT'})
try('selectit2', s.select, s, {}, {iterator = box.index.LE, limit = 2})
try('selectoff', s.select, s, nil, {offset = 1, limit = 1})
try('selectbadit', s.select, s, {}, {iterator = 'bogus'})
try('selectbadopts', s.select, s, {}, 5)
try('update', s.update, s, 1, {{'=', 3, 100}})
try('updatemiss', s.update, s, 42, {{'=', 3, 100}})
try('updatebad', s.update, s, 1, {{'=', 1, 'str'}})
try('upsert', s.upsert, s, {4, 'four'}, {{'+', 3, 1}})
try('upsert2', s.upsert, s, {4, 'four'}, {{'=', 3, 7}})
try('delete', s.delete, s, 3)
try('deletemiss', s.delete, s, 3)
try('idxsel', s.index.byname.select, s.index.byname, 'two')
try('idxget', s.index.byname.get, s.index.byname, 'four')
try('idxcount', s.index.byname.count, s.index.byname, 'one')
try('count', s.index.pk.count, s.index.pk)
try('count2', s.index.pk.count, s.index.pk, 2, {iterator = 'GE'})
try('min', s.index.pk.min, s.index.pk)
try('max', s.index.pk.max, s.index.pk)
try('minkey', s.index.pk.min, s.index.pk, 2)
try('idxdelete', s.index.pk.delete, s.index.pk, 4)
try('idxupdate', s.index.pk.update, s.index.pk, 2, {{'=', 2, 'TWO'}})
try('spacecount', function() return s:count() end)
try('nopk', c.space.nopk.select, c.space.nopk)
try('dotsel', s.select)
try('dotidx', s.index.pk.select)
try('nomatch', s.index.byname.get, s.index.byname, 'x')
s:insert{10, 'dup'}
s:insert{11, 'dup'}
try('getmulti', s.index.byname.get, s.index.byname, 'dup')
try('timeoutopt', s.select, s, {}, {timeout = 5, limit = 1})

-- futures
local f = c:call('slow', {0.2}, {is_async = true})
print('future', f:is_ready(), select('#', f:result()), (select(2, f:result())).message)
local r, e = f:wait_result(0.01)
print('wr short', r, e.type, e.code, e.message)
print('wr', json.encode(f:wait_result(5)), f:is_ready(), json.encode(f:result()))
local f2 = c:call('slow', {0.1}, {is_async = true})
f2:discard()
print('discard', f2:is_ready(), select(2, f2:result()).message,
      select(2, f2:wait_result(1)).message)
local f3 = s:select({}, {is_async = true, limit = 2})
print('fsel', json.encode(f3:wait_result()))
local f4 = c:call('fail', {}, {is_async = true})
local r4, e4 = f4:wait_result()
print('ferr', r4, e4.type, e4.code, e4.message)
try('badwait', f4.wait_result, f4, 'x')
local f5 = c:eval('return 1, 2', {}, {is_async = true})
print('feval', json.encode(f5:wait_result()))
local f6 = s.index.pk:get(1, {is_async = true})
print('fget', json.encode(f6:wait_result()))
local many = {}
for i = 1, 50 do many[i] = c:call('echo', {i}, {is_async = true}) end
local total = 0
for i = 1, 50 do total = total + many[i]:wait_result()[1] end
print('pipelined', total)
local pf = c:call('pusher', {}, {is_async = true})
for i, m in pf:pairs(5) do print('pairs', i, json.encode(m)) end
local pushed = {}
print('on_push', c:call('pusher', {}, {on_push = function(ctx, m) table.insert(ctx, m) end,
                                      on_push_ctx = pushed}), json.encode(pushed))
try('asyncpush', c.call, c, 'pusher', {}, {is_async = true, on_push = print})
try('badpairs', pf.pairs, pf, -1)

-- timeouts
try('timeout', c.call, c, 'slow', {0.5}, {timeout = 0.05})
print('after timeout', c:ping(), c.state)

-- many fibers on one connection, answered out of order
local ch = fiber.channel(10)
for i, d in ipairs({0.3, 0.1, 0.2}) do
    fiber.create(function() ch:put(i .. ':' .. c:call('slow', {d})) end)
end
local got = {}
for _ = 1, 3 do table.insert(got, ch:get(5)) end
print('fibers', table.concat(got, ' '))

-- schema reload after DDL
local reloads = 0
c:on_schema_reload(function() reloads = reloads + 1 end)
local v0 = c.schema_version
c:eval("box.schema.space.create('later'):create_index('pk')")
c:ping()
print('reload', c.space.later ~= nil, c.schema_version > v0, reloads >= 1)
c.space.later:insert{1}
print('later', json.encode(c.space.later:select{}))
local other = net.connect('u:p@' .. addr)
other:eval("box.space.later:drop()")
other:close()
c:ping()
print('dropped', c.space.later)

-- triggers, wait_connected, close
local events = {}
local c2 = net.connect('u:p@' .. addr, {wait_connected = false})
print('c2', c2.state)
try('early async', c2.call, c2, 'echo', {1}, {is_async = true})
local function on_connect(x) table.insert(events, 'connect:' .. x.state) end
c2:on_connect(on_connect)
c2:on_disconnect(function(x) table.insert(events, 'disconnect:' .. x.state) end)
print('triggers', #c2:on_connect(), #c2:on_disconnect(), #c2:on_schema_reload())
print('wc', c2:wait_connected(5), c2.state, c2:wait_state('active', 1),
      c2:wait_state({active = true, closed = true}, 0))
try('badtrigger', c2.on_connect, c2, 5)
c2:close()
print('events', table.concat(events, ' '), c2.state, c2.error, c2:is_connected())
try('closedcall', c2.call, c2, 'echo')
print('ping closed', c2:ping(), c2:wait_connected(0.1), c2:wait_state('closed'))
c:close()
print('done')
os.exit(0)
"""


def _run_client(binary: str, script: str, port, cwd: Path, name: str = "client.lua",
                timeout: float = 120) -> str:
    (cwd / name).write_text(script)
    done = subprocess.run(["timeout", "-s", "KILL", str(timeout), binary, name, str(port)],
                          cwd=cwd, capture_output=True, text=True)
    return done.stdout + "rc=%d\n" % done.returncode


def _matrix(tmp_path: Path, script: str, server_script: str = SERVER) -> dict:
    """The client `script` run by 2.6.0 and by Spindle, each against a fresh
    2.6.0 server and a fresh Spindle server: {(server, client): output}."""
    outputs = {}
    for server in ("tarantool", "spindle"):
        for client in ("tarantool", "spindle"):
            where = tmp_path / f"{server}-{client}"
            node = BoxProcess(tarantool_binary() if server == "tarantool" else SPINDLE,
                              server_script, where / "server")
            try:
                node.wait_ready()
                outputs[server, client] = _run_client(
                    tarantool_binary() if client == "tarantool" else SPINDLE, script,
                    node.port, where)
            finally:
                node.stop()
    return outputs


def test_netbox_client_matches_tarantool(tmp_path):
    outputs = _matrix(tmp_path, CLIENT)
    reference = outputs["tarantool", "tarantool"]
    assert "\ndone\nrc=0\n" in reference, reference
    assert "state\tactive\tnil\ttrue\tBinary" in reference
    for key, output in outputs.items():
        assert output.splitlines() == reference.splitlines(), key


CLIENT_MORE = PRELUDE + r"""
local c16 = net.connect('u:p@' .. addr, {call_16 = true})
try('call16', c16.call, c16, 'multi')
try('call16b', c16.call, c16, 'sum', 1, 2)
try('eval16', c16.eval, c16, 'return 1, 2')
local c = net.connect('127.0.0.1', tonumber(arg[1]), {user = 'u', password = 'p'})
print('hostport', c.state, c.host, c.port == tonumber(arg[1]), type(c.port))
c:eval([[local s = box.schema.space.create('ci', {format = {{'k', 'string'}}})
s:create_index('pk', {parts = {{1, 'string', collation = 'unicode_ci'}}})
s:create_index('sk', {parts = {{1, 'string', is_nullable = true}}, unique = false})
s:insert{'Abc'}
for i = 1, 3000 do box.space.test:replace{i, string.rep('x', 50)} end]])
c:ping()
local ci = c.space.ci
print('coll', ci.index.pk.parts[1].collation, ci.index.pk.parts[1].collation_id,
      ci.index.sk.parts[1].is_nullable, json.encode(ci:get('aBC')))
local rows = c.space.test:select({}, {limit = 5000})
print('big', #rows, rows[3000][1])
local tc = net.timeout(0.5).connect(addr, {user = 'u', password = 'p'})
print('ntimeout', tc.state)
print('ctimeout', c:timeout(0.05):call('slow', {0}) == 'done')
try('ctimeout2', function() return c:timeout(0.05):call('slow', {0.3}) end)
local conns = {}
for i = 1, 20 do conns[i] = net.connect('u:p@' .. addr, {wait_connected = false}) end
local ok = 0
for i = 1, 20 do
    if conns[i]:wait_connected(10) and conns[i]:call('sum', {i, 1}) == i + 1 then
        ok = ok + 1
    end
end
print('conns', ok)
for i = 1, 20 do conns[i]:close() end
-- ddl while requests are in flight
local futures = {}
for i = 1, 20 do futures[i] = c:call('slow', {0.05}, {is_async = true}) end
c:eval("box.schema.space.create('mid')")
local n = 0
for i = 1, 20 do if futures[i]:wait_result(5) == nil then n = n + 1 end end
c:ping()
print('mid', n, c.space.mid ~= nil, c.space.mid.index[0])
local w = net.connect('127.0.0.1:1', {wait_connected = 0.1})
print('wc num', w.state)
print(pcall(c.close))
print(c:close(), c:close(), c.state)
try('closed again', c.ping, c)
local tc1 = net.connect('u:p@' .. addr, {wait_connected = false})
tc1:on_connect(function() error('trigger failed', 0) end)
tc1:on_disconnect(function() print('on_disconnect ran') end)
print('failing trigger', tc1:wait_connected(5), tc1.state, tc1.error)
local tc2 = net.connect('u:p@' .. addr, {wait_connected = false})
tc2:on_schema_reload(function() error('reload failed', 0) end)
print('failing reload', tc2:wait_connected(5), tc2.state, tc2.error)
local sc1 = net.connect('u:p@' .. addr, {wait_connected = false})
sc1:on_schema_reload(function(x) x:close() end)
print('closed by on_schema_reload', sc1:wait_connected(5), sc1.state, sc1.error)
local sc2 = net.connect('u:p@' .. addr, {wait_connected = false})
sc2:on_connect(function(x) x:close() end)
print('closed by on_connect', sc2:wait_connected(5), sc2.state, sc2.error, sc2:ping())
local function workers()
    local n = 0
    for _, f in pairs(fiber.info()) do
        if f.name:find('net.box') then n = n + 1 end
    end
    return n
end
local base = workers()
for i = 1, 5 do local x = net.connect('u:p@' .. addr) assert(x:ping()) end
collectgarbage() collectgarbage()
fiber.sleep(0.1)
print('collected', workers() - base)
local gf
do
    local x = net.connect('u:p@' .. addr)
    gf = x:call('slow', {1}, {is_async = true})
end
collectgarbage() collectgarbage()
fiber.sleep(0.1)
print('future of a collected one', workers() - base, gf:wait_result(2))
os.exit(0)
"""


def test_netbox_options_and_many_connections(tmp_path):
    """call_16, host and port apart, collations and nullable parts of the schema, a
    big select, net.box.timeout() and conn:timeout(), twenty connections, DDL with
    requests in flight, wait_connected as a number, close() twice, triggers that
    fail or close their connection, connections collected unclosed."""
    outputs = _matrix(tmp_path, CLIENT_MORE)
    reference = outputs["tarantool", "tarantool"]
    assert "closed again\tok\t[false]" in reference, reference
    for key, output in outputs.items():
        assert output.splitlines() == reference.splitlines(), key


UNIX_CLIENT = PRELUDE + r"""
local c = net.connect('u:p@unix/:' .. arg[1])
print('unix', c.state, c.host, c.port == arg[1], c:call('sum', {1, 2}))
local d = net.connect(arg[1], {user = 'u', password = 'p'})
print('path', d.state, d.host, json.encode(d.space.test:select{}))
local e = net.connect('unix/', arg[1], {user = 'u', password = 'p'})
print('host+port', e.state, e:eval('return 7'))
os.exit(0)
"""


def test_unix_socket(tmp_path):
    for server in (tarantool_binary(), SPINDLE):
        path = str(tmp_path / ("s%d.sock" % len(server)))
        node = BoxProcess(server, SERVER, tmp_path / f"srv{len(server)}", unix_path=path)
        try:
            node.wait_ready()
            real = _run_client(tarantool_binary(), UNIX_CLIENT, path, tmp_path)
            ours = _run_client(SPINDLE, UNIX_CLIENT, path, tmp_path)
        finally:
            node.stop()
        assert "unix\tactive\tunix/\ttrue\t3" in real, real
        assert ours == real


RECONNECT_CLIENT = PRELUDE + r"""
local counts = {connect = 0, disconnect = 0}
local c = net.connect(addr, {reconnect_after = 0.1, user = 'u', password = 'p'})
c:on_connect(function() counts.connect = counts.connect + 1 end)
c:on_disconnect(function() counts.disconnect = counts.disconnect + 1 end)
print('first', c.state, c:call('sum', {1, 2}))
local inflight = c:call('slow', {30}, {is_async = true})
print('ready')
io.stdin:read('*l')                  -- the server is being restarted
local _, err = inflight:wait_result(20)
print('inflight', err.type, err.code)
print('lost', c:wait_state('error_reconnect', 20), c.state, c:is_connected())
local down_ok, down_err = pcall(c.call, c, 'sum', {1, 2}, {timeout = 0.2})
-- (the message is the last attempt's: "Peer closed" until a reconnect was tried)
print('while down', down_ok, down_err.type, down_err.code)
print('back', c:wait_connected(30), c.state, c.error)
print('after', c:call('sum', {2, 3}), json.encode(c.space.test:select{}),
      counts.connect, counts.disconnect)
c:close()
os.exit(0)
"""


def _restart_scenario(server: str, client: str, tmp_path: Path) -> list[str]:
    """The client connects to `server` over a unix socket, the server is stopped
    and started again on the same path: what the client printed."""
    path = str(tmp_path / "r.sock")
    workdir = tmp_path / "data"
    node = BoxProcess(server, SERVER, workdir, unix_path=path).wait_ready()
    (tmp_path / "client.lua").write_text(RECONNECT_CLIENT)
    proc = subprocess.Popen(["timeout", "-s", "KILL", "120", client, "client.lua", path],
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    lines = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        while True:
            line = proc.stdout.readline()
            assert line, lines
            lines.append(line.rstrip("\n"))
            if line == "ready\n":
                break
        node.stop()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        # the data directory stays: the restarted server recovers it (the space
        # exists again, its rows are there)
        time.sleep(0.5)
        node = BoxProcess(server, "function sum(a, b) return a + b end\n"
                          "box.cfg{listen = arg[1], log_level = 2}\n",
                          workdir, name="again.lua", unix_path=path).wait_ready()
        out, _ = proc.communicate(timeout=90)
        lines += out.splitlines()
    finally:
        if proc.poll() is None:
            proc.kill()
        node.stop()
    return lines


def test_reconnect_after_the_server_restarts(tmp_path):
    runs = {}
    for server in ("tarantool", "spindle"):
        for client in ("tarantool", "spindle"):
            where = tmp_path / f"{server}-{client}"
            where.mkdir()
            runs[server, client] = _restart_scenario(
                tarantool_binary() if server == "tarantool" else SPINDLE,
                tarantool_binary() if client == "tarantool" else SPINDLE, where)
    reference = runs["tarantool", "tarantool"]
    assert reference[-1] == "after\t5\t[]\t1\t1", reference
    for server in ("tarantool", "spindle"):
        assert runs[server, "spindle"] == runs[server, "tarantool"], server
    assert runs["spindle", "tarantool"] == reference


SELF = r"""
box.cfg{log_level = 2}
local net = require('net.box')
local json = require('json')
local s = box.schema.space.create('t')
s:create_index('pk')
function add(a, b) return a + b end
function boom() error('boom') end
function boxerr() box.error(box.error.ILLEGAL_PARAMS, 'bad') end
obj = {x = 10}
function obj.get(self) return self.x end
local me = net.self
print(me:ping(), me:is_connected(), me:wait_connected(), me:timeout(1) == me)
print(me:call('add', {1, 2}), me:call('obj:get'))
print(me:eval('return 1 + ...', {2}), me:eval('1 + 1'))
me.space.t:insert{1, 'a'}
print(json.encode(me.space.t:select{}), me.space.t == box.space.t)
for _, f in ipairs({function() return me:call('nope') end,
                    function() return me:call('boom') end,
                    function() return me:call('boxerr') end,
                    function() return me:eval('return +') end,
                    function() return me:call('add', 1) end,
                    function() return me.call('add') end}) do
    local ok, e = pcall(f)
    if type(e) == 'string' then print(ok, e) else print(ok, e.type, e.code, e.message) end
end
print(me:call('add', {1, 2}) == 3, select('#', me:eval('return nil, nil')))
os.exit(0)
"""


def test_net_box_self(tmp_path):
    real, ours = both(SELF, tmp_path)
    assert real.returncode == 0, real.stderr
    assert "true\ttrue\ttrue\ttrue" in real.stdout
    assert ours.stdout == real.stdout, ours.stderr


# --------------------------------------------------------------- bad peers

def _greeting() -> bytes:
    line1 = b"Tarantool 2.6.0 (Binary) 11111111-2222-3333-4444-555555555555"
    return line1.ljust(63) + b"\n" + base64.b64encode(os.urandom(32)).ljust(63) + b"\n"


def _reply(sync: int, body: dict) -> bytes:
    packet = msgpack.packb({0: 0, 1: sync, 5: 1}) + msgpack.packb(body)
    return b"\xce" + struct.pack(">I", len(packet)) + packet


def _usual_reply(sync: int, body: dict, rtype: int = 0) -> bytes:
    """A reply with the fixed-width header every 2.6.0 reply has (the one the
    client's Lua side reads itself; _reply's compact one goes the strict way)."""
    packet = struct.pack(">BBBIBBQBBI", 0x83, 0, 0xCE, rtype, 1, 0xCF, sync, 5, 0xCE, 1) \
        + msgpack.packb(body)
    return b"\xce" + struct.pack(">I", len(packet)) + packet


class FakeServer:
    """A peer that greets, answers the schema selects and PING, and treats each
    CALL as `mode` says."""

    def __init__(self, mode: str):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.mode == "bad greeting":
                conn.sendall(b"hello" * 40)
                time.sleep(5)
                return
            if self.mode == "no greeting":
                time.sleep(5)
                return
            if self.mode == "short greeting":
                conn.sendall(b"Tarantool 2.6.0")
                conn.close()
                return
            conn.sendall(_greeting())
            buf = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                while len(buf) >= 5 and len(buf) >= 5 + struct.unpack(">I", buf[1:5])[0]:
                    size = struct.unpack(">I", buf[1:5])[0]
                    packet, buf = buf[5:5 + size], buf[5 + size:]
                    unpacker = msgpack.Unpacker(strict_map_key=False)
                    unpacker.feed(packet)
                    header = unpacker.unpack()
                    if not self._answer(conn, header[0], header.get(1, 0)):
                        return
        except OSError:
            return

    def _answer(self, conn: socket.socket, request_type: int, sync: int) -> bool:
        if request_type == 1:                       # the schema
            conn.sendall(_reply(sync, {0x30: []}))
        elif request_type == 64:
            conn.sendall(_reply(sync, {}))
        elif request_type == 10:
            if self.mode == "garbage":              # an invalid header
                conn.sendall(b"\xce\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1")
            elif self.mode == "bad length":         # not a length prefix at all
                conn.sendall(b"\x91\x01garbage-garbage")
            elif self.mode == "dies mid-reply":
                whole = _reply(sync, {0x30: [1, 2, 3]})
                conn.sendall(whole[:len(whole) // 2])
                time.sleep(0.2)
                conn.close()
                return False
            elif self.mode == "wrong sync first":
                conn.sendall(_reply(sync + 1000, {0x30: [1]}) + _reply(sync, {0x30: ["ok"]}))
            elif self.mode == "usual, in pieces":   # a reply cut across reads
                whole = _usual_reply(sync, {0x30: ["pieces"]})
                for part in (whole[:3], whole[3:20], whole[20:]):
                    conn.sendall(part)
                    time.sleep(0.01)    # (separate segments, most of the time)
            elif self.mode == "usual, mixed":
                # a push, a reply to nobody, the reply: one write of usual headers
                conn.sendall(_usual_reply(sync, {0x30: ["pushed"]}, rtype=0x80)
                             + _usual_reply(sync + 1000, {0x30: [0]})
                             + _usual_reply(sync, {0x30: ["mixed"]}))
            elif self.mode == "usual, short length":    # a length prefix other than ce
                packet = _usual_reply(sync, {0x30: ["short"]})[5:]
                conn.sendall(msgpack.packb(len(packet)) + packet)
            elif self.mode == "usual, error":
                conn.sendall(_usual_reply(sync, {0x31: "it failed"}, rtype=0x8000 | 32))
            # "silent": no answer
        return True


BAD_PEER_CLIENT = r"""
io.stdout:setvbuf('no')
local net = require('net.box')
local fiber = require('fiber')
local c = net.connect('127.0.0.1:' .. arg[1], {connect_timeout = 2})
print('state', c.state, c.error)
if c.state == 'active' then
    local done = fiber.channel(2)
    for i = 1, 2 do
        fiber.create(function()
            local ok, e = pcall(c.call, c, 'f', {}, {timeout = 2})
            if ok then done:put('ok ' .. tostring(e))
            else done:put(tostring(e.type) .. ' ' .. tostring(e.code) .. ' ' .. e.message) end
        end)
    end
    local got = {done:get(10), done:get(10)}
    table.sort(got)
    print(got[1]) print(got[2])
    print('after', c.state, c:ping())
end
os.exit(0)
"""

# garbage: 2.6.0's own Lua fails on it, with its messages (net_box.lua's); Spindle
# says what it could not read. Both: code 0, the connection in state `error`.
_GARBAGE_MESSAGE = ("builtin/box/net_box.lua", "Invalid MsgPack")
# a peer gone mid-reply: "Peer closed", or the reset that a close with unread data makes
_GONE = ("ClientError 77 Peer closed", "ClientError 77 Connection reset by peer")


def _normalized(output: str) -> list[str]:
    lines = []
    for line in output.splitlines():
        if line.startswith("ClientError 0 ") and any(m in line for m in _GARBAGE_MESSAGE):
            line = "ClientError 0 <garbage>"
        if line in _GONE:
            line = "ClientError 77 <gone>"
        lines.append(line)
    return lines


def test_bad_peers_fail_the_waiting_fibers(tmp_path):
    for mode in ("bad greeting", "short greeting", "no greeting", "garbage", "bad length",
                 "dies mid-reply", "silent", "wrong sync first", "usual, in pieces",
                 "usual, mixed", "usual, short length", "usual, error"):
        server = FakeServer(mode)
        try:
            real = _run_client(tarantool_binary(), BAD_PEER_CLIENT, server.port, tmp_path,
                               timeout=30)
            ours = _run_client(SPINDLE, BAD_PEER_CLIENT, server.port, tmp_path, timeout=30)
        finally:
            server.close()
        assert real.endswith("rc=0\n") and ours.endswith("rc=0\n"), (mode, real, ours)
        assert _normalized(ours) == _normalized(real), (mode, real, ours)


# ----------------------------------------------- the errors of test_netbox_errors_oracle

def test_spindle_client_sees_the_errors_2_6_0_sees(tmp_path):
    """test_netbox_errors_oracle.py's client (refusals, custom and chained errors
    with their MP_ERROR fields, traces, long messages, an auth failure) run by
    Spindle's net.box too. (A box.error is cdata in 2.6.0 and a table in Spindle:
    the client's check for it takes both.)"""
    from .test_netbox_errors_oracle import CLIENT as ERRORS_CLIENT
    from .test_netbox_errors_oracle import SERVER as ERRORS_SERVER
    client = ERRORS_CLIENT.replace("if type(e) ~= 'cdata' then",
                                   "if type(e) ~= 'cdata' and type(e) ~= 'table' then")
    assert client != ERRORS_CLIENT
    outputs = _matrix(tmp_path, client, ERRORS_SERVER)
    reference = outputs["tarantool", "tarantool"]
    assert "chained" in reference and "rc=0" in reference, reference
    for key, output in outputs.items():
        assert output.splitlines() == reference.splitlines(), key
