-- The `box` global before storage exists: box.cfg with every 2.6 option, box.NULL,
-- box.error. The storage and replication issues hang the rest of box on this table.
local native, blocking, wait, NULL, codes, errors = ...

local box = {NULL = NULL}

-- box.error ------------------------------------------------------------------------
local error_mt = errors.metatable

local function new_error(level, code, ...)
    if type(code) == 'table' and getmetatable(code) == error_mt then
        return code
    end
    if type(code) == 'table' then
        local reason = code.reason
        local err = errors.new('ClientError', tonumber(code.code) or 0,
            reason == nil and '' or tostring(reason), nil, level + 1)
        return err
    end
    if type(code) ~= 'number' then
        error('Usage: box.error.new(code, args) or box.error.new(type, args)', 0)
    end
    local args = {...}
    for i = 1, select('#', ...) do
        args[i] = tostring(args[i] == nil and 'nil' or args[i])
    end
    local err = errors.new('ClientError', code, native.format(code, args), nil, level + 1)
    return err   -- not a tail call: the trace must see the caller's frame
end

local box_error = {}
for name, code in pairs(codes) do
    box_error[name] = code
end
function box_error.new(code, ...)
    local err = new_error(2, code, ...)
    return err
end
function box_error.last()
    return native.last_error()
end
function box_error.clear()
    native.clear_error()
end
setmetatable(box_error, {__call = function(_, code, ...)
    if code == nil then
        local last = native.last_error()
        if last ~= nil then
            error(last, 2)
        end
        return
    end
    local err = new_error(2, code, ...)
    native.set_last(err.type, err.code, err.message)
    error(err, 2)
end})
box.error = box_error

-- box.cfg ----------------------------------------------------------------------------
-- Before the first call box.cfg is a function; afterwards a table of the current
-- values whose __call reconfigures, as in Tarantool.
local cfg_mt = {}

local function refresh(values)
    local cfg = setmetatable({}, cfg_mt)
    for k, v in pairs(values) do
        cfg[k] = v
    end
    box.cfg = cfg
end

local function configure(options)
    local values = wait(blocking.configure, options)
    refresh(values)
end

cfg_mt.__call = function(_, options) return configure(options) end
cfg_mt.__serialize = function(cfg)
    local copy = {}
    for k, v in pairs(cfg) do copy[k] = v end
    return copy
end

box.cfg = configure

-- What 2.6.0 refuses before box.cfg (box.ctl, box.session, box.index, box.error,
-- box.tuple are there from the start).
local not_yet = {info = true, space = true, snapshot = true, schema = true,
                 begin = true, commit = true, rollback = true, atomic = true,
                 slab = true, stat = true, once = true, backup = true, func = true,
                 sequence = true, feedback = true}
setmetatable(box, {__index = function(_, key)
    if not_yet[key] and not native.configured() then
        error('Please call box.cfg{} first', 2)
    end
end})

return box
