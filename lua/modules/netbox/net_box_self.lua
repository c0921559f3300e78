-- net.box.self: the local box with a connection's API (2.6.0's), for code that
-- runs the same whether its box is remote or here. Loaded by net_box.lua with the
-- argument checks it shares; returns the object.
local parts = ...
local check_remote_arg, check_call_args = parts.check_remote_arg, parts.check_call_args
local check_eval_args, call_global = parts.check_eval_args, parts.call_global
local msgpack = require('msgpack')
local encode, decode = msgpack.encode, msgpack.decode
local type, select, unpack, rawget, pcall, tostring = type, select, unpack, rawget, pcall,
    tostring
local string_format = string.format
local E_PROC_LUA = box.error.PROC_LUA

local function rollback()
    if rawget(box, 'rollback') ~= nil then
        box.rollback()
    end
end

local function handle_eval_result(status, ...)
    if not status then
        rollback()
        return box.error(E_PROC_LUA, (...))
    end
    local results = {...}
    for i = 1, select('#', ...) do
        if type(results[i]) == 'cdata' then
            results[i] = decode(encode(results[i]))
        end
    end
    return unpack(results)      -- (trailing nils dropped, as 2.6.0 drops them)
end

-- call_global(name, ...) answers false when no global function has that name
local function handle_call_result(name, status, found, ...)
    if status and not found then
        rollback()
        box.error({code = box.error.NO_SUCH_PROC,
                   reason = string_format("Procedure '%s' is not defined", name)})
    end
    if not status then
        return handle_eval_result(false, found)
    end
    return handle_eval_result(true, ...)
end

local self_box = {
    ping = function() return true end,
    reload_schema = function() end,
    close = function() end,
    timeout = function(self) return self end,
    wait_connected = function() return true end,
    is_connected = function() return true end,
    call = function(_box, proc_name, args)
        check_remote_arg(_box, 'call')
        check_call_args(args)
        proc_name = tostring(proc_name)
        args = args or {}
        local func = rawget(box, 'func') and box.func[proc_name]
        if func ~= nil then
            return handle_eval_result(pcall(func.call, func, args))
        end
        return handle_call_result(proc_name, pcall(call_global, proc_name, unpack(args)))
    end,
    eval = function(_box, expr, args)
        check_remote_arg(_box, 'eval')
        check_eval_args(args)
        local proc, errmsg = loadstring(expr)
        if not proc then
            proc, errmsg = loadstring('return ' .. expr)
        end
        if not proc then
            rollback()
            return box.error(E_PROC_LUA, errmsg)
        end
        return handle_eval_result(pcall(proc, unpack(args or {})))
    end,
}

setmetatable(self_box, {
    __index = function(_, key)
        if key == 'space' then
            return box.space
        end
    end,
})

return self_box
