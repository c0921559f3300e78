-- Tarantool's uuid module (src/lua/uuid.lua in 2.6): uuids are `struct tt_uuid` cdata
-- with :str(), :bin([byteorder]), :isnil(), tostring() and ==. Loaded with the
-- serializer core and a function returning 16 random bytes; returns the module.
local core, random_bytes = ...

local ffi = require('ffi')
local uuid_t = core.uuid_t
local format, byte, sub, find, match = string.format, string.byte, string.sub,
                                       string.find, string.match
local type, tonumber, error, setmetatable = type, tonumber, error, setmetatable
local band, bor = bit.band, bit.bor
local bswap32 = function(v) return bit.bswap(v) % 4294967296 end
local bswap16 = function(v) return bor(bit.rshift(v, 8), band(bit.lshift(v, 8), 0xff00)) end

local UUID_LEN = 16

local function is_uuid(value)
    return type(value) == 'cdata' and ffi.istype(uuid_t, value)
end

local function text(u)
    local n = u.node
    return format('%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x',
                  u.time_low, u.time_mid, u.time_hi_and_version,
                  u.clock_seq_hi_and_reserved, u.clock_seq_low,
                  n[0], n[1], n[2], n[3], n[4], n[5])
end

local function uuid_tostring(u)
    if not is_uuid(u) then
        return error('Usage: uuid:str()')
    end
    return text(u)
end

-- sscanf's %<width>x: optional blanks, an optional sign, up to `width` hex digits.
local function scan_hex(s, at, width)
    at = find(s, '[^ \t\n\v\f\r]', at) or #s + 1
    local sign = sub(s, at, at)
    local negative = sign == '-'
    if sign == '-' or sign == '+' then
        at, width = at + 1, width - 1
    end
    local digits = match(s, '^%x+', at)
    if digits == nil or width <= 0 then
        return nil
    end
    digits = sub(digits, 1, width)
    local value = tonumber(digits, 16)
    return negative and -value or value, at + #digits
end

local FIELDS = {{8, 'time_low', 2 ^ 32}, {4, 'time_mid', 2 ^ 16},
                {4, 'time_hi_and_version', 2 ^ 16}, {2, 'clock_seq_hi_and_reserved', 256},
                {2, 'clock_seq_low', 256}}
local SEPARATOR_AFTER = {true, true, true, false, true}

local function valid_variant(u)          -- tt_uuid_validate
    local n = u.clock_seq_hi_and_reserved
    return band(n, 0x80) == 0 or band(n, 0xc0) == 0x80 or band(n, 0xe0) == 0xc0
end

local function parse(s)                 -- tt_uuid_from_string
    local nul = find(s, '%z')
    if (nul and nul - 1 or #s) ~= 36 then
        return nil
    end
    local u, at = ffi.new(uuid_t), 1
    for i, field in ipairs(FIELDS) do
        local value
        value, at = scan_hex(s, at, field[1])
        if value == nil then return nil end
        u[field[2]] = value % field[3]
        if SEPARATOR_AFTER[i] then
            if sub(s, at, at) ~= '-' then return nil end
            at = at + 1
        end
    end
    for i = 0, 5 do
        local value
        value, at = scan_hex(s, at, 2)
        if value == nil then return nil end
        u.node[i] = value % 256
    end
    if not valid_variant(u) then
        return nil
    end
    return u
end

local function uuid_fromstr(str)
    if type(str) ~= 'string' then
        error('builtin/uuid.lua:38: fromstr(str)', 0)
    end
    return parse(str)
end

local function need_bswap(order)
    if order == nil or order == 'l' or order == 'h' or order == 'host' then
        return false
    elseif order == 'b' or order == 'n' or order == 'network' then
        return true
    end
    error('builtin/uuid.lua:54: invalid byteorder, valid is l, b, h, n', 0)
end

local function swapped(u)
    local copy = ffi.new(uuid_t)
    ffi.copy(copy, u, UUID_LEN)
    copy.time_low = bswap32(copy.time_low)
    copy.time_mid = bswap16(copy.time_mid)
    copy.time_hi_and_version = bswap16(copy.time_hi_and_version)
    return copy
end

local function uuid_tobin(u, byteorder)
    if not is_uuid(u) then
        return error('Usage: uuid:bin([byteorder])')
    end
    if need_bswap(byteorder) then
        u = swapped(u)
    end
    return ffi.string(ffi.cast('char *', u), UUID_LEN)
end

local function uuid_frombin(bin, byteorder)
    if type(bin) ~= 'string' or #bin ~= UUID_LEN then
        error('builtin/uuid.lua:73: frombin(bin, [byteorder])', 0)
    end
    local u = ffi.new(uuid_t)
    ffi.copy(u, bin, UUID_LEN)
    if need_bswap(byteorder) then
        u = swapped(u)
    end
    return u
end

local function uuid_isnil(u)
    if not is_uuid(u) then
        return error('Usage: uuid:isnil()')
    end
    return ffi.string(ffi.cast('char *', u), UUID_LEN) == string.rep('\0', UUID_LEN)
end

local function uuid_eq(lhs, rhs)
    if not is_uuid(rhs) then
        return false
    end
    if not is_uuid(lhs) then
        return error('Usage: uuid == var')
    end
    return ffi.string(ffi.cast('char *', lhs), UUID_LEN) ==
           ffi.string(ffi.cast('char *', rhs), UUID_LEN)
end

local function uuid_new()               -- tt_uuid_create: a random version 4 uuid
    local u = ffi.new(uuid_t)
    ffi.copy(u, random_bytes(), UUID_LEN)
    u.clock_seq_hi_and_reserved = bor(band(u.clock_seq_hi_and_reserved, 0x3f), 0x80)
    u.time_hi_and_version = bor(band(u.time_hi_and_version, 0x0fff), 0x4000)
    return u
end

ffi.metatype(uuid_t, {
    __tostring = uuid_tostring,
    __eq = uuid_eq,
    __index = {
        isnil = uuid_isnil,
        bin = uuid_tobin,       -- binary, host byte order
        str = uuid_tostring,    -- RFC 4122 text
    },
})

return setmetatable({
    NULL = ffi.new('const struct tt_uuid'),
    new = uuid_new,
    fromstr = uuid_fromstr,
    frombin = uuid_frombin,
    bin = function(byteorder) return uuid_tobin(uuid_new(), byteorder) end,
    str = function() return text(uuid_new()) end,
}, {
    __call = uuid_new,
})
