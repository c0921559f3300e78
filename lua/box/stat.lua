-- box.runtime (there before box.cfg, as in 2.6.0), box.stat, box.slab and box.backup
-- (put into `box` by the first box.cfg).
--
-- Loaded with (native, box).
local native, box = ...
local rawset, setmetatable = rawset, setmetatable

local function callable(fn, fields)
    return setmetatable(fields or {}, {__call = function(_, ...) return fn(...) end})
end

local function install_early()
    rawset(box, 'runtime', {
        info = function() return native.runtime_info(collectgarbage('count') * 1024) end,
    })
end

local stat = callable(function() return native.stat() end, {
    net = callable(function() return native.stat_net() end),
    reset = function() native.stat_reset() end,
    vinyl = function() return {} end,      -- no vinyl engine: nothing to count
    sql = function() return native.stat_sql() end,
})

local slab = {
    info = function() return native.slab_info() end,
    stats = function() return native.slab_stats() end,
    check = function() end,                -- nothing to check: no slab allocator
}

local backup = {
    start = function(...)
        -- luaL_optinteger of box_lua_backup_start; then its own refusal
        local index = ...
        if index ~= nil then
            local number = tonumber(index)
            if number == nil or (type(index) ~= 'number' and type(index) ~= 'string') then
                error(("bad argument #1 to '?' (number expected, got %s)"):format(type(index)), 0)
            end
            index = number >= 0 and math.floor(number) or math.ceil(number)
        end
        if index ~= nil and index < 0 then
            error('invalid checkpoint index', 0)
        end
        return native.backup_start(index or 0)
    end,
    stop = function() native.backup_stop() end,
}

local function install()
    rawset(box, 'stat', stat)
    rawset(box, 'slab', slab)
    rawset(box, 'backup', backup)
end

return {install_early = install_early, install = install}
