-- Tarantool's decimal module (src/lua/decimal.c in 2.6): decimal_t cdata (declared by
-- the serializer core) with arithmetic, comparison and tostring metamethods, and the
-- functions new, is_decimal, precision, scale, round, rescale, trim, abs, sqrt, ln,
-- log10, exp. Lua checks arguments and converts operands to text; Python's decimal
-- module computes (lua/modules/decimal.py) and answers with the parts of the result
-- (negative, digits, exponent), or nil and what failed: 0 for the operation, N for
-- the N-th operand. Loaded with the serializer core and those natives.
local core, native = ...

local ffi = require('ffi')
local decimal_t, is_decimal = core.decimal_t, core.is_decimal
local make_decimal, decimal_sci, decimal_text = core.make_decimal, core.decimal_sci,
                                                core.decimal_text
local decimal_coefficient = core.decimal_coefficient
local guard = core.guard
local parse, arith, compare, round_to = native.parse, native.arith, native.compare,
                                        native.round
local type, select, error, tonumber, tostring = type, select, error, tonumber, tostring
local format, gsub, floor = string.format, string.gsub, math.floor
local istype = ffi.istype

local int64_t, uint64_t = ffi.typeof('int64_t'), ffi.typeof('uint64_t')
local NUMERIC_CDATA = {ffi.typeof('int8_t'), ffi.typeof('int16_t'), ffi.typeof('int32_t'),
                       ffi.typeof('uint8_t'), ffi.typeof('uint16_t'), ffi.typeof('uint32_t'),
                       ffi.typeof('char'), ffi.typeof('float'), ffi.typeof('double')}

local function type_error(index)
    error(format('expected decimal, number or string as %d argument', index), 0)
end

local function value_error(index)
    error(format('incorrect value to convert to decimal as %d argument', index), 0)
end

-- The parts Python answered, as a decimal_t; nil parts raise what failed.
local function result(negative, digits, exponent)
    if negative == nil then
        if digits == 0 then
            error('decimal operation failed', 0)
        end
        value_error(digits)
    end
    return make_decimal(negative, digits, exponent)
end

-- decimal_from_double: numbers go through printf's %.15g (DBL_DIG digits).
local function number_text(n)
    return format('%.15g', n)
end

-- lua_todecimal's view of a value: its text and whether Python must still check and
-- round it (a string or a number's text), or nil when it cannot be a decimal.
local function operand(value)
    local tp = type(value)
    if tp == 'string' then
        return value, true
    elseif tp == 'number' then
        return number_text(value), true
    elseif tp ~= 'cdata' then
        return nil
    elseif istype(decimal_t, value) then
        return decimal_sci(value), false
    elseif istype(int64_t, value) or istype(uint64_t, value) then
        return (gsub(tostring(value), 'U?LL$', '')), true
    end
    for i = 1, #NUMERIC_CDATA do
        if istype(NUMERIC_CDATA[i], value) then
            return number_text(tonumber(value)), true
        end
    end
    return nil
end

-- Two operands for Python, with the mask of those it must check (1: the first, 2: the
-- second). Tarantool converts the first one completely before it looks at the second.
local function operands(a, b)
    local a_text, a_raw = operand(a)
    if a_text == nil then
        type_error(1)
    end
    local b_text, b_raw = operand(b)
    if b_text == nil then
        if a_raw and parse(a_text) == nil then
            value_error(1)
        end
        type_error(2)
    end
    return a_text, b_text, (a_raw and 1 or 0) + (b_raw and 2 or 0)
end

local function new(...)
    if select('#', ...) == 0 then
        error('usage: decimal.new(value)', 0)
    end
    local value = ...
    if is_decimal(value) then
        return decimal_t(value)
    end
    local text = operand(value)
    if text == nil then
        type_error(1)
    end
    local negative, digits, exponent = parse(text)
    if negative == nil then
        value_error(1)
    end
    return make_decimal(negative, digits, exponent)
end

local function is_decimal_api(...)
    if select('#', ...) == 0 then
        error('usage: decimal.is_decimal(value)', 0)
    end
    return is_decimal((...))
end

-- lua_checkdecimal: the functions that read a decimal's fields take nothing else.
local function checked(value)
    if type(value) ~= 'cdata' then
        error('expected cdata as 1 argument', 0)
    elseif not istype(decimal_t, value) then
        error('expected decimal as 1 argument', 0)
    end
    return value
end

-- A function of one decimal: usage error without an argument, then lua_checkdecimal.
local function of_decimal(name, fn)
    local usage = format('usage: decimal.%s(decimal)', name)
    return function(...)
        if select('#', ...) == 0 then
            error(usage, 0)
        end
        return fn(checked((...)))
    end
end

local function precision(d)          -- decimal_precision: digits the value shows
    local exponent = d.exponent
    if exponent <= 0 then
        return d.digits > -exponent and d.digits or -exponent
    end
    return d.digits + exponent
end

local function scale(d)
    return d.exponent < 0 and -d.exponent or 0
end

-- decNumberTrim: trailing zeros after the point go; a zero keeps only its sign.
local function trim(d)
    local digits, exponent = decimal_coefficient(d), d.exponent
    local negative = d.bits >= 0x80
    if digits == '0' then
        return make_decimal(negative, '0', 0)
    end
    while exponent < 0 and digits:byte(-1) == 48 do
        digits, exponent = digits:sub(1, -2), exponent + 1
    end
    return make_decimal(negative, digits, exponent)
end

-- lua_tointeger, then C's int: the scale argument of round and rescale.
local function c_int(value)
    local n = type(value) == 'number' and value or
              type(value) == 'string' and tonumber(value) or 0
    if n ~= n or n >= 9223372036854775808 or n < -9223372036854775808 then
        return 0                               -- (int64_t) of those is INT64_MIN
    end
    n = (n >= 0 and floor(n) or -floor(-n)) % 4294967296
    return n >= 2147483648 and n - 4294967296 or n
end

local function rounding(name, rescale)
    local usage = format('usage: decimal.%s(decimal, scale)', name)
    return function(...)
        if select('#', ...) < 2 then
            error(usage, 0)
        end
        local d, n = ...
        return result(round_to(decimal_sci(checked(d)), c_int(n), rescale))
    end
end

-- A function of one value convertible to decimal (abs, sqrt, ln, log10, exp).
local function math_function(name)
    local usage = format('usage: decimal.%s(decimal)', name)
    return function(...)
        if select('#', ...) == 0 then
            error(usage, 0)
        end
        local text, raw = operand((...))
        if text == nil then
            type_error(1)
        end
        return result(arith(name, text, '', raw and 1 or 0))
    end
end

local function arithmetic(op)
    return guard(function(a, b)
        return result(arith(op, operands(a, b)))
    end)
end

-- -1, 0 or 1, for the comparison metamethods.
local function order(a, b)
    local sign, failed = compare(operands(a, b))
    if sign == nil then
        value_error(failed)
    end
    return sign
end

-- nil or a NULL cdata (box.NULL): never equal to a decimal.
local function is_null(value)
    local tp = type(value)
    return tp == 'nil' or (tp == 'cdata' and not istype(decimal_t, value) and value == nil)
end

local function check_not_nil(a, b)         -- type(): `a == nil` would call __eq
    if type(a) == 'nil' or type(b) == 'nil' then
        error('attempt to compare decimal with nil', 0)
    end
end

ffi.metatype(decimal_t, {
    __tostring = decimal_text,
    __add = arithmetic('add'),
    __sub = arithmetic('sub'),
    __mul = arithmetic('mul'),
    __div = arithmetic('div'),
    __mod = arithmetic('mod'),
    __pow = arithmetic('pow'),
    __unm = guard(function(a) return result(arith('unm', decimal_sci(a), '', 0)) end),
    __eq = guard(function(a, b)
        if is_null(a) or is_null(b) then
            return false
        end
        return order(a, b) == 0
    end),
    __lt = guard(function(a, b)
        check_not_nil(a, b)
        return order(a, b) < 0
    end),
    __le = guard(function(a, b)
        check_not_nil(a, b)
        return order(a, b) <= 0
    end),
})

local module = {
    new = new,
    is_decimal = is_decimal_api,
    precision = of_decimal('precision', precision),
    scale = of_decimal('scale', scale),
    trim = of_decimal('trim', trim),
    round = rounding('round', false),
    rescale = rounding('rescale', true),
}
for _, name in ipairs({'abs', 'sqrt', 'ln', 'log10', 'exp'}) do
    module[name] = math_function(name)
end
for name, fn in pairs(module) do
    module[name] = guard(fn)
end
return module
