"""package.path, package.cpath and the working-directory loader as Tarantool 2.6.0 sets
them up.

The default paths are 2.6.0's: the user's luarocks tree, then Tarantool's and Lua's
system directories (Spindle reads Lua modules from the same places, so rocks installed
for Tarantool are found). LUA_PATH and LUA_CPATH replace them as LuaJIT lets them, a
';;' in them standing for the default. Before package.path, require() looks in the
working directory (?.lua, ?/init.lua, ?.so) and in the .rocks trees of it and of every
directory above it, as 2.6.0's own loader does."""
from __future__ import annotations

import os
import platform

_LOADER = r"""
local getcwd = ...
local format, gsub, concat = string.format, string.gsub, table.concat

-- the directories 2.6.0's loaders look in: the working directory, then the .rocks
-- tree of it and of each directory above it, up to the root
local function rocks_dirs()
    local dirs, dir = {}, getcwd()
    while true do
        dirs[#dirs + 1] = dir .. '/.rocks'
        if dir == '' then return dirs end
        dir = dir:match('^(.*)/[^/]*$') or ''
    end
end

local function exists(path)
    local f = io.open(path, 'r')
    if f == nil then return false end
    f:close()
    return true
end

-- a loader over the file names `paths(file)` gives; `open(path, name)` loads one
local function loader(paths, open)
    return function(name)
        local tried = {}
        for _, path in ipairs(paths(gsub(name, '%.', '/'))) do
            if exists(path) then
                local chunk, err = open(path, name)
                if chunk == nil then error(err, 2) end
                return chunk
            end
            tried[#tried + 1] = format("\n\tno file '%s'", path)
        end
        return concat(tried)
    end
end

local function open_lua(path) return loadfile(path) end
local function open_c(path, name)
    return package.loadlib(path, 'luaopen_' .. gsub(gsub(name, '^.*%-', ''), '%.', '_'))
end

local function from_rocks(tail)
    return function(file)
        local paths = {}
        for _, dir in ipairs(rocks_dirs()) do
            for _, pattern in ipairs(tail) do paths[#paths + 1] = dir .. format(pattern, file) end
        end
        return paths
    end
end

local loaders = {
    loader(function(file) local cwd = getcwd()
        return {cwd .. '/' .. file .. '.lua', cwd .. '/' .. file .. '/init.lua'} end, open_lua),
    loader(function(file) return {getcwd() .. '/' .. file .. '.so'} end, open_c),
    loader(from_rocks({'/share/tarantool/%s.lua', '/share/tarantool/%s/init.lua'}), open_lua),
    loader(from_rocks({'/lib/tarantool/%s.so'}), open_c),
}
for i, fn in ipairs(loaders) do
    table.insert(package.loaders, 1 + i, fn)
end
"""


# require() as LuaJIT's (lib_package.c) does it, written in Lua so that a module's
# body runs as a Lua call: it may yield (fiber.sleep, a DDL waiting for the WAL, a
# socket read), as it may in 2.6.0, where a fiber is a C stack; LuaJIT's C require
# is a boundary no coroutine yield crosses. Same lookups, sentinel, messages (at
# level 2: luaL_error names the position of require's caller).
_REQUIRE = r"""
local type, error, tostring, rawget, newproxy = type, error, tostring, rawget, newproxy
local format = string.format
local loaded = package.loaded
local sentinel = newproxy()

function require(name)
    if type(name) ~= 'string' and type(name) ~= 'number' then
        -- (luaL_argerror names the function as its caller called it: '?' from pcall)
        local called = debug.getinfo(1, 'n').name or '?'
        error(format("bad argument #1 to '%s' (string expected, got %s)", called,
                     name == nil and 'no value' or type(name)), 2)
    end
    name = tostring(name)
    local found = loaded[name]
    if found then
        if found == sentinel then
            error(format("loop or previous error loading module '%s'", name), 2)
        end
        return found
    end
    local loaders = package.loaders
    if type(loaders) ~= 'table' then
        error("'package.loaders' must be a table", 2)
    end
    local tried, loader, i = '', nil, 1
    while true do
        local search = rawget(loaders, i)
        if search == nil then
            error(format("module '%s' not found:%s", name, tried), 2)
        end
        local result = search(name)
        if type(result) == 'function' then
            loader = result
            break
        elseif type(result) == 'string' or type(result) == 'number' then
            tried = tried .. result
        end
        i = i + 1
    end
    loaded[name] = sentinel
    local value = loader(name)
    if value ~= nil then
        loaded[name] = value
    end
    if loaded[name] == sentinel then
        loaded[name] = true
    end
    return loaded[name]
end
"""


def _defaults() -> tuple[str, str]:
    home = os.environ.get("HOME", "")
    arch = f"{platform.machine()}-linux-gnu"
    path = [f"{home}/.luarocks/share/lua/5.1/?.lua", f"{home}/.luarocks/share/lua/5.1/?/init.lua",
            f"{home}/.luarocks/share/lua/?.lua", f"{home}/.luarocks/share/lua/?/init.lua",
            "/usr/local/share/tarantool/?.lua", "/usr/local/share/tarantool/?/init.lua",
            "/usr/share/tarantool/?.lua", "/usr/share/tarantool/?/init.lua",
            "/usr/local/share/lua/5.1/?.lua", "/usr/local/share/lua/5.1/?/init.lua",
            "/usr/share/lua/5.1/?.lua", "/usr/share/lua/5.1/?/init.lua"]
    cpath = [f"{home}/.luarocks/lib/lua/5.1/?.so", f"{home}/.luarocks/lib/lua/?.so",
             f"/usr/local/lib/{arch}/tarantool/?.so", f"/usr/lib/{arch}/tarantool/?.so",
             "/usr/local/lib/tarantool/?.so", f"/usr/local/lib/{arch}/lua/5.1/?.so",
             f"/usr/lib/{arch}/lua/5.1/?.so", "/usr/local/lib/lua/5.1/?.so"]
    return ";".join(path) + ";", ";".join(cpath) + ";"


def _from_env(variable: str, default: str) -> str:
    """LuaJIT's setpath(): the variable's value, each ';;' in it the default."""
    value = os.environ.get(variable)
    if value is None:
        return default
    return value.replace(";;", ";\1;").replace("\1", default)


def install(runtime) -> None:
    path, cpath = _defaults()
    package = runtime.globals.package
    package.path = _from_env("LUA_PATH", path).encode("utf-8", "surrogateescape")
    package.cpath = _from_env("LUA_CPATH", cpath).encode("utf-8", "surrogateescape")
    runtime.load(_LOADER, "=package")(runtime.bridge(lambda: os.getcwd().encode(
        "utf-8", "surrogateescape"), convert_args=False))
    runtime.load(_REQUIRE, "=require")()
