-- What Tarantool's serializers (json, yaml, msgpack, the console) see in a Lua value.
--
-- Follows Tarantool 2.6 src/lua/utils.c (luaL_tofield / luaL_convertfield) so that
-- every serializer classifies a value the same way: numbers become uint/int/double by
-- their value, a table is an array or a map by its keys (or by its __serialize hint),
-- __serialize functions are called, box.NULL is nil, and values of other types are
-- shown with tostring(), turned into nil or refused, as the serializer's options say.
--
-- Loaded once per runtime with (NULL, map_mt, array_mt, is_error, raise_box).
local NULL, map_mt, array_mt, is_error, raise_box = ...

local ffi = require('ffi')
local type, next, rawget, floor, select = type, next, rawget, math.floor, select
local tostring, tonumber, pcall, error = tostring, tonumber, pcall, error
local format, gsub = string.format, string.gsub
local getmetatable = debug.getmetatable      -- ignores a __metatable guard, as C does
local huge = math.huge

-- struct tt_uuid (lib/uuid/tt_uuid.h); the uuid module gives it its metatype.
if not pcall(ffi.typeof, 'struct tt_uuid') then
    ffi.cdef[[
        struct tt_uuid {
            uint32_t time_low;
            uint16_t time_mid;
            uint16_t time_hi_and_version;
            uint8_t clock_seq_hi_and_reserved;
            uint8_t clock_seq_low;
            uint8_t node[6];
        };
    ]]
end
local uuid_t = ffi.typeof('struct tt_uuid')

-- decimal_t: Tarantool's decNumber of 38 digits (DECDPUN 3), the same fields and size,
-- so d.digits, d.exponent and d.bits read as in Tarantool. The coefficient is kept in
-- base-1000 units, least significant first; bits has 0x80 for a negative value.
-- LuaJIT names an anonymous struct by its ctype id in errors ("attempt to get length
-- of 'struct 114'"); in 2.6.0 decimal_t is ctype 114, so ids up to it are used up
-- first (each `struct {}` takes one).
local DECIMAL_CTYPE_ID = 114
if not pcall(ffi.typeof, 'decimal_t') then
    local last = tonumber(ffi.typeof('struct {}'))
    while last < DECIMAL_CTYPE_ID - 1 do
        last = tonumber(ffi.typeof('struct {}'))
    end
    ffi.cdef[[
        typedef struct {
            int32_t digits;
            int32_t exponent;
            uint8_t bits;
            uint16_t lsu[13];
        } decimal_t;
    ]]
end
local decimal_t = ffi.typeof('decimal_t')

local int64_t, uint64_t = ffi.typeof('int64_t'), ffi.typeof('uint64_t')
local small_ints = {ffi.typeof('int8_t'), ffi.typeof('int16_t'), ffi.typeof('int32_t'),
                    ffi.typeof('uint8_t'), ffi.typeof('uint16_t'), ffi.typeof('uint32_t'),
                    ffi.typeof('char')}
local bool_t, float_t, double_t = ffi.typeof('bool'), ffi.typeof('float'), ffi.typeof('double')
local voidp_t, cvoidp_t = ffi.typeof('void *'), ffi.typeof('const void *')
local istype = ffi.istype

---------------------------------------------------------------------------------
-- Options (src/lua/utils.c OPTIONS): each serializer has its own cfg table, changed
-- by calling it: json.cfg{encode_invalid_numbers = false}.

local OPTIONS = {
    {'encode_sparse_convert', 'boolean', true},
    {'encode_sparse_ratio', 'number', 2},
    {'encode_sparse_safe', 'number', 10},
    {'encode_max_depth', 'number', 128},
    {'encode_deep_as_nil', 'boolean', false},
    {'encode_invalid_numbers', 'boolean', true},
    {'encode_number_precision', 'number', 14},
    {'encode_load_metatables', 'boolean', true},
    {'encode_use_tostring', 'boolean', false},
    {'encode_invalid_as_nil', 'boolean', false},
    {'decode_invalid_numbers', 'boolean', true},
    {'decode_save_metatables', 'boolean', true},
    {'decode_max_depth', 'number', 128},
}

local function to_integer(v)
    v = tonumber(v) or 0
    return v >= 0 and floor(v) or -floor(-v)
end

-- Copy the recognised options of `update` into `cfg` (lua_toboolean/lua_tointeger).
local function apply_options(cfg, update)
    for _, option in ipairs(OPTIONS) do
        local name, kind = option[1], option[2]
        local value = update[name]
        if value ~= nil then
            if kind == 'boolean' then
                cfg[name] = value ~= false
            else
                cfg[name] = to_integer(value)
            end
        end
    end
    return cfg
end

local cfg_mt = {
    __call = function(cfg, update)
        if type(update) ~= 'table' then
            error(format("bad argument #2 to '?' (table expected, got %s)", type(update)), 2)
        end
        apply_options(cfg, update)
        return nil
    end,
}

local function new_cfg(overrides)
    local cfg = {}
    for _, option in ipairs(OPTIONS) do
        cfg[option[1]] = option[3]
    end
    for k, v in pairs(overrides or {}) do
        cfg[k] = v
    end
    return setmetatable(cfg, cfg_mt)
end

-- A per-call copy of cfg changed by a user's options table (json.encode(v, opts)).
local function call_cfg(cfg, update)
    local copy = {}
    for k, v in next, cfg do copy[k] = v end
    return apply_options(copy, update)
end

---------------------------------------------------------------------------------
-- Classification (luaL_tofield + luaL_convertfield).
--
-- tofield(value, cfg) returns one of:
--   'nil' | 'null'               nil, or a NULL cdata/userdata (both MP_NIL)
--   'bool', b
--   'uint', n | 'int', n         n is a Lua number or an int64_t/uint64_t cdata
--   'double', x | 'float', x
--   'str', s
--   'uuid', u
--   'decimal', d
--   'array', t, size, compact    t may be the result of a __serialize function
--   'map', t, size, compact

local tofield

local function array_length(t)        -- luaL_arrlen: the greatest integer key
    local max = 0
    for k in next, t do
        if type(k) == 'number' and k > max and floor(k) == k then
            max = k
        end
    end
    return max
end

local function map_length(t)
    local size = 0
    for _ in next, t do size = size + 1 end
    return size
end

local function classify_number(num, cfg)
    if num == num and num ~= huge and num ~= -huge and num ~= floor(num) then
        return 'double', num
    elseif num >= 0 and num < 18446744073709551616 then
        return 'uint', num
    elseif num >= -9223372036854775808 and num < 9223372036854775808 then
        return 'int', num
    end
    if not cfg.encode_invalid_numbers then      -- NaN or +-Inf
        if not cfg.encode_invalid_as_nil then
            raise_box('number must not be NaN or Inf')
        end
        return 'nil'
    end
    return 'double', num
end

local function check_finite(kind, num, cfg)
    if num ~= num or num == huge or num == -huge then
        if not cfg.encode_invalid_numbers then
            if not cfg.encode_invalid_as_nil then
                raise_box('number must not be NaN or Inf')
            end
            return 'nil'
        end
    end
    return kind, num
end

local function inspect_table(t, cfg)
    if cfg.encode_load_metatables then
        local mt = getmetatable(t)
        local hint = mt ~= nil and type(mt) == 'table' and rawget(mt, '__serialize') or nil
        if hint ~= nil then
            if type(hint) == 'function' then
                local ok, result = pcall(hint, t)
                if not ok then
                    raise_box(type(result) == 'string' and result or tostring(result))
                end
                return tofield(result, cfg)
            end
            if type(hint) ~= 'string' and type(hint) ~= 'number' then
                raise_box('invalid __serialize value')
            end
            hint = tostring(hint)
            if hint == 'array' or hint == 'seq' or hint == 'sequence' then
                return 'array', t, array_length(t), hint == 'seq'
            elseif hint == 'map' or hint == 'mapping' then
                return 'map', t, map_length(t), hint == 'map'
            end
            raise_box('invalid __serialize value')
        end
        if mt ~= nil and is_error(t) then         -- box.error objects show their message
            return 'str', tostring(t.message)
        end
    end
    local size, max = 0, 0
    for k in next, t do
        size = size + 1
        if type(k) ~= 'number' or (k ~= size and (k < 1 or floor(k) ~= k)) then
            for _ in next, t, k do size = size + 1 end
            return 'map', t, size, false
        end
        if k > max then max = k end
    end
    local ratio = cfg.encode_sparse_ratio
    if ratio > 0 and max > size * ratio and max > cfg.encode_sparse_safe then
        if not cfg.encode_sparse_convert then
            raise_box('excessively sparse array')
        end
        return 'map', t, size, false
    end
    return 'array', t, max, false
end

local function index_serialize(value)
    return value.__serialize
end

-- __serialize of a cdata or userdata (lua_field_inspect_ucdata): found by indexing.
local function inspect_ucdata(value, cfg)
    local ok, hint = pcall(index_serialize, value)
    if not ok or hint == nil then
        return nil
    end
    if type(hint) ~= 'function' then
        error('invalid __serialize value', 0)
    end
    local _, result = pcall(hint, value)
    return result, true
end

-- A ctype object (ffi.typeof('int')), which ffi.istype would take for its type. Only
-- tostring() tells one from a value: it prints 'ctype<...>' and never calls a
-- metatype's __tostring for it.
local function is_ctype(value)
    local ok, text = pcall(tostring, value)
    return ok and text == tostring(ffi.typeof(value))
end

local function classify_cdata(value, cfg)
    if is_ctype(value) then
        return nil
    elseif istype(int64_t, value) then
        return value >= 0 and 'uint' or 'int', value
    elseif istype(uint64_t, value) then
        return 'uint', value
    elseif istype(uuid_t, value) then
        return 'uuid', value
    elseif istype(decimal_t, value) then
        return 'decimal', value
    elseif istype(bool_t, value) then
        return 'bool', tonumber(value) ~= 0
    elseif istype(double_t, value) then
        return check_finite('double', tonumber(value), cfg)
    elseif istype(float_t, value) then
        return check_finite('float', tonumber(value), cfg)
    elseif (istype(voidp_t, value) or istype(cvoidp_t, value)) and value == nil then
        return 'null'
    end
    for i = 1, #small_ints do
        if istype(small_ints[i], value) then
            local n = tonumber(value)
            return n >= 0 and 'uint' or 'int', n
        end
    end
    return nil
end

-- A value no serializer knows: __serialize, then tostring / nil / an error.
local function convert_unknown(value, tp, cfg)
    if cfg.encode_load_metatables and (tp == 'userdata' or
                                      (tp == 'cdata' and not is_ctype(value))) then
        local result, found = inspect_ucdata(value, cfg)
        if found then
            local kind, a, b, c = tofield(result, cfg, true)
            if kind ~= nil then
                return kind, a, b, c
            end
            value, tp = result, type(result)
        end
    end
    if cfg.encode_use_tostring then
        return 'str', tostring(value)
    end
    if cfg.encode_invalid_as_nil then
        return 'nil'
    end
    error(format("unsupported Lua type '%s'", tp), 0)
end

-- `raw` = luaL_tofield without luaL_convertfield (returns nil for unknown values).
function tofield(value, cfg, raw)
    local tp = type(value)
    if tp == 'string' then
        return 'str', value
    elseif tp == 'number' then
        return classify_number(value, cfg)
    elseif tp == 'table' then
        return inspect_table(value, cfg)
    elseif tp == 'nil' then
        return 'nil'
    elseif tp == 'boolean' then
        return 'bool', value
    elseif tp == 'cdata' then
        local kind, a = classify_cdata(value, cfg)
        if kind ~= nil then
            return kind, a
        end
    end
    if raw then
        return nil
    end
    return convert_unknown(value, tp, cfg)
end

-- Decimal text of an integer number or int64/uint64 cdata.
local function integer_text(n)
    if type(n) == 'number' then
        if n >= -9007199254740992 and n <= 9007199254740992 then
            return format('%d', n)
        end
        n = n < 0 and ffi.new(int64_t, n) or ffi.new(uint64_t, n)
    end
    return (gsub(tostring(n), 'U?LL$', ''))
end

---------------------------------------------------------------------------------
-- decimal_t values: their digits, their text, and building one from its parts.

local DECIMAL_ROOM = 39                      -- digits that fit in lsu[13]
local UNIT_TEXT = {}                         -- 0..999 as three digits
for i = 0, 999 do UNIT_TEXT[i] = format('%03d', i) end
local rep, sub, concat = string.rep, string.sub, table.concat

local function is_decimal(value)
    return type(value) == 'cdata' and istype(decimal_t, value)
end

-- The coefficient's digits, most significant first ('0' for zero).
local function decimal_coefficient(d)
    local top = floor((d.digits + 2) / 3) - 1
    local lsu = d.lsu
    local parts = {format('%d', lsu[top])}
    for i = top - 1, 0, -1 do
        parts[#parts + 1] = UNIT_TEXT[lsu[i]]
    end
    return concat(parts)
end

local function decimal_negative(d)
    return d.bits >= 0x80
end

-- decimal_to_string: plain notation, never an exponent (1E+2 is '100', 0E+3 '0000').
local function decimal_text(d)
    local digits, exponent = decimal_coefficient(d), d.exponent
    local sign = decimal_negative(d) and '-' or ''
    if exponent >= 0 then
        return sign .. digits .. rep('0', exponent)
    end
    local point = #digits + exponent
    if point > 0 then
        return sign .. sub(digits, 1, point) .. '.' .. sub(digits, point + 1)
    end
    return sign .. '0.' .. rep('0', -point) .. digits
end

-- The exact value as Python's decimal module reads it: '-15E-1'.
local function decimal_sci(d)
    return (decimal_negative(d) and '-' or '') .. decimal_coefficient(d) .. 'E' ..
           d.exponent
end

-- A decimal_t from a sign, a digit string without leading zeros (1 to 39 digits)
-- and an exponent.
local function make_decimal(negative, digits, exponent)
    local d = decimal_t()
    local n = #digits
    d.digits, d.exponent, d.bits = n, exponent, negative and 0x80 or 0
    local unit = 0
    for last = n, 1, -3 do
        d.lsu[unit] = tonumber(sub(digits, last > 3 and last - 2 or 1, last))
        unit = unit + 1
    end
    return d
end

---------------------------------------------------------------------------------
-- The keys of a map in a fixed order: 2.6.0 writes a map in its LuaJIT's hash order,
-- which is the same on every run for the same table; this LuaJIT seeds its string
-- hashes at random, so its order changes from run to run. Numbers (ascending), then
-- strings (byte order), then booleans (false first), then the rest by tostring().
local KEY_RANK = {number = 1, string = 2, boolean = 3}
local sort = table.sort

local function key_before(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then
        local ra, rb = KEY_RANK[ta] or 4, KEY_RANK[tb] or 4
        if ra ~= rb then return ra < rb end
        return ta < tb
    end
    if ta == 'number' or ta == 'string' then return a < b end
    if ta == 'boolean' then return b and not a end
    return tostring(a) < tostring(b)
end

local function sorted_keys(t)
    local keys, n = {}, 0
    for k in next, t do
        n = n + 1
        keys[n] = k
    end
    if n > 1 then
        sort(keys, key_before)
    end
    return keys, n
end

-- Shared tables (lyaml find_references): a table reached twice gets an anchor.

local function find_references(refs, value)
    if type(value) ~= 'table' then
        return
    end
    local seen = refs[value]
    if seen == nil then
        refs[value] = false
    elseif seen == false then
        refs[value] = true
        return
    else
        return
    end
    for k, v in next, value do
        find_references(refs, v)
        find_references(refs, k)
    end
end

-- A walk for Python (lua/serialize.py) over the values packed[first..n]: the state
-- remembers which tables are shared and gives each of them a stable number. Values
-- stay in Lua: Python names them as (parent table, key), since a Lua thread would not
-- survive a trip through Python (lupa hands it back as a function).
local function pack(...)
    return {n = select('#', ...), ...}
end

local function walk_begin(packed, n, first)
    local refs = {}
    for i = first or 1, n do
        find_references(refs, rawget(packed, i))
    end
    return {refs = refs, ids = {}, count = 0}
end

local function shared_id(state, t)
    if not state.refs[t] then
        return nil
    end
    local id = state.ids[t]
    if id == nil then
        state.count = state.count + 1
        id = state.count
        state.ids[t] = id
    end
    return id
end

-- One step of the walk: the kind of parent[key] and, for a container, its children
-- packed in a plain table (array: items 1..size; map: key1, value1, key2, ...).
local function expand_step(parent, key, cfg, state)
    local value = rawget(parent, key)
    local kind, a, b, c = tofield(value, cfg)
    if kind == 'nil' then
        -- only a real nil prints as nil in Lua output; anything else is box.NULL
        return type(value) == 'nil' and 'nil' or 'null', nil
    elseif kind == 'uint' or kind == 'int' then
        return kind, integer_text(a)
    elseif kind == 'uuid' then
        return 'uuid', tostring(a)
    elseif kind == 'decimal' then
        return 'decimal', decimal_text(a)
    elseif kind == 'array' then
        local items = {}
        for i = 1, b do items[i] = rawget(a, i) end
        return 'array', items, b, c, shared_id(state, a)
    elseif kind == 'map' then
        local keys, count = sorted_keys(a)
        local items = {}
        for i = 1, count do
            local k = keys[i]
            items[2 * i - 1] = k
            items[2 * i] = rawget(a, k)
        end
        return 'map', items, count, c, shared_id(state, a)
    end
    return kind, a
end

-- Errors come back as ('error', err, tostring(err)) so Python keeps the error value.
local function expand(parent, key, cfg, state)
    local ok, kind, a, b, c, d = pcall(expand_step, parent, key, cfg, state)
    if not ok then
        return 'error', kind, tostring(kind)
    end
    return kind, a, b, c, d
end

-- An API function whose string errors read like luaL_error's: prefixed with the
-- position of the Lua code that called it (none when it was called as a tail call).
local function rethrow(ok, ...)
    if ok then
        return ...
    end
    error((...), 2)
end

local function guard(fn)
    return function(...)
        return rethrow(pcall(fn, ...))
    end
end

-- 64-bit integers for Python: (hi, lo) halves of the two's complement bits.
local function make_uint64(hi, lo)
    return ffi.new(uint64_t, hi) * 4294967296ULL + lo
end

local function make_int64(hi, lo)
    return ffi.cast(int64_t, make_uint64(hi, lo))
end

return {
    NULL = NULL,
    map_mt = map_mt,
    array_mt = array_mt,
    uuid_t = uuid_t,
    decimal_t = decimal_t,
    is_decimal = is_decimal,
    decimal_coefficient = decimal_coefficient,
    decimal_text = decimal_text,
    decimal_sci = decimal_sci,
    make_decimal = make_decimal,
    DECIMAL_ROOM = DECIMAL_ROOM,
    new_cfg = new_cfg,
    call_cfg = call_cfg,
    tofield = tofield,
    integer_text = integer_text,
    make_uint64 = make_uint64,
    make_int64 = make_int64,
    find_references = find_references,
    sorted_keys = sorted_keys,
    pack = pack,
    guard = guard,
    walk_begin = walk_begin,
    expand = expand,
    raise_box = raise_box,
}
