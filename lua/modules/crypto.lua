-- Tarantool's crypto module (2.6.0): crypto.digest.<algo>(s) and :new() objects,
-- crypto.hmac.<algo>(key, s), <algo>_hex and .new(key) objects, and
-- crypto.cipher.<algo>.<mode>.encrypt/decrypt(s, key, iv). Loaded with the Python
-- primitives (lua/modules/crypto.py) and the key size of each cipher; returns the
-- module. Errors read as 2.6.0's: the positions in its builtin/crypto.lua are part
-- of the text it raises.
local py, key_sizes = ...

local type, error, setmetatable, tostring = type, error, setmetatable, tostring
local format, gsub, byte = string.format, string.gsub, string.byte

local ffi = require('ffi')

-- A large string goes to Python as its address and length, read there in place
-- (crypto.py's lua_bytes) instead of copied: only as the last argument of a call
-- that returns before Lua drops the string.
local RAW_FROM = 65536
local function raw(s)
    local n = #s
    if n < RAW_FROM then
        return s
    end
    return tonumber(ffi.cast('uintptr_t', ffi.cast('const char *', s))), n
end

local DIGESTS = {'md4', 'md5', 'ripemd160', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'}

local function tohex(s)
    return (gsub(s, '.', function(c) return format('%02x', byte(c)) end))
end

-- What 2.6.0 says when a value is used as a string (its code calls value:len()).
local function not_a_string(where, name, value)
    if type(value) == 'table' then
        error(where .. ": attempt to call method 'len' (a nil value)", 0)
    end
    error(format("%s: attempt to index local '%s' (a %s value)", where, name, type(value)),
          0)
end

local function is_string(value)
    return type(value) == 'string'
end

-- ------------------------------------------------------------------ digests

local digest_methods = {}
local digest_mt = {__index = digest_methods}

local function digest_ctx(algo)
    local ctx, err = py.digest_new(algo)
    if ctx == nil then
        error("builtin/crypto.lua:107: Can't init digest: " .. err, 0)
    end
    return ctx
end

function digest_methods.init(self)
    self.ctx = digest_ctx(self.digest)
    self.initialized = true
end

function digest_methods.update(self, input)
    if not self.initialized then
        error('Digest not initialized', 0)
    end
    if not is_string(input) then
        not_a_string('builtin/crypto.lua:125', 'input', input)
    end
    py.update(self.ctx, raw(input))
end

function digest_methods.result(self)
    if not self.initialized then
        error('Digest not initialized', 0)
    end
    self.initialized = false
    return py.result(self.ctx)
end

function digest_methods.free(self)
    self.ctx = nil
    self.initialized = false
end

local function digest_new(algo)
    local self = setmetatable({digest = algo, initialized = false}, digest_mt)
    self:init()
    return self
end

local digest = {}
for _, algo in ipairs(DIGESTS) do
    digest[algo] = setmetatable({new = function() return digest_new(algo) end}, {
        __call = function(_, str)
            if not is_string(str) then
                error('builtin/crypto.lua:323: Usage: digest.' .. algo .. '(string)', 0)
            end
            local result, err = py.digest(algo, raw(str))
            if result == nil then
                error("builtin/crypto.lua:107: Can't init digest: " .. err, 0)
            end
            return result
        end,
    })
end

-- -------------------------------------------------------------------- HMACs

local hmac_methods = {}
local hmac_mt = {__index = hmac_methods}

local function hmac_ctx(algo, key)
    if key == nil then
        error('Key should be specified for HMAC operations', 0)
    end
    if not is_string(key) then
        not_a_string('builtin/crypto.lua:187', 'key', key)
    end
    local ctx, err = py.hmac_new(algo, key)
    if ctx == nil then
        error("builtin/crypto.lua:179: Can't init HMAC: " .. err, 0)
    end
    return ctx
end

function hmac_methods.init(self, key)
    self.ctx = hmac_ctx(self.digest, key)
    self.initialized = true
end

function hmac_methods.update(self, input)
    if not self.initialized then
        error('HMAC not initialized', 0)
    end
    if not is_string(input) then
        not_a_string('builtin/crypto.lua:197', 'input', input)
    end
    py.update(self.ctx, raw(input))
end

function hmac_methods.result(self)
    if not self.initialized then
        error('HMAC not initialized', 0)
    end
    self.initialized = false
    return py.result(self.ctx)
end

hmac_methods.free = digest_methods.free

local hmac = {}
for _, algo in ipairs(DIGESTS) do
    local function compute(key, str)
        if not is_string(str) then
            error('builtin/crypto.lua:346: Usage: hmac.' .. algo .. '(key, string)', 0)
        end
        if key == nil then
            error('builtin/crypto.lua:348: Key should be specified for HMAC operations', 0)
        end
        if not is_string(key) then
            not_a_string('builtin/crypto.lua:187', 'key', key)
        end
        local result, err = py.hmac(algo, key, raw(str))
        if result == nil then
            error("builtin/crypto.lua:179: Can't init HMAC: " .. err, 0)
        end
        return result
    end
    hmac[algo] = setmetatable({
        new = function(key)
            local self = setmetatable({digest = algo, initialized = false}, hmac_mt)
            self:init(key)
            return self
        end,
    }, {__call = function(_, key, str) return compute(key, str) end})
    hmac[algo .. '_hex'] = function(key, str)
        if not is_string(str) then
            error('builtin/crypto.lua:357: Usage: hmac.' .. algo .. '_hex(key, string)', 0)
        end
        return tohex(compute(key, str))
    end
end

-- ------------------------------------------------------------------ ciphers

local cipher_algo = {none = 0, aes128 = 1, aes192 = 2, aes256 = 3, des = 4}
local cipher_mode = {ecb = 0, cbc = 1, cfb = 2, ofb = 3}

local function iv_size(algo, mode)
    if mode == 'ecb' or algo == 'none' then
        return 0
    end
    return algo == 'des' and 8 or 16
end

-- The first error 2.6.0 finds when it sets `value` up as a key or an IV (value:len(),
-- the key's on line 259 of its file, the IV's on 260).
local function not_a_key(name, value)
    local where = name == 'key' and 'builtin/crypto.lua:259: ' or 'builtin/crypto.lua:260: '
    if type(value) == 'table' then
        error(where .. "attempt to call method 'len' (a nil value)", 0)
    end
    error(format("%sattempt to index field '%s' (a %s value)", where, name, type(value)), 0)
end

local function make_cipher(algo, mode, encrypt)
    local key_size, expected_iv = key_sizes[algo], iv_size(algo, mode)
    return function(str, key, iv)
        -- 2.6.0 initialises the cipher only when it has both key and IV (checking
        -- their sizes, then asking OpenSSL); an uninitialised one is refused before
        -- the input is looked at
        if key == nil or iv == nil then
            error('builtin/crypto.lua:414: Cipher not initialized', 0)
        end
        if not is_string(key) then
            not_a_key('key', key)
        end
        if not is_string(iv) then
            not_a_key('iv', iv)
        end
        if #key ~= key_size then
            py.fail(format('key size expected %d, got %d', key_size, #key))
        end
        if #iv ~= expected_iv then
            py.fail(format('IV size expected %d, got %d', expected_iv, #iv))
        end
        if algo == 'des' then
            py.refuse_cipher()
        end
        if not is_string(str) then
            error('builtin/crypto.lua:272: Usage: cipher:update(string)', 0)
        end
        return py.cipher(algo, mode, encrypt, str, key, iv)
    end
end

-- An unknown name raises where it is used (level 2), as 2.6.0's __index does.
local function refusing(what)
    return {__index = function(_, name)
        error(format('%s method "%s" is not supported', what, tostring(name)), 2)
    end}
end

local cipher = setmetatable({}, refusing('Cipher'))
for algo in pairs(cipher_algo) do
    local modes = setmetatable({}, {__index = function(_, name)
        error(format('builtin/crypto.lua:388: Cipher mode %s is not supported',
                     tostring(name)), 0)
    end})
    for mode in pairs(cipher_mode) do
        modes[mode] = {encrypt = make_cipher(algo, mode, true),
                       decrypt = make_cipher(algo, mode, false)}
    end
    rawset(cipher, algo, modes)
end
setmetatable(digest, refusing('Digest'))
setmetatable(hmac, refusing('HMAC'))

local public = {digest = digest, hmac = hmac, cipher = cipher}
return setmetatable({cipher_algo = cipher_algo, cipher_mode = cipher_mode},
                    {__index = public}), raw
