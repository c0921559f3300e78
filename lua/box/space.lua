-- box.space: space and index objects with Tarantool 2.6's methods (schema.lua's
-- space_mt and index_mt) over the natives of lua/box/space.py.
--
-- Loaded with (native, blocking, wait, tuple, box). `native` functions never block;
-- `blocking` holds the DML functions for wait(): a statement outside a transaction
-- commits, which waits for the WAL. Error texts and their positions are 2.6.0's.
local native, blocking, wait, tuple, box = ...
local type, rawget, rawequal, select, error, tostring = type, rawget, rawequal, select, error, tostring
local setmetatable, pairs, ipairs, next, string_format = setmetatable, pairs, ipairs, next,
    string.format
local getmetatable, unpack = getmetatable, unpack
local co_isyieldable = coroutine.isyieldable
local uint64_t = require('ffi').typeof('uint64_t')
local fun_wrap = require('fun').wrap
local bless, bless_list, is_tuple = tuple.bless, tuple.bless_list, tuple.is

local spaces = {}          -- box.space: id and name -> space object
local tuple_mts = {}       -- space id -> tuple metatable of its format
local triggers = {}        -- space id -> {on_replace = {...}, before_replace = {...}}
local dml_epoch = 0        -- bumped by every DML from Lua: pairs() chunks expire

local iterators = {EQ = 0, REQ = 1, ALL = 2, LT = 3, LE = 4, GE = 5, GT = 6,
                   BITS_ALL_SET = 7, BITS_ANY_SET = 8, BITS_ALL_NOT_SET = 9,
                   OVERLAPS = 10, NEIGHBOR = 11}

local function check_space_arg(space, method)
    if type(space) ~= 'table' or space.id == nil then
        error(string_format('builtin/box/schema.lua:1291: Use space:%s(...) instead of '
                            .. 'space.%s(...)', method, method), 0)
    end
end

local function check_index_arg(index, method)
    if type(index) ~= 'table' or index.id == nil then
        error(string_format('builtin/box/schema.lua:1310: Use index:%s(...) instead of '
                            .. 'index.%s(...)', method, method), 0)
    end
end

local function check_space_exists(space)
    if rawget(spaces, space.id) == nil then
        box.error(box.error.NO_SUCH_SPACE, space.name)
    end
end

local function check_primary_index(space)
    local pk = space.index[0]
    if pk == nil then
        box.error(box.error.NO_SUCH_INDEX_ID, 0, space.name)
    end
    return pk
end

local function key_is_nil(key)
    return key == nil or (type(key) == 'table' and #key == 0)
end

-- box.internal.check_iterator_type of 2.6.0 (`key_nil`: whether the key is empty);
-- net.box's remote indexes check with it too
local function iterator_type(opts, key_nil)
    if opts ~= nil and type(opts) ~= 'table' and type(opts) ~= 'string' then
        error(string_format("builtin/box/schema.lua:1338: attempt to index local 'opts' "
                            .. "(a %s value)", type(opts)), 0)
    end
    if type(opts) == 'table' and opts.iterator ~= nil then
        local it = opts.iterator
        if type(it) == 'number' then
            return it
        elseif type(it) == 'string' then
            local itype = iterators[string.upper(it)]
            if itype == nil then
                box.error(box.error.ITERATOR_TYPE, it)
            end
            return itype
        end
        box.error(box.error.ITERATOR_TYPE, tostring(it))
    elseif type(opts) == 'string' then
        local itype = iterators[string.upper(opts)]
        if itype == nil then
            box.error(box.error.ITERATOR_TYPE, opts)
        end
        return itype
    end
    return key_nil and iterators.ALL or iterators.EQ
end

local function check_iterator_type(opts, key)
    return iterator_type(opts, key_is_nil(key))
end

local function check_uint(value, argno)
    if type(value) ~= 'number' then
        error(string_format("builtin/box/schema.lua:1541: bad argument #%d to 'box_select' "
                            .. "(cannot convert '%s' to 'unsigned int')", argno, type(value)), 0)
    end
    return value
end

local function check_select_opts(opts, key)
    local itype = check_iterator_type(opts, key)
    local offset, limit = 0, 4294967295
    if type(opts) == 'table' then
        if opts.offset ~= nil then offset = check_uint(opts.offset, 4) end
        if opts.limit ~= nil then limit = check_uint(opts.limit, 5) end
    end
    return itype, offset, limit
end

-- A DML statement: through wait() where Lua can yield (an autocommit waits for the
-- WAL; inside a transaction the request returns at once, for what a direct call
-- costs), so it crosses into Python once. Where Lua cannot yield (a trigger), the
-- native runs it directly inside a transaction; it answers false, having done
-- nothing, when no transaction is open (no DML result is false), and wait() then
-- raises the error of a forbidden yield.
local function dml(name, ...)
    dml_epoch = dml_epoch + 1
    if co_isyieldable() then
        return wait(blocking[name], ...)
    end
    local result = native[name](...)
    if result == false then
        return wait(blocking[name], ...)
    end
    return result
end

-- Whether box.begin() from Lua opened a transaction that box.commit()/rollback() has
-- not ended yet (txn.lua keeps it). Only a hint of which way put_fields tries first:
-- a transaction begun or ended elsewhere (a console session's, one a yield aborted)
-- just makes it take the slower way, never a wrong one.
local txn_hint = {open = false}

-- insert/replace of a tuple of plain fields: the fields travel as arguments (one
-- conversion by lupa instead of a Python walk over the table) and, unless a
-- before_replace trigger could have changed it, the result is built here from the
-- same values, which is what the stored tuple converts back to. Inside a
-- transaction (or where Lua cannot yield) the native is tried first: a plain call,
-- not a bridge, that does the statement, or answers false having done nothing when
-- no transaction is open (an error comes back as (false, error)). Otherwise, and
-- then, the statement goes through wait(): the autocommit waits for the WAL.
-- The stored tuple comes back as `fields` (nil: a new table of the arguments) when
-- it is the fields given, else as itself. (One function, not two: a Lua call per
-- statement is measurable here.)
local function put_fields(name, fields, sid, ...)
    local result
    if txn_hint.open or not co_isyieldable() then
        local err
        result, err = native[name](sid, ...)
        if result == false then
            if err ~= nil then
                error(err, 0)
            end
            result = wait(blocking[name], sid, ...)
        end
    else
        result = wait(blocking[name], sid, ...)
    end
    if result == true then
        return fields or {...}
    end
    return result
end

local MAX_PLAIN_FIELDS, MAX_EXACT = 128, 2^53
local NULL = box.NULL

-- The field count of `t` when it is an array of strings, booleans and numbers that
-- come back from Python unchanged (not -0, NaN, or beyond 2^53, which become
-- int64 cdata), or box.NULL (a nil field: the key an auto-increment fills), with
-- no other keys and no serializer hint but a tuple's: then it converts to exactly
-- these fields. nil otherwise; and whether a box.NULL is among them. One walk
-- with next() proves both: its keys must come as 1, 2, ..., n, which they do for
-- an array (a table whose integer keys sit in its hash part may come otherwise
-- and just takes the general way).
local function plain_length(t)
    if type(t) ~= 'table' or (getmetatable(t) ~= nil and not is_tuple(t)) then
        return nil
    end
    local n, has_null = 0, false
    local k, v = next(t)
    while k ~= nil do
        n = n + 1
        if k ~= n or n > MAX_PLAIN_FIELDS then
            return nil
        end
        local kind = type(v)
        if kind == 'number' then
            if v ~= v or v > MAX_EXACT or v < -MAX_EXACT or (v == 0 and 1 / v < 0) then
                return nil
            end
        elseif kind ~= 'string' and kind ~= 'boolean' then
            if not rawequal(v, NULL) then
                return nil
            end
            has_null = true
        end
        k, v = next(t, k)
    end
    return n, has_null
end

local function put(name, fields_name, sid, t)
    local n, has_null = plain_length(t)
    if n == nil then
        return dml(name, sid, t)
    end
    dml_epoch = dml_epoch + 1
    if not has_null then
        return put_fields(fields_name, nil, sid, unpack(t, 1, n))
    end
    -- box.NULL travels as a nil argument (None in Python); a stored tuple that is
    -- the fields given comes back as a copy of them (box.NULL kept)
    local args, fields = {}, {}
    for i = 1, n do
        local v = t[i]
        fields[i] = v
        if not rawequal(v, NULL) then
            args[i] = v
        end
    end
    return put_fields(fields_name, fields, sid, unpack(args, 1, n))
end

-- index objects ---------------------------------------------------------------------

local index_mt = {}
index_mt.__index = index_mt

function index_mt.len(index)
    check_index_arg(index, 'len')
    return native.len(index.space_id, index.id)
end

function index_mt.bsize(index)
    check_index_arg(index, 'bsize')
    return native.index_bsize(index.space_id, index.id)
end

function index_mt.min(index, key)
    check_index_arg(index, 'min')
    return bless(native.min(index.space_id, index.id, key), tuple_mts[index.space_id])
end

function index_mt.max(index, key)
    check_index_arg(index, 'max')
    return bless(native.max(index.space_id, index.id, key), tuple_mts[index.space_id])
end

function index_mt.random(index, rnd)
    check_index_arg(index, 'random')
    return bless(native.random(index.space_id, index.id, rnd or math.random(0, 2147483647)),
                 tuple_mts[index.space_id])
end

function index_mt.get(index, key)
    check_index_arg(index, 'get')
    return bless(native.get(index.space_id, index.id, key), tuple_mts[index.space_id])
end

function index_mt.select(index, key, opts)
    check_index_arg(index, 'select')
    local itype, offset, limit = check_select_opts(opts, key)
    return bless_list(native.select(index.space_id, index.id, key, itype, offset, limit),
                      tuple_mts[index.space_id])
end

function index_mt.count(index, key, opts)
    check_index_arg(index, 'count')
    return native.count(index.space_id, index.id, key, check_iterator_type(opts, key))
end

local iterator_state_mt = {__tostring = function() return '<iterator state>' end}

-- pairs: a Lua iterator (gen, param, state). Tuples come in chunks that grow while
-- they are used up and shrink back to one when a DML made the rest stale.
function index_mt.pairs(index, key, opts)
    check_index_arg(index, 'pairs')
    local itype = check_iterator_type(opts, key)
    local sid, iid = index.space_id, index.id
    native.iterator_check(sid, iid, key, itype)
    local buffer, pos, size, last, epoch, done, step = nil, 0, 0, nil, dml_epoch, false, 1
    local state = setmetatable({}, iterator_state_mt)
    local function gen()
        if pos >= size or epoch ~= dml_epoch then
            if done and pos >= size then
                return nil
            end
            if epoch ~= dml_epoch then
                step = 1
            elseif buffer ~= nil then
                step = step < 256 and step * 2 or step
            end
            buffer = native.iterator_next(sid, iid, key, itype, last, step)
            pos, size, epoch = 0, #buffer, dml_epoch
            done = size < step
            if size == 0 then
                return nil
            end
        end
        pos = pos + 1
        last = buffer[pos]
        return state, bless(last, tuple_mts[sid])
    end
    -- a fun iterator as 2.6.0's (s:pairs():map(f)); its state prints as 2.6.0's cdata
    return fun_wrap(gen, nil, state)
end

function index_mt.update(index, key, ops)
    check_index_arg(index, 'update')
    return bless(dml('update', index.space_id, index.id, key, ops), tuple_mts[index.space_id])
end

function index_mt.delete(index, key)
    check_index_arg(index, 'delete')
    return bless(dml('delete', index.space_id, index.id, key), tuple_mts[index.space_id])
end

function index_mt.stat(index)
    return {}
end

function index_mt.compact(index)
end

function index_mt.drop(index)
    check_index_arg(index, 'drop')
    return box.schema.index.drop(index.space_id, index.id)
end

function index_mt.rename(index, name)
    check_index_arg(index, 'rename')
    return box.schema.index.rename(index.space_id, index.id, name)
end

function index_mt.alter(index, options)
    check_index_arg(index, 'alter')
    return box.schema.index.alter(index.space_id, index.id, options)
end

-- space objects ---------------------------------------------------------------------

local space_mt = {}
space_mt.__index = space_mt

function space_mt.len(space)
    check_space_arg(space, 'len')
    local pk = space.index[0]
    return pk == nil and 0 or pk:len()
end

function space_mt.count(space, key, opts)
    check_space_arg(space, 'count')
    local pk = space.index[0]
    return pk == nil and 0 or pk:count(key, opts)
end

function space_mt.bsize(space)
    check_space_arg(space, 'bsize')
    check_space_exists(space)
    return uint64_t(native.bsize(space.id))    -- size_t, a uint64_t cdata as in 2.6.0
end

function space_mt.get(space, key)
    check_space_arg(space, 'get')
    return check_primary_index(space):get(key)
end

function space_mt.select(space, key, opts)
    check_space_arg(space, 'select')
    return check_primary_index(space):select(key, opts)
end

function space_mt.insert(space, t)
    check_space_arg(space, 'insert')
    return bless(put('insert', 'insert_fields', space.id, t), tuple_mts[space.id])
end

function space_mt.replace(space, t)
    check_space_arg(space, 'replace')
    return bless(put('replace', 'replace_fields', space.id, t), tuple_mts[space.id])
end
space_mt.put = space_mt.replace

function space_mt.update(space, key, ops)
    check_space_arg(space, 'update')
    return check_primary_index(space):update(key, ops)
end

function space_mt.upsert(space, t, ops, deprecated)
    check_space_arg(space, 'upsert')
    if deprecated ~= nil then
        box.error(box.error.PROC_LUA, 'Error: extra argument in upsert call: '
                  .. tostring(deprecated) .. '. Usage :upsert(tuple, operations)')
    end
    dml('upsert', space.id, t, ops)
end

function space_mt.delete(space, key)
    check_space_arg(space, 'delete')
    return check_primary_index(space):delete(key)
end

-- As 2.6.0: the primary key's max + 1, put in front of the caller's own table.
function space_mt.auto_increment(space, t)
    check_space_arg(space, 'auto_increment')
    local last = check_primary_index(space):max()
    local max = 0
    if last ~= nil then
        max = last[1]
    end
    table.insert(t, 1, max + 1)
    return space:insert(t)
end

function space_mt.pairs(space, key, opts)
    check_space_arg(space, 'pairs')
    local pk = space.index[0]
    if pk == nil then
        return function() end, nil, 0
    end
    return pk:pairs(key, opts)
end

function space_mt.frommap(space, map, opts)
    if type(space) ~= 'table' or space.id == nil or type(map) ~= 'table' then
        error('Usage: space:frommap(map, opts)', 0)
    end
    local ok, t = pcall(native.frommap, space.id, map)
    if not ok then
        return nil, type(t) == 'table' and t.message or tostring(t)
    end
    if type(opts) == 'table' and opts.table then
        return t
    end
    return bless(t, tuple_mts[space.id])
end

function space_mt.truncate(space)
    check_space_arg(space, 'truncate')
    return box.schema.space.truncate(space.id)
end

function space_mt.format(space, format)
    check_space_arg(space, 'format')
    return box.schema.space.format(space.id, format)
end

function space_mt.drop(space)
    check_space_arg(space, 'drop')
    check_space_exists(space)
    return box.schema.space.drop(space.id, space.name)
end

function space_mt.rename(space, name)
    check_space_arg(space, 'rename')
    check_space_exists(space)
    return box.schema.space.rename(space.id, name)
end

function space_mt.create_index(space, name, options)
    check_space_arg(space, 'create_index')
    check_space_exists(space)
    return box.schema.index.create(space.id, name, options)
end

function space_mt.run_triggers(space, yesno)
    check_space_arg(space, 'run_triggers')
end

-- triggers --------------------------------------------------------------------------

-- lbox_trigger_reset(): list, add, replace or delete in `list` (kept newest first).
local function trigger_reset(list, changed, ...)
    local top = select('#', ...)
    local new, old = ...
    if top > 2 or (top > 0 and new ~= nil and type(new) ~= 'function')
            or (top > 1 and old ~= nil and type(old) ~= 'function') then
        error('trigger reset: incorrect arguments', 0)
    end
    local pos
    if old ~= nil then
        for i = 1, #list do
            if rawequal(list[i], old) then
                pos = i
                break
            end
        end
        if pos == nil then
            error('trigger reset: Trigger is not found', 0)
        end
    end
    if new ~= nil then
        if pos ~= nil then
            list[pos] = new
        else
            table.insert(list, 1, new)
        end
        changed(list)
        return new
    elseif pos ~= nil then
        table.remove(list, pos)
        changed(list)
        return
    end
    -- listed oldest first, as 2.6.0 lists them (they run newest first)
    local copy, n = {}, #list
    for i = 1, n do
        copy[i] = list[n + 1 - i]
    end
    return copy
end

local function space_triggers(id, kind)
    local all = triggers[id]
    if all == nil then
        all = {on_replace = {}, before_replace = {}}
        triggers[id] = all
    end
    return all[kind]
end

local function trigger_method(kind)
    local usage = 'usage: space:' .. kind .. '(function | nil, [function | nil])'
    return function(space, ...)
        if type(space) ~= 'table' or space.id == nil then
            error(usage, 0)
        end
        local id = space.id
        return trigger_reset(space_triggers(id, kind), function(list)
            native.set_trigger(id, kind, #list > 0)
        end, ...)
    end
end
local on_replace_method = trigger_method('on_replace')
local before_replace_method = trigger_method('before_replace')

local function snapshot(list)
    local copy = {}
    for i = 1, #list do
        copy[i] = list[i]
    end
    return copy
end

local function run_on_replace(id, old, new, space_name, op)
    local all = triggers[id]
    if all == nil then
        return
    end
    local mt = tuple_mts[id]
    old, new = bless(old, mt), bless(new, mt)
    for _, fn in ipairs(snapshot(all.on_replace)) do
        fn(old, new, space_name, op)
    end
end

-- Returns 0 (keep the new tuple), 1 (drop it), 2 and a tuple, or 3 (the old tuple).
local function run_before_replace(id, old, new, space_name, op)
    local all = triggers[id]
    if all == nil then
        return 0
    end
    local mt = tuple_mts[id]
    old, new = bless(old, mt), bless(new, mt)
    local result, changed = new, false
    for _, fn in ipairs(snapshot(all.before_replace)) do
        local n, ret = (function(...) return select('#', ...), (...) end)(
            fn(old, result, space_name, op))
        if n > 0 then
            if ret == nil then
                result, changed = nil, true
            elseif is_tuple(ret) then
                if not rawequal(ret, result) then
                    result, changed = ret, true
                end
            else
                box.error(box.error.BEFORE_REPLACE_RET, type(ret))
            end
        end
    end
    if not changed then
        return 0
    elseif result == nil then
        return 1
    elseif rawequal(result, old) then
        return 3
    end
    return 2, result
end

-- keeping box.space current -----------------------------------------------------------

local function update_indexes(space, described)
    local previous = rawget(space, 'index') or {}
    local index = {}
    for _, d in ipairs(described) do
        local obj = rawget(previous, d.id)
        if obj == nil then
            obj = setmetatable({}, index_mt)
        end
        obj.unique, obj.parts, obj.id = d.unique, d.parts, d.id
        obj.space_id, obj.type, obj.name = d.space_id, d.type, d.name
        obj.sequence_id, obj.sequence_fieldno = d.sequence_id, d.sequence_fieldno
        obj.sequence_path = d.sequence_path
        obj.dimension = d.dimension
        obj.func = d.func       -- {fid =, name =} of a functional index
        index[d.id] = obj
        index[d.name] = obj
    end
    space.index = index
end

-- From Python after every change of the space's `_space`/`_index` rows: `info` is
-- its description, or nil when it is gone.
local function refresh(id, info)
    local space = rawget(spaces, id)
    if space ~= nil and rawequal(rawget(spaces, space.name), space) then
        spaces[space.name] = nil
    end
    if info == nil then
        spaces[id] = nil
        tuple_mts[id] = nil
        triggers[id] = nil
        return
    end
    if space == nil then
        space = setmetatable({}, space_mt)
        space.on_replace = on_replace_method
        space.before_replace = before_replace_method
        space.ck_constraint = {}
        spaces[id] = space
    end
    space.id, space.name, space.engine = info.id, info.name, info.engine
    space.field_count, space.temporary = info.field_count, info.temporary
    space.is_local, space.is_sync, space.enabled = info.is_local, info.is_sync, info.enabled
    update_indexes(space, info.indexes)
    spaces[info.name] = space
    tuple_mts[id] = tuple.make_mt(info.names)
end

local function install()
    rawset(box, 'space', spaces)
    rawset(box, 'index', iterators)
end

-- box.index is there before box.cfg too, as in 2.6.0
local function install_early()
    rawset(box, 'index', iterators)
end

-- A tuple of space `id` as Lua code outside this module hands it out.
local function bless_for(id, t)
    return bless(t, tuple_mts[id])
end

return {
    -- box.internal's argument checks of 2.6.0, for net.box's remote spaces
    checks = {check_space_arg = check_space_arg, check_index_arg = check_index_arg,
              check_primary_index = check_primary_index, check_iterator_type = iterator_type},
    refresh = refresh,
    txn_hint = txn_hint,
    bless_for = bless_for,
    install = install,
    install_early = install_early,
    run_on_replace = run_on_replace,
    run_before_replace = run_before_replace,
    trigger_reset = trigger_reset,
    space_mt = space_mt,
    index_mt = index_mt,
}
