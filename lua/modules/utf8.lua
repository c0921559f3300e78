-- Tarantool's `utf8` module (2.6.0's, not Lua 5.3's): len, sub, next and char walk the
-- bytes here; upper, lower, the character classes and cmp/casecmp are Unicode's
-- (lua/modules/utf8.py: Python's case mappings and ICU's root collation, as 2.6.0's
-- ICU). Positions are byte positions for len and next, characters for sub; a byte that
-- starts no valid UTF-8 sequence counts as one character where 2.6.0 counts it so.
local native = ...
local type, tostring, tonumber, select, error, floor = type, tostring, tonumber, select,
    error, math.floor
local byte, char, sub, format, concat = string.byte, string.char, string.sub,
    string.format, table.concat
local getinfo = debug.getinfo
local bit = require('bit')
local band, bor, rshift = bit.band, bit.bor, bit.rshift

-- "bad argument" as LuaJIT words it for a C function: named as the caller called it
-- ('?' through pcall), at the caller's line when the caller is Lua
local function bad_argument(n, expected, value, given)
    local info = getinfo(3, 'n')
    local got = given and type(value) or 'no value'
    error(format("bad argument #%d to '%s' (%s expected, got %s)", n,
                 info and info.name or '?', expected, got), 4)
end

local function string_arg(value)
    local kind = type(value)
    return kind == 'string' or kind == 'number'
end

-- an integer argument as luaL_checkinteger takes it (numeric strings too)
local function integer_arg(n, value, given)
    local number = tonumber(value)
    if number == nil or (type(value) ~= 'number' and type(value) ~= 'string') then
        bad_argument(n + 1, 'number', value, given)
    end
    return number >= 0 and floor(number) or -floor(-number)
end

-- the code point at byte position pos and the size of its sequence, or nil for bytes
-- that are not a well-formed UTF-8 sequence (overlong forms, surrogates and values
-- past U+10FFFF included)
local function decode(s, pos)
    local c = byte(s, pos)
    if c == nil then
        return nil
    end
    if c < 0x80 then
        return c, 1
    end
    local size, min, cp
    if c >= 0xC2 and c <= 0xDF then
        size, min, cp = 2, 0x80, band(c, 0x1F)
    elseif c >= 0xE0 and c <= 0xEF then
        size, min, cp = 3, 0x800, band(c, 0x0F)
    elseif c >= 0xF0 and c <= 0xF4 then
        size, min, cp = 4, 0x10000, band(c, 0x07)
    else
        return nil
    end
    for k = 1, size - 1 do
        local cc = byte(s, pos + k)
        if cc == nil or band(cc, 0xC0) ~= 0x80 then
            return nil
        end
        cp = cp * 64 + band(cc, 0x3F)
    end
    if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then
        return nil
    end
    return cp, size
end

local utf8 = {}

function utf8.len(...)
    local s, i, j = ...
    if not string_arg(s) then
        error('Usage: utf8.len(<string>, [i, [j]])', 2)
    end
    s = tostring(s)
    local len = #s
    i = i == nil and 1 or integer_arg(1, i, true)
    j = j == nil and -1 or integer_arg(2, j, true)
    if i < 0 then i = len + i + 1 end
    if j < 0 then j = len + j + 1 end
    if i < 1 or i > len + 1 or j > len then
        return nil, 'position is out of string'
    end
    local count = 0
    while i <= j do
        local _, size = decode(s, i)
        if size == nil then
            return nil, i
        end
        i, count = i + size, count + 1
    end
    return count
end

-- byte positions where the characters of s start (a bad byte is one character)
local function starts(s)
    local result, pos, len = {}, 1, #s
    while pos <= len do
        result[#result + 1] = pos
        local _, size = decode(s, pos)
        pos = pos + (size or 1)
    end
    return result
end

function utf8.sub(...)
    local s, i, j = ...
    if not string_arg(s) or i == nil then
        error('Usage: utf8.sub(<string>, [i, [j]])', 2)
    end
    s = tostring(s)
    i = integer_arg(1, i, true)
    j = j == nil and -1 or integer_arg(2, j, true)
    local positions = starts(s)
    local count = #positions
    if i < 0 then i = count + i + 1 end
    if j < 0 then j = count + j + 1 end
    if i < 1 then i = 1 end
    if j > count then j = count end
    if i > j then
        return ''
    end
    local stop = positions[j + 1] and positions[j + 1] - 1 or #s
    return sub(s, positions[i], stop)
end

function utf8.next(...)
    local s, pos = ...
    if not string_arg(s) then
        error('Usage: utf8.next(<string>, [<byte offset>])', 2)
    end
    s = tostring(s)
    pos = pos == nil and 1 or integer_arg(1, pos, true)
    if pos < 0 then pos = #s + pos + 1 end
    if pos < 1 then pos = 1 end
    local cp, size = decode(s, pos)
    if cp == nil then
        return
    end
    return pos + size, cp
end

-- one code point as UTF-8, written as ICU's U8_APPEND_UNSAFE writes any 32-bit value
local function encode(cp)
    cp = cp % 4294967296
    if cp < 0x80 then
        return char(cp)
    elseif cp < 0x800 then
        return char(bor(rshift(cp, 6), 0xC0), bor(band(cp, 0x3F), 0x80))
    elseif cp < 0x10000 then
        return char(bor(rshift(cp, 12), 0xE0) % 256, bor(band(rshift(cp, 6), 0x3F), 0x80),
                    bor(band(cp, 0x3F), 0x80))
    end
    return char(bor(rshift(cp, 18), 0xF0) % 256, bor(band(rshift(cp, 12), 0x3F), 0x80),
                bor(band(rshift(cp, 6), 0x3F), 0x80), bor(band(cp, 0x3F), 0x80))
end

function utf8.char(...)
    local count = select('#', ...)
    if count == 0 then
        error('Usage: utf8.char(<char code>', 2)   -- sic: 2.6.0's text
    end
    local parts = {}
    for n = 1, count do
        parts[n] = encode(integer_arg(n - 1, (select(n, ...)), true))
    end
    return concat(parts)
end

local function case_function(name, convert)
    local usage = format('Usage: utf8.%s(<string>)', name)
    return function(...)
        local s = ...
        if not string_arg(s) then
            error(usage, 2)
        end
        return convert(tostring(s))
    end
end

utf8.upper = case_function('upper', native.upper)
utf8.lower = case_function('lower', native.lower)

local function class_function(name, class)
    local usage = format('Usage: utf8.%s(<string> or <one symbol code>)', name)
    return function(...)
        local value = ...
        if type(value) == 'string' then
            local cp, size = decode(value, 1)
            if cp == nil or size ~= #value then
                return false
            end
            return native.is(class, cp)
        end
        if select('#', ...) == 0 then
            error(usage, 2)
        end
        return native.is(class, integer_arg(0, value, true))
    end
end

utf8.isalpha = class_function('isalpha', 'alpha')
utf8.isdigit = class_function('isdigit', 'digit')
utf8.islower = class_function('islower', 'lower')
utf8.isupper = class_function('isupper', 'upper')

local function compare_function(name, collation)
    local usage = format('Usage: utf8.%s(<string1>, <string2>)', name)
    return function(...)
        local a, b = ...
        if not string_arg(a) or not string_arg(b) then
            error(usage, 2)
        end
        return native.compare(collation, tostring(a), tostring(b))
    end
end

utf8.cmp = compare_function('cmp', 'unicode')
utf8.casecmp = compare_function('casecmp', 'unicode_ci')

return utf8
