"""net.box's `buffer` and `skip_header` options (issue 24): the raw response body goes
into a buffer.ibuf (without its {IPROTO_DATA = ...} header with skip_header), the
request returns the byte count, and msgpack.decode / ibuf_decode read it back, as in
Tarantool 2.6.0's documentation. The same client script run by 2.6.0 and by Spindle,
against a 2.6.0 server and a Spindle server (the servers' bodies are compared byte
for byte): calls, evals, selects, changes, pushes (on_push and future:pairs), is_async
futures, the requests that refuse a buffer, a buffer that is not one (which ends the
connection, as it fails 2.6.0's worker)."""
from __future__ import annotations

from .test_netbox_oracle import PRELUDE, _matrix

CLIENT = PRELUDE + r"""
local msgpack = require('msgpack')
local buffer = require('buffer')
local ffi = require('ffi')
local c = net.connect('u:p@' .. addr)
local ibuf = buffer.ibuf()
local function hex(ib)
    local s = ffi.string(ib.rpos, ib:size())
    return (s:gsub('.', function(ch) return string.format('%02x', ch:byte()) end))
end
local function drain(tag, ib)
    print(tag, ib:size(), hex(ib))
    ib:recycle()
end
-- the documented pattern: call with a buffer, then decode the response body
try('call buffer', c.call, c, 'echo', {1, 'a', {x = 2}}, {buffer = ibuf})
print('body', ibuf:size(), hex(ibuf))
local len, p = msgpack.decode_map_header(ibuf.rpos, ibuf:size())
local key
key, p = msgpack.decode(p, ibuf.wpos - p)
local data
data, p = msgpack.decode(p, ibuf.wpos - p)
print('decoded', len, key, json.encode(data), p == ibuf.wpos)
ibuf:recycle()
try('call skip_header', c.call, c, 'echo', {1, 'a'}, {buffer = ibuf, skip_header = true})
local rpos, result = msgpack.ibuf_decode(ibuf.rpos)
print('ibuf_decode', json.encode(result), rpos == ibuf.wpos)
ibuf:recycle()
try('call appends', c.call, c, 'echo', {1}, {buffer = ibuf})
try('call appends 2', c.call, c, 'multi', {}, {buffer = ibuf, skip_header = true})
drain('appended', ibuf)
try('eval buffer', c.eval, c, 'return 1, 2', {}, {buffer = ibuf})
drain('eval', ibuf)
try('eval skip', c.eval, c, 'return ...', {'x'}, {buffer = ibuf, skip_header = true})
drain('eval skip', ibuf)
try('eval nothing', c.eval, c, 'return', {}, {buffer = ibuf, skip_header = true})
drain('eval nothing', ibuf)
c.space.test:replace({1, 'one'})
c.space.test:replace({2, 'two', 5})
try('select buffer', c.space.test.select, c.space.test, {}, {buffer = ibuf})
drain('select', ibuf)
try('select skip', c.space.test.select, c.space.test, {1}, {buffer = ibuf, skip_header = true})
drain('select skip', ibuf)
try('index select', c.space.test.index.byname.select, c.space.test.index.byname, 'two', {buffer = ibuf, skip_header = true})
drain('index select', ibuf)
try('select empty', c.space.test.select, c.space.test, {9}, {buffer = ibuf})
drain('select empty', ibuf)
try('insert', c.space.test.insert, c.space.test, {3, 'three'}, {buffer = ibuf})
drain('insert', ibuf)
try('replace', c.space.test.replace, c.space.test, {3, 'drei'}, {buffer = ibuf, skip_header = true})
drain('replace', ibuf)
try('update', c.space.test.update, c.space.test, 3, {{'=', 3, 7}}, {buffer = ibuf})
drain('update', ibuf)
try('upsert', c.space.test.upsert, c.space.test, {4, 'four'}, {{'=', 3, 1}}, {buffer = ibuf})
drain('upsert', ibuf)
try('delete', c.space.test.delete, c.space.test, 3, {buffer = ibuf})
drain('delete', ibuf)
try('delete none', c.space.test.delete, c.space.test, 99, {buffer = ibuf, skip_header = true})
drain('delete none', ibuf)
try('get', c.space.test.get, c.space.test, 1, {buffer = ibuf})
try('index get', c.space.test.index.pk.get, c.space.test.index.pk, 1, {buffer = ibuf})
try('min', c.space.test.index.pk.min, c.space.test.index.pk, 1, {buffer = ibuf})
try('max', c.space.test.index.pk.max, c.space.test.index.pk, 1, {buffer = ibuf})
try('count', c.space.test.index.pk.count, c.space.test.index.pk, 1, {buffer = ibuf})
try('ping', c.ping, c, {buffer = ibuf})
drain('ping', ibuf)
local fa = c.space.test:select({}, {buffer = ibuf, skip_header = true, is_async = true})
try('async select', fa.wait_result, fa, 5)
drain('async select', ibuf)
try('error', c.call, c, 'fail', {}, {buffer = ibuf})
drain('error', ibuf)
try('no such', c.call, c, 'nosuch', {}, {buffer = ibuf, skip_header = true})
drain('no such', ibuf)
try('skip without buffer', c.call, c, 'echo', {5}, {skip_header = true})
try('big', c.call, c, 'big', {}, {buffer = ibuf, skip_header = true})
local _, big = msgpack.ibuf_decode(ibuf.rpos)
print('big', big[1], big[2], big[3], big[4])
ibuf:recycle()
-- async
local f = c:call('echo', {'async'}, {buffer = ibuf, is_async = true})
print('async size before', ibuf:size())
try('async wait', f.wait_result, f)
drain('async', ibuf)
local f2 = c:call('slow', {0.05}, {buffer = ibuf, skip_header = true, is_async = true})
while not f2:is_ready() do fiber.sleep(0.01) end
print('async ready size', ibuf:size())
try('async result', f2.result, f2)
print('async result size', ibuf:size())
drain('async 2', ibuf)
local f3 = c:call('fail', {}, {buffer = ibuf, is_async = true})
try('async error', f3.wait_result, f3)
drain('async error', ibuf)
-- pushes with a buffer
local pushes = {}
try('pushes', c.call, c, 'pusher', {}, {buffer = ibuf, skip_header = true, on_push = function(ctx, m) table.insert(pushes, m) end})
print('pushed', json.encode(pushes))
drain('pushes', ibuf)
local f4 = c:call('pusher', {}, {buffer = ibuf, is_async = true})
for i, m in f4:pairs(1) do print('pair', i, json.encode(m)) end
drain('pairs', ibuf)
-- shared buffer and a pointer to the struct
try('shared', c.call, c, 'echo', {7}, {buffer = buffer.IBUF_SHARED, skip_header = true})
print('shared', select(2, msgpack.ibuf_decode(buffer.IBUF_SHARED.rpos))[1])
buffer.IBUF_SHARED:recycle()
try('bad buffer', c.call, c, 'echo', {7}, {buffer = {}})
try('bad buffer 2', c.call, c, 'echo', {7}, {buffer = 'x'})
-- (the first one ended the connection: 2.6.0's worker failed on it)
print('after bad', c.state, c.error)
try('after bad call', c.call, c, 'echo', {7})
local other = net.connect('u:p@' .. addr)
local f5 = other:call('echo', {8}, {buffer = false, is_async = true})
try('bad buffer async', f5.wait_result, f5, 5)
print('after bad async', other.state, other.error)
other:close()
c:close()
print('done')
os.exit(0)
"""


def test_buffer_and_skip_header_as_tarantool(tmp_path):
    outputs = _matrix(tmp_path, CLIENT)
    reference = outputs["tarantool", "tarantool"]
    assert "\ndone\nrc=0\n" in reference, reference
    assert "call skip_header\tok\t[8]" in reference
    for key, output in outputs.items():
        assert output.splitlines() == reference.splitlines(), key
