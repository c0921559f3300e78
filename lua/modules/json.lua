-- Tarantool's json module (2.6 bundles lua-cjson): encode and decode with its number
-- formatting, escaping and error messages. Loaded with the serializer core
-- (serializer.lua); returns the module.
local core = ...

local ffi = require('ffi')
local tofield, integer_text, new_cfg, call_cfg = core.tofield, core.integer_text,
                                                  core.new_cfg, core.call_cfg
local guard, decimal_text, sorted_keys = core.guard, core.decimal_text, core.sorted_keys
local NULL, map_mt, array_mt = core.NULL, core.map_mt, core.array_mt
local byte, sub, find, match, char, format = string.byte, string.sub, string.find,
                                             string.match, string.char, string.format
local gsub, concat, tostring, tonumber = string.gsub, table.concat, tostring, tonumber
local type, next, rawget, rawset, select = type, next, rawget, rawset, select
local new
local setmetatable, error, huge = setmetatable, error, math.huge
local band, bor, rshift, lshift = bit.band, bit.bor, bit.rshift, bit.lshift

local function argcheck(n)
    if n ~= 1 and n ~= 2 then
        error("bad argument #1 to '?' (expected 1 or 2 arguments)", 0)
    end
end

----------------------------------------------------------------------------- encode

local ESCAPES = {}
for i = 0, 31 do ESCAPES[char(i)] = format('\\u%04x', i) end
ESCAPES['\b'], ESCAPES['\t'], ESCAPES['\n'] = '\\b', '\\t', '\\n'
ESCAPES['\f'], ESCAPES['\r'] = '\\f', '\\r'
ESCAPES['"'], ESCAPES['\\'], ESCAPES['/'], ESCAPES['\127'] = '\\"', '\\\\', '\\/', '\\u007f'

local function quote(s)
    return '"' .. gsub(s, '[%z\1-\31"\\/\127]', ESCAPES) .. '"'
end

local function number_text(num, cfg)
    if num ~= num then
        return 'nan'
    end
    local precision = cfg.encode_number_precision
    if precision <= 0 or precision > 14 then precision = 14 end
    return format('%.' .. precision .. 'g', num)
end

local encode_value

local function too_deep(cfg)
    if not cfg.encode_deep_as_nil then
        error('Too high nest level', 0)
    end
end

local function encode_object(t, cfg, depth, buf)
    buf[#buf + 1] = '{'
    local comma = false
    local keys, count = sorted_keys(t)       -- (a fixed order: see serializer.lua)
    for i = 1, count do
        local k = keys[i]
        local v = rawget(t, k)
        if comma then buf[#buf + 1] = ',' end
        comma = true
        local kind, key = tofield(k, cfg)
        if kind == 'uint' or kind == 'int' then
            buf[#buf + 1] = '"' .. integer_text(key) .. '":'
        elseif kind == 'str' then
            buf[#buf + 1] = quote(key) .. ':'
        else
            error('table key must be a number or string', 0)
        end
        encode_value(v, cfg, depth, buf)
    end
    buf[#buf + 1] = '}'
end

local function encode_array(t, size, cfg, depth, buf)
    buf[#buf + 1] = '['
    for i = 1, size do
        if i > 1 then buf[#buf + 1] = ',' end
        encode_value(rawget(t, i), cfg, depth, buf)
    end
    buf[#buf + 1] = ']'
end

function encode_value(value, cfg, depth, buf)
    local kind, a, b = tofield(value, cfg)
    if kind == 'str' then
        buf[#buf + 1] = quote(a)
    elseif kind == 'uint' or kind == 'int' then
        buf[#buf + 1] = integer_text(a)
    elseif kind == 'double' or kind == 'float' then
        buf[#buf + 1] = number_text(a, cfg)
    elseif kind == 'bool' then
        buf[#buf + 1] = a and 'true' or 'false'
    elseif kind == 'nil' or kind == 'null' then
        buf[#buf + 1] = 'null'
    elseif kind == 'map' or kind == 'array' then
        if depth >= cfg.encode_max_depth then
            too_deep(cfg)
            buf[#buf + 1] = 'null'
        elseif kind == 'map' then
            encode_object(a, cfg, depth + 1, buf)
        else
            encode_array(a, b, cfg, depth + 1, buf)
        end
    elseif kind == 'uuid' then
        buf[#buf + 1] = quote(tostring(a))
    elseif kind == 'decimal' then
        buf[#buf + 1] = quote(decimal_text(a))
    end
end

local function encode(cfg, ...)
    local n = select('#', ...)
    argcheck(n)
    local value, options = ...
    if n == 2 then
        cfg = call_cfg(cfg, options)
    end
    local buf = {}
    encode_value(value, cfg, 0, buf)
    return concat(buf)
end

----------------------------------------------------------------------------- decode

-- The parser's state for one call (decode never calls user code, so one is enough).
local s, pos, line, line_start, depth, dcfg

local SINGLE = {
    [123] = 'T_OBJ_BEGIN', [125] = 'T_OBJ_END', [91] = 'T_ARR_BEGIN',
    [93] = 'T_ARR_END', [44] = 'T_COMMA', [58] = 'T_COLON',
}
local UNKNOWN = {[102] = true, [105] = true, [73] = true, [110] = true, [78] = true,
                 [116] = true, [34] = true, [43] = true, [45] = true}
for c = 48, 57 do UNKNOWN[c] = true end

local ESCAPED = {[34] = '"', [92] = '\\', [47] = '/', [98] = '\b', [116] = '\t',
                 [110] = '\n', [102] = '\f', [114] = '\r'}

-- A token: type, value, column (0-based, of where it starts or failed).
local function token_error(message)
    return 'T_ERROR', message, pos - line_start
end

local function hex4(at)
    local h = sub(s, at, at + 3)
    if #h ~= 4 or not match(h, '^%x%x%x%x$') then
        return nil
    end
    return tonumber(h, 16)
end

local function utf8(code)
    if code <= 0x7F then
        return char(code)
    elseif code <= 0x7FF then
        return char(bor(rshift(code, 6), 0xC0), bor(band(code, 0x3F), 0x80))
    elseif code <= 0xFFFF then
        return char(bor(rshift(code, 12), 0xE0), bor(band(rshift(code, 6), 0x3F), 0x80),
                    bor(band(code, 0x3F), 0x80))
    end
    return char(bor(rshift(code, 18), 0xF0), bor(band(rshift(code, 12), 0x3F), 0x80),
                bor(band(rshift(code, 6), 0x3F), 0x80), bor(band(code, 0x3F), 0x80))
end

-- \uXXXX at `at` (the backslash): the UTF-8 text and the escape's length, or nil.
local function unicode_escape(at)
    local code = hex4(at + 2)
    if code == nil then return nil end
    local length = 6
    if band(code, 0xF800) == 0xD800 then
        if band(code, 0x400) ~= 0 or sub(s, at + 6, at + 7) ~= '\\u' then
            return nil
        end
        local low = hex4(at + 8)
        if low == nil or band(low, 0xFC00) ~= 0xDC00 then
            return nil
        end
        code = lshift(band(code, 0x3FF), 10) + band(low, 0x3FF) + 0x10000
        length = 12
    end
    return utf8(code), length
end

local function string_token()
    local column = pos - line_start
    local parts, from = {}, pos + 1
    while true do
        local at = find(s, '["\\%z]', from)
        if at == nil then
            pos = #s + 1
            return token_error('unexpected end of string')
        end
        local c = byte(s, at)
        if c ~= 92 then
            if c == 0 then
                pos = at
                return token_error('unexpected end of string')
            end
            parts[#parts + 1] = sub(s, from, at - 1)
            pos = at + 1
            return 'T_STRING', concat(parts), column
        end
        parts[#parts + 1] = sub(s, from, at - 1)
        local e = byte(s, at + 1)
        if e == 117 then
            local text, length = unicode_escape(at)
            if text == nil then
                pos = at
                return token_error('invalid unicode escape code')
            end
            parts[#parts + 1] = text
            from = at + length
        elseif ESCAPED[e] then
            parts[#parts + 1] = ESCAPED[e]
            from = at + 2
        else
            pos = at
            return token_error('invalid escape code')
        end
    end
end

local UINT64_MAX = 0xFFFFFFFFFFFFFFFFULL
local INT64_MAX = 0x7FFFFFFFFFFFFFFFULL

-- Decimal digits as uint64, saturating like strtoull.
local function digits_u64(digits)
    local acc = 0ULL
    for i = 1, #digits do
        local d = byte(digits, i) - 48
        if acc > (UINT64_MAX - d) / 10 then
            return UINT64_MAX, true
        end
        acc = acc * 10 + d
    end
    return acc, false
end

-- luaL_pushint64 / luaL_pushuint64: a Lua number up to 1e14 - 1, else a cdata.
local function push_integer(negative, digits)
    if #digits <= 14 then
        local n = tonumber(digits)
        return negative and -n or n
    end
    local value, overflow = digits_u64(digits)
    if negative then                             -- strtoll clamps at LLONG_MIN
        if overflow or value > INT64_MAX + 1 then value = INT64_MAX + 1 end
        return -ffi.cast('int64_t', value)
    end
    if overflow or value >= INT64_MAX then       -- strtoll hit LLONG_MAX: strtoull
        return value
    end
    local n = ffi.cast('int64_t', value)
    if value <= 99999999999999ULL then return tonumber(n) end
    return n
end

local function number_token()
    local column = pos - line_start
    local sign, digits = match(s, '^(%-?)(%d+)', pos)
    local after = pos + #sign + #digits
    local c = byte(s, after)
    if c == 46 or c == 101 or c == 69 then       -- '.', 'e', 'E': strtod
        local text = match(s, '^%-?%d+%.?%d*', pos)
        local exponent = match(s, '^[eE][+-]?%d+', pos + #text)
        text = text .. (exponent or '')
        pos = pos + #text
        return 'T_NUMBER', tonumber(text), column
    end
    pos = after
    return 'T_INT', push_integer(sign == '-', digits), column
end

local function invalid_number()
    local p = pos
    local c = byte(s, p)
    if c == 43 then return true end              -- '+'
    if c == 45 then p = p + 1; c = byte(s, p) end
    if c == 48 then
        local c2 = byte(s, p + 1) or 0
        return bor(c2, 0x20) == 120 or (c2 >= 48 and c2 <= 57)
    end
    return c == nil or c < 48 or c > 57
end

local function next_token()
    local c
    while true do
        c = byte(s, pos) or 0
        if c == 10 then
            line = line + 1
            line_start = pos + 1
        elseif c ~= 32 and c ~= 9 and c ~= 13 then
            break
        end
        pos = pos + 1
    end
    local column = pos - line_start
    if c == 0 then
        return 'T_END', nil, column
    end
    local single = SINGLE[c]
    if single then
        pos = pos + 1
        return single, nil, column
    end
    if not UNKNOWN[c] then
        return token_error('invalid token')
    end
    if c == 34 then
        return string_token()
    elseif not invalid_number() then
        return number_token()
    elseif sub(s, pos, pos + 3) == 'true' then
        pos = pos + 4
        return 'T_BOOLEAN', true, column
    elseif sub(s, pos, pos + 4) == 'false' then
        pos = pos + 5
        return 'T_BOOLEAN', false, column
    elseif sub(s, pos, pos + 3) == 'null' then
        pos = pos + 4
        return 'T_NULL', nil, column
    elseif dcfg.decode_invalid_numbers then
        if sub(s, pos, pos + 2) == 'inf' then
            pos = pos + 3
            return 'T_NUMBER', huge, column
        elseif sub(s, pos, pos + 3) == '-inf' then
            pos = pos + 4
            return 'T_NUMBER', -huge, column
        elseif sub(s, pos, pos + 2) == 'nan' or sub(s, pos, pos + 2) == '-na' then
            pos = pos + (c == 45 and 4 or 3)
            return 'T_NUMBER', 0 / 0, column
        end
    end
    return token_error('invalid token')
end

local function throw(expected, kind, value, column)
    local found = kind == 'T_ERROR' and value or kind
    error(format('Expected %s but found %s on line %d at character %d', expected, found,
                 line, column + 1), 0)
end

local function descend()
    depth = depth + 1
    if depth > dcfg.decode_max_depth then
        error(format('Found too many nested data structures (%d) on line %d at character %d',
                     depth, line, pos - line_start), 0)
    end
end

local parse_value

local function parse_object()
    descend()
    local t = {}
    if dcfg.decode_save_metatables then setmetatable(t, map_mt) end
    local kind, value, column = next_token()
    if kind == 'T_OBJ_END' then
        depth = depth - 1
        return t
    end
    while true do
        if kind ~= 'T_STRING' then throw('object key string', kind, value, column) end
        local key = value
        kind, value, column = next_token()
        if kind ~= 'T_COLON' then throw('colon', kind, value, column) end
        rawset(t, key, parse_value(next_token()))
        kind, value, column = next_token()
        if kind == 'T_OBJ_END' then
            depth = depth - 1
            return t
        end
        if kind ~= 'T_COMMA' then throw('comma or object end', kind, value, column) end
        kind, value, column = next_token()
    end
end

local function parse_array()
    descend()
    local t = {}
    if dcfg.decode_save_metatables then setmetatable(t, array_mt) end
    local kind, value, column = next_token()
    if kind == 'T_ARR_END' then
        depth = depth - 1
        return t
    end
    local i = 1
    while true do
        rawset(t, i, parse_value(kind, value, column))
        i = i + 1
        kind, value, column = next_token()
        if kind == 'T_ARR_END' then
            depth = depth - 1
            return t
        end
        if kind ~= 'T_COMMA' then throw('comma or array end', kind, value, column) end
        kind, value, column = next_token()
    end
end

function parse_value(kind, value, column)
    if kind == 'T_STRING' or kind == 'T_INT' or kind == 'T_BOOLEAN' then
        return value
    elseif kind == 'T_NUMBER' then
        if not dcfg.decode_invalid_numbers and (value ~= value or value == huge or
                                                value == -huge) then
            error('number must not be NaN or Inf', 0)
        end
        return value
    elseif kind == 'T_OBJ_BEGIN' then
        return parse_object()
    elseif kind == 'T_ARR_BEGIN' then
        return parse_array()
    elseif kind == 'T_NULL' then
        return NULL
    end
    throw('value', kind, value, column)
end

local function decode(cfg, ...)
    local n = select('#', ...)
    argcheck(n)
    local text, options = ...
    if type(text) == 'number' then
        text = tostring(text)
    elseif type(text) ~= 'string' then
        error(format("bad argument #1 to '?' (string expected, got %s)",
                     text == nil and 'no value' or type(text)), 0)
    end
    if n == 2 then
        cfg = call_cfg(cfg, options)
    end
    if #text >= 2 and (byte(text, 1) == 0 or byte(text, 2) == 0) then
        error('JSON parser does not support UTF-16 or UTF-32', 0)
    end
    s, pos, line, line_start, depth, dcfg = text, 1, 1, 1, 0, cfg
    local value = parse_value(next_token())
    local kind, v, column = next_token()
    if kind ~= 'T_END' then
        throw('the end', kind, v, column)
    end
    s = nil
    return value
end

----------------------------------------------------------------------------- module

function new()
    local cfg = new_cfg()
    return {
        encode = guard(function(...) return encode(cfg, ...) end),
        decode = guard(function(...) return decode(cfg, ...) end),
        new = new,
        cfg = cfg,
        NULL = NULL,
        array_mt = array_mt,
        map_mt = map_mt,
    }
end

local json = new()
json.null = NULL      -- compatibility with cjson
return json
