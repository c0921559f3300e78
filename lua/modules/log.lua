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

local function emitter(level, with_where)
    return function(fmt, ...)
        if level > native.level() then
            return
        end
        local where
        if with_where then
            local info = debug.getinfo(2, 'Sl')
            if info and info.currentline and info.currentline > 0 then
                where = info.short_src .. ':' .. info.currentline
            end
        end
        native.say(level, message(fmt, ...), where)
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
log.rotate = function() native.rotate() end   -- as SIGHUP: a log file is reopened
return log
