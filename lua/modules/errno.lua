-- Tarantool's errno module: the E* constants of the platform (read-only), errno()
-- to read the last error number (and set it: errno(n) returns the previous one), and
-- errno.strerror([n]). Loaded with the table of constants; returns the module and a
-- setter for Python code (fio, socket) that reports a failed call's errno.
local constants = ...

local ffi = require('ffi')
local type, select, tonumber, pcall, error, setmetatable = type, select, tonumber, pcall,
                                                           error, setmetatable

pcall(ffi.cdef, 'char *strerror(int errnum);')   -- another module may have declared it

-- The value errno() reports. Kept here rather than in C's errno, which the Python
-- interpreter overwrites between any two Lua statements that call into it.
local current = 0

local INT_MIN, INT_MAX = -2147483648, 2147483647
local floor, ceil = math.floor, math.ceil

-- An argument becomes an int as 2.6.0's ffi.errno converts it: a number truncated
-- towards zero, INT_MIN when it does not fit (x86's cvttsd2si; this LuaJIT would
-- wrap it instead), true -> 1, an int64 cdata its low bits. nil for what it refuses;
-- __call hands that to ffi.errno in a tail call so the error reads as 2.6.0's
-- (named after the caller's call site).
local function as_int(value)
    if type(value) == 'number' then
        local whole = value >= 0 and floor(value) or ceil(value)
        if whole ~= whole or whole < INT_MIN or whole > INT_MAX then
            return INT_MIN
        end
        return whole
    end
    if not pcall(ffi.errno, value) then
        return nil
    end
    return ffi.errno()
end

local function strerror(errno)
    if errno == nil then
        errno = current
    end
    local n = tonumber(errno)
    if n == nil then
        error("builtin/errno.lua:12: bad argument #1 to 'strerror' " ..
              "(cannot convert 'nil' to 'int')", 0)
    end
    return ffi.string(ffi.C.strerror(as_int(n)))
end

local errno = setmetatable({strerror = strerror}, {
    __index = constants,
    __newindex = function()
        error("builtin/errno.lua:19: Can't create new errno constants", 0)
    end,
    __call = function(_, ...)
        if select('#', ...) == 0 then
            return current
        end
        local value = ...
        local new = as_int(value)
        if new == nil then
            return ffi.errno(value)
        end
        local old = current
        current = new
        return old
    end,
})

local function set(value)
    current = value
end

return errno, set
