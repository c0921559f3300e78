-- box.func: the persistent functions of _func, by name and by id, each a table of
-- its definition with a :call(args) method, as 2.6.0 shows them. Looked up through
-- box's __index (lazy.func), rebuilt when the schema version moved, so DDL from
-- anywhere (IPROTO, replication, a rollback) shows up.
--
-- Loaded with (native, blocking, wait, box).
local native, blocking, wait, box = ...

local func_mt = {}
func_mt.__index = func_mt

function func_mt.call(self, args)
    if type(self) ~= 'table' or getmetatable(self) ~= func_mt then
        error('Use func:call(...)', 2)
    end
    if args ~= nil and type(args) ~= 'table' then
        error('Use func:call(table)', 2)
    end
    return wait(blocking.call, self.name, args or {})
end

local cache, cached_version

local function funcs()
    local version = native.schema_version()
    if cache == nil or version ~= cached_version then
        cache = {}
        for _, def in ipairs(native.definitions()) do
            local func = setmetatable(def, func_mt)
            cache[def.id] = func
            cache[def.name] = func
        end
        cached_version = version
    end
    return cache
end

local function install()
    getmetatable(box).lazy.func = funcs
end

-- A functional index's call: `fn` on the stored tuple `t` of space `space_id`, as
-- the box.tuple Lua code gets (`bless_for` of box/space.lua: field names work).
local function index_call(fn, bless_for, space_id, t)
    return fn(bless_for(space_id, t))
end

return {install = install, index_call = index_call}
