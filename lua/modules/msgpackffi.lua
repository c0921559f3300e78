-- Tarantool's `msgpackffi` module: msgpack's encode/decode under msgpackffi's names
-- and error texts (the encoding is the msgpack module's: one home for MsgPack).
-- decode_unchecked also takes a bare 'char *' (no size, as 2.6.0's): the object's
-- length is read from its own headers before it is decoded. on_encode checks its
-- arguments as 2.6.0's; custom cdata encoders write into 2.6.0's C encoder buffer,
-- which Spindle does not have, so registering one is refused with that reason.
local msgpack = ...
local ffi = require('ffi')
local type, error, tostring, select, pcall, pairs, getmetatable, setmetatable = type, error,
    tostring, select, pcall, pairs, getmetatable, setmetatable
local format, match = string.format, string.match

local DECODE_USAGE = 'builtin/msgpackffi.lua:626: msgpackffi.decode_unchecked(str, offset) ' ..
    '-> res, new_offset | msgpackffi.decode_unchecked([const] char *buf) -> res, new_buf'
local bytes_t = ffi.typeof('const unsigned char *')

local function rethrow(message)
    message = tostring(message)
    local kind = match(message, "unsupported Lua type '([^']*)'")
    if kind ~= nil then
        error(format("builtin/msgpackffi.lua:292: can not encode Lua type: '%s'", kind), 0)
    end
    if match(message, 'invalid MsgPack') then
        error('builtin/msgpackffi.lua:584: assertion failed!', 0)
    end
    error(message, 0)
end

local function call(f, ...)
    local result = {pcall(f, ...)}
    if not result[1] then
        rethrow(result[2])
    end
    return unpack(result, 2, table.maxn(result))
end

-- the size of the MsgPack object at p (a byte pointer), walking its headers
local function object_size(p)
    local pos, pending = 0, 1
    local function be(offset, n)
        local v = 0
        for k = 0, n - 1 do v = v * 256 + p[offset + k] end
        return v
    end
    while pending > 0 do
        pending = pending - 1
        local c = p[pos]
        pos = pos + 1
        if c <= 0x7f or c >= 0xe0 or (c >= 0xc0 and c <= 0xc3) then     -- scalars
            if c == 0xc1 then error('builtin/msgpackffi.lua:584: assertion failed!', 0) end
        elseif c >= 0x80 and c <= 0x8f then pending = pending + 2 * (c - 0x80)
        elseif c >= 0x90 and c <= 0x9f then pending = pending + (c - 0x90)
        elseif c >= 0xa0 and c <= 0xbf then pos = pos + (c - 0xa0)
        elseif c == 0xc4 or c == 0xd9 then pos = pos + 1 + p[pos]
        elseif c == 0xc5 or c == 0xda then pos = pos + 2 + be(pos, 2)
        elseif c == 0xc6 or c == 0xdb then pos = pos + 4 + be(pos, 4)
        elseif c == 0xc7 then pos = pos + 2 + p[pos]
        elseif c == 0xc8 then pos = pos + 3 + be(pos, 2)
        elseif c == 0xc9 then pos = pos + 5 + be(pos, 4)
        elseif c == 0xca then pos = pos + 4
        elseif c == 0xcb then pos = pos + 8
        elseif c == 0xcc or c == 0xd0 then pos = pos + 1
        elseif c == 0xcd or c == 0xd1 then pos = pos + 2
        elseif c == 0xce or c == 0xd2 then pos = pos + 4
        elseif c == 0xcf or c == 0xd3 then pos = pos + 8
        elseif c >= 0xd4 and c <= 0xd8 then pos = pos + 1 + 2 ^ (c - 0xd4)
        elseif c == 0xdc then pending = pending + be(pos, 2); pos = pos + 2
        elseif c == 0xdd then pending = pending + be(pos, 4); pos = pos + 4
        elseif c == 0xde then pending = pending + 2 * be(pos, 2); pos = pos + 2
        elseif c == 0xdf then pending = pending + 2 * be(pos, 4); pos = pos + 4
        end
    end
    return pos
end

local function decoder(decode)
    return function(data, offset)
        if type(data) == 'string' then
            offset = offset == nil and 1 or offset
            if type(offset) == 'number' and (offset < 1 or offset > #data) then
                error(format('builtin/msgpackffi.lua:604: offset = %d is out of bounds [1..%d]',
                             offset, #data), 0)
            end
            if data:byte(offset) == 0xc1 then     -- the one code MsgPack never uses
                error('builtin/msgpackffi.lua:584: assertion failed!', 0)
            end
            return call(decode, data, offset)
        elseif type(data) == 'cdata' and (ffi.istype('const char *', data) or
                                          ffi.istype('char *', data)) then
            return call(decode, data, object_size(ffi.cast(bytes_t, data)))
        end
        error(DECODE_USAGE, 0)
    end
end

-- msgpackffi's encoder takes a table as an array only when 1..#t are all its keys
-- ({1, nil, 3} is a map); the msgpack module's sparse-array rules differ, so such
-- tables (with no metatable of their own) go to it as copies marked as maps
local function as_msgpackffi(value, depth)
    if type(value) ~= 'table' or getmetatable(value) ~= nil or depth > 128 then
        return value
    end
    local length, count, nested = #value, 0, false
    for _, item in pairs(value) do
        count = count + 1
        nested = nested or type(item) == 'table'
    end
    local holey = length > 0 and count ~= length
    if not holey and not nested then
        return value
    end
    local copy = {}
    for key, item in pairs(value) do
        copy[key] = as_msgpackffi(item, depth + 1)
    end
    return holey and setmetatable(copy, msgpack.map_mt) or copy
end

local msgpackffi = {
    NULL = msgpack.NULL,
    array_mt = msgpack.array_mt,
    map_mt = msgpack.map_mt,
    encode = function(...)
        if select('#', ...) == 0 then
            return call(msgpack.encode, nil)
        end
        return call(msgpack.encode, as_msgpackffi((...), 0))
    end,
    decode = decoder(msgpack.decode),
    decode_unchecked = decoder(msgpack.decode_unchecked),
}

function msgpackffi.on_encode(ctype, callback)
    if type(ctype) ~= 'cdata' or type(callback) ~= 'function' then
        error("builtin/msgpackffi.lua:55: Usage: on_encode(ffi.typeof('mytype'), " ..
              'function(buf, obj)', 0)
    end
    error('msgpackffi.on_encode: custom cdata encoders write into the C encoder buffer ' ..
          "of Tarantool's msgpackffi, which Spindle does not have", 2)
end

return msgpackffi
