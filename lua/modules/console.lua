-- Tarantool 2.6.0's `console` module over Spindle's console evaluator (lua/console.py).
-- `native` holds non-blocking Python functions, `blocking` those only ever run through
-- wait() (they park the fiber: sockets, statements). Errors read as 2.6.0's, which
-- raises them from builtin/box/console.lua at these lines.
local native, blocking, wait = ...
local type, tostring, error, setmetatable = type, tostring, error, setmetatable

local function fail(line, message)
    error(('builtin/box/console.lua:%d: %s'):format(line, message), 0)
end

local hooks = {}

local server_mt = {}
server_mt.__index = {
    close = function(self) return native.server_close(self._id) end,
    name = function(self) return native.server_name(self._id) end,
}
server_mt.__tostring = function(self) return native.server_text(self._id) end

local function listen(uri)
    local id, err, line = wait(blocking.listen, uri)
    if id == nil then
        fail(line, err)
    end
    return setmetatable({_id = id}, server_mt)
end

local function delimiter(delim)
    if not native.has_console() then
        fail(253, 'console.delimiter(): need existing console')
    end
    if delim == nil then
        return native.get_delimiter()
    elseif type(delim) == 'string' then
        native.set_delimiter(delim)
    else
        fail(255, 'invalid delimiter')
    end
end

local function ac(yes_no)
    if not native.has_console() then
        fail(736, 'console.ac(): need existing console')
    end
    native.set_ac(not not yes_no)
end

local function eval(line)
    if line == nil then
        return nil
    end
    if type(line) ~= 'string' then
        fail(369, ("attempt to index local 'line' (a %s value)"):format(type(line)))
    end
    return wait(blocking.eval, line)
end

local function eos(value)
    if not value then
        return (native.eos())
    end
    local _, err = native.eos(value)
    if err ~= nil then
        fail(226, err)
    end
end

-- the table itself, as 2.6.0 hands it out (its fields in 2.6.0's order)
local default_output = {fmt = 'yaml', opts = nil}

local function set_default_output(value)
    if value == nil then
        fail(158, 'Nil output value passed')
    end
    local err, fmt, opts = native.parse_output(tostring(value))
    if err ~= nil then
        fail(162, err)
    end
    default_output.fmt = fmt
    default_output.opts = opts
end

local function get_default_output(...)
    if (...) ~= nil then
        fail(171, 'Arguments provided while prohibited')
    end
    return default_output
end

local function hook(kind, line)
    return function(fn)
        if fn == nil or type(fn) == 'function' then
            hooks[kind] = fn
            native.set_hook(kind, fn)
            return
        end
        fail(line, ('Wrong type of %s hook: %s'):format(kind, type(fn)))
    end
end

local function connect(uri, opts)
    if not native.has_console() then
        fail(769, 'console.connect() need existing console')
    end
    opts = opts or {}
    if uri == nil then
        fail(779, 'Usage: console.connect("[login:password@][host:]port")')
    end
    return wait(blocking.connect, tostring(uri), opts.timeout)
end

local function start()
    if native.started() then
        fail(747, 'console is already started')
    end
    return wait(blocking.start)
end

local function completion_handler(str, pos1, pos2)
    return native.complete(str, pos1, pos2)
end

return {
    start = start,
    eval = eval,
    delimiter = delimiter,
    set_default_output = set_default_output,
    get_default_output = get_default_output,
    eos = eos,
    ac = ac,
    connect = connect,
    listen = listen,
    on_start = hook('on_start', 719),
    on_client_disconnect = hook('on_client_disconnect', 727),
    completion_handler = completion_handler,
}
