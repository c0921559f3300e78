"""Errors as clients read them (issue 23 item 7): a real Tarantool 2.6.0 `net.box`
client, the raw IPROTO replies and the Python `tarantool` connector, each run
against a Tarantool 2.6.0 server and against a Spindle server started from the same
script; what they see must be the same.

The server refuses access (insert, update, select, call, eval, an unknown
function), finds a duplicate key, and runs functions that raise a CustomError
(table and format forms), a chain of three errors (prev), a plain Lua error() and a
ClientError made in Lua, and messages and a custom type longer than 2.6.0 keeps.
A 2.6 net.box read Spindle's AccessDeniedError without its MP_ERROR fields as
malformed and dropped the connection, so after every error the client also checks
that the connection still works.
"""
from __future__ import annotations

import socket
import struct
import subprocess

import msgpack
import tarantool

from .oracle import serve_both, tarantool_binary

SERVER = r"""
box.cfg{log_level = 2}
local t = box.schema.space.create('t')
t:create_index('pk')
local hidden = box.schema.space.create('hidden')
hidden:create_index('pk')
local ro = box.schema.space.create('ro')
ro:create_index('pk')
box.schema.user.grant('guest', 'read', 'space', 'ro')
local wo = box.schema.space.create('wo')
wo:create_index('pk')
box.schema.user.grant('guest', 'write', 'space', 'wo')
box.schema.user.grant('guest', 'read,write', 'space', 't')
box.schema.user.create('u', {password = 'p'})
function custom_err()
    box.error(box.error.new{type = 'MyError', reason = 'boom', code = 55})
end
function custom_fmt()
    box.error('FmtError', 'bad %s %d', 'thing', 7)
end
function chained()
    local inner = box.error.new{type = 'Inner', reason = 'inner cause', code = 2}
    local mid = box.error.new(box.error.ILLEGAL_PARAMS, 'middle')
    mid:set_prev(inner)
    local outer = box.error.new{type = 'Outer', reason = 'outer'}
    outer:set_prev(mid)
    outer:raise()
end
function plain() error('plain lua error') end
function client_err() box.error(box.error.TUPLE_FOUND, 'i', 's') end
function timeout_err() box.error(box.error.TIMEOUT) end
function long_err() error(string.rep('d', 600)) end
function long_custom()
    box.error{type = string.rep('t', 100), reason = string.rep('\xc3\xa9', 300)}
end
function ok() return 1 end
for _, f in ipairs{'custom_err', 'custom_fmt', 'chained', 'plain', 'client_err',
                   'timeout_err', 'long_err', 'long_custom', 'ok'} do
    box.schema.func.create(f)
    box.schema.user.grant('guest', 'execute', 'function', f)
end
box.schema.func.create('secret')
function secret() return 'no' end
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""

CLIENT = r"""
io.stdout:setvbuf('no')
local net = require('net.box')
local json = require('json')
local c = net.connect('127.0.0.1:' .. arg[1], {wait_connected = 10})
assert(c:ping())
local function show(tag, e, depth)
    depth = depth or 0
    if type(e) ~= 'cdata' then
        print(tag, 'not a box.error:', type(e), tostring(e))
        return
    end
    local keys = {}
    for k, v in pairs(e:unpack()) do
        if k == 'trace' then
            v = v[1] and (tostring(v[1].file) .. ':' .. tostring(v[1].line)) or '{}'
        elseif k == 'prev' then
            v = 'yes'
        end
        table.insert(keys, k .. '=' .. tostring(v))
    end
    table.sort(keys)
    local pad = string.rep('  ', depth)
    print(tag, pad .. table.concat(keys, ' '))
    print(tag, pad .. table.concat({tostring(e.type), tostring(e.code),
        tostring(e.object_type), tostring(e.object_name), tostring(e.access_type),
        tostring(e.custom_type), tostring(e.errno), tostring(e.base_type),
        tostring(e:match('%w+'))}, ' '))
    if e.prev ~= nil then
        show(tag, e.prev, depth + 1)
    end
end
local function try(tag, f)
    local ok, res = pcall(f)
    if ok then
        print(tag, 'ok', json.encode(res))
    else
        show(tag, res)
    end
    print(tag, 'after', c:ping(), c.state, c:call('ok', {}, {timeout = 10}))
end
try('insert', function() return c.space.ro:insert{1} end)
try('select', function() return c.space.wo:select{} end)
try('call', function() return c:call('secret') end)
try('update', function() return c.space.ro:update(1, {{'=', 2, 3}}) end)
try('eval', function() return c:eval('return 1') end)
try('dup1', function() return c.space.t:insert{1} end)
try('dup2', function() return c.space.t:insert{1} end)
try('custom', function() return c:call('custom_err') end)
try('fmt', function() return c:call('custom_fmt') end)
try('chained', function() return c:call('chained') end)
try('plain', function() return c:call('plain') end)
try('client', function() return c:call('client_err') end)
try('timeout', function() return c:call('timeout_err') end)
try('nofunc', function() return c:call('no_such_function') end)
for _, f in ipairs{'long_err', 'long_custom'} do
    local _, e = pcall(c.call, c, f)
    print(f, #e.message, #e.type, e.message:sub(-3) == e.message:sub(-3))
end
print('t holds', json.encode(c.space.t:select{}))
local u = net.connect('127.0.0.1:' .. arg[1], {user = 'u', password = 'bad'})
print('auth', u.state, u.error)
c:close()
os.exit(0)
"""


def _netbox_client(tmp_path):
    def scenario(port: int) -> str:
        (tmp_path / "client.lua").write_text(CLIENT)
        done = subprocess.run([tarantool_binary(), "client.lua", str(port)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        return done.stdout + done.stderr
    return scenario


def test_a_2_6_net_box_client_sees_the_same_errors(tmp_path):
    real, ours = serve_both(SERVER, tmp_path, _netbox_client(tmp_path))
    assert "insert\tafter\ttrue\tactive\t1" in real, real
    assert ours.splitlines() == real.splitlines()


# (request type, body) of each refused request; spaces 514 'ro' and 515 'wo'
RAW_REQUESTS = [
    (2, {0x10: 514, 0x21: [1]}),                     # INSERT, no write
    (1, {0x10: 515, 0x11: 0, 0x12: 10, 0x20: []}),   # SELECT, no read
    (10, {0x22: "secret", 0x21: []}),                # CALL, no execute
    (8, {0x27: "return 1", 0x21: []}),               # EVAL, no universe execute
    (2, {0x10: 512, 0x21: [1]}),                     # INSERT ok, then
    (2, {0x10: 512, 0x21: [1]}),                     # a duplicate key
    (10, {0x22: "custom_err", 0x21: []}),
    (10, {0x22: "custom_fmt", 0x21: []}),
    (10, {0x22: "chained", 0x21: []}),
    (10, {0x22: "plain", 0x21: []}),
    (10, {0x22: "timeout_err", 0x21: []}),
    (10, {0x22: "long_err", 0x21: []}),              # messages cut at 511 bytes
    (10, {0x22: "long_custom", 0x21: []}),           # and a type at 63
]


def _raw_replies(port: int, requests: list = RAW_REQUESTS) -> list[bytes]:
    """Each reply as it came, the schema version (which differs) cut out."""
    replies = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        stream = sock.makefile("rb")
        stream.read(128)
        for sync, (request_type, body) in enumerate(requests, 1):
            packed = msgpack.packb({0: request_type, 1: sync}) + msgpack.packb(body)
            sock.sendall(b"\xce" + struct.pack(">I", len(packed)) + packed)
            size = struct.unpack(">I", stream.read(5)[1:])[0]
            reply = stream.read(size)
            unpacker = msgpack.Unpacker(strict_map_key=False)
            unpacker.feed(reply)
            header = unpacker.unpack()
            header.pop(5)
            replies.append(msgpack.packb(header) + reply[unpacker.tell():])
    return replies


def test_the_error_replies_are_the_same_bytes(tmp_path):
    real, ours = serve_both(SERVER, tmp_path, _raw_replies)
    assert b"object_type" in real[0]
    for request, theirs, mine in zip(RAW_REQUESTS, real, ours):
        assert mine == theirs, (request, msgpack.unpackb(theirs, strict_map_key=False),
                                msgpack.unpackb(mine, strict_map_key=False))


def _python_connector(port: int) -> list:
    """The error details the `tarantool` connector gives for the same refusals."""
    seen = []
    conn = tarantool.Connection("127.0.0.1", port, connect_now=True)
    try:
        for name, call in (("insert", lambda: conn.insert("ro", [1])),
                           ("call", lambda: conn.call("secret")),
                           ("custom", lambda: conn.call("custom_err")),
                           ("chained", lambda: conn.call("chained"))):
            try:
                call()
                seen.append((name, "ok"))
            except tarantool.DatabaseError as exc:
                stack = []
                err = exc.extra_info
                while err is not None:
                    stack.append((err.type, err.message, err.errcode, err.fields))
                    err = err.prev
                seen.append((name, exc.code, exc.message, stack))
            seen.append((name, conn.ping(notime=True)))
    finally:
        conn.close()
    return seen


def test_the_python_connector_sees_the_same_errors(tmp_path):
    real, ours = serve_both(SERVER, tmp_path, _python_connector)
    assert real[0][3][0][3] == {"object_type": "space", "object_name": "ro",
                                "access_type": "Write"}
    assert ours == real


REQUEST_PATH_SERVER = r"""
box.cfg{log_level = 2}
local t = box.schema.space.create('t', {format = {{'id', 'unsigned'},
                                                   {'v', 'string', is_nullable = true}}})
t:create_index('pk')
t:create_index('sk', {parts = {2, 'string'}, unique = false})
box.schema.user.grant('guest', 'read,write,execute', 'universe')
t:insert{1, 'a'}
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""

# Refusals of the request path, where 2.6.0 names a C file and line for each.
REQUEST_PATH_ERRORS = [
    (1, {0x10: 9999, 0x11: 0, 0x12: 10, 0x20: []}),           # no such space
    (1, {0x10: 512, 0x11: 7, 0x12: 10, 0x20: []}),            # no such index
    (1, {0x10: 512, 0x11: 0, 0x12: 10, 0x20: ["x"]}),         # key part type
    (1, {0x10: 512, 0x11: 0, 0x12: 10, 0x20: [1, 2]}),        # key part count
    (2, {0x10: 512, 0x21: ["x"]}),                            # field type
    (2, {0x10: 512, 0x21: []}),                               # field missing
    (5, {0x10: 512, 0x11: 0, 0x20: [1, 2]}),                  # exact match
    (5, {0x10: 512, 0x11: 1, 0x20: ["a"]}),                   # get() on a non-unique index
    (2, {0x10: 512, 0x21: [1, "b"]}),                         # duplicate key
    (4, {0x10: 512, 0x11: 0, 0x20: [1], 0x21: [["+", 2, 5]]}),  # no such field
    (4, {0x10: 512, 0x11: 0, 0x20: [1], 0x21: [["?", 2, 5]]}),  # unknown update op
    (10, {0x22: "nosuch", 0x21: []}),                         # no such procedure
    (8, {0x27: "return +", 0x21: []}),                        # eval: syntax error
    (8, {0x27: "error('x')", 0x21: []}),                      # eval: error()
    (8, {0x27: "box.error(box.error.ILLEGAL_PARAMS, 'y')", 0x21: []}),
]


def test_request_path_errors_are_the_same_bytes(tmp_path):
    real, ours = serve_both(REQUEST_PATH_SERVER, tmp_path,
                            lambda port: _raw_replies(port, REQUEST_PATH_ERRORS))
    for request, theirs, mine in zip(REQUEST_PATH_ERRORS, real, ours):
        assert mine == theirs, (request, msgpack.unpackb(theirs, strict_map_key=False),
                                msgpack.unpackb(mine, strict_map_key=False))
