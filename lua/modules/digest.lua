-- Tarantool's digest module (2.6.0). Loaded with the Python natives
-- (lua/modules/digest.py), the crypto module (its digests and aes256cbc are
-- crypto's, as in 2.6.0), crypto's raw() (a large string passed as its address and
-- length, read in place) and the driver's wait(); returns the module. Argument
-- checks and their words are 2.6.0's, the positions in its builtin/digest.lua
-- included (they are part of the text it raises).
local natives, crypto, raw, wait = ...

local ffi = require('ffi')
local type, error, setmetatable, tonumber, pcall = type, error, setmetatable, tonumber,
                                                    pcall
local format, gsub, byte = string.format, string.gsub, string.byte
local floor, ceil = math.floor, math.ceil

local CRC_BEGIN = 4294967295
local MURMUR_SEED = 13

local function tohex(s)
    return (gsub(s, '.', function(c) return format('%02x', byte(c)) end))
end

-- C argument conversions as 2.6.0's LuaJIT makes them. Each typed function below
-- does nothing; a value it refuses is handed to it in a tail call, so the error
-- reads as 2.6.0's, named after the caller's call site.
local as_uint = ffi.cast('void (*)(unsigned int)', function() end)
local as_guava_args = ffi.cast('void (*)(uint64_t, int)', function() end)

local function truncate(n)
    return n >= 0 and floor(n) or ceil(n)
end

-- double -> unsigned int: through a 64-bit integer (x86's cvttsd2si; what does
-- not fit is 2^63, whose low 32 bits are 0), then its low 32 bits
local function uint32_of(n)
    local whole = truncate(n)
    if whole ~= whole or whole >= 2^63 or whole < -2^63 then
        return 0
    end
    return whole % 2^32
end

-- double -> int: truncated, INT_MIN when it does not fit (x86's cvttsd2si)
local function int32_of(n)
    local whole = truncate(n)
    if whole ~= whole or whole >= 2^31 or whole < -2^31 then
        return -2^31
    end
    return whole
end

local function is_string(value)
    return type(value) == 'string'
end

local m = {}

-- ---------------------------------------------------------- SHA/MD digests

for _, algo in ipairs({'md4', 'md5', 'sha224', 'sha256', 'sha384', 'sha512'}) do
    local compute = crypto.digest[algo]
    m[algo] = function(str)
        return compute(str)
    end
    m[algo .. '_hex'] = function(str)
        if not is_string(str) then
            error('builtin/digest.lua:255: Usage: digest.' .. algo .. '_hex(string)', 0)
        end
        return tohex(compute(str))
    end
end

-- 2.6.0's sha1 has checks of its own (it was there before crypto)
local sha1 = crypto.digest.sha1
function m.sha1(str)
    if not is_string(str) then
        error('builtin/digest.lua:210: Usage: digest.sha1(string)', 0)
    end
    return sha1(str)
end

function m.sha1_hex(str)
    if not is_string(str) then
        error('builtin/digest.lua:218: Usage: digest.sha1_hex(string)', 0)
    end
    return tohex(sha1(str))
end

m.aes256cbc = {encrypt = crypto.cipher.aes256.cbc.encrypt,
               decrypt = crypto.cipher.aes256.cbc.decrypt}

-- ------------------------------------------------------------------- crc32

local crc32_update = natives.crc32_update

function m.crc32_update(crc, str)
    if not is_string(str) then
        error('builtin/digest.lua:203: Usage: digest.crc32_update(string)', 0)
    end
    if type(crc) == 'cdata' then
        crc = tonumber(crc % 2^32)
    else
        crc = tonumber(crc)
        if crc == nil then
            return as_uint(nil)
        end
        crc = uint32_of(crc)
    end
    return crc32_update(crc, raw(str))
end

local crc32_methods = {}

function crc32_methods.update(self, str)
    if not is_string(str) then
        error('builtin/digest.lua:106: Usage crc32:update(string)', 0)
    end
    self.value = crc32_update(self.value, raw(str))
end

function crc32_methods.result(self)
    if self == nil then
        error("builtin/digest.lua:112: attempt to index local 'self' (a nil value)", 0)
    end
    return self.value
end

local crc32_mt = {__index = crc32_methods}

local function crc32_new()
    return setmetatable({value = CRC_BEGIN}, crc32_mt)
end

function crc32_methods.copy(self)
    return setmetatable({value = self.value}, crc32_mt)
end

function crc32_methods.clear(self)
    self.value = CRC_BEGIN
end

m.crc32 = setmetatable({crc_begin = CRC_BEGIN, new = crc32_new}, {
    __call = function(_, str)
        if not is_string(str) then
            error('builtin/digest.lua:139: Usage digest.crc32(string)', 0)
        end
        return crc32_update(CRC_BEGIN, raw(str))
    end,
})

-- ------------------------------------------------------------------ base64

function m.base64_encode(bin, options)
    if not is_string(bin) or options ~= nil and type(options) ~= 'table' then
        error('builtin/digest.lua:167: Usage: digest.base64_encode(string[, table])', 0)
    end
    options = options or {}
    return natives.base64_encode(bin, not not options.nopad, not not options.nowrap,
                                 not not options.urlsafe)
end

function m.base64_decode(str)
    if not is_string(str) then
        error('builtin/digest.lua:190: Usage: digest.base64_decode(string)', 0)
    end
    return natives.base64_decode(str)
end

-- ----------------------------------------------------------------- urandom

function m.urandom(n)
    if n == nil then
        error('builtin/digest.lua:230: Usage: digest.urandom(len)', 0)
    end
    -- 2.6.0 first reserves n bytes in a buffer (arithmetic on n), then hands n to C
    if type(n) ~= 'number' and (type(n) ~= 'string' or tonumber(n) == nil)
            and type(n) ~= 'cdata' then
        error(format("builtin/buffer.lua:229: attempt to perform arithmetic on local " ..
                     "'size' (a %s value)", type(n)), 0)
    end
    if type(n) == 'string' then
        error("builtin/digest.lua:233: bad argument #2 to 'random_bytes' " ..
              "(cannot convert 'string' to 'uint64_t')", 0)
    end
    n = tonumber(n)
    if n < 0 then       -- 2.6.0 crashes here
        error('builtin/digest.lua:230: Usage: digest.urandom(len)', 0)
    end
    return natives.urandom(n)
end

-- ------------------------------------------------------------------ murmur

local murmur_methods = {}
local murmur_mt = {__index = murmur_methods}

-- `value` holds the running hash state (mmh3's incremental MurmurHash3 x86_32)
function murmur_methods.update(self, str)
    if not is_string(str) then
        error('builtin/digest.lua:54: Usage: murhash:update(string)', 0)
    end
    natives.murmur_update(self.value, raw(str))
    self.total_length = self.total_length + #str
end

function murmur_methods.result(self)
    return natives.murmur_result(self.value)
end

function murmur_methods.clear(self)
    self.value = natives.murmur_new(self.seed[0])
    self.total_length = 0
end

function murmur_methods.copy(self)
    return setmetatable({seed = ffi.new('int[1]', self.seed[0]),
                         value = natives.murmur_copy(self.value),
                         total_length = self.total_length,
                         default_seed = MURMUR_SEED}, murmur_mt)
end

local function murmur_new(opts)
    if opts ~= nil and type(opts) ~= 'table' and type(opts) ~= 'string' then
        error(format("builtin/digest.lua:85: attempt to index local 'opts' (a %s value)",
                     type(opts)), 0)
    end
    local seed = opts ~= nil and opts.seed or MURMUR_SEED
    if type(seed) == 'number' then
        seed = int32_of(seed)
    end
    -- anything else as ffi takes it for an int[1] (true is 1, a table its elements)
    local ok, cell = pcall(ffi.new, 'int[1]', seed)
    if not ok then
        error(format("builtin/digest.lua:86: cannot convert '%s' to 'int [1]'", type(seed)),
              0)
    end
    return setmetatable({seed = cell, value = natives.murmur_new(cell[0]), total_length = 0,
                         default_seed = MURMUR_SEED}, murmur_mt)
end

m.murmur = setmetatable({default_seed = MURMUR_SEED, new = murmur_new}, {
    __call = function(_, str)
        if not is_string(str) then
            error('builtin/digest.lua:96: Usage: digest.murhash(string)', 0)
        end
        return natives.murmur(MURMUR_SEED, raw(str))
    end,
})

-- ------------------------------------------------------------------- guava

-- Guava's consistent hash (Lamping and Veach's jump with Guava's linear
-- congruential generator): the bucket in [0, buckets) of a 64-bit state
local LCG_MULTIPLIER = 2862933555777941757ULL

function m.guava(state, buckets)
    if not pcall(as_guava_args, state, buckets) then
        return as_guava_args(state, buckets)
    end
    local s = ffi.new('uint64_t', type(state) == 'number' and truncate(state) or state)
    buckets = type(buckets) == 'number' and int32_of(buckets) or
              tonumber(ffi.new('int', buckets))
    local candidate = 0
    while true do
        s = s * LCG_MULTIPLIER + 1
        local next = (candidate + 1) / ((tonumber(bit.rshift(s, 33)) + 1) / 2^31)
        next = next >= 2^31 and -1 or floor(next)
        if next < 0 or next >= buckets then
            return candidate
        end
        candidate = next
    end
end

-- ------------------------------------------------------------------ pbkdf2

function m.pbkdf2(pass, salt, iters, digest_len)
    if not is_string(pass) or not is_string(salt) then
        error('builtin/digest.lua:147: Usage: digest.pbkdf2(pass, salt[,iters][,digest_len])',
              0)
    end
    if iters ~= nil and type(iters) ~= 'number' then
        error('builtin/digest.lua:150: iters must be a number', 0)
    end
    if digest_len ~= nil and type(digest_len) ~= 'number' then
        error('builtin/digest.lua:153: digest_len must be a number', 0)
    end
    return wait(natives.pbkdf2, pass, salt, iters or 100000, digest_len or 128)
end

function m.pbkdf2_hex(pass, salt, iters, digest_len)
    if not is_string(pass) or not is_string(salt) then
        error('builtin/digest.lua:243: Usage: digest.pbkdf2_hex(pass, salt)', 0)
    end
    local result = m.pbkdf2(pass, salt, iters, digest_len)
    if result == nil then
        error("bad argument #1 to 'string.hex' (string expected, got nil)", 0)
    end
    return tohex(result)
end

return m
