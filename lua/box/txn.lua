-- Transactions from Lua: box.begin/commit/rollback/atomic, savepoints, box.on_commit
-- and box.on_rollback. Only box.commit() waits (for the WAL), so only it goes through
-- wait(); the rest are direct calls. Transaction triggers stay in Lua (keyed by the
-- transaction id); Python runs them through one dispatcher per transaction.
--
-- Loaded with (native, blocking, wait, box, trigger_reset, bless_for, txn_hint).
local native, blocking, wait, box, trigger_reset, bless_for, txn_hint = ...
local type, error, pcall, ipairs = type, error, pcall, ipairs
local co_isyieldable = coroutine.isyieldable

local txn_triggers = {}    -- txn id -> {commit = {...}, rollback = {...}}

-- native.begin is called directly, not through a bridge: nothing, or (false, error)
local function begin()
    local ok, err = native.begin()
    if ok == false then
        error(err, 2)
    end
    txn_hint.open = true        -- (space.lua's put_fields: see there)
end

-- Where Lua can yield, straight to commit() (with nothing to commit it returns at
-- once); elsewhere only a transaction to commit needs the wait, which then raises.
local function commit()
    txn_hint.open = false
    if co_isyieldable() or native.prepare_commit() then
        wait(blocking.commit)
    end
end

local function rollback()
    txn_hint.open = false
    native.rollback()
end

local function savepoint()
    local sp, txn_id = native.savepoint()
    return {csavepoint = sp, txn_id = txn_id}
end

local function rollback_to_savepoint(sp)
    if type(sp) ~= 'table' or sp.csavepoint == nil then
        error('Usage: box.rollback_to_savepoint(savepoint)', 0)
    end
    native.rollback_to_savepoint(sp.csavepoint)
end

local function atomic_tail(ok, ...)
    if not ok then
        rollback()
        error((...), 0)
    end
    commit()
    return ...
end

local function atomic(fn, ...)
    begin()
    return atomic_tail(pcall(fn, ...))
end

local function txn_trigger(kind)
    local usage = 'Usage inside a transaction: box.on_' .. kind
                  .. '([function | nil, [function | nil]])'
    return function(...)
        if not native.is_in_txn() then
            error(usage, 0)
        end
        local id = native.hook_txn()
        local all = txn_triggers[id]
        if all == nil then
            all = {commit = {}, rollback = {}}
            txn_triggers[id] = all
        end
        return trigger_reset(all[kind], function() end, ...)
    end
end

-- From Python when transaction `id` ends: `stmts` is a list of {space_id, old, new}
-- (false for a missing tuple).
local function run_triggers(id, kind, stmts)
    local all = txn_triggers[id]
    txn_triggers[id] = nil
    if all == nil then
        return
    end
    local function iterator()
        local i = 0
        return function()
            i = i + 1
            local stmt = stmts[i]
            if stmt == nil then
                return nil
            end
            local sid, old, new = stmt[1], stmt[2] or nil, stmt[3] or nil
            return i, bless_for(sid, old), bless_for(sid, new), sid
        end
    end
    for _, fn in ipairs(all[kind]) do
        fn(iterator)
    end
end

local function install()
    rawset(box, 'begin', begin)
    rawset(box, 'commit', commit)
    rawset(box, 'rollback', rollback)
    rawset(box, 'savepoint', savepoint)
    rawset(box, 'rollback_to_savepoint', rollback_to_savepoint)
    rawset(box, 'atomic', atomic)
    rawset(box, 'is_in_txn', native.is_in_txn)
    rawset(box, 'txn_id', native.txn_id)
    rawset(box, 'on_commit', txn_trigger('commit'))
    rawset(box, 'on_rollback', txn_trigger('rollback'))
end

return {install = install, run_triggers = run_triggers}
