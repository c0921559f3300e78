-- Tarantool's msgpack module (src/lua/msgpack.c in 2.6): encode(value[, ibuf]) -> string
-- or the byte count written into the ibuf, decode(string[, position]) -> value, next
-- position, decode(char *, size) -> value, next pointer, ibuf_decode(rpos) -> next
-- pointer, value, decode_array_header/decode_map_header(char *, size) -> count, next
-- pointer. Integers take the smallest MsgPack form; decoded integers beyond 1e14 - 1 are
-- int64_t/uint64_t cdata, as Tarantool's luaL_pushint64 makes them; decoded arrays and
-- maps carry array_mt/map_mt. Loaded with the serializer core (serializer.lua); returns
-- the module.
local core, decode_error = ...

local ffi = require('ffi')
local tofield, new_cfg, guard = core.tofield, core.new_cfg, core.guard
local NULL, map_mt, array_mt, uuid_t = core.NULL, core.map_mt, core.array_mt, core.uuid_t
local decimal_coefficient, make_decimal = core.decimal_coefficient, core.make_decimal
local byte, char, sub, format, concat = string.byte, string.char, string.sub, string.format,
                                        table.concat
local gsub, match, rep = string.gsub, string.match, string.rep
local type, next, rawget, select, tonumber = type, next, rawget, select, tonumber
local setmetatable, error = setmetatable, error
local band, rshift = bit.band, bit.rshift

local MP_DECIMAL, MP_UUID, MP_ERROR = 1, 2, 3

local scratch = ffi.new('union { uint64_t u; int64_t i; double d; uint8_t b[8]; }')
local scratch32 = ffi.new('union { float f; uint32_t u; uint8_t b[4]; }')
local LITTLE = ffi.abi('le')

-- The 8 bytes of the scratch union in big-endian order.
local function scratch_be()
    local b = scratch.b
    if LITTLE then
        return char(b[7], b[6], b[5], b[4], b[3], b[2], b[1], b[0])
    end
    return char(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
end

local function be32(v)
    return char(band(rshift(v, 24), 255), band(rshift(v, 16), 255),
                band(rshift(v, 8), 255), band(v, 255))
end

----------------------------------------------------------------------------- encode

local function encode_uint(buf, v)
    if type(v) ~= 'number' then
        if v < 4294967296ULL then
            v = tonumber(v)
        else
            scratch.u = v
            buf[#buf + 1] = '\xcf' .. scratch_be()
            return
        end
    end
    if v < 128 then
        buf[#buf + 1] = char(v)
    elseif v < 256 then
        buf[#buf + 1] = char(0xcc, v)
    elseif v < 65536 then
        buf[#buf + 1] = char(0xcd, rshift(v, 8), band(v, 255))
    elseif v < 4294967296 then
        buf[#buf + 1] = '\xce' .. be32(v)
    else
        scratch.u = v
        buf[#buf + 1] = '\xcf' .. scratch_be()
    end
end

local function encode_int(buf, v)               -- v < 0
    if type(v) ~= 'number' then
        if v >= -2147483648LL then
            v = tonumber(v)
        else
            scratch.i = v
            buf[#buf + 1] = '\xd3' .. scratch_be()
            return
        end
    end
    if v >= -32 then
        buf[#buf + 1] = char(band(v, 255))
    elseif v >= -128 then
        buf[#buf + 1] = char(0xd0, band(v, 255))
    elseif v >= -32768 then
        buf[#buf + 1] = char(0xd1, band(rshift(v, 8), 255), band(v, 255))
    elseif v >= -2147483648 then
        buf[#buf + 1] = '\xd2' .. be32(v)
    else
        scratch.i = v
        buf[#buf + 1] = '\xd3' .. scratch_be()
    end
end

local function encode_header(buf, n, fix, fix_limit, code16, code32)
    if n < fix_limit then
        buf[#buf + 1] = char(fix + n)
    elseif n < 65536 then
        buf[#buf + 1] = char(code16, rshift(n, 8), band(n, 255))
    else
        buf[#buf + 1] = char(code32) .. be32(n)
    end
end

local function encode_str(buf, s)
    local n = #s
    if n < 32 then
        buf[#buf + 1] = char(0xa0 + n)
    elseif n < 256 then
        buf[#buf + 1] = char(0xd9, n)
    else
        encode_header(buf, n, 0, 0, 0xda, 0xdb)
    end
    buf[#buf + 1] = s
end

local function encode_uuid(buf, u)
    buf[#buf + 1] = '\xd8\x02' .. be32(u.time_low) ..
        char(rshift(u.time_mid, 8), band(u.time_mid, 255),
             rshift(u.time_hi_and_version, 8), band(u.time_hi_and_version, 255),
             u.clock_seq_hi_and_reserved, u.clock_seq_low,
             u.node[0], u.node[1], u.node[2], u.node[3], u.node[4], u.node[5])
end

-- An extension's header: fixext for 1, 2, 4, 8 and 16 bytes, else ext 8/16/32.
local FIXEXT = {[1] = 0xd4, [2] = 0xd5, [4] = 0xd6, [8] = 0xd7, [16] = 0xd8}

local function encode_ext(buf, ext_type, data)
    local n = #data
    if FIXEXT[n] then
        buf[#buf + 1] = char(FIXEXT[n], ext_type)
    elseif n < 256 then
        buf[#buf + 1] = char(0xc7, n, ext_type)
    elseif n < 65536 then
        buf[#buf + 1] = char(0xc8, rshift(n, 8), band(n, 255), ext_type)
    else
        buf[#buf + 1] = '\xc9' .. be32(n) .. char(ext_type)
    end
    buf[#buf + 1] = data
end

-- decimal_pack: the scale as a MsgPack integer, then the digits in packed BCD ending
-- with a sign nibble (0xc, or 0xd when negative), padded with a leading 0 nibble.
local function encode_decimal(buf, d)
    local body = {}
    local scale = -d.exponent
    if scale >= 0 then encode_uint(body, scale) else encode_int(body, scale) end
    local nibbles = decimal_coefficient(d) .. (d.bits >= 0x80 and 'd' or 'c')
    if #nibbles % 2 == 1 then
        nibbles = '0' .. nibbles
    end
    for i = 1, #nibbles, 2 do
        body[#body + 1] = char(tonumber(sub(nibbles, i, i + 1), 16))
    end
    encode_ext(buf, MP_DECIMAL, concat(body))
end

local encode_value

local function encode_container(buf, kind, t, size, cfg, level)
    if level >= cfg.encode_max_depth then
        if not cfg.encode_deep_as_nil then
            error(format('Too high nest level - %d', level + 1), 0)
        end
        buf[#buf + 1] = '\xc0'
        return
    end
    if kind == 'map' then
        encode_header(buf, size, 0x80, 16, 0xde, 0xdf)
        for k, v in next, t do
            encode_value(buf, k, cfg, level + 1)
            encode_value(buf, v, cfg, level + 1)
        end
    else
        encode_header(buf, size, 0x90, 16, 0xdc, 0xdd)
        for i = 1, size do
            encode_value(buf, rawget(t, i), cfg, level + 1)
        end
    end
end

function encode_value(buf, value, cfg, level)
    local kind, a, b = tofield(value, cfg)
    if kind == 'uint' then
        encode_uint(buf, a)
    elseif kind == 'int' then
        encode_int(buf, a)
    elseif kind == 'str' then
        encode_str(buf, a)
    elseif kind == 'double' then
        scratch.d = a
        buf[#buf + 1] = '\xcb' .. scratch_be()
    elseif kind == 'float' then
        scratch32.f = a
        buf[#buf + 1] = '\xca' .. be32(scratch32.u)
    elseif kind == 'bool' then
        buf[#buf + 1] = a and '\xc3' or '\xc2'
    elseif kind == 'nil' or kind == 'null' then
        buf[#buf + 1] = '\xc0'
    elseif kind == 'map' or kind == 'array' then
        encode_container(buf, kind, a, b, cfg, level)
    elseif kind == 'uuid' then
        encode_uuid(buf, a)
    elseif kind == 'decimal' then
        encode_decimal(buf, a)
    end
end

-- The buffer module's `struct ibuf` (or a pointer to one), else nil. The type exists
-- once require('buffer') has declared it; before that no value can be an ibuf.
local ibuf_t
local function as_ibuf(value)
    if type(value) ~= 'cdata' then
        return nil
    end
    if ibuf_t == nil then
        local ok, ctype = pcall(ffi.typeof, 'struct ibuf')
        if not ok then
            return nil
        end
        ibuf_t = ctype
    end
    return ffi.istype(ibuf_t, value) and value or nil
end

local function encode(cfg, ...)
    local n = select('#', ...)
    if n < 1 then
        error('msgpack.encode: a Lua object expected', 0)
    end
    local ibuf
    if n > 1 then
        ibuf = as_ibuf((select(2, ...)))
        if ibuf == nil then
            error("msgpack.encode: argument 2 must be of type 'struct ibuf'", 0)
        end
    end
    local buf = {}
    encode_value(buf, (...), cfg, 0)
    local data = concat(buf)
    if ibuf == nil then
        return data
    end
    -- into the ibuf: appended at its write position, the byte count returned
    ffi.copy(ibuf:alloc(#data), data, #data)
    return #data
end

----------------------------------------------------------------------------- check

local function invalid()
    error('msgpack.decode: invalid MsgPack', 0)
end

local function be_uint(s, p, n)            -- n = 1, 2 or 4 bytes at p
    local v = 0
    for i = p, p + n - 1 do v = v * 256 + byte(s, i) end
    return v
end

-- Lengths of the fixed-size forms, by first byte (others handled in code).
local FIXED = {[0xc0] = 1, [0xc1] = 1, [0xc2] = 1, [0xc3] = 1, [0xca] = 5, [0xcb] = 9,
               [0xcc] = 2, [0xcd] = 3, [0xce] = 5, [0xcf] = 9, [0xd0] = 2, [0xd1] = 3,
               [0xd2] = 5, [0xd3] = 9, [0xd4] = 3, [0xd5] = 4, [0xd6] = 6, [0xd7] = 10,
               [0xd8] = 18}

local bytes_t = ffi.typeof('const uint8_t *')

-- mp_check over the bytes b[0 .. len - 1]: the offset after the one complete value
-- starting at offset o, or nil when it runs past len. Without len (a bare pointer, as
-- ibuf_decode takes) the value's own headers give its extent, as 2.6.0's unchecked
-- decoders trust them.
local function skip(b, o, len)
    len = len or math.huge
    local pending = 1
    while pending > 0 do
        if o >= len then return nil end
        local c = b[o]
        pending = pending - 1
        if c < 0x80 or c >= 0xe0 then
            o = o + 1
        elseif c < 0x90 then
            o, pending = o + 1, pending + 2 * (c - 0x80)
        elseif c < 0xa0 then
            o, pending = o + 1, pending + (c - 0x90)
        elseif c < 0xc0 then
            o = o + 1 + (c - 0xa0)
        elseif FIXED[c] then
            o = o + FIXED[c]
        else
            local size = (c == 0xc4 or c == 0xc7 or c == 0xd9) and 1 or
                         (c == 0xc5 or c == 0xc8 or c == 0xda or c == 0xdc or
                          c == 0xde) and 2 or 4
            if o + size >= len then return nil end
            local n = 0
            for i = o + 1, o + size do n = n * 256 + b[i] end
            o = o + 1 + size
            if c == 0xdc or c == 0xdd then
                pending = pending + n
            elseif c == 0xde or c == 0xdf then
                pending = pending + 2 * n
            elseif c >= 0xc7 and c <= 0xc9 then
                o = o + 1 + n                    -- the ext type byte, then the data
            else
                o = o + n
            end
        end
    end
    if o > len then return nil end
    return o
end

----------------------------------------------------------------------------- decode

local function push_uint(v)       -- uint64 cdata -> number when small enough
    if v <= 99999999999999ULL then return tonumber(v) end
    return v
end

local function push_int(v)
    if v >= -99999999999999LL and v <= 99999999999999LL then return tonumber(v) end
    return v
end

local function load64(s, p)        -- the 8 big-endian bytes at p into scratch
    local b = scratch.b
    for i = 0, 7 do
        b[LITTLE and 7 - i or i] = byte(s, p + i)
    end
end

local function decode_uuid(s, p, len)
    if len ~= 16 then invalid() end
    local u = ffi.new(uuid_t)
    u.time_low = be_uint(s, p, 4)
    u.time_mid = be_uint(s, p + 4, 2)
    u.time_hi_and_version = be_uint(s, p + 6, 2)
    u.clock_seq_hi_and_reserved = byte(s, p + 8)
    u.clock_seq_low = byte(s, p + 9)
    for i = 0, 5 do u.node[i] = byte(s, p + 10 + i) end
    local n = u.clock_seq_hi_and_reserved       -- tt_uuid_validate: the variant
    if band(n, 0x80) ~= 0 and band(n, 0xc0) ~= 0x80 and band(n, 0xe0) ~= 0xc0 then
        invalid()
    end
    return u
end

-- decimal_unpack: the scale (any MsgPack integer, -37..38) and BCD digits ending with
-- a sign nibble (0xa..0xf; 0xb and 0xd are negative). More than 39 significant
-- digits do not fit a decimal_t (2.6.0 overruns its buffer with them): refused.
local MIN_SCALE, MAX_SCALE = -37, 38
local DECIMAL_BCD_ROOM = math.floor(core.DECIMAL_ROOM / 2) + 1   -- digits and sign

local function decimal_scale(s, p, stop)
    local c = byte(s, p)
    if c == nil or p >= stop then
        invalid()
    end
    local value, after = nil, p + 1
    if c < 0x80 then
        value = c
    elseif c >= 0xe0 then
        value = c - 256
    else
        local size = ({[0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = 8,
                       [0xd0] = 1, [0xd1] = 2, [0xd2] = 4, [0xd3] = 8})[c]
        if size == nil or p + size >= stop then
            invalid()
        end
        -- decimal_unpack keeps the scale in an int32_t: only its low 32 bits count
        local bits = 8 * math.min(size, 4)
        value = 0
        for i = p + 1 + size - bits / 8, p + size do value = value * 256 + byte(s, i) end
        if (c >= 0xd0 or bits == 32) and value >= 2 ^ (bits - 1) then
            value = value - 2 ^ bits
        end
        after = p + 1 + size
    end
    if value < MIN_SCALE or value > MAX_SCALE then
        invalid()
    end
    return value, after
end

local function decode_decimal(s, p, len)
    local stop = p + len
    local scale, at = decimal_scale(s, p, stop)
    local bcd = gsub(sub(s, at, stop - 1), '^%z+', '')    -- leading zero digits
    if #bcd > DECIMAL_BCD_ROOM then
        invalid()
    end
    local nibbles = gsub(format(rep('%02x', #bcd), byte(bcd, 1, -1)), '^0+', '')
    local digits, sign = match(nibbles, '^([0-9]*)([a-f])$')
    if digits == nil then
        invalid()
    end
    if digits == '' then
        digits = '0'
    elseif #digits > core.DECIMAL_ROOM then
        invalid()
    end
    return make_decimal(sign == 'b' or sign == 'd', digits, -scale)
end

local function unsupported(ext_type)
    if ext_type >= 128 then ext_type = ext_type - 256 end
    error(format('Unsuported MsgPack extension type: %u', ext_type % 4294967296), 0)
end

local decode_value

local function decode_array(s, p, n, cfg)
    local t = {}
    for i = 1, n do
        t[i], p = decode_value(s, p, cfg)
    end
    if cfg.decode_save_metatables then setmetatable(t, array_mt) end
    return t, p
end

local function decode_map(s, p, n, cfg)
    local t = {}
    for _ = 1, n do
        local k, v
        k, p = decode_value(s, p, cfg)
        v, p = decode_value(s, p, cfg)
        t[k] = v
    end
    if cfg.decode_save_metatables then setmetatable(t, map_mt) end
    return t, p
end

local function checked_number(x, cfg)
    if not cfg.decode_invalid_numbers and (x ~= x or x == 1 / 0 or x == -1 / 0) then
        error('number must not be NaN or Inf', 0)
    end
    return x
end

local function decode_ext(s, p, c)
    local ext_type, len, data
    if c >= 0xd4 and c <= 0xd8 then
        len = ({[0xd4] = 1, [0xd5] = 2, [0xd6] = 4, [0xd7] = 8, [0xd8] = 16})[c]
        ext_type, data = byte(s, p + 1), p + 2
    elseif c == 0xc1 then
        return unsupported(0)
    else
        local size = c == 0xc7 and 1 or c == 0xc8 and 2 or 4
        len = be_uint(s, p + 1, size)
        ext_type, data = byte(s, p + 1 + size), p + 2 + size
    end
    if ext_type == MP_UUID then
        return decode_uuid(s, data, len), data + len
    elseif ext_type == MP_DECIMAL then
        return decode_decimal(s, data, len), data + len
    elseif ext_type == MP_ERROR then
        local err = decode_error(sub(s, data, data + len - 1))
        if err == nil then
            error('Can not parse an error from MsgPack', 0)
        end
        return err, data + len
    end
    return unsupported(ext_type)
end

function decode_value(s, p, cfg)
    local c = byte(s, p)
    if c < 0x80 then
        return c, p + 1
    elseif c >= 0xe0 then
        return c - 256, p + 1
    elseif c < 0x90 then
        return decode_map(s, p + 1, c - 0x80, cfg)
    elseif c < 0xa0 then
        return decode_array(s, p + 1, c - 0x90, cfg)
    elseif c < 0xc0 then
        local n = c - 0xa0
        return sub(s, p + 1, p + n), p + 1 + n
    elseif c == 0xc0 then
        return NULL, p + 1
    elseif c == 0xc2 or c == 0xc3 then
        return c == 0xc3, p + 1
    elseif c == 0xcc or c == 0xd0 then
        local v = byte(s, p + 1)
        if c == 0xd0 and v >= 128 then v = v - 256 end
        return v, p + 2
    elseif c == 0xcd or c == 0xd1 then
        local v = be_uint(s, p + 1, 2)
        if c == 0xd1 and v >= 32768 then v = v - 65536 end
        return v, p + 3
    elseif c == 0xce or c == 0xd2 then
        local v = be_uint(s, p + 1, 4)
        if c == 0xd2 and v >= 2147483648 then v = v - 4294967296 end
        return v, p + 5
    elseif c == 0xcf then
        load64(s, p + 1)
        return push_uint(scratch.u), p + 9
    elseif c == 0xd3 then
        load64(s, p + 1)
        return push_int(scratch.i), p + 9
    elseif c == 0xca then
        scratch32.u = be_uint(s, p + 1, 4)
        return checked_number(tonumber(scratch32.f), cfg), p + 5
    elseif c == 0xcb then
        load64(s, p + 1)
        return checked_number(scratch.d, cfg), p + 9
    elseif c == 0xd9 or c == 0xda or c == 0xdb or c == 0xc4 or c == 0xc5 or c == 0xc6 then
        local size = (c == 0xd9 or c == 0xc4) and 1 or (c == 0xda or c == 0xc5) and 2 or 4
        local n = be_uint(s, p + 1, size)
        local from = p + 1 + size
        return sub(s, from, from + n - 1), from + n
    elseif c == 0xdc or c == 0xdd then
        local size = c == 0xdc and 2 or 4
        return decode_array(s, p + 1 + size, be_uint(s, p + 1, size), cfg)
    elseif c == 0xde or c == 0xdf then
        local size = c == 0xde and 2 or 4
        return decode_map(s, p + 1 + size, be_uint(s, p + 1, size), cfg)
    end
    return decode_ext(s, p, c)
end

local CHAR_PTR, MUTABLE_CHAR_PTR = ffi.typeof('const char *'), ffi.typeof('char *')

-- A 'char *' or 'const char *' exactly (ffi.istype would also take 'unsigned char *',
-- which 2.6.0 refuses).
local function is_char_ptr(value)
    if type(value) ~= 'cdata' then
        return false
    end
    local ctype = ffi.typeof(value)
    return ctype == CHAR_PTR or ctype == MUTABLE_CHAR_PTR
end

local function decode_string(cfg, s, offset, check)
    local p = 1
    if offset ~= nil then
        p = tonumber(offset)
        if p == nil then
            error("bad argument #2 to '?' (number expected, got " .. type(offset) .. ")", 0)
        end
        p = p >= 0 and math.floor(p) or -math.floor(-p)
        if p - 1 < 0 or p - 1 >= #s then
            error('msgpack.decode: offset is out of bounds', 0)
        end
    end
    if check and skip(ffi.cast(bytes_t, s), p - 1, #s) == nil then
        invalid()
    end
    return decode_value(s, p, cfg)
end

-- decode(ptr, size): a 'char *' buffer; returns the value and the pointer after it.
-- The value at a byte pointer with no size to keep to (2.6.0's unchecked decoding):
-- its own headers say where it ends. Returns the value and its length.
local function decode_at(cfg, bytes)
    local size = skip(bytes, 0)
    return decode_value(ffi.string(bytes, size), 1, cfg), size
end

-- decode(ptr, size): a 'char *' buffer of `size` bytes, checked; decode_unchecked(ptr)
-- reads the value whatever the size says, as 2.6.0 does. Returns the value and the
-- pointer after it (of ptr's type).
local function decode_pointer(cfg, ptr, has_size, size, check)
    if not check then
        local value, length = decode_at(cfg, ffi.cast(bytes_t, ptr))
        return value, ptr + length
    end
    local given = size
    size = tonumber(size)
    if size == nil then
        error("bad argument #2 to '?' (number expected, got " ..
              (has_size and type(given) or 'no value') .. ')', 0)
    end
    size = size >= 0 and math.floor(size) or -math.floor(-size)
    if size < 0 then
        error("msgpack.decode: size can't be negative", 0)
    end
    if skip(ffi.cast(bytes_t, ptr), 0, size) == nil then
        invalid()
    end
    local s = ffi.string(ptr, size)
    local value, p = decode_value(s, 1, cfg)
    return value, ptr + (p - 1)
end

local function decoder(check)
    return function(cfg, data, ...)
        if type(data) == 'string' then
            return decode_string(cfg, data, (...), check)
        elseif is_char_ptr(data) then
            return decode_pointer(cfg, data, select('#', ...) > 0, ..., check)
        end
        error("msgpack.decode: a Lua string or 'char *' expected", 0)
    end
end
local decode, decode_unchecked = decoder(true), decoder(false)

-- ibuf_decode(rpos): the value at a bare pointer (no size: its headers say where it
-- ends, unchecked as in 2.6.0), returned after the pointer past it, of rpos's type.
local function ibuf_decode(cfg, rpos)
    -- a pointer (or an address); 2.6.0 reads any other cdata's bytes as one
    local ok, bytes = pcall(ffi.cast, bytes_t, rpos)
    if type(rpos) ~= 'cdata' or not ok or not pcall(ffi.cast, ffi.typeof(rpos), bytes) then
        error('expected cdata as 1 argument', 0)
    end
    if bytes == nil then
        error('msgpack.ibuf_decode: rpos is null', 0)
    end
    local value, size = decode_at(cfg, bytes)
    return ffi.cast(ffi.typeof(rpos), bytes + size), value
end

-- decode_array_header/decode_map_header(ptr, size): the element count of the array
-- (map) whose header starts at a 'char *', and the pointer after that header.
local HEADERS = {
    array = {fix = 0x90, [0xdc] = 2, [0xdd] = 4},
    map = {fix = 0x80, [0xde] = 2, [0xdf] = 4},
}

local function header_decoder(kind)
    local name = 'msgpack.decode_' .. kind .. '_header'
    local fix, sizes = HEADERS[kind].fix, HEADERS[kind]
    return function(...)
        if select('#', ...) ~= 2 then
            error('Usage: ' .. name .. '(ptr, size)', 0)
        end
        local ptr, size = ...
        if not is_char_ptr(ptr) then
            error(name .. ": 'char *' expected", 0)
        end
        local n = tonumber(size)
        if n == nil then
            error("bad argument #2 to '?' (number expected, got " .. type(size) .. ')', 0)
        end
        n = n >= 0 and math.floor(n) or -math.floor(-n)   -- an integer, as lua_tointeger
        if n <= 0 then
            error(name .. ': non-positive size', 0)
        end
        local b = ffi.cast(bytes_t, ptr)
        local c = b[0]
        local count, length
        if c >= fix and c < fix + 16 then
            count, length = c - fix, 1
        elseif sizes[c] then
            length = 1 + sizes[c]
            if length > n then
                error(name .. ': unexpected end of buffer', 0)
            end
            count = 0
            for i = 1, length - 1 do count = count * 256 + b[i] end
        else
            error(name .. ': unexpected msgpack type', 0)
        end
        return count, ptr + length
    end
end
local decode_array_header, decode_map_header = header_decoder('array'), header_decoder('map')

----------------------------------------------------------------------------- module

local new
function new()
    local cfg = new_cfg()
    return {
        encode = guard(function(...) return encode(cfg, ...) end),
        decode = guard(function(...) return decode(cfg, ...) end),
        decode_unchecked = guard(function(...) return decode_unchecked(cfg, ...) end),
        ibuf_decode = guard(function(rpos) return ibuf_decode(cfg, rpos) end),
        decode_array_header = decode_array_header,
        decode_map_header = decode_map_header,
        new = new,
        cfg = cfg,
        NULL = NULL,
        array_mt = array_mt,
        map_mt = map_mt,
    }
end

return new()
