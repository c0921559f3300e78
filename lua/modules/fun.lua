-- Tarantool's `fun` module: the luafun iterator API 2.6.0 bundles, written for Spindle
-- from that API's documented behaviour (and 2.6.0's answers to the same calls).
--
-- An iterator is the triple (gen, param, state) of Lua's generic `for`. Every function
-- taking an iterator accepts the triple, an iterator object, a table (an array when
-- #t > 0, else its pairs as key, value), or a string (its characters). Functions
-- making an iterator return an iterator object plus its param and state, so both
-- `for _, x in fun.range(3)` and `fun.range(3):map(f):totable()` work.
--
-- Errors raised on purpose carry the place 2.6.0's builtin/fun.lua raises them from,
-- so that a pcall() reads the same on both.
local type, select, error, setmetatable, getmetatable = type, select, error, setmetatable,
    getmetatable
local unpack, next, pairs, ipairs, tostring, rawget = unpack, next, pairs, ipairs, tostring,
    rawget
local string_sub, string_find = string.sub, string.find
local string_format, math_min, math_max, math_random = string.format, math.min, math.max,
    math.random

local fun = {}
local methods = {}

local function fail(line, message)
    error(string_format('builtin/fun.lua:%d: %s', line, message), 0)
end

local iterator_mt = {
    __index = methods,
    -- `for _, x in obj, param, state`: the object is the generator
    __call = function(self, param, state) return self.gen(param, state) end,
    __tostring = function() return '<generator>' end,
}

local function wrap(gen, param, state)
    return setmetatable({gen = gen, param = param, state = state}, iterator_mt), param, state
end

local function unwrap(self)
    return self.gen, self.param, self.state
end

-- a copy of a state table, so that an iterator can be restarted from a saved point
local function copy(value)
    if type(value) ~= 'table' then
        return value
    end
    local result = {}
    for k, v in pairs(value) do
        result[copy(k)] = copy(v)
    end
    return setmetatable(result, getmetatable(value))
end

local function empty_gen() return nil end

local ipairs_gen = ipairs({})          -- Lua's own ipairs step, as 2.6.0 uses

local function string_gen(text, index)
    index = index + 1
    if index > #text then
        return nil
    end
    return index, string_sub(text, index, index)
end

-- a table without array part: its pairs, as (key, key, value)
local function hash_gen(tab, key)
    local value
    key, value = next(tab, key)
    return key, key, value
end

-- A box tuple is cdata in 2.6.0, which fun does not iterate (tuple:pairs() does)
local function is_tuple(obj)
    local box = package.loaded.box
    local tuple = type(box) == 'table' and rawget(box, 'tuple') or nil
    return tuple ~= nil and tuple.is(obj)
end

local function raw_iter(obj, param, state)
    local kind = type(obj)
    if kind == 'function' then
        return obj, param, state
    elseif kind == 'table' then
        local mt = getmetatable(obj)
        if mt ~= nil then
            if mt == iterator_mt then
                return obj.gen, obj.param, obj.state
            elseif mt.__ipairs ~= nil then
                return mt.__ipairs(obj)
            elseif mt.__pairs ~= nil then
                return mt.__pairs(obj)
            elseif is_tuple(obj) then
                kind = 'cdata'
            end
        end
    end
    if kind == 'table' then
        if #obj > 0 then
            return ipairs(obj)
        end
        return hash_gen, obj, nil
    elseif kind == 'string' then
        if #obj == 0 then
            return empty_gen, nil, nil
        end
        return string_gen, obj, 0
    elseif obj == nil then
        fail(100, 'invalid iterator')
    end
    fail(127, string_format('object %s of type "%s" is not iterable', tostring(obj), kind))
end

local function iter(obj, param, state)
    return wrap(raw_iter(obj, param, state))
end

-- Publish `impl(args..., gen, param, state)` as fun.name(args..., iterable) and as the
-- method obj:name(args...). `nargs` is the count of leading arguments.
local function export(name, nargs, impl)
    if nargs == 0 then
        fun[name] = function(gen, param, state)
            return impl(raw_iter(gen, param, state))
        end
        methods[name] = function(self)
            return impl(self.gen, self.param, self.state)
        end
    elseif nargs == 1 then
        fun[name] = function(a, gen, param, state)
            return impl(a, raw_iter(gen, param, state))
        end
        methods[name] = function(self, a)
            return impl(a, self.gen, self.param, self.state)
        end
    else
        fun[name] = function(a, b, gen, param, state)
            return impl(a, b, raw_iter(gen, param, state))
        end
        methods[name] = function(self, a, b)
            return impl(a, b, self.gen, self.param, self.state)
        end
    end
end

local function alias(name, ...)
    for i = 1, select('#', ...) do
        local other = select(i, ...)
        fun[other], methods[other] = fun[name], methods[name]
    end
end

-- calls f with the values of one step, passing its state on; nil at the end
local function call_step(fun, state_x, ...)   -- named as 2.6.0's, for its error text
    if state_x == nil then
        return nil
    end
    fun(...)
    return state_x
end

-- the values of one step without its state; nil at the end
local function values_of(state_x, ...)
    if state_x == nil then
        return nil
    end
    return ...
end

-- generators ---------------------------------------------------------------------

local function range_up(limits, value)
    value = value + limits[2]
    if value > limits[1] then
        return nil
    end
    return value, value
end

local function range_down(limits, value)
    value = value + limits[2]
    if value < limits[1] then
        return nil
    end
    return value, value
end

function fun.range(start, stop, step)
    if step == nil then
        if stop == nil then
            if start == 0 then
                return empty_gen, nil, nil     -- 2.6.0 answers a bare generator here
            end
            stop = start
            start = stop > 0 and 1 or -1
        end
        step = start <= stop and 1 or -1
    end
    if step == 0 then
        fail(221, 'step must not be zero')
    end
    return wrap(step > 0 and range_up or range_down, {stop, step}, start - step)
end

local function repeat_one(value, position) return position + 1, value end
local function repeat_many(values, position)
    return position + 1, unpack(values, 1, values.n)
end

function fun.duplicate(...)
    if select('#', ...) <= 1 then
        return wrap(repeat_one, (...), 0)
    end
    return wrap(repeat_many, {n = select('#', ...), ...}, 0)
end
fun.xrepeat, fun.replicate = fun.duplicate, fun.duplicate

local function tabulate_step(f, position) return position + 1, f(position) end

function fun.tabulate(f)
    return wrap(tabulate_step, f, 0)
end

function fun.zeros() return wrap(repeat_one, 0, 0) end
function fun.ones() return wrap(repeat_one, 1, 0) end

local function random_step(bounds, position)
    if bounds == nil then
        return position + 1, math_random()
    end
    return position + 1, math_random(bounds[1], bounds[2] - 1)
end

function fun.rands(low, high)
    if low == nil and high == nil then
        return wrap(random_step, nil, 0)
    end
    if type(low) ~= 'number' then
        fail(282, 'invalid first arg to rands')
    end
    if high == nil then
        low, high = 0, low
    elseif type(high) ~= 'number' then
        fail(286, 'invalid second arg to rands')
    end
    if low >= high then
        fail(289, 'empty interval')
    end
    return wrap(random_step, {low, high}, 0)
end

fun.wrap = wrap
fun.iter = iter
methods.unwrap = unwrap

-- slicing --------------------------------------------------------------------------

export('nth', 1, function(n, gen, param, state)
    if n <= 0 then
        fail(299, 'invalid first argument to nth')
    end
    if gen == ipairs_gen then
        return param[n]
    elseif gen == string_gen then
        if n <= #param then
            return string_sub(param, n, n)
        end
        return nil
    end
    for _ = 1, n - 1 do
        state = gen(param, state)
        if state == nil then
            return nil
        end
    end
    return values_of(gen(param, state))
end)

local function head_of(state_x, ...)
    if state_x == nil then
        fail(323, 'head: iterator is empty')
    end
    return ...
end

export('head', 0, function(gen, param, state)
    return head_of(gen(param, state))
end)
alias('head', 'car')

export('tail', 0, function(gen, param, state)
    state = gen(param, state)
    if state == nil then
        return wrap(empty_gen, nil, nil)
    end
    return wrap(gen, param, state)
end)
alias('tail', 'cdr')

-- take_n: state {taken, inner state}; a fresh table each step, states stay immutable
local function take_n_next(taken, state_x, ...)
    if state_x == nil then
        return nil
    end
    return {taken, state_x}, ...
end

local function take_n_step(source, state)
    if state[1] >= source[1] then
        return nil
    end
    return take_n_next(state[1] + 1, source[2](source[3], state[2]))
end

local function take_n(n, gen, param, state)
    if n < 0 then
        fail(365, 'invalid first argument to take_n')
    end
    return wrap(take_n_step, {n, gen, param}, {0, state})
end
export('take_n', 1, take_n)

local function take_while_next(f, state_x, ...)
    if state_x == nil or not f(...) then
        return nil
    end
    return state_x, ...
end

local function take_while_step(source, state)
    return take_while_next(source[1], source[2](source[3], state))
end

local function take_while(f, gen, param, state)
    return wrap(take_while_step, {f, gen, param}, state)
end
export('take_while', 1, take_while)

local function take(n_or_f, gen, param, state)
    if type(n_or_f) == 'number' then
        return take_n(n_or_f, gen, param, state)
    end
    return take_while(n_or_f, gen, param, state)
end
export('take', 1, take)

local function drop_n(n, gen, param, state)
    if n < 0 then
        fail(401, 'invalid first argument to drop_n')
    end
    for _ = 1, n do
        state = gen(param, state)
        if state == nil then
            return wrap(empty_gen, nil, nil)
        end
    end
    return wrap(gen, param, state)
end
export('drop_n', 1, drop_n)

local function still_dropping(f, state_x, ...)
    if state_x == nil then
        return nil, false
    end
    return state_x, f(...) and true or false
end

local function drop_while(f, gen, param, state)
    while true do
        local before = copy(state)
        local state_x, dropping = still_dropping(f, gen(param, state))
        if state_x == nil then
            return wrap(empty_gen, nil, nil)
        end
        if not dropping then
            return wrap(gen, param, before)   -- restart at the first kept element
        end
        state = state_x
    end
end
export('drop_while', 1, drop_while)

local function drop(n_or_f, gen, param, state)
    if type(n_or_f) == 'number' then
        return drop_n(n_or_f, gen, param, state)
    end
    return drop_while(n_or_f, gen, param, state)
end
export('drop', 1, drop)

export('span', 1, function(n_or_f, gen, param, state)
    return take(n_or_f, gen, param, state), drop(n_or_f, gen, param, state)
end)
alias('span', 'split', 'split_at')

-- indexing -------------------------------------------------------------------------

export('index', 1, function(x, gen, param, state)
    local position = 1
    for _, value in gen, param, state do
        if value == x then
            return position
        end
        position = position + 1
    end
    return nil
end)
alias('index', 'index_of', 'elem_index')

local function indexes_next(x, state_x, value)
    if state_x == nil then
        return nil
    end
    return state_x, value == x
end

local function indexes_step(source, state)
    local position, inner = state[1], state[2]
    while true do
        local state_x, found = indexes_next(source[1], source[2](source[3], inner))
        if state_x == nil then
            return nil
        end
        position, inner = position + 1, state_x
        if found then
            return {position, inner}, position
        end
    end
end

export('indexes', 1, function(x, gen, param, state)
    return wrap(indexes_step, {x, gen, param}, {0, state})
end)
alias('indexes', 'indices', 'elem_indexes', 'elem_indices')

-- filtering ------------------------------------------------------------------------

local filter_step

-- a rejected element moves on by a tail call: no stack grows however many are skipped
local function filter_check(source, state_x, ...)
    if state_x == nil then
        return nil
    end
    if source[1](...) then
        return state_x, ...
    end
    return filter_step(source, state_x)
end

filter_step = function(source, state)
    return filter_check(source, source[2](source[3], state))
end

local function filter(f, gen, param, state)
    return wrap(filter_step, {f, gen, param}, state)
end
export('filter', 1, filter)
alias('filter', 'remove_if')

export('grep', 1, function(pattern, gen, param, state)
    local f = pattern
    if type(pattern) == 'string' then
        f = function(x) return string_find(x, pattern) ~= nil end
    end
    return filter(f, gen, param, state)
end)

export('partition', 1, function(f, gen, param, state)
    local function rejected(...) return not f(...) end
    return filter(f, gen, param, state), filter(rejected, gen, param, state)
end)

-- reducing -------------------------------------------------------------------------

local function fold_next(f, acc, state_x, ...)
    if state_x == nil then
        return nil, acc
    end
    return state_x, f(acc, ...)
end

export('foldl', 2, function(f, start, gen, param, state)
    local acc = start
    while true do
        state, acc = fold_next(f, acc, gen(param, state))
        if state == nil then
            return acc
        end
    end
end)
alias('foldl', 'reduce')

export('length', 0, function(gen, param, state)
    if gen == ipairs_gen or gen == string_gen then
        return #param
    end
    local count = 0
    repeat
        state = gen(param, state)
        count = count + 1
    until state == nil
    return count - 1
end)

export('is_null', 0, function(gen, param, state)
    return gen(param, copy(state)) == nil
end)

function fun.is_prefix_of(prefix, whole)
    local gen_x, param_x, state_x = raw_iter(prefix)
    local gen_y, param_y, state_y = raw_iter(whole)
    local r_x, r_y
    -- 2.6.0 looks at the first 10 elements only, and answers nil past them
    for _ = 1, 10 do
        state_x, r_x = gen_x(param_x, state_x)
        state_y, r_y = gen_y(param_y, state_y)
        if state_x == nil then
            return true
        end
        if state_y == nil or r_x ~= r_y then
            return false
        end
    end
end
methods.is_prefix_of = fun.is_prefix_of

local function verdict(f, state_x, ...)
    if state_x == nil then
        return nil
    end
    return state_x, f(...)
end

export('all', 1, function(f, gen, param, state)
    local ok
    repeat
        state, ok = verdict(f, gen(param, state))
    until state == nil or not ok
    return state == nil
end)
alias('all', 'every')

export('any', 1, function(f, gen, param, state)
    local ok
    repeat
        state, ok = verdict(f, gen(param, state))
    until state == nil or ok
    return not not ok
end)
alias('any', 'some')

export('sum', 0, function(gen, param, state)
    local s, r = 0, 0
    repeat
        s = s + r
        state, r = gen(param, state)
    until state == nil
    return s
end)

export('product', 0, function(gen, param, state)
    local p, r = 1, 1
    repeat
        p = p * r
        state, r = gen(param, state)
    until state == nil
    return p
end)

local function less(a, b) if a < b then return a end return b end
local function more(a, b) if a > b then return a end return b end

local function extreme(line, name, numeric, other)
    return function(cmp, gen, param, state)
        local state_x, m = gen(param, state)
        if state_x == nil then
            fail(line, name .. ': iterator is empty')
        end
        if cmp == nil then
            cmp = type(m) == 'number' and numeric or other
        end
        for _, r in gen, param, state_x do
            m = cmp(m, r)
        end
        return m
    end
end

local min_of, max_of = extreme(698, 'min', math_min, less), extreme(738, 'max', math_max, more)
local min_by_of, max_by_of = extreme(722, 'min'), extreme(762, 'max')
export('min', 0, function(gen, param, state) return min_of(nil, gen, param, state) end)
export('max', 0, function(gen, param, state) return max_of(nil, gen, param, state) end)
export('min_by', 1, min_by_of)
export('max_by', 1, max_by_of)
alias('min', 'minimum')
alias('max', 'maximum')
alias('min_by', 'minimum_by')

export('totable', 0, function(gen, param, state)
    local result, value = {}, nil
    while true do
        state, value = gen(param, state)
        if state == nil then
            return result
        end
        result[#result + 1] = value
    end
end)

export('tomap', 0, function(gen, param, state)
    local result, key, value = {}, nil, nil
    while true do
        state, key, value = gen(param, state)
        if state == nil then
            return result
        end
        result[key] = value
    end
end)

export('each', 1, function(f, gen, param, state)
    repeat
        state = call_step(f, gen(param, state))
    until state == nil
end)
alias('each', 'for_each', 'foreach')

-- transformations ------------------------------------------------------------------

local function map_step(source, state)
    local gen, param, f = source[1], source[2], source[3]
    return verdict(f, gen(param, state))
end

export('map', 1, function(f, gen, param, state)
    return wrap(map_step, {gen, param, f}, state)
end)

local function enumerate_next(position, state_x, ...)
    if state_x == nil then
        return nil
    end
    return {position, state_x}, position, ...
end

local function enumerate_step(source, state)
    return enumerate_next(state[1] + 1, source[1](source[2], state[2]))
end

export('enumerate', 0, function(gen, param, state)
    return wrap(enumerate_step, {gen, param}, {0, state})
end)

-- intersperse: x after every element; state {position, inner state}
local function intersperse_next(position, state_x, ...)
    if state_x == nil then
        return nil
    end
    return {position, state_x}, ...
end

local function intersperse_step(source, state)
    local x, gen, param = source[1], source[2], source[3]
    local position, inner = state[1], state[2]
    if position % 2 == 1 then
        return {position + 1, inner}, x
    end
    return intersperse_next(position + 1, gen(param, inner))
end

export('intersperse', 1, function(x, gen, param, state)
    return wrap(intersperse_step, {x, gen, param}, {0, state})
end)

-- compositions ---------------------------------------------------------------------

local function zip_step(sources, states)
    local count = sources.n
    local new_states, values = {}, {}
    for i = 1, count do
        local source = sources[i]
        local state_x, value = source[1](source[2], states[i])
        if state_x == nil then
            return nil
        end
        new_states[i], values[i] = state_x, value
    end
    return new_states, unpack(values, 1, count)
end

-- How many iterables a list of arguments holds: a call ending in `fun.range(3)` also
-- passes that iterator's param and state, which are not iterables of their own.
local function count_iterables(...)
    local n = select('#', ...)
    if n >= 3 then
        local last = select(n - 2, ...)
        if type(last) == 'table' and getmetatable(last) == iterator_mt
                and last.param == select(n - 1, ...) and last.state == select(n, ...) then
            return n - 2
        end
    end
    return n
end

local function iterables(...)
    local sources, states = {n = count_iterables(...)}, {}
    for i = 1, sources.n do
        local gen, param, state = raw_iter((select(i, ...)))
        sources[i], states[i] = {gen, param}, state
    end
    return sources, states
end

function fun.zip(...)
    local sources, states = iterables(...)
    if sources.n == 0 then
        return wrap(empty_gen, nil, nil)
    end
    return wrap(zip_step, sources, states)
end
methods.zip = fun.zip

-- at the end of a round, start again from a copy of the first state
local function cycle_next(source, state_x, ...)
    if state_x ~= nil then
        return state_x, ...
    end
    return source[1](source[2], copy(source[3]))
end

local function cycle_step(source, state)
    return cycle_next(source, source[1](source[2], state))
end

export('cycle', 0, function(gen, param, state)
    if gen(param, copy(state)) == nil then
        return wrap(empty_gen, nil, nil)
    end
    return wrap(cycle_step, {gen, param, copy(state)}, state)
end)

-- chain: state {which source, its state}; sources run one after another
local chain_step

local function chain_next(sources, which, state_x, ...)
    if state_x ~= nil then
        return {which, state_x}, ...
    end
    which = which + 1
    if which > sources.n then
        return nil
    end
    return chain_step(sources, {which, sources.initial[which]})
end

chain_step = function(sources, state)
    local source = sources[state[1]]
    return chain_next(sources, state[1], source[1](source[2], state[2]))
end

function fun.chain(...)
    local sources, states = iterables(...)
    if sources.n == 0 then
        return wrap(empty_gen, nil, nil)
    end
    sources.initial = states
    return wrap(chain_step, sources, {1, states[1]})
end
methods.chain = fun.chain

-- operators ------------------------------------------------------------------------

local operator = {
    lt = function(a, b) return a < b end,
    le = function(a, b) return a <= b end,
    eq = function(a, b) return a == b end,
    ne = function(a, b) return a ~= b end,
    ge = function(a, b) return a >= b end,
    gt = function(a, b) return a > b end,
    add = function(a, b) return a + b end,
    sub = function(a, b) return a - b end,
    mul = function(a, b) return a * b end,
    div = function(a, b) return a / b end,
    truediv = function(a, b) return a / b end,
    floordiv = function(a, b) return math.floor(a / b) end,
    intdiv = function(a, b)
        local q = a / b
        if a >= 0 then return math.floor(q) end
        return math.ceil(q)
    end,
    mod = function(a, b) return a % b end,
    pow = function(a, b) return a ^ b end,
    concat = function(a, b) return a .. b end,
    len = function(a) return #a end,
    land = function(a, b) return a and b end,
    lor = function(a, b) return a or b end,
    lnot = function(a) return not a end,
    truth = function(a) return not not a end,
    unm = function(a) return -a end,
    neq = function(a) return -a end,   -- 2.6.0's name for negation (not "not equal")
}
operator.length = operator.len
fun.op, fun.operator = operator, operator
methods.op, methods.operator = operator, operator

return fun
