-- box.error objects: what a Tarantool error looks like from Lua.
--
-- An error is a table with 2.6.0's fields: type (a CustomError's own name, else the
-- base type), base_type, code (ClientError and its kin only), message, trace, errno
-- (a SystemError's), prev (the error it was raised after), and the reflected fields
-- of its class (custom_type; object_type, object_name, access_type). Methods come
-- from the metatable: unpack, raise, match, set_prev.
--
-- An error raised by Python code keeps its Python exception in the field `_py`, so
-- when it travels back to Python (through pcall-less Lua frames) it is re-raised with
-- its own type; one made in Lua (box.error.new) gets a Python exception built from
-- its fields (lua/errors.py). `_effect` is the error whose prev this one is: 2.6.0
-- keeps an error in one chain only.
local error_mt = {}
local methods = {}

-- The class fields 2.6.0's reflection adds to an error (and to its unpack()).
local REFLECTED = {'custom_type', 'object_type', 'object_name', 'access_type'}
-- Base types that have a code in Lua (ClientError and its subclasses in 2.6.0;
-- CLIENT_ERROR_TYPES of core/iproto/errors.py).
local HAS_CODE = {ClientError = true, AccessDeniedError = true, CustomError = true}

local function is_error(value)
    return getmetatable(value) == error_mt
end

-- 2.6.0 raises these from builtin/error.lua with error(msg) (level 1): the position
-- is that file's line.
function methods.unpack(e)
    if not is_error(e) then
        error('builtin/error.lua:159: Usage: error:unpack()', 0)
    end
    local result = {type = e.type, base_type = e.base_type, code = e.code,
                    message = e.message, trace = e.trace, errno = e.errno, prev = e.prev}
    for _, key in ipairs(REFLECTED) do
        result[key] = rawget(e, key)
    end
    return result
end

function methods.raise(e)
    if not is_error(e) then
        error('builtin/error.lua:176: Usage: error:raise()', 0)
    end
    error(e)
end

-- Tarantool 1.6's err:match(pattern): string.match on the message.
function methods.match(e, ...)
    if not is_error(e) then
        error('builtin/error.lua:183: Usage: error:match()', 0)
    end
    return string.match(e.message, ...)
end

-- error_set_prev() of 2.6.0's diag.c, cycle check and unlinking as there.
function methods.set_prev(e, prev)
    if not is_error(e) then
        error('builtin/error.lua:134: Usage: error1:set_prev(error2)', 0)
    end
    if prev ~= nil and not is_error(prev) then
        error('builtin/error.lua:138: Usage: error1:set_prev(error2)', 0)
    end
    if prev ~= nil then
        if rawequal(e, prev) then
            error('builtin/error.lua:143: Cycles are not allowed', 0)
        end
        if prev._effect ~= nil or e._effect ~= nil then
            local tmp = prev.prev
            while tmp ~= nil do
                if rawequal(tmp, e) then
                    error('builtin/error.lua:143: Cycles are not allowed', 0)
                end
                tmp = tmp.prev
            end
            if prev._effect ~= nil then
                prev._effect.prev = nil
            end
        end
        prev._effect = e
    end
    if e.prev ~= nil then
        e.prev._effect = nil
    end
    e.prev = prev
end

-- `trace` is a new table at each read, as 2.6.0's getter makes it.
error_mt.__index = function(e, key)
    if key == 'trace' then
        local trace = rawget(e, '_trace')
        return trace[1] and {{file = trace[1].file, line = trace[1].line}} or {}
    end
    return methods[key]
end
error_mt.__tostring = function(e) return e.message end
error_mt.__concat = function(lhs, rhs)
    if is_error(lhs) then
        return tostring(lhs) .. rhs
    elseif is_error(rhs) then
        return lhs .. tostring(rhs)
    end
    error('error_mt.__concat(): neither of args is an error')
end

-- {file, line} of the function `level` frames above the caller, as 2.6.0's
-- luaT_error_create() takes it (lua_getstack(L, 1): a C caller such as pcall
-- gives '[C]' and line -1, which the C struct keeps as an unsigned number).
local function caller_trace(level)
    local info = debug.getinfo(level + 1, 'Sl')
    if info == nil then
        return {}
    end
    local line = info.currentline
    if line < 0 then
        line = line + 4294967296
    end
    return {{file = info.short_src, line = line}}
end

-- Every error has an id (`_id`), and the object of an id is kept, weakly, so that
-- an error crossing into Lua again (box.error.last() after pcall) is the object
-- Lua already has, as 2.6.0's cdata of one struct error compare equal. Errors made
-- in Lua count down from -1, those of Python exceptions (lua/errors.py) up from 1.
local by_id = setmetatable({}, {__mode = 'v'})
local last_lua_id = 0

-- A new error. `extra` (optional) holds base_type, errno, the reflected fields,
-- trace and id; without a trace the error is located at the caller `level` frames up.
local function new(type_name, code, message, py, level, extra)
    extra = extra or {}
    local base_type = extra.base_type or type_name
    local id = extra.id
    if id == nil then
        last_lua_id = last_lua_id - 1
        id = last_lua_id
    end
    local err = {type = type_name, base_type = base_type,
                 code = HAS_CODE[base_type] and code or nil, message = message,
                 _py = py, errno = extra.errno, _id = id,
                 _trace = extra.trace or caller_trace((level or 1) + 1)}
    for _, key in ipairs(REFLECTED) do
        err[key] = extra[key]
    end
    by_id[id] = err
    return setmetatable(err, error_mt)
end

-- Built from a Python exception object (a lupa-wrapped Python object); `extra`
-- as for new(), `prev` the error object of the exception's cause.
local function from_python(exc, type_name, code, message, extra, prev)
    local known = by_id[extra.id]
    if known ~= nil then
        return known
    end
    if extra.trace == nil then
        -- no C position to show: the Lua code that made the call which failed
        -- (the first Lua frame above this call from Python, not the driver's; an
        -- error for a coroutine that waited has none here, and keeps {})
        local level = 2
        while true do
            local info = debug.getinfo(level, 'Sl')
            if info == nil then
                extra.trace = {}
                break
            end
            if info.what ~= 'C' and info.short_src ~= 'driver.lua' then
                extra.trace = {{file = info.short_src, line = info.currentline}}
                break
            end
            level = level + 1
        end
    end
    local err = new(type_name, code, message, exc, 3, extra)
    if prev ~= nil then
        err.prev = prev
        prev._effect = err
    end
    return err
end

return {
    new = new,
    from_python = from_python,
    is_error = is_error,
    caller_trace = caller_trace,
    metatable = error_mt,
    yield_forbidden = function()
        return new('FiberSwitchForbidden', 0, 'fiber yield is not allowed here', nil, 3)
    end,
}
