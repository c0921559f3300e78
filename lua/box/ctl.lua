-- box.ctl: waiting for read-only / read-write, restarting replication.
--
-- Loaded with (blocking, wait, box).
local blocking, wait, box, trigger_reset, log = ...

local function check_timeout(timeout)
    if timeout ~= nil and type(timeout) ~= 'number' then
        error(("bad argument #1 to '?' (number expected, got %s)"):format(type(timeout)), 0)
    end
end

local ctl = {}

function ctl.wait_ro(timeout)
    check_timeout(timeout)
    return wait(blocking.wait_ro, true, timeout)
end

function ctl.wait_rw(timeout)
    check_timeout(timeout)
    return wait(blocking.wait_ro, false, timeout)
end

-- Restart the appliers that stopped for good (an unrecoverable error), or the one
-- to `peer` (a replica id or a URI from box.cfg.replication), without resetting
-- box.cfg.replication. Returns how many were restarted.
function ctl.replication_restart(peer)
    return wait(blocking.replication_restart, peer)
end

-- A new master takes over the synchronous transactions of the old one: what a
-- quorum has is confirmed, the rest rolled back.
function ctl.clear_synchro_queue()
    wait(blocking.clear_synchro_queue)
end

-- box.ctl.promote() (2.6.3): become the leader (election_mode = 'manual': run one
-- election) and take the synchronous queue over with a PROMOTE row.
function ctl.promote()
    wait(blocking.promote)
end

-- box.ctl.on_shutdown: triggers (newest first) run once when the instance stops by
-- os.exit() or a signal; an error is logged and the others still run.
local on_shutdown = {}
function ctl.on_shutdown(...)
    return trigger_reset(on_shutdown, function() end, ...)
end

local function run_shutdown()
    local copy = {}
    for i = 1, #on_shutdown do
        copy[i] = on_shutdown[i]
    end
    for _, fn in ipairs(copy) do
        local ok, err = pcall(fn)
        if not ok then
            log.error(tostring(err))
        end
    end
end

-- box.ctl.on_schema_init: triggers run in the first box.cfg once the system spaces
-- exist and before anything is recovered or joined, so that box.space._space and
-- the others can get triggers that see every row recovery brings.
local on_schema_init = {}
function ctl.on_schema_init(...)
    return trigger_reset(on_schema_init, function() end, ...)
end

local function run_schema_init(install_spaces)
    if #on_schema_init == 0 then
        return
    end
    install_spaces()
    local copy = {}
    for i = 1, #on_schema_init do
        copy[i] = on_schema_init[i]
    end
    for _, fn in ipairs(copy) do
        fn()
    end
end

local function install()
    rawset(box, 'ctl', ctl)
end

return {install = install, run_shutdown = run_shutdown, run_schema_init = run_schema_init}
