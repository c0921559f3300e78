-- The `box` global before storage exists: box.cfg with every 2.6 option, box.NULL,
-- box.error. The storage and replication issues hang the rest of box on this table.
local native, blocking, wait, NULL, codes, errors = ...

local box = {NULL = NULL}

-- box.error ------------------------------------------------------------------------
-- As 2.6.0's box/lua/error.cc: box.error(code, args...), box.error(type, fmt, ...),
-- box.error{code=, reason=, type=} and box.error(err); a `type` makes a CustomError.
local is_error = errors.is_error

local function format_reason(reason, ...)
    -- 2.6.0 runs string.format through lua_call, so an argument error names '?'
    local ok, text = pcall(string.format, reason, ...)
    if not ok then
        text = tostring(text):gsub("^bad argument (#%d+) to 'format'", "bad argument %%1 to '?'")
        error((text:gsub('%(value expected%)$', '(no value)')), 0)   -- (2.6.0's LuaJIT words)
    end
    return text
end

-- luaT_error_create(): the error the arguments describe, located at the caller
-- of the function `level` frames up; nil when they describe none.
local function create(level, n, first, ...)
    local code, custom_type, reason = 0, nil, nil
    local kind = type(first)
    if n >= 1 and (kind == 'number' or kind == 'string') then
        local nargs = n - 1
        if kind == 'number' then
            -- the C code is an integer (truncated, as a cast does)
            code = first >= 0 and math.floor(first) or math.ceil(first)
            reason = native.template(first)
            if nargs > 0 then
                reason = format_reason(reason, ...)
            elseif reason:find('%', 1, true) then
                return nil
            end
        else
            custom_type = first
            reason = ...
            if type(reason) ~= 'string' then
                return nil
            end
            -- (the format is always applied here, even with no arguments)
            reason = format_reason(reason, select(2, ...))
        end
    elseif n == 1 and kind == 'table' then
        if first.code ~= nil then
            code = tonumber(first.code) or 0
        end
        reason = first.reason
        reason = (type(reason) == 'string' or type(reason) == 'number') and tostring(reason) or ''
        local t = first.type
        if type(t) == 'string' or type(t) == 'number' then
            custom_type = tostring(t)
        end
    else
        return nil
    end
    local trace = errors.caller_trace(level + 1)
    native.count_error()   -- (a ClientError or CustomError is made: 2.6.0 counts it)
    reason = reason:sub(1, 511)   -- (2.6.0's 512-byte message buffer, cut bytewise)
    if custom_type ~= nil then
        custom_type = custom_type:sub(1, 63)   -- (and its 64-byte custom type)
        return errors.new(custom_type, code, reason, nil, nil,
                          {base_type = 'CustomError', custom_type = custom_type, trace = trace})
    end
    return errors.new('ClientError', code, reason, nil, nil, {trace = trace})
end

local box_error = {}
for name, code in pairs(codes) do
    box_error[name] = code
end
local error_functions = {}
function error_functions.new(...)
    local err = select('#', ...) > 0 and create(2, select('#', ...), ...) or nil
    if err == nil then
        error('Usage: box.error.new(code, args) or box.error.new(type, args)', 0)
    end
    return err   -- not a tail call: the trace must see the caller's frame
end
function error_functions.last(...)
    if select('#', ...) > 0 then
        error('box.error.last(): bad arguments', 0)
    end
    return native.last_error()
end
function error_functions.clear(...)
    if select('#', ...) > 0 then
        error('box.error.clear(): bad arguments', 0)
    end
    native.clear_error()
end
function error_functions.set(...)
    local err = ...
    if select('#', ...) == 0 then
        error('Usage: box.error.set(error)', 0)
    end
    if not is_error(err) then
        error(string.format('Invalid argument #1 (error expected, got %s)', type(err)), 0)
    end
    native.set_last(err)
end
-- The functions are not keys of box.error in 2.6.0 (pairs() lists the codes).
setmetatable(box_error, {__index = error_functions, __call = function(_, ...)
    local n = select('#', ...)
    if n == 0 then
        local last = native.last_error()
        if last ~= nil then
            error(last, 2)
        end
        return
    end
    local err = ...
    if n == 1 and is_error(err) then
        native.set_last(err)
        error(err, 2)
    end
    err = create(2, n, ...)
    if err == nil then
        error('box.error(): bad arguments', 0)
    end
    native.set_last(err)
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
-- the first box.cfg shows its values while the box loads, as 2.6.0's load_cfg
blocking.refresh = refresh

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
                 sequence = true, feedback = true,
                 spark = true}     -- Spindle's box.spark: Spark over this instance's files
-- Parts computed on each look-up once configured (box.func: lua/box/func.lua).
local lazy = {}
setmetatable(box, {lazy = lazy, __index = function(_, key)
    if not_yet[key] and not native.configured() then
        error('Please call box.cfg{} first', 2)
    end
    local get = lazy[key]
    if get ~= nil then
        return get()
    end
end})

return box
