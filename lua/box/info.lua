-- box.info (a table that is also callable) and box.snapshot().
--
-- Loaded with (native, blocking, wait, box, helpers).
local native, blocking, wait, box, helpers = ...
local map_mt = helpers.map_mt
local mapping_mt = {__serialize = 'mapping'}   -- a block-style map, e.g. {1: {...}}
local setmetatable, type, pairs = setmetatable, type, pairs

-- Vclocks print as flow maps ({1: 4}) wherever they are.
local function mark_vclocks(t)
    for k, v in pairs(t) do
        if type(v) == 'table' then
            if k == 'vclock' then
                setmetatable(v, map_mt)
            else
                mark_vclocks(v)
            end
        end
    end
    return t
end

-- box.info.gc() and friends: callable, and shown as an empty table inside box.info.
local function callable(fn)
    return setmetatable({}, {__call = function(_, ...) return fn(...) end})
end

local sections = {
    gc = callable(function() return mark_vclocks(native.gc()) end),
    memory = callable(function() return native.memory(collectgarbage('count') * 1024) end),
    sql = callable(function() return native.sql() end),
    vinyl = callable(function() return native.vinyl() end),
}

local function info()
    local t = mark_vclocks(native.info())
    if type(t.replication) == 'table' then
        setmetatable(t.replication, mapping_mt)
    end
    for name, section in pairs(sections) do
        t[name] = section
    end
    -- box.info.replication_anon: {count = N}, and called: the anonymous replicas
    t.replication_anon = setmetatable(t.replication_anon or {count = 0},
        {__call = function() return mark_vclocks(native.replication_anon()) end})
    return t
end

local info_mt = {
    __index = function(_, key)
        local section = sections[key]
        if section ~= nil then
            return section
        end
        return info()[key]
    end,
    __call = function() return info() end,
    __serialize = function() return info() end,
}

local function snapshot()
    return wait(blocking.snapshot)
end

local function install()
    rawset(box, 'info', setmetatable({}, info_mt))
    rawset(box, 'snapshot', snapshot)
end

return {install = install}
