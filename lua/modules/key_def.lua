-- Tarantool's `key_def` module: key_def.new(parts) and the objects' extract_key,
-- compare, compare_with_key, merge and totable, over the indexes' own key
-- definitions (lua/modules/key_def.py). A key_def is a `struct key_def` cdata, as in
-- 2.6.0; the parts it was made from live here, for totable and merge. Collations are
-- box's (box.space._collation), so none is known before box.cfg, as in 2.6.0.
local native = ...
local ffi = require('ffi')
local type, error, tostring, tonumber, setmetatable, ipairs = type, error, tostring,
    tonumber, setmetatable, ipairs

local USAGE_NEW = 'Bad params, use: key_def.new({{fieldno = fieldno, type = type' ..
    '[, is_nullable = <boolean>][, path = <string>][, collation_id = <number>]' ..
    '[, collation = <string>]}, ...}'

ffi.cdef('struct key_def { uint32_t id; };')
local key_def_t = ffi.typeof('struct key_def')
local parts_of = setmetatable({}, {__mode = 'k'})   -- key_def -> its parts
local collected = {}                                -- ids whose objects are gone

local function raise(_, message)      -- (an IllegalParams error, the only kind here)
    native.illegal(message)
end

local function collation_name(part, number)
    local collation, collation_id = part.collation, part.collation_id
    if collation ~= nil and collation_id ~= nil then
        raise('IllegalParams', 'Conflicting options: collation_id and collation')
    end
    if collation == nil and collation_id == nil then
        return nil
    end
    local space = type(box.cfg) ~= 'function' and box.space._collation or nil
    if collation_id ~= nil then
        local row = space and space:get(tonumber(collation_id))
        if row == nil then
            box.error(box.error.WRONG_INDEX_OPTIONS, number,
                      'collation was not found by ID')
        end
        return row[2]
    end
    collation = tostring(collation)
    if space == nil or space.index.name:get(collation) == nil then
        raise('IllegalParams', string.format('Unknown collation: "%s"', collation))
    end
    return collation
end

local function make(parts)
    if #collected > 0 then
        native.forget(collected)
        collected = {}
    end
    local id = native.new(parts)
    local key_def = ffi.gc(key_def_t(id), function(k) collected[#collected + 1] = k.id end)
    parts_of[key_def] = parts
    return key_def
end

local key_def = {}

function key_def.new(parts)
    if type(parts) ~= 'table' then
        error(USAGE_NEW, 2)
    end
    if #parts == 0 then
        raise('IllegalParams', 'Key definition can only be constructed by using at least ' ..
              '1 key_part')
    end
    local normalized = {}
    for number, part in ipairs(parts) do
        if type(part) ~= 'table' then
            error(string.format('attempt to index a %s value', type(part)), 2)
        end
        if part.type == nil then
            raise('IllegalParams', 'type must not be nil')
        end
        local fieldno = part.fieldno
        if fieldno == nil then fieldno = part.field end
        if fieldno == nil then
            raise('IllegalParams', 'fieldno or field must not be nil')
        end
        normalized[number] = {
            type = tostring(part.type),
            is_nullable = part.is_nullable ~= nil and part.is_nullable ~= false,
            fieldno = tonumber(fieldno) or 0,
            collation = collation_name(part, number),
            path = part.path,
        }
    end
    return make(normalized)
end

local function check_self(self, usage)
    if not ffi.istype(key_def_t, self) then
        error('Usage: ' .. usage, 3)
    end
end

-- a tuple or a Lua table, as the fields Python reads
local function fields(value)
    if type(value) ~= 'table' then
        raise('IllegalParams', 'A tuple or a table expected, got ' .. type(value))
    end
    return value
end

local methods = {}

function methods.extract_key(self, tuple)
    check_self(self, 'key_def:extract_key(tuple)')
    return box.tuple.new(native.extract_key(self.id, fields(tuple)))
end

function methods.compare(self, a, b)
    check_self(self, 'key_def:compare(tuple_a, tuple_b)')
    return native.compare(self.id, fields(a), fields(b))
end

function methods.compare_with_key(self, tuple, key)
    check_self(self, 'key_def:compare_with_key(tuple, key)')
    if type(key) ~= 'table' then
        box.error(box.error.TUPLE_NOT_ARRAY)
    end
    return native.compare_with_key(self.id, fields(tuple), key)
end

-- these parts, then the other's parts on fields (and paths) these do not use
function methods.merge(self, other)
    check_self(self, 'key_def:merge(second_key_def)')
    if not ffi.istype(key_def_t, other) then
        error('Usage: key_def:merge(second_key_def)', 2)
    end
    local merged, used = {}, {}
    for _, part in ipairs(parts_of[self]) do
        merged[#merged + 1] = part
        used[part.fieldno .. '\0' .. tostring(part.path)] = true
    end
    for _, part in ipairs(parts_of[other]) do
        if not used[part.fieldno .. '\0' .. tostring(part.path)] then
            merged[#merged + 1] = part
        end
    end
    return make(merged)
end

function methods.totable(self)
    check_self(self, 'key_def:totable()')
    local result = {}
    for number, part in ipairs(parts_of[self]) do
        result[number] = {type = part.type, is_nullable = part.is_nullable,
                          fieldno = part.fieldno, collation = part.collation,
                          path = part.path}
    end
    return result
end

methods.__serialize = methods.totable     -- yaml/json show a key_def as its parts

-- a function, not the table: a name that is neither a field nor a method is nil, as
-- for 2.6.0's key_def (a table would let LuaJIT raise "has no member named ...")
ffi.metatype(key_def_t, {__index = function(_, name) return methods[name] end})

return key_def
