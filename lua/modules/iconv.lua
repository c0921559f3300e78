-- Tarantool's `iconv` module: iconv.new(to, from) makes a converter, a `struct iconv`
-- cdata called with a string (lua/modules/iconv.py converts). Errors read as 2.6.0's.
local native = ...
local ffi = require('ffi')
local type, error, format = type, error, string.format

local USAGE = 'builtin/iconv.lua:76: Usage: iconv.new("CP1251", "KOI8-R")'

ffi.cdef('struct iconv { uint32_t id; };')
local iconv_t = ffi.typeof('struct iconv')
local collected = {}

local function convert(self, data)
    if type(data) ~= 'string' then
        if type(data) == 'table' then
            error("builtin/iconv.lua:30: attempt to call method 'len' (a nil value)", 2)
        end
        error(format("builtin/iconv.lua:30: attempt to index local 'data' (a %s value)",
                     type(data)), 2)
    end
    local result = native.convert(self.id, data)
    if result == 1 then
        error('builtin/iconv.lua:49: Invalid multibyte sequence', 2)
    elseif result == 2 then
        error('builtin/iconv.lua:52: Incomplete multibyte sequence', 2)
    end
    return result
end

ffi.metatype(iconv_t, {
    __call = convert,
    __tostring = function(self) return format('iconv: %p', self) end,
})

local iconv = {}

function iconv.new(to, from)
    if type(to) ~= 'string' or type(from) ~= 'string' then
        error(USAGE, 2)
    end
    if #collected > 0 then
        native.forget(collected)
        collected = {}
    end
    local id = native.new(to, from)
    if id == nil then
        error('builtin/iconv.lua:80: iconv: Invalid argument', 2)
    end
    return ffi.gc(iconv_t(id), function(c) collected[#collected + 1] = c.id end)
end

return iconv
