-- What Tarantool 2.6.0 adds to Lua's own libraries: string.split, startswith,
-- endswith, ljust, rjust, center, hex, fromhex, strip, lstrip, rstrip; table.copy,
-- deepcopy (both honour a __copy metamethod) and table.new; os.setenv, os.environ.
-- Argument errors read as 2.6.0's, at the caller's position (level 2) as there; the
-- few that 2.6.0 raises from inside its own files carry that file's position in
-- their text. Run once at start; debug.sourcefile/sourcedir are in
-- extensions_debug.lua (they must live in a chunk named as 2.6.0's).
local ffi = require('ffi')
local type, error, tostring, tonumber, pairs, next, rawget, setmetatable, getmetatable,
      pcall = type, error, tostring, tonumber, pairs, next, rawget, setmetatable,
              getmetatable, pcall
local format, sub, rep, find, byte, char, gsub = string.format, string.sub, string.rep,
    string.find, string.byte, string.char, string.gsub
local floor = math.floor

local function bad_argument(level, n, fname, expected, got)
    error(format("bad argument #%d to '%s' (%s expected, got %s)", n, fname, expected, got),
          level + 1)
end

-- checks for arguments of the string functions, raising at the caller of the function
-- that called them (level 3 from here)
local function need_string(value, n, fname, depth)
    if type(value) ~= 'string' then
        bad_argument(3 + (depth or 0), n, fname, 'string', type(value))
    end
end

local function need_optional_string(value, n, fname)
    if value ~= nil and type(value) ~= 'string' then
        bad_argument(3, n, fname, 'string', type(value))
    end
end

local function need_optional_integer(value, n, fname)
    if value ~= nil and type(value) ~= 'number' then
        bad_argument(3, n, fname, 'integer', type(value))
    end
end

local function need_width(value, fname, depth)
    if type(value) ~= 'number' or value < 0 then
        bad_argument(3 + depth, 2, fname, 'positive integer', type(value))
    end
end

local function need_char(value, fname, depth)
    if value ~= nil and (type(value) ~= 'string' or #value ~= 1) then
        bad_argument(3 + depth, 3, fname, 'char', type(value))
    end
end

-- ------------------------------------------------------------------- split

local SPACE = '[ \t\n\v\f\r]'
local NOT_SPACE = '[^ \t\n\v\f\r]'

-- runs of whitespace separate, none at the ends (Python's str.split())
local function split_spaces(inp, maxsplit)
    local result, at, splits = {}, find(inp, NOT_SPACE), 0
    while at ~= nil do
        if maxsplit ~= nil and splits >= maxsplit then
            result[#result + 1] = sub(inp, at)
            break
        end
        local stop = find(inp, SPACE, at)
        result[#result + 1] = sub(inp, at, stop and stop - 1 or #inp)
        splits = splits + 1
        at = stop and find(inp, NOT_SPACE, stop)
    end
    return result
end

local function split_by(inp, sep, maxsplit)
    local result, at, splits = {}, 1, 0
    while maxsplit == nil or splits < maxsplit do
        local first, last = find(inp, sep, at, true)
        if first == nil then
            break
        end
        result[#result + 1] = sub(inp, at, first - 1)
        at = last + 1
        splits = splits + 1
    end
    result[#result + 1] = sub(inp, at)
    return result
end

function string.split(inp, sep, maxsplit)
    need_string(inp, 1, 'string.split')
    need_optional_string(sep, 2, 'string.split')
    if sep == '' then
        -- 2.6.0 raises this one a level further out than its other checks
        bad_argument(3, 2, 'string.split', 'non-empty string', 'empty string')
    end
    if maxsplit ~= nil and (type(maxsplit) ~= 'number' or maxsplit < 0) then
        bad_argument(2, 3, 'string.split', 'positive integer', type(maxsplit))
    end
    if sep == nil then
        return split_spaces(inp, maxsplit)
    end
    return split_by(inp, sep, maxsplit)
end

-- ------------------------------------------------------ startswith/endswith

-- 1-based bounds as string.sub takes them, negative ones from the end; the end no
-- further than the string's
local function bounds(len, beg, stop)
    beg = beg or 1
    stop = stop or len
    if beg < 0 then beg = len + beg + 1 end
    if stop < 0 then stop = len + stop + 1 end
    if stop > len then stop = len end
    return beg, stop
end

-- An empty head or tail is always there; otherwise the range must hold it, and for
-- startswith begin inside the string (2.6.0 compares the bytes at the range's ends)
function string.startswith(inp, head, beg, stop)
    need_string(inp, 1, 'string.startswith')
    need_string(head, 2, 'string.startswith')
    need_optional_integer(beg, 3, 'string.startswith')
    need_optional_integer(stop, 4, 'string.startswith')
    if #head == 0 then
        return true
    end
    beg, stop = bounds(#inp, beg, stop)
    if beg < 1 or stop - beg + 1 < #head then
        return false
    end
    return sub(inp, beg, beg + #head - 1) == head
end

local function no_length(value, name)
    local kind = type(value)
    if kind ~= 'string' and kind ~= 'table' then
        error(format("builtin/string.lua:248: attempt to get length of local '%s' (a %s value)",
                     name, kind), 0)
    end
end

function string.endswith(inp, tail, beg, stop)
    -- 2.6.0 takes both lengths before it checks anything
    no_length(inp, 'inp')
    no_length(tail, 'tail')
    need_optional_integer(beg, 3, 'string.endswith')
    need_optional_integer(stop, 4, 'string.endswith')
    if #tail == 0 then
        return true
    end
    beg, stop = bounds(#inp, beg, stop)
    if stop - beg + 1 < #tail or stop - #tail < 0 then
        return false
    end
    return sub(inp, stop - #tail + 1, stop) == tail
end

-- -------------------------------------------------------- ljust/rjust/center

-- (called by the string function: its checks raise one level further out)
local function padding(fname, inp, width, fill)
    need_string(inp, 1, fname, 1)
    need_width(width, fname, 1)
    need_char(fill, fname, 1)
    return floor(width) - #inp, fill or ' '
end

function string.ljust(inp, width, fill)
    local room, pad = padding('string.ljust', inp, width, fill)
    if room <= 0 then
        return inp
    end
    return inp .. rep(pad, room)
end

function string.rjust(inp, width, fill)
    local room, pad = padding('string.rjust', inp, width, fill)
    if room <= 0 then
        return inp
    end
    return rep(pad, room) .. inp
end

function string.center(inp, width, fill)
    local room, pad = padding('string.center', inp, width, fill)
    if room <= 0 then
        return inp
    end
    local left = floor(room / 2)
    return rep(pad, left) .. inp .. rep(pad, room - left)
end

-- ----------------------------------------------------------------- hex

function string.hex(inp)
    need_string(inp, 1, 'string.hex')
    return (gsub(inp, '.', function(c) return format('%02x', byte(c)) end))
end

function string.fromhex(inp)
    need_string(inp, 1, 'string.fromhex')
    if #inp % 2 ~= 0 then
        bad_argument(2, 1, 'string.fromhex', 'even amount of chars', 'odd amount')
    end
    if find(inp, '%X') then
        bad_argument(2, 1, 'string.fromhex', 'hex string', 'non hex chars')
    end
    return (gsub(inp, '..', function(pair) return char(tonumber(pair, 16)) end))
end

-- ------------------------------------------------------------------- strip

-- a pattern class of the characters of `chars`, each escaped
local function char_class(chars)
    return '[' .. gsub(chars, '%W', '%%%0') .. ']'
end

local function stripper(fname, left, right)
    return function(inp, chars)
        need_string(inp, 1, fname)
        need_optional_string(chars, 2, fname)
        if chars == '' then
            return inp
        end
        local one = '^' .. (chars and char_class(chars) or '%s') .. '$'
        local first, last = 1, #inp
        while left and first <= last and find(sub(inp, first, first), one) do
            first = first + 1
        end
        while right and last >= first and find(sub(inp, last, last), one) do
            last = last - 1
        end
        return sub(inp, first, last)
    end
end

string.strip = stripper('string.strip', true, true)
string.lstrip = stripper('string.lstrip', true, false)
string.rstrip = stripper('string.rstrip', false, true)

-- ------------------------------------------------------------------- table

-- 2.6.0 calls a __copy metamethod (from these lines of its builtin/table.lua) and
-- returns what it gives as the copy
local function copy_by_metamethod(value, line)
    local mt = getmetatable(value)
    local copy_function = mt ~= nil and type(mt) == 'table' and rawget(mt, '__copy')
    if not copy_function then
        return false
    end
    if type(copy_function) ~= 'function' then
        error(format("builtin/table.lua:%d: attempt to call local 'copy_function' (a %s value)",
                     line, type(copy_function)), 0)
    end
    return true, copy_function(value)
end

function table.copy(orig)
    if type(orig) ~= 'table' then
        return orig
    end
    local handled, copy = copy_by_metamethod(orig, 54)
    if handled then
        return copy
    end
    copy = {}
    for key, value in pairs(orig) do
        copy[key] = value
    end
    return setmetatable(copy, getmetatable(orig))
end

-- keys and values copied too; a table met twice (or inside itself) is copied once
local function deepcopy(orig, seen)
    if type(orig) ~= 'table' then
        return orig
    end
    if seen[orig] ~= nil then
        return seen[orig]
    end
    local handled, copy = copy_by_metamethod(orig, 20)
    if handled then
        return copy
    end
    copy = {}
    seen[orig] = copy
    for key, value in next, orig do
        copy[deepcopy(key, seen)] = deepcopy(value, seen)
    end
    return setmetatable(copy, getmetatable(orig))
end

function table.deepcopy(orig)
    return deepcopy(orig, {})
end

table.new = require('table.new')

-- ---------------------------------------------------------------------- os

-- declared at the first os.setenv or os.environ, not at start: every declaration
-- takes ctype ids, and a start that took more than 2.6.0's would move the id of
-- decimal_t (the serializer core pins it at 2.6.0's), which scripts can see
local env_declared = false
local function declare_env()
    if not env_declared then
        pcall(ffi.cdef, [[
            int setenv(const char *name, const char *value, int overwrite);
            int unsetenv(const char *name);
            extern char **environ;
        ]])
        env_declared = true
    end
end

-- 2.6.0 hands the arguments to C from its builtin/env.lua:33; a failed call
-- meets a bug of its own there (it calls errno.errstring, which does not exist)
function os.setenv(name, value)
    declare_env()
    local ok, result
    if value ~= nil then
        ok, result = pcall(ffi.C.setenv, name, value, 1)
    else
        ok, result = pcall(ffi.C.unsetenv, name)
    end
    if not ok then
        error('builtin/env.lua:33: ' .. gsub(tostring(result), "to '%?'", "to 'setenv'"), 0)
    end
    if result == -1 then
        error("builtin/env.lua:38: attempt to call field 'errstring' (a nil value)", 0)
    end
end

function os.environ()
    declare_env()
    local result, at = {}, 0
    local environ = ffi.C.environ
    while environ[at] ~= nil do
        local entry = ffi.string(environ[at])
        local equals = find(entry, '=', 1, true)
        if equals then
            result[sub(entry, 1, equals - 1)] = sub(entry, equals + 1)
        end
        at = at + 1
    end
    return result
end
