-- Tarantool's pwd module (2.6.0's builtin/pwd.lua): users and groups as tables.
-- `native` looks them up through Python's pwd and grp (the same NSS calls 2.6.0
-- makes through ffi); this side checks arguments as 2.6.0 does.
local native = ...

local type, error = type, error

-- A number is converted as ffi converts it to uid_t / gid_t: truncated, then
-- taken modulo 2^32 (-1 is 4294967295, which names nobody).
local function id_t(number)
    local whole = number < 0 and math.ceil(number) or math.floor(number)
    return whole % 4294967296
end

local function key(value, what, line)
    local kind = type(value)
    if kind == 'number' then
        return id_t(value)
    elseif kind == 'string' then
        return value
    end
    error(string.format("builtin/pwd.lua:%d: Bad type of %s (expected 'string'/'number')",
                        line, what), 0)
end

local function group(fields)
    if fields == nil then
        return nil
    end
    return {id = fields[1], name = fields[2], members = fields[3]}
end

local function user(fields)
    if fields == nil then
        return nil
    end
    local result = {name = fields[1], id = fields[2], workdir = fields[3],
                    shell = fields[4]}
    result.group = group(fields[5])
    return result
end

local function each(list, make)
    local result = {}
    for i, fields in ipairs(list) do
        result[i] = make(fields)
    end
    return result
end

local pwd = {}

function pwd.getpw(uid)
    if uid == nil then
        uid = native.getuid()
    end
    return user(native.getpw(key(uid, 'uid', 116)))
end

function pwd.getgr(gid)
    if gid == nil then
        gid = native.getgid()
    end
    return group(native.getgr(key(gid, 'gid', 130)))
end

function pwd.getpwall()
    return each(native.getpwall(), user)
end

function pwd.getgrall()
    return each(native.getgrall(), group)
end

return pwd
