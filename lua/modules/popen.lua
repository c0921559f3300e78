-- Tarantool's popen module (2.6.0's src/lua/popen.c): popen.new(argv, opts),
-- popen.shell(command, mode) and the handle's read/write/wait/signal/kill/terminate/
-- info/shutdown/close and fields. Loaded with `native` (Python calls that do not
-- block; misuse raises IllegalParams from there), `blocking` (read, write, wait:
-- run only through wait()), wait and the signal table; returns the module.
local native, blocking, wait, signals = ...

local ffi = require('ffi')
local type, tostring, pairs, ipairs, select = type, tostring, pairs, ipairs, select

local popen = {
    opts = {INHERIT = 'inherit', DEVNULL = 'devnull', CLOSE = 'close', PIPE = 'pipe'},
    state = {ALIVE = 'alive', EXITED = 'exited', SIGNALED = 'signaled'},
    stream = {OPEN = 'open', CLOSED = 'closed'},
    signal = signals,
}

-- Handles are userdata as in 2.6.0: proxies sharing one metatable. Each maps (weak
-- keys) to a `struct popen_ref` cdata with the handle's id; when a forgotten proxy
-- is collected its ref goes too, and the ref's finalizer hands the id to
-- `graveyard`, closed by the next popen call (a finalizer must not call Python).
pcall(ffi.cdef, 'struct popen_ref { int id; };')
local graveyard = {}
local ref_t = ffi.metatype('struct popen_ref', {
    __gc = function(ref)
        if ref.id > 0 then
            graveyard[#graveyard + 1] = ref.id
        end
    end,
})
local refs = setmetatable({}, {__mode = 'k'})

local function reap()
    if graveyard[1] ~= nil then
        local ids = graveyard
        graveyard = {}
        native.reap(ids)
    end
end

local function id_of(self, usage)
    local ref = refs[self]
    if ref == nil then
        native.illegal('Bad params, use: ' .. usage)
    end
    return ref.id
end

-- what a wrong argument was, as 2.6.0 words it: its type, or 'no value'
local function got(value, present)
    if value == nil and not present then
        return 'no value'
    end
    return type(value)
end

local function wrong(func, name, expected, what)
    native.illegal(string.format('%s: wrong parameter "%s": expected %s, got %s', func,
                                 name, expected, what))
end

-- a status from Python's [state, code or signal, signal name]
local function status_table(fields)
    if fields[1] == 'exited' then
        return {state = 'exited', exit_code = fields[2]}
    elseif fields[1] == 'signaled' then
        local result = {state = 'signaled'}
        result.signame = fields[3]
        result.signo = fields[2]
        return result
    end
    return {state = fields[1]}
end

local function with_status(info)
    info.status = status_table(info.status)
    return info
end

-- methods ------------------------------------------------------------------------

local methods = {}
local READ_USAGE = 'ph:read([{stdout = <boolean>, stderr = <boolean>, timeout = <number>}])'
local WRITE_USAGE = 'ph:write(str[, {timeout = <number>}])'
local SHUTDOWN_USAGE = 'ph:shutdown({stdin = <boolean>, stdout = <boolean>, ' ..
                       'stderr = <boolean>})'

function methods.read(self, opts)
    local id = id_of(self, READ_USAGE)
    local stream, timeout = 'stdout', nil
    if opts ~= nil then
        if type(opts) ~= 'table' or (opts.timeout ~= nil and type(opts.timeout) ~= 'number') then
            native.illegal('Bad params, use: ' .. READ_USAGE)
        end
        if opts.stdout and opts.stderr then
            native.illegal('popen: reading from both stdout and stderr at one call is ' ..
                           'not supported')
        end
        if opts.stderr then
            stream = 'stderr'
        end
        timeout = opts.timeout
    end
    return wait(blocking.read, id, stream, timeout)
end

function methods.write(self, data, opts)
    local id = id_of(self, WRITE_USAGE)
    if type(data) ~= 'string' or (opts ~= nil and (type(opts) ~= 'table' or
            (opts.timeout ~= nil and type(opts.timeout) ~= 'number'))) then
        native.illegal('Bad params, use: ' .. WRITE_USAGE)
    end
    return wait(blocking.write, id, data, opts and opts.timeout)
end

function methods.wait(self)
    return status_table(wait(blocking.wait, id_of(self, 'ph:wait()')))
end

function methods.signal(self, signo)
    local id = id_of(self, 'ph:signal(signo)')
    if type(signo) ~= 'number' then
        native.illegal('Bad params, use: ph:signal(signo)')
    end
    return native.signal(id, signo)
end

function methods.kill(self)
    return native.signal(id_of(self, 'ph:kill()'), signals.SIGKILL)
end

function methods.terminate(self)
    return native.signal(id_of(self, 'ph:terminate()'), signals.SIGTERM)
end

function methods.info(self)
    return with_status(native.info(id_of(self, 'ph:info()')))
end

function methods.shutdown(self, opts)
    local id = id_of(self, SHUTDOWN_USAGE)
    if opts ~= nil and type(opts) ~= 'table' then
        native.illegal('Bad params, use: ' .. SHUTDOWN_USAGE)
    end
    local names = {}
    for _, name in ipairs({'stdin', 'stdout', 'stderr'}) do
        if opts ~= nil and opts[name] then
            names[#names + 1] = name
        end
    end
    if #names == 0 then
        native.illegal('popen: neither stdin, stdout nor stderr is set')
    end
    return native.shutdown(id, names)
end

function methods.close(self)
    local id = id_of(self, 'ph:close()')
    return native.close(id)
end

local prototype = newproxy(true)
local mt = getmetatable(prototype)
mt.__metatable = 'popen_handle'
mt.__index = function(self, key)
    local method = methods[key]
    if method ~= nil then
        return method
    end
    local ref = refs[self]
    if ref == nil then
        return nil
    end
    local value = native.field(ref.id, key)
    if key == 'status' then
        return status_table(value)
    end
    return value
end
-- (the serializers find it by indexing the handle, as 2.6.0's do)
function methods.__serialize(self)
    local ref = refs[self]
    return ref and with_status(native.field(ref.id, 'serialize'))
end

-- constructors ---------------------------------------------------------------------

local STDIO = {inherit = true, devnull = true, close = true, pipe = true}
local FLAGS = {shell = false, setsid = false, close_fds = true, restore_signals = true,
               group_signal = false, keep_child = false}

local function spawn(func, argv, opts)
    local settings = {stdin = 'inherit', stdout = 'inherit', stderr = 'inherit'}
    for name, default in pairs(FLAGS) do
        local value = opts[name]
        if value ~= nil and type(value) ~= 'boolean' then
            wrong(func, 'opts.' .. name, 'boolean or nil', type(value))
        end
        if value == nil then
            value = default
        end
        settings[name] = value
    end
    for _, name in ipairs({'stdin', 'stdout', 'stderr'}) do
        local value = opts[name]
        if value ~= nil then
            if not STDIO[value] then
                wrong(func, 'opts.' .. name, 'popen.opts.<...> constant', tostring(value))
            end
            settings[name] = value
        end
    end
    if opts.env ~= nil then
        if type(opts.env) ~= 'table' then
            wrong(func, 'opts.env', 'table or nil', type(opts.env))
        end
        local env = {}
        for k, v in pairs(opts.env) do
            env[tostring(k)] = tostring(v)
        end
        settings.env = env
    end
    reap()
    local ref = ffi.new(ref_t, {id = wait(blocking.new, argv, settings)})
    local handle = newproxy(prototype)
    refs[handle] = ref
    return handle
end

function popen.new(...)
    local argv, opts = ...
    if type(argv) ~= 'table' then
        wrong('popen.new', 'argv', 'table', got(argv, select('#', ...) > 0))
    end
    local list = {}
    for i, arg in ipairs(argv) do
        if type(arg) ~= 'string' then
            wrong('popen.new', 'argv[' .. i .. ']', 'string', type(arg))
        end
        list[i] = arg
    end
    if opts ~= nil and type(opts) ~= 'table' then
        wrong('popen.new', 'opts', 'table or nil', type(opts))
    end
    return spawn('popen.new', list, opts or {})
end

function popen.shell(...)
    local command, mode = ...
    if type(command) ~= 'string' then
        wrong('popen.shell', 'command', 'string', got(command, select('#', ...) > 0))
    end
    local opts = {shell = true, setsid = true, group_signal = true}
    if mode ~= nil then
        if type(mode) ~= 'string' then
            wrong('popen.shell', 'mode', 'string or nil', type(mode))
        end
        if mode:find('[^rwR]') then
            native.illegal('popen.shell: wrong parameter "mode": expected \'r\', \'w\', ' ..
                           '\'R\' or its combination, got ' .. tostring(mode))
        end
        if mode:find('r', 1, true) then opts.stdout = 'pipe' end
        if mode:find('R', 1, true) then opts.stderr = 'pipe' end
        if mode:find('w', 1, true) then opts.stdin = 'pipe' end
    end
    return spawn('popen.shell', {command}, opts)
end

return popen
