-- Tarantool's `pickle` module: pack(format, ...) and unpack(format, string), written for
-- Spindle over LuaJIT's FFI. Letters: b B (8 bits), s S (16, little endian), i I (32),
-- l L (64), n (16, big endian), N (32), q Q (64), f d (float, double), a A (a string:
-- packed as is; unpacked, the rest of the input). unpack knows the lower-case integer
-- letters plus n N q f d a A, as 2.6.0's; its integers are unsigned.
local ffi = require('ffi')
local bit = require('bit')
local type, tostring, tonumber, select, error = type, tostring, tonumber, select, error
local string_format, string_sub = string.format, string.sub

local cell = ffi.new('union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; ' ..
                     'float f; double d; char bytes[8]; }')
local uint64_t = ffi.typeof('uint64_t')

-- letter -> {bytes, union field, big endian?, width named in errors}
local PACK = {
    b = {1, 'u8', false, 8}, B = {1, 'u8', false, 8},
    s = {2, 'u16', false, 16}, S = {2, 'u16', false, 16},
    i = {4, 'u32', false, 32}, I = {4, 'u32', false, 32},
    l = {8, 'u64', false, 64}, L = {8, 'u64', false, 64},
    n = {2, 'u16', true, 16}, N = {4, 'u32', true, 32},
    q = {8, 'u64', true, 64}, Q = {8, 'u64', true, 64},
    f = {4, 'f', false}, d = {8, 'd', false},
}
local UNPACK = {b = PACK.b, s = PACK.s, i = PACK.i, l = PACK.l, n = PACK.n, N = PACK.N,
                q = PACK.q, f = PACK.f, d = PACK.d}

local function swap(field, value)
    if field == 'u16' then
        return bit.rshift(bit.bswap(value), 16)
    end
    return bit.bswap(value)
end

local function bad_argument(n, ...)
    local got = select('#', ...) == 0 and 'no value' or type((...))
    error(string_format("bad argument #%d to '?' (string expected, got %s)", n, got), 3)
end

local function integer_of(value)
    if type(value) == 'cdata' then
        return ffi.cast(uint64_t, value)
    end
    if type(value) == 'number' then   -- a numeric string is refused, as in 2.6.0
        return value
    end
    return nil
end

local pickle = {}

function pickle.pack(...)
    local format = ...
    if type(format) ~= 'string' and type(format) ~= 'number' then
        if select('#', ...) == 0 then bad_argument(1) end
        bad_argument(1, format)
    end
    format = tostring(format)
    local nargs = select('#', ...)
    local parts = {}
    for position = 1, #format do
        local letter = string_sub(format, position, position)
        local value = select(position + 1, ...)
        if position + 1 > nargs then
            error('pickle.pack: argument count does not match the format', 2)
        end
        if letter == 'a' or letter == 'A' then
            if type(value) ~= 'string' and type(value) ~= 'number' then
                bad_argument(position + 1, value)
            end
            parts[#parts + 1] = tostring(value)
        else
            local spec = PACK[letter]
            if spec == nil then
                error(string_format("pickle.pack: unsupported pack format specifier '%s'",
                                    letter), 2)
            end
            local size, field, big, width = spec[1], spec[2], spec[3], spec[4]
            if width ~= nil then
                local number = integer_of(value)
                if number == nil then
                    error(string_format('pickle.pack: expected %d-bit int', width), 2)
                end
                if width == 64 then
                    cell.u64 = number
                else
                    -- C's conversion to a narrower unsigned type: the low bits
                    cell.u64 = ffi.cast('int64_t', number)
                    if width == 8 then cell.u8 = ffi.cast('uint8_t', cell.u64)
                    elseif width == 16 then cell.u16 = ffi.cast('uint16_t', cell.u64)
                    else cell.u32 = ffi.cast('uint32_t', cell.u64) end
                end
                if big then
                    cell[field] = swap(field, cell[field])
                end
            else
                local number = tonumber(value)
                if number == nil then
                    error(string_format('pickle.pack: expected %s', field == 'f' and 'float'
                                        or 'double'), 2)
                end
                cell[field] = number
            end
            parts[#parts + 1] = ffi.string(cell.bytes, size)
        end
    end
    return table.concat(parts)
end

local function pushed(value)
    -- an integer above 2^53 stays a uint64_t cdata, as 2.6.0's luaL_pushuint64
    if type(value) == 'cdata' then
        if value <= 9007199254740992ULL then
            return tonumber(value)
        end
        return ffi.new(uint64_t, value)
    end
    return value
end

function pickle.unpack(...)
    local format, data = ...
    if type(format) ~= 'string' and type(format) ~= 'number' then
        if select('#', ...) == 0 then bad_argument(1) end
        bad_argument(1, format)
    end
    if type(data) ~= 'string' and type(data) ~= 'number' then
        if select('#', ...) < 2 then bad_argument(2) end
        bad_argument(2, data)
    end
    format, data = tostring(format), tostring(data)
    local results, offset, total = {}, 0, #data
    for position = 1, #format do
        local letter = string_sub(format, position, position)
        if letter == 'a' or letter == 'A' then
            results[#results + 1] = string_sub(data, offset + 1)
            offset = total
        else
            local spec = UNPACK[letter]
            if spec == nil then
                error(string_format("pickle.unpack: unsupported format specifier '%s'",
                                    letter), 2)
            end
            local size, field, big = spec[1], spec[2], spec[3]
            if offset + size > total then
                error(string_format("pickle.unpack('%s'): got %d bytes (expected: %d+)",
                                    letter, total, offset + size), 2)
            end
            ffi.copy(cell.bytes, string_sub(data, offset + 1, offset + size), size)
            local value = cell[field]
            if big then
                value = swap(field, value)
                if field == 'u32' then value = value % 4294967296 end
            end
            results[#results + 1] = pushed(value)
            offset = offset + size
        end
    end
    if offset ~= total then
        error(string_format("pickle.unpack('%s'): too many bytes: unpacked %d, total %d",
                            string_sub(format, -1), offset, total), 2)
    end
    return unpack(results, 1, #format)
end

return pickle
