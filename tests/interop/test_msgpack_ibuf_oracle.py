"""msgpack's pointer and buffer API (encode into a buffer.ibuf, decode from 'char *',
ibuf_decode, decode_array_header, decode_map_header) and msgpackffi.internal: the same
script on 2.6.0 and Spindle prints the same lines, bad arguments included. Pointers
print as their offset from the buffer's start, so addresses never enter the output."""
from __future__ import annotations

from .module_oracle import assert_same_output

# ptr(p): a pointer returned as 'ctype+offset' from `base`, which each case sets
POINTERS = r"""
local ffi = require('ffi')
local msgpack = require('msgpack')
local buffer = require('buffer')
local base
local function at(s) base = ffi.cast('char *', s) return base end
local function ptr(...)
    local out = {}
    for i = 1, select('#', ...) do
        local v = select(i, ...)
        if type(v) == 'cdata' and tostring(ffi.typeof(v)):find('%*') then
            v = tostring(ffi.typeof(v)) .. '+' .. tostring(ffi.cast('char *', v) - base)
        end
        out[i] = v
    end
    return unpack(out, 1, select('#', ...))
end
"""

DOCS = POINTERS + r"""
-- the examples of 2.6.0's msgpack documentation
show('array header', function() return ptr(msgpack.decode_array_header(at('\x93\x01\x02\x03'), 4)) end)
show('map header', function() return ptr(msgpack.decode_map_header(at('\x81\x01\x02'), 3)) end)
local ibuf = buffer.ibuf()
show('encode into ibuf', msgpack.encode, {1, 2, 3}, ibuf)
show('encode again', msgpack.encode, {x = 'y'}, ibuf)
show('size', function() return ibuf:size() end)
base = ibuf.rpos
show('decode ptr', function() return ptr(msgpack.decode(ibuf.rpos, ibuf:size())) end)
show('ibuf_decode', function()
    local rpos, first = msgpack.ibuf_decode(ibuf.rpos)
    local after, second = msgpack.ibuf_decode(rpos)
    return ptr(rpos), first, ptr(after), second, after == ibuf.wpos
end)
show('walk', function()
    -- the documented way to read a buffer: headers, then values, then advance rpos
    local len, p = msgpack.decode_array_header(ibuf.rpos, ibuf:size())
    local items = {}
    for i = 1, len do items[i], p = msgpack.decode(p, ibuf.wpos - p) end
    ibuf.rpos = p
    return len, items, ibuf:size()
end)
show('read on', function() return ptr(msgpack.decode(ibuf.rpos, ibuf:size())) end)
show('IBUF_SHARED', msgpack.encode, nil, buffer.IBUF_SHARED)
show('struct pointer', msgpack.encode, 'abc', ffi.cast('struct ibuf *', ibuf))
show('new() instance', function()
    local m = msgpack.new()
    local b = buffer.ibuf()
    return m.encode({1}, b), b:size(), ptr(m.decode_array_header(at(ffi.string(b.rpos, b:size())), 1))
end)
show('const char', function()
    return ptr(msgpack.decode_array_header(ffi.cast('const char *', at('\x91\x01')), 2))
end)
show('array16', function()
    local t = {} for i = 1, 300 do t[i] = i end
    local s = msgpack.encode(t)
    return ptr(msgpack.decode_array_header(at(s), #s))
end)
show('array32', function()
    local t = {} for i = 1, 70000 do t[i] = i end
    local s = msgpack.encode(t)
    return ptr(msgpack.decode_array_header(at(s), 5))
end)
show('map16', function()
    local t = {} for i = 1, 20 do t['k' .. i] = i end
    local s = msgpack.encode(t)
    return ptr(msgpack.decode_map_header(at(s), 3))
end)
show('map32 header', function() return ptr(msgpack.decode_map_header(at('\xdf\x00\x00\x00\x02'), 5)) end)
show('empty array', function() return ptr(msgpack.decode_array_header(at('\x90'), 1)) end)
show('fractional size', function() return ptr(msgpack.decode_array_header(at('\x91\x01'), 1.5)) end)
show('string size', function() return ptr(msgpack.decode_array_header(at('\x91\x01'), '1')) end)
show('ibuf_decode const', function() return ptr(msgpack.ibuf_decode(ffi.cast('const char *', at('\x92\x01\xa1x')))) end)
show('ibuf_decode void', function() return ptr(msgpack.ibuf_decode(ffi.cast('void *', at('\x92\x01\xa1x')))) end)
show('ibuf_decode uchar', function() return ptr(msgpack.ibuf_decode(ffi.cast('unsigned char *', at('\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00')))) end)
show('ibuf_decode extra arg', function() return ptr(msgpack.ibuf_decode(at('\x01'), 5)) end)
show('ibuf_decode nested', function() return ptr(msgpack.ibuf_decode(at('\x82\xa1a\x91\xc0\xa1b\xc3'))) end)
-- decode_unchecked of a pointer reads the value whatever the size says
for _, size in ipairs({4, 2, 100, 0, -1, 'x', '4'}) do
    show('unchecked size ' .. size, function() return ptr(msgpack.decode_unchecked(at('\x93\x01\x02\x03'), size)) end)
end
show('unchecked no size', function() return ptr(msgpack.decode_unchecked(at('\x93\x01\x02\x03'))) end)
show('unchecked nil size', function() return ptr(msgpack.decode_unchecked(at('\x93\x01\x02\x03'), nil)) end)
show('unchecked const', function() return ptr(msgpack.decode_unchecked(ffi.cast('const char *', at('\x92\x01\xa1x')))) end)
show('new() unchecked', function() return ptr(msgpack.new().decode_unchecked(at('\x91\xc3'))) end)
show('decode fractional size', function() return ptr(msgpack.decode(at('\x93\x01\x02\x03'), 4.5)) end)
show('decode string size', function() return ptr(msgpack.decode(at('\x93\x01\x02\x03'), '4')) end)
show('decode bigger size', function() return ptr(msgpack.decode(at('\x93\x01\x02\x03\x04'), 5)) end)
"""

BAD = POINTERS + r"""
local ibuf = buffer.ibuf()
show('encode number buffer', msgpack.encode, 1, 2)
show('encode nil buffer', msgpack.encode, 1, nil)
show('encode string buffer', msgpack.encode, 1, 'x')
show('encode table buffer', msgpack.encode, 1, {})
show('encode char array', msgpack.encode, 1, ffi.new('char[3]'))
show('encode extra', msgpack.encode, 1, ibuf, 3)
show('encode nothing', msgpack.encode)
show('array no args', msgpack.decode_array_header)
show('array one arg', msgpack.decode_array_header, at('\x91\x01'))
show('array three args', msgpack.decode_array_header, at('\x91\x01'), 2, 3)
show('array string', msgpack.decode_array_header, '\x91\x01', 2)
show('array nil ptr', msgpack.decode_array_header, nil, 1)
show('array uchar', msgpack.decode_array_header, ffi.cast('unsigned char *', at('\x91\x01')), 2)
show('array void', msgpack.decode_array_header, ffi.cast('void *', at('\x91\x01')), 2)
show('array char[]', msgpack.decode_array_header, ffi.new('char[3]', 0x91), 1)
show('array zero size', msgpack.decode_array_header, at('\x91\x01'), 0)
show('array negative size', msgpack.decode_array_header, at('\x91\x01'), -1)
show('array nil size', msgpack.decode_array_header, at('\x91\x01'), nil)
show('array word size', msgpack.decode_array_header, at('\x91\x01'), 'x')
show('array of a map', msgpack.decode_array_header, at('\x81\x01\x02'), 3)
show('array of a number', msgpack.decode_array_header, at('\x01'), 1)
show('array truncated', msgpack.decode_array_header, at('\xdd\x00\x01\x11\x70'), 4)
show('array16 truncated', msgpack.decode_array_header, at('\xdc\x01\x00'), 2)
show('map of an array', msgpack.decode_map_header, at('\x91\x01'), 2)
show('map truncated', msgpack.decode_map_header, at('\xde\x00'), 2)
show('map c1', msgpack.decode_map_header, at('\xc1'), 4)
show('map no args', msgpack.decode_map_header)
show('ibuf_decode nothing', msgpack.ibuf_decode)
show('ibuf_decode string', msgpack.ibuf_decode, 'abc')
show('ibuf_decode number', msgpack.ibuf_decode, 1)
show('ibuf_decode null', msgpack.ibuf_decode, ffi.cast('char *', 0))
show('ibuf_decode c1', msgpack.ibuf_decode, at('\x92\x01\xc1'))
show('ibuf_decode ext', msgpack.ibuf_decode, at('\x92\x01\xd4\x05\x01'))
show('decode uchar', msgpack.decode, ffi.cast('unsigned char *', at('\x91\x01')), 2)
show('decode no size', msgpack.decode, at('\x91\x01'))
show('decode nil size', msgpack.decode, at('\x91\x01'), nil)
show('decode word size', msgpack.decode, at('\x91\x01'), 'x')
show('decode zero size', msgpack.decode, at('\x91\x01'), 0)
show('decode short size', msgpack.decode, at('\x91\x01'), 1)
show('decode negative size', msgpack.decode, at('\x91\x01'), -1)
show('unchecked uchar', msgpack.decode_unchecked, ffi.cast('unsigned char *', at('\x91\x01')))
show('unchecked table', msgpack.decode_unchecked, {})
show('decode void', msgpack.decode, ffi.cast('void *', at('\x91\x01')), 2)
"""

MSGPACKFFI_INTERNAL = POINTERS + r"""
local mf = require('msgpackffi')
local internal = mf.internal
show('keys', function()
    local keys = {} for k in pairs(internal) do keys[#keys + 1] = k end
    table.sort(keys) return table.concat(keys, ' ')
end)
local b = buffer.ibuf()
internal.encode_array(b, 3)
internal.encode_fix(b, 0x90, 2)
internal.encode_r(b, {1, 'a', {x = 1}}, 0)
internal.encode_r(b, 2^40, 0)
internal.encode_r(b, nil, 0)
internal.encode_r(b, true, 0)
show('written', function() return b:size(), (msgpack.decode(b.rpos, b:size())) end)
show('holey table', function()
    local c = buffer.ibuf()
    internal.encode_r(c, {1, nil, 3}, 0)
    return (msgpack.decode(c.rpos, c:size()))
end)
show('array16', function() internal.encode_array(b, 300) return b:size() end)
show('array32', function() internal.encode_array(b, 70000) return b:size() end)
show('fix overflow', function() internal.encode_fix(b, 0x80, 300) return b:size() end)
show('no buffer', internal.encode_array, nil, 3)
show('no size', internal.encode_array, b)
show('no number', internal.encode_fix, b, 0x90)
show('no level', internal.encode_r, b, {1})
show('function', internal.encode_r, b, function() end, 0)
show('string buffer', internal.encode_r, 'x', 1, 0)
show('decode_unchecked ptr', function()
    return ptr(mf.decode_unchecked(at(msgpack.encode({1, {2, 'x'}}) .. 'tail')))
end)
show('decode_unchecked ext', mf.decode_unchecked, at('\x92\x01\xd4\x05\x01'))
show('decode ext', mf.decode, '\x92\x01\xd4\x05\x01')
show('encode ignores a buffer', function() return mf.encode(1, b) end)
"""


def test_msgpack_pointer_api_as_tarantool(tmp_path):
    assert_same_output(DOCS, tmp_path, min_lines=25)


def test_msgpack_pointer_api_bad_input_as_tarantool(tmp_path):
    assert_same_output(BAD, tmp_path, min_lines=30)


def test_msgpackffi_internal_as_tarantool(tmp_path):
    assert_same_output(MSGPACKFFI_INTERNAL, tmp_path, min_lines=15)
