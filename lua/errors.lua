-- box.error objects: what a Tarantool error looks like from Lua.
--
-- An error raised by Python code keeps its Python exception in the field `_py`, so
-- when it travels back to Python (through pcall-less Lua frames) it is re-raised with
-- its own type; one made in Lua (box.error.new) gets a Python exception built from
-- its fields.
local error_mt = {}
local methods = {}

function methods.unpack(e)
    return {type = e.type, base_type = e.base_type, code = e.code, message = e.message,
            trace = e.trace}
end

function methods.raise(e)
    error(e, 2)
end

error_mt.__index = methods
error_mt.__tostring = function(e) return e.message end

local function caller_trace(level)
    local info = debug.getinfo(level + 1, 'Sl')
    if info == nil then
        return {}
    end
    return {{file = info.short_src, line = info.currentline}}
end

local function new(type_name, code, message, py, level)
    return setmetatable({type = type_name, base_type = type_name, code = code,
                         message = message, _py = py,
                         trace = caller_trace((level or 1) + 1)}, error_mt)
end

-- Built from a Python exception object (a lupa-wrapped Python object).
local function from_python(exc, type_name, code, message)
    return new(type_name, code, message, exc, 3)
end

local function is_error(value)
    return getmetatable(value) == error_mt
end

return {
    new = new,
    from_python = from_python,
    is_error = is_error,
    metatable = error_mt,
    yield_forbidden = function()
        return new('FiberSwitchForbidden', 0, 'fiber yield is not allowed here', nil, 3)
    end,
}
