-- box.tuple: tuples as Lua tables (see lua/box/tuple.py for the representation).
--
-- A tuple is a plain array table whose metatable is one of the tuple metatables:
-- the format-less one, or one per space format (it knows the field names, so
-- t.name works). All of them share __eq, __tostring and the methods, and carry
-- __serialize = 'seq', so the console, yaml, json and msgpack see an array, shown in
-- flow style like Tarantool's tuples ([1, 'a']). Nested arrays and maps carry the
-- msgpack array/map metatables, as Tarantool's decoded fields do.
--
-- Loaded with (native, helpers); returns the helpers space.lua uses and installs
-- box.tuple when asked.
local native, helpers = ...
local array_mt, NULL = helpers.array_mt, helpers.NULL
local setmetatable, getmetatable, rawget, type, select = setmetatable, getmetatable, rawget, type, select
local unpack, tostring, error = unpack, tostring, error
local fun_wrap = require('fun').wrap

local methods = {}
local tuple_mts = setmetatable({}, {__mode = 'k'})   -- every tuple metatable
local yaml_encode

local function is_tuple(t)
    return type(t) == 'table' and tuple_mts[getmetatable(t)] ~= nil
end

local function tuple_check(t, usage)
    if not is_tuple(t) then
        error('builtin/box/tuple.lua:106: Usage: ' .. usage, 0)
    end
end

-- Tarantool compares tuple pointers; stored tuples come back as fresh tables here,
-- so equality is field by field (nested tables by identity).
local function tuple_eq(a, b)
    local n = #a
    if n ~= #b then
        return false
    end
    for i = 1, n do
        if a[i] ~= b[i] then
            return false
        end
    end
    return true
end

local function totable_range(t, i, j)
    local ret = {}
    i = i or 1
    j = j or #t
    if j > #t then
        j = #t
    end
    local k = 0
    for pos = i, j do
        k = k + 1
        ret[k] = rawget(t, pos)
    end
    return setmetatable(ret, array_mt)
end

local function tuple_tostring(t)
    yaml_encode = yaml_encode or require('yaml').encode
    local text = yaml_encode(totable_range(t))
    return text:sub(5, -6)     -- '--- [...]\n...\n' -> '[...]'
end

-- A tuple metatable; `names` maps field names to field numbers (1-based) or is nil.
local function make_mt(names)
    local mt = {__serialize = 'seq', __eq = tuple_eq, __tostring = tuple_tostring,
                _names = names}
    if names ~= nil and next(names) ~= nil then
        mt.__index = function(t, key)
            local no = names[key]
            if no ~= nil then
                local value = rawget(t, no)
                if value ~= nil then
                    return value
                end
            end
            return methods[key]
        end
    else
        mt.__index = methods
    end
    tuple_mts[mt] = true
    return mt
end

local base_mt = make_mt(nil)

-- A missing tuple is no value at all (get() of a missing key prints nothing).
local function bless(t, mt)
    if t == nil then
        return
    end
    return setmetatable(t, mt or base_mt)
end

local function bless_list(list, mt)
    mt = mt or base_mt
    for i = 1, #list do
        setmetatable(list[i], mt)
    end
    return list
end

-- methods ---------------------------------------------------------------------------

function methods.next(t, pos)
    tuple_check(t, 'tuple:next(tuple[, pos])')
    pos = pos or 0
    if type(pos) ~= 'number' then
        error("error: invalid key to 'next'", 0)
    end
    local value = rawget(t, pos + 1)
    if value == nil then
        return nil
    end
    return pos + 1, value
end

function methods.ipairs(t, pos)
    tuple_check(t, 'tuple:pairs(tuple[, pos])')
    return fun_wrap(methods.next, t, pos or 0)   -- a fun iterator, as 2.6.0's
end
methods.pairs = methods.ipairs

function methods.totable(t, i, j)
    tuple_check(t, 'tuple:totable([from[, to]])')
    if i ~= nil and i < 1 then
        error('builtin/box/tuple.lua:178: tuple.totable: invalid second argument', 0)
    end
    if j ~= nil and j <= 0 then
        error('builtin/box/tuple.lua:187: tuple.totable: invalid third argument', 0)
    end
    return totable_range(t, i, j)
end

function methods.unpack(t, i, j)
    return unpack(methods.totable(t, i, j))
end

function methods.slice(t, ...)
    local argc = select('#', ...)
    if argc == 0 or argc > 2 then
        error('Usage: tuple:slice(start[, end])', 0)
    end
    local n = #t
    local from, to = ...
    from = tonumber(from) or 0
    local start
    if from >= 0 and from < n then
        start = from
    elseif from < 0 and -from <= n then
        start = from + n
    else
        error('tuple.slice(): start >= field count', 0)
    end
    local stop = n
    if argc == 2 then
        to = tonumber(to) or 0
        if to > 0 and to <= n then
            stop = to
        elseif to < 0 and -to < n then
            stop = to + n
        else
            error('tuple.slice(): end > field count', 0)
        end
    end
    if stop <= start then
        error('tuple.slice(): start must be less than end', 0)
    end
    return unpack(t, start + 1, stop)
end

function methods.transform(t, offset, len, ...)
    if select('#', ...) == 0 and (offset == nil or len == nil) then
        error('tuple.transform(): bad arguments', 0)
    end
    local n = #t
    offset, len = tonumber(offset) or 0, tonumber(len) or 0
    if offset == 0 then
        error('tuple.transform(): offset is out of bound', 0)
    elseif offset < 0 then
        if -offset > n then
            error('tuple.transform(): offset is out of bound', 0)
        end
        offset = offset + n + 1
    elseif offset > n then
        offset = n + 1
    end
    if len < 0 then
        error('tuple.transform(): len is negative', 0)
    end
    if len > n + 1 - offset then
        len = n + 1 - offset
    end
    local fields = {}
    for i = 1, offset - 1 do
        fields[#fields + 1] = t[i]
    end
    for i = 1, select('#', ...) do
        local v = select(i, ...)
        fields[#fields + 1] = v == nil and NULL or v
    end
    for i = offset + len, n do
        fields[#fields + 1] = t[i]
    end
    return bless(native.new(fields))
end

local function index_of(t, offset, value)
    for i = offset + 1, #t do
        if t[i] == value then
            return i
        end
    end
end

function methods.find(t, offset, value)
    tuple_check(t, 'tuple:find([offset, ]val)')
    if value == nil then
        value, offset = offset, 0
    end
    return index_of(t, offset, value)
end

function methods.findall(t, offset, value)
    tuple_check(t, 'tuple:findall([offset, ]val)')
    if value == nil then
        value, offset = offset, 0
    end
    local found = {}
    local i = index_of(t, offset, value)
    while i ~= nil do
        found[#found + 1] = i
        i = index_of(t, i, value)
    end
    return found
end

function methods.update(t, ops)
    tuple_check(t, 'tuple:update({ { op, field, arg}+ })')
    if type(ops) ~= 'table' then
        error('builtin/box/tuple.lua:230: Usage: tuple:update({ { op, field, arg}+ })', 0)
    end
    local mt = getmetatable(t)
    return bless(native.update(t, ops, mt._names), mt)
end

function methods.upsert(t, ops)
    tuple_check(t, 'tuple:upsert({ { op, field, arg}+ })')
    if type(ops) ~= 'table' then
        error('builtin/box/tuple.lua:243: Usage: tuple:upsert({ { op, field, arg}+ })', 0)
    end
    local mt = getmetatable(t)
    return bless(native.upsert(t, ops, mt._names), mt)
end

function methods.bsize(t)
    tuple_check(t, 'tuple:bsize()')
    return native.bsize(t)
end

function methods.tomap(t, opts)
    tuple_check(t, 'tuple:tomap([opts])')
    local names_only = type(opts) == 'table' and opts.names_only
    local map = {}
    if not names_only then
        for i = 1, #t do
            map[i] = t[i]
        end
    end
    local names = getmetatable(t)._names
    if names ~= nil then
        for name, no in pairs(names) do
            local value = rawget(t, no)
            if value ~= nil then
                map[name] = value
            end
        end
    end
    return map
end

-- box.tuple -------------------------------------------------------------------------

local box_tuple = {}
for name, fn in pairs(methods) do
    box_tuple[name] = fn
end

function box_tuple.new(...)
    local n = select('#', ...)
    local fields
    if n == 1 and type((...)) == 'table' then
        fields = ...
    else
        fields = {...}
        for i = 1, n do
            if fields[i] == nil then
                fields[i] = NULL
            end
        end
    end
    return bless(native.new(fields))
end

box_tuple.is = is_tuple

-- The field names the console's table output heads columns with: those of a tuple's
-- format, or of an array of tuples sharing one format (a select, a Spark result), in
-- field order, false for a field the format leaves unnamed. Nothing when there are
-- none to give (not tuples, no format, tuples of several formats).
local function field_names(value)
    local mt
    if is_tuple(value) then
        mt = getmetatable(value)
    elseif type(value) == 'table' and is_tuple(rawget(value, 1)) then
        mt = getmetatable(rawget(value, 1))
        for i = 2, #value do
            if getmetatable(rawget(value, i)) ~= mt then
                return
            end
        end
    else
        return
    end
    local names = mt._names
    if names == nil then
        return
    end
    local list, count = {}, 0
    for name, no in pairs(names) do
        list[no] = name
        if no > count then
            count = no
        end
    end
    for i = 1, count do
        if list[i] == nil then
            list[i] = false
        end
    end
    return unpack(list, 1, count)
end

return {
    box_tuple = box_tuple,
    is = is_tuple,
    bless = bless,
    bless_list = bless_list,
    make_mt = make_mt,
    base_mt = base_mt,
    field_names = field_names,
}
