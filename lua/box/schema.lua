-- box.schema: spaces, indexes, users, roles, functions and sequences over
-- core/box/ddl.py.
-- Every DDL call is DML on system spaces that commits, so it goes through wait();
-- the look-ups (exists, info, password) are direct calls.
--
-- Loaded with (native, blocking, wait, box, sequence_bless).
local native, blocking, wait, box, sequence_bless = ...

local function ddl(name, ...)
    return wait(blocking.ddl, name, ...)
end

local function nothing() end

local schema = {space = {}, index = {}, user = {}, role = {}, func = {},
                sequence = {bless = sequence_bless}}

-- spaces -----------------------------------------------------------------------------

function schema.space.create(name, options)
    local id = ddl('space_create', name, options)
    return box.space[id]
end
schema.create_space = schema.space.create

function schema.space.drop(space_id, space_name, options)
    ddl('space_drop', space_id, space_name, options)
end

function schema.space.rename(space_id, name)
    ddl('space_rename', space_id, name)
end

function schema.space.format(space_id, format)
    return ddl('space_format', space_id, format)
end

function schema.space.truncate(space_id)
    ddl('space_truncate', space_id)
end

-- indexes ----------------------------------------------------------------------------

function schema.index.create(space_id, name, options)
    local index_id = ddl('index_create', space_id, name, options)
    local space = box.space[space_id]
    return space and space.index[index_id]
end

function schema.index.drop(space_id, index_id)
    ddl('index_drop', space_id, index_id)
end

function schema.index.rename(space_id, index_id, name)
    ddl('index_rename', space_id, index_id, name)
end

function schema.index.alter(space_id, index_id, options)
    ddl('index_alter', space_id, index_id, options)
end

-- users and roles ----------------------------------------------------------------------

function schema.user.create(name, options) ddl('user_create', name, options) end
function schema.user.drop(name, options) ddl('user_drop', name, options) end
function schema.user.passwd(name, password) ddl('user_passwd', name, password) end
function schema.user.grant(name, ...) ddl('user_grant', name, ...) end
function schema.user.revoke(name, ...) ddl('user_revoke', name, ...) end
function schema.user.enable(name) ddl('user_enable', name) end
function schema.user.disable(name) ddl('user_disable', name) end
function schema.user.exists(name) return native.user_exists(name) end
function schema.user.info(name) return native.user_info(name, 'user') end
schema.user.password = native.password

function schema.role.create(name, options) ddl('role_create', name, options) end
function schema.role.drop(name, options) ddl('role_drop', name, options) end
function schema.role.grant(name, ...) ddl('role_grant', name, ...) end
function schema.role.revoke(name, ...) ddl('role_revoke', name, ...) end
function schema.role.exists(name) return native.role_exists(name) end
function schema.role.info(name) return native.user_info(name, 'role') end

-- functions ----------------------------------------------------------------------------

function schema.func.create(name, options)
    -- a body must compile, as 2.6.0 loads it when the _func row goes in
    if type(options) == 'table' and type(options.body) == 'string' then
        local ok, err = loadstring('return ' .. options.body)
        if not ok then
            box.error(box.error.LOAD_FUNCTION, name, err)
        end
    end
    ddl('func_create', name, options)
end
function schema.func.drop(name, options) ddl('func_drop', name, options) end
function schema.func.exists(name) return native.func_exists(name) end

-- sequences (box.sequence: lua/box/sequence.lua) --------------------------------------

function schema.sequence.create(name, options)
    local _, not_created = ddl('sequence_create', name, options)
    if not_created ~= nil then
        return box.sequence[name], not_created
    end
    return box.sequence[name]
end
function schema.sequence.alter(name, options) ddl('sequence_alter', name, options) end
function schema.sequence.drop(name, options) ddl('sequence_drop', name, options) end

schema.upgrade = nothing

-- box.once(key, fn, ...): fn runs once in the life of the replica set, marked by
-- the row {'once' .. key} in _schema, which replicates and survives restarts. The
-- mark is written before fn runs, so a failing fn is not run again. A read-only
-- instance waits until it is writable (box.ctl.wait_rw), then looks again: another
-- member may have done it meanwhile.
local function once(key, fn, ...)
    if type(key) ~= 'string' or type(fn) ~= 'function' then
        box.error(box.error.ILLEGAL_PARAMS, 'Usage: box.once(key, func, ...)')
    end
    local mark = 'once' .. key
    local _schema = box.space._schema
    if _schema:get{mark} ~= nil then
        return
    end
    box.ctl.wait_rw()
    if _schema:get{mark} ~= nil then
        return
    end
    _schema:put{mark}
    return fn(...)
end

local function install()
    rawset(box, 'schema', schema)
    rawset(box, 'once', once)
end

return {install = install}
