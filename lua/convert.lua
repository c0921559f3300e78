-- Helpers for Python's view of Lua values (lua/convert.py): what a table is, what a
-- cdata holds, and how to build 64-bit integers and NULL from Python.
local ffi = require('ffi')
local type, pairs, getmetatable, floor, tostring = type, pairs, getmetatable, math.floor, tostring

local unpack = unpack

local NULL = ffi.cast('void *', 0)
local map_mt = {__serialize = 'map'}
local array_mt = {__serialize = 'seq'}

-- An array's shape: ('array', n), followed by its n elements (nil where there is a
-- hole) when there are few enough to return at once, so Python reads a small array
-- in the one call instead of indexing it element by element.
local MAX_UNPACKED = 64
local function array(t, n)
    if n <= MAX_UNPACKED then
        return 'array', n, unpack(t, 1, n)
    end
    return 'array', n
end

-- Tarantool's serializer rule: a table whose keys are 1..n is an array; a sparse one
-- stays an array while it is not too sparse (max key <= 10, or <= 2 x the key count).
-- A __serialize function stands for the table: ('serialize', what it returned), as
-- 2.6.0's luaL_tofield calls it for every encoder (MsgPack, IPROTO results, JSON).
local function classify(t)
    local mt = getmetatable(t)
    local hint = mt and mt.__serialize
    if type(hint) == 'function' then
        return 'serialize', hint(t)
    end
    if hint == 'map' or hint == 'mapping' then
        return 'map'
    end
    local count, max = 0, 0
    for k in pairs(t) do
        if type(k) ~= 'number' or k < 1 or k ~= floor(k) then
            if hint == 'seq' or hint == 'sequence' or hint == 'array' then
                return array(t, #t)
            end
            return 'map'
        end
        count = count + 1
        if k > max then max = k end
    end
    if count == 0 then
        return 'empty'
    end
    if max == count or max <= 10 or max <= 2 * count or hint then
        return array(t, max)
    end
    return 'map'
end

local int64_t, uint64_t = ffi.typeof('int64_t'), ffi.typeof('uint64_t')

-- The uuid module declares `struct tt_uuid` after this chunk loads: look it up late.
local uuid_t
local function is_uuid(value)
    if uuid_t == nil then
        local ok, t = pcall(ffi.typeof, 'struct tt_uuid')
        if not ok then
            return false
        end
        uuid_t = t
    end
    return ffi.istype(uuid_t, value)
end

-- ('null') | ('int', decimal text) | ('uuid', text) | ('other', tostring)
local function cdata_info(value)
    if value == nil then
        return 'null'
    end
    if ffi.istype(int64_t, value) or ffi.istype(uint64_t, value) then
        local text = tostring(value):gsub('U?LL$', '')
        return 'int', text
    end
    if is_uuid(value) then
        return 'uuid', tostring(value)
    end
    return 'other', tostring(value)
end

-- A uuid cdata from its text, through the uuid module (text if it is not loaded).
local function make_uuid(text)
    local module = package.loaded.uuid
    return module and module.fromstr(text) or text
end

local function make_int64(negative, hi, lo)
    if negative then
        return -(ffi.new(int64_t, hi) * 4294967296LL + lo)
    end
    return ffi.new(uint64_t, hi) * 4294967296ULL + lo
end

return {
    classify = classify,
    cdata_info = cdata_info,
    make_uuid = make_uuid,
    make_int64 = make_int64,
    NULL = NULL,
    map_mt = map_mt,
    array_mt = array_mt,
    setmetatable = setmetatable,
    tostring = tostring,
}
