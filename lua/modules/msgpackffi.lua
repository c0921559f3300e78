-- Tarantool's `msgpackffi` module: msgpack's encode/decode under msgpackffi's names
-- and error texts (the encoding is the msgpack module's: one home for MsgPack).
-- decode_unchecked also takes a bare 'char *' (no size, as 2.6.0's): msgpack.ibuf_decode's
-- decoding, which reads the object's length from its own headers. `internal` holds the
-- encoders into a buffer.ibuf that 2.6.0's net.box uses (encode_fix, encode_array,
-- encode_r), over msgpack.encode's ibuf form. on_encode checks its
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
    if match(message, '^Unsuported MsgPack extension type') then
        error('builtin/msgpackffi.lua:521: Unsupported extension type', 0)
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
            if ffi.cast(bytes_t, data)[0] == 0xc1 then
                error('builtin/msgpackffi.lua:584: assertion failed!', 0)
            end
            local after, value = call(msgpack.ibuf_decode, data)
            return value, after
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

-- msgpackffi.internal: each writes at the ibuf's write position. Misuse fails as the
-- Lua code of 2.6.0's encoders does (a missing buffer or number), by the same words.
local function alloc(buf, size)
    if type(buf) ~= 'cdata' and type(buf) ~= 'table' and type(buf) ~= 'string' then
        error(format("builtin/msgpackffi.lua:64: attempt to index local 'buf' (a %s value)",
                     type(buf)), 0)
    end
    if buf.alloc == nil then
        error("builtin/msgpackffi.lua:64: attempt to call method 'alloc' (a nil value)", 0)
    end
    return buf:alloc(size)
end

local function encode_fix(buf, code, num)
    local p = alloc(buf, 1)
    if type(num) ~= 'number' then
        error("builtin/msgpackffi.lua:65: bad argument #2 to 'bor' (number expected, got " ..
              type(num) .. ')', 0)
    end
    p[0] = bit.bor(code, num)
end

local function encode_be(buf, code, size, bytes)    -- code, then size in `bytes` bytes
    local p = alloc(buf, 1 + bytes)
    p[0] = code
    for i = bytes, 1, -1 do
        p[i] = size % 256
        size = math.floor(size / 256)
    end
end

local function encode_array(buf, size)
    if type(size) ~= 'number' then
        error(format('builtin/msgpackffi.lua:188: attempt to compare %s with number',
                     type(size)), 0)
    end
    if size <= 0xf then
        encode_fix(buf, 0x90, size)
    elseif size <= 0xffff then
        encode_be(buf, 0xdc, size, 2)
    else
        encode_be(buf, 0xdd, size, 4)
    end
end

local function encode_r(buf, obj, level)
    if type(level) ~= 'number' then
        error(format('builtin/msgpackffi.lua:232: attempt to compare number with %s',
                     type(level)), 0)
    end
    alloc(buf, 0)
    call(msgpack.encode, as_msgpackffi(obj, 0), buf)
end

msgpackffi.internal = {encode_fix = encode_fix, encode_array = encode_array,
                       encode_r = encode_r}

function msgpackffi.on_encode(ctype, callback)
    if type(ctype) ~= 'cdata' or type(callback) ~= 'function' then
        error("builtin/msgpackffi.lua:55: Usage: on_encode(ffi.typeof('mytype'), " ..
              'function(buf, obj)', 0)
    end
    error('msgpackffi.on_encode: custom cdata encoders write into the C encoder buffer ' ..
          "of Tarantool's msgpackffi, which Spindle does not have", 2)
end

return msgpackffi
