-- Tarantool's log module: log.info('fmt %s', x), tables logged as JSON, and the
-- caller's file:line on warnings and worse, as Tarantool prints them.
local native, levels = ...
local log = {}
local format, select, type, tostring = string.format, select, type, tostring
local json   -- loaded on first table message (the json module registers after log)

local function message(fmt, ...)
    if type(fmt) == 'table' then
        json = json or package.loaded.json
        return json and json.encode(fmt) or tostring(fmt)
    end
    if select('#', ...) > 0 then
        return format(tostring(fmt), ...)
    end
    return tostring(fmt)
end

-- the json format writes a table message's own members in place of "message"
local function json_fields(fmt)
    json = json or package.loaded.json
    local ok, text = pcall(json.encode, fmt)
    if ok and text:sub(1, 1) == '{' and #text > 2 then
        return text:sub(2, -2)
    end
    return nil
end

local function emitter(level, with_where)
    return function(fmt, ...)
        if level > native.level() then
            return
        end
        local where
        local as_json = native.format() == 'json'   -- (it gives every line its place)
        if with_where or as_json then
            local info = debug.getinfo(2, 'Sl')
            if info and info.currentline and info.currentline > 0 then
                where = info.short_src .. ':' .. info.currentline
            end
        end
        local fields = as_json and type(fmt) == 'table' and json_fields(fmt) or nil
        native.say(level, message(fmt, ...), where, fields)
    end
end

log.error = emitter(levels.error, true)
log.warn = emitter(levels.warn, true)
log.info = emitter(levels.info, false)
log.verbose = emitter(levels.verbose, false)
log.debug = emitter(levels.debug, false)
log.crit = emitter(levels.crit, true)
log.syserror = emitter(levels.syserror, true)

function log.level(level)
    if level ~= nil then
        native.set_level(level)
    end
    return native.level()
end
log.pid = native.pid

local FORMATS = {json = true, plain = true}

function log.log_format(name)
    if not FORMATS[name] then
        error('builtin/log.lua:372: expected json,plain', 0)
    end
    native.set_format(name)
end

-- log.cfg: the log's settings, and log.cfg{...} changes them (level and format; the
-- destination is set once, when the log starts, as in 2.6.0)
local cfg_mt = {}
log.cfg = setmetatable({}, cfg_mt)

function log.cfg_sync()           -- (Python calls it on any change; taken off log then)
    rawset(log.cfg, 'level', native.level())
    rawset(log.cfg, 'format', native.format())
end
log.cfg_sync()

local LEVEL_WORDS = 'crit,warn,info,debug,syserror,verbose,fatal,error'

function cfg_mt.__call(_, options)
    if type(options) ~= 'table' then
        error(string.format("builtin/log.lua:467: attempt to index local 'cfg' (a %s value)",
                            type(options)), 0)
    end
    for _, name in ipairs({'log', 'nonblock'}) do
        if options[name] ~= nil then
            error(string.format("builtin/log.lua:447: log.cfg: '%s' can't be set dynamically",
                                name), 0)
        end
    end
    if options.format ~= nil and not FORMATS[options.format] then
        error("builtin/log.lua:477: log.cfg: 'format' expected json,plain", 0)
    end
    local level = options.level
    if level ~= nil and not (levels[level] ~= nil or (type(level) == 'number' and
                                                         level >= 0 and level <= 7)) then
        error("builtin/log.lua:485: log.cfg: 'level' expected " .. LEVEL_WORDS, 0)
    end
    if options.format ~= nil then native.set_format(options.format) end
    if level ~= nil then native.set_level(level) end
end
log.rotate = function() native.rotate() end   -- as SIGHUP: a log file is reopened
return log
