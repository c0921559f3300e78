-- The Lua face of Tarantool's fiber module over Spindle's scheduler.
-- `native` holds non-blocking Python functions; `blocking` holds Python callables
-- that are only ever run through wait() (they may park the fiber).
local native, blocking, wait = ...

local fiber = {}
local fiber_mt = {}
local fiber_methods = {}
local objects = setmetatable({}, {__mode = 'v'})   -- fid -> object, for identity
local storages = {}                                  -- fid -> fiber.storage table

local function object(fid)
    local f = objects[fid]
    if f == nil then
        f = setmetatable({_fid = fid}, fiber_mt)
        objects[fid] = f
    end
    return f
end

local function fid_of(f, usage)
    if type(f) == 'table' and rawget(f, '_fid') then
        return f._fid
    end
    if type(f) == 'number' then
        return f
    end
    error(usage, 3)
end

fiber_mt.__index = function(f, key)
    if key == 'storage' then
        local fid = rawget(f, '_fid')
        if native.status(fid) == 'dead' then
            error('the fiber is dead', 2)
        end
        local storage = storages[fid]
        if storage == nil then
            storage = {}
            storages[fid] = storage
        end
        return storage
    end
    return fiber_methods[key]
end
fiber_mt.__tostring = function(f) return 'fiber: ' .. f._fid end
fiber_mt.__serialize = function(f)
    return {id = f._fid, name = native.name(f._fid), status = native.status(f._fid)}
end

function fiber_methods.id(f) return fid_of(f, 'Usage: fiber:id()') end
function fiber_methods.status(f) return native.status(fid_of(f, 'Usage: fiber:status()')) end
function fiber_methods.name(f, name, opts)
    local fid = fid_of(f, 'Usage: fiber:name([name])')
    if name ~= nil then   -- setting returns nothing, as in Tarantool
        native.set_name(fid, tostring(name), type(opts) == 'table' and opts.truncate)
        return
    end
    return native.name(fid)
end
function fiber_methods.cancel(f)
    local fid = fid_of(f, 'Usage: fiber:cancel()')
    native.cancel(fid)
    if fid == native.self() then
        native.testcancel()
    end
end
function fiber_methods.wakeup(f) native.wakeup(fid_of(f, 'Usage: fiber:wakeup()')) end
function fiber_methods.set_joinable(f, yes)
    native.set_joinable(fid_of(f, 'Usage: fiber:set_joinable(bool)'), yes)
end
function fiber_methods.join(f)
    return wait(blocking.join, fid_of(f, 'Usage: fiber:join()'))
end

function fiber.create(fn, ...)
    if type(fn) ~= 'function' and not (type(fn) == 'table' and getmetatable(fn)
            and getmetatable(fn).__call) then
        error('fiber.create(function, ...): bad arguments', 2)
    end
    return object(wait(blocking.create, fn, ...))
end

function fiber.new(fn, ...)
    if type(fn) ~= 'function' and not (type(fn) == 'table' and getmetatable(fn)
            and getmetatable(fn).__call) then
        error('fiber.new(function, ...): bad arguments', 2)
    end
    return object(wait(blocking.new, fn, ...))
end

function fiber.sleep(delay)
    if type(delay) ~= 'number' then
        error('fiber.sleep(delay): bad arguments', 2)
    end
    return wait(blocking.sleep, delay)
end

function fiber.yield()
    return wait(blocking.sleep, 0)
end

function fiber.self() return object(native.self()) end
function fiber.id() return native.self() end
function fiber.name(name, opts) return fiber_methods.name(fiber.self(), name, opts) end
function fiber.status(f) return native.status(f and fid_of(f, 'Usage: fiber.status(fiber)') or native.self()) end
function fiber.cancel(f) return fiber_methods.cancel(type(f) == 'table' and f or object(f)) end
function fiber.kill(fid) return fiber.cancel(fid) end
function fiber.join(f) return fiber_methods.join(f) end
function fiber.wakeup(f) return fiber_methods.wakeup(f) end
function fiber.testcancel() native.testcancel() end
function fiber.find(fid)
    if type(fid) ~= 'number' or not native.exists(fid) then
        return nil
    end
    return object(fid)
end
fiber.info = native.info
fiber.time = native.time
fiber.time64 = native.time64
fiber.clock = native.clock
fiber.clock64 = native.clock64

-- fiber.cond ------------------------------------------------------------------
local cond_mt = {__tostring = function() return 'cond' end}
cond_mt.__index = {
    wait = function(c, timeout)
        if timeout ~= nil and type(timeout) ~= 'number' then
            error('Usage: cond:wait([timeout])', 2)
        end
        return wait(blocking.cond_wait, c._c, timeout)
    end,
    signal = function(c) native.cond_signal(c._c) end,
    broadcast = function(c) native.cond_broadcast(c._c) end,
}
function fiber.cond()
    return setmetatable({_c = native.cond_new()}, cond_mt)
end

-- fiber.channel ---------------------------------------------------------------
local channel_mt = {}
channel_mt.__tostring = function(ch) return 'channel: ' .. native.channel_count(ch._ch) end
channel_mt.__index = {
    put = function(ch, value, timeout)
        if timeout ~= nil and (type(timeout) ~= 'number' or timeout < 0) then
            error('usage: channel:put(var [, timeout])', 2)
        end
        return wait(blocking.channel_put, ch._ch, value, timeout)
    end,
    get = function(ch, timeout)
        if timeout ~= nil and (type(timeout) ~= 'number' or timeout < 0) then
            error('usage: channel:get([timeout])', 2)
        end
        local value = wait(blocking.channel_get, ch._ch, timeout)
        return value   -- exactly one value: nil on timeout or a closed channel
    end,
    close = function(ch) native.channel_close(ch._ch) end,
    is_closed = function(ch) return native.channel_is_closed(ch._ch) end,
    count = function(ch) return native.channel_count(ch._ch) end,
    size = function(ch) return native.channel_size(ch._ch) end,
    is_full = function(ch) return native.channel_is_full(ch._ch) end,
    is_empty = function(ch) return native.channel_is_empty(ch._ch) end,
    has_readers = function(ch) return native.channel_has_readers(ch._ch) end,
    has_writers = function(ch) return native.channel_has_writers(ch._ch) end,
}
function fiber.channel(size)
    size = size or 0
    if type(size) ~= 'number' or size < 0 then
        error('fiber.channel(size): negative size', 2)
    end
    return setmetatable({_ch = native.channel_new(size)}, channel_mt)
end

local function drop_storage(fid)
    storages[fid] = nil
end

return fiber, drop_storage
