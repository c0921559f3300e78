-- box.sequence: sequence objects with 2.6.0's methods (schema.lua's sequence_mt and
-- box/lua/sequence.c) over the natives of lua/box/sequence.py. The table follows
-- `_sequence` from Python (refresh), as lbox_sequence_new_or_delete does: an
-- object keeps its identity across alters, under its id and its current name.
--
-- Loaded with (native, blocking, wait, box).
local native, blocking, wait, box = ...
local ffi = require('ffi')
local type, error, rawget, tonumber, setmetatable = type, error, rawget, tonumber,
    setmetatable
local string_format, math_floor, math_ceil = string.format, math.floor, math.ceil
local int64_t, uint64_t = ffi.typeof('int64_t'), ffi.typeof('uint64_t')

local sequences = {}       -- box.sequence: id and name -> sequence object

-- luaL_pushint64(): a number within +-(1e14 - 1), else an int64_t (Python hands a
-- value past 2^53 over as a cdata, a positive one as a uint64_t).
local DBL_INT_MAX = 1e14 - 1
local function int64(value)
    if type(value) == 'cdata' then
        return ffi.cast(int64_t, value)
    elseif value > DBL_INT_MAX or value < -DBL_INT_MAX then
        return ffi.new(int64_t, value)
    end
    return value
end

-- `self.id` as sequence_mt's methods read it: indexing anything but a table (or a
-- string, which indexes the string library) fails where schema.lua's line does.
local function id_of(self, line)
    local kind = type(self)
    if kind == 'table' or kind == 'cdata' or kind == 'userdata' then
        return self.id
    elseif kind == 'string' then
        return nil
    end
    error(string_format("builtin/box/schema.lua:%d: attempt to index local 'self' "
                        .. "(a %s value)", line, kind), 0)
end

-- luaL_checkinteger(L, 1) of box.internal.sequence's functions.
local function check_id(id)
    local n = tonumber(id)
    if n == nil or (type(id) ~= 'number' and type(id) ~= 'string') then
        error(string_format("bad argument #1 to '?' (number expected, got %s)", type(id)), 0)
    end
    return n >= 0 and math_floor(n) or math_ceil(n)
end

-- luaL_checkint64(L, 2): a number (truncated; out of range, x86's conversion gives
-- INT64_MIN), an integer cdata, or a string of one.
local function check_int64(value)
    local kind = type(value)
    if kind == 'number' then
        if value ~= value or value >= 2^63 or value < -2^63 then
            return ffi.new(int64_t, -2^63)
        end
        return value >= 0 and math_floor(value) or math_ceil(value)
    elseif kind == 'cdata' and (ffi.istype(int64_t, value) or ffi.istype(uint64_t, value)) then
        return ffi.cast(int64_t, value)
    elseif kind == 'string' and tonumber(value) ~= nil then
        return check_int64(tonumber(value))
    end
    error('expected int64_t as 2 argument', 0)
end

-- A statement that writes `_sequence_data` (next, set, reset). Inside an open
-- transaction it waits for nothing: the native runs it there, without a round
-- trip through wait() (which was most of next()'s cost). Outside one the native
-- answers false having done nothing, and wait() runs it as a statement that
-- commits (or, where Lua cannot yield, raises the error of a forbidden yield).
local function write(name, ...)
    local result = native[name](...)
    if result == false then
        return wait(blocking[name], ...)
    end
    return result
end

local sequence_mt = {}
sequence_mt.__index = sequence_mt

function sequence_mt.next(self)
    return int64(write('next', check_id(id_of(self, 1817))))
end

function sequence_mt.current(self)
    local id = id_of(self, 1822)
    if type(id) ~= 'number' then
        error(string_format("builtin/box/schema.lua:1822: bad argument #1 to "
                            .. "'box_sequence_current' (cannot convert '%s' to "
                            .. "'unsigned int')", type(id)), 0)
    end
    -- (2.6.0 reads it from an int64_t buffer: a cdata, whatever the value)
    return ffi.cast(int64_t, native.current(id))
end

function sequence_mt.set(self, value)
    local id = check_id(id_of(self, 1830))
    write('set', id, check_int64(value))
end

function sequence_mt.reset(self)
    write('reset', check_id(id_of(self, 1834)))
end

function sequence_mt.alter(self, opts)
    box.schema.sequence.alter(id_of(self, 1838), opts)
end

function sequence_mt.drop(self)
    box.schema.sequence.drop(id_of(self, 1842))
end

local function bless(seq)
    setmetatable(seq, {__index = sequence_mt})
end

-- From Python after every change of a `_sequence` row (and its undo): `info` is
-- the sequence's definition, or nil when it is gone.
local function refresh(id, info)
    local seq = rawget(sequences, id)
    if info == nil then
        if seq ~= nil then
            sequences[seq.name] = nil
            sequences[id] = nil
        end
        return
    end
    if seq == nil then
        seq = {}
        sequences[id] = seq
    else
        sequences[seq.name] = nil
    end
    -- one by one, in 2.6.0's order: a console shows the keys in the table's order
    seq.id = info.id
    seq.uid = info.uid
    seq.name = info.name
    seq.step = int64(info.step)
    seq.min = int64(info.min)
    seq.max = int64(info.max)
    seq.start = int64(info.start)
    seq.cache = int64(info.cache)
    seq.cycle = info.cycle
    box.schema.sequence.bless(seq)
    sequences[info.name] = seq
end

local function install()
    rawset(box, 'sequence', sequences)
end

return {
    refresh = refresh,
    bless = bless,
    install = install,
}
