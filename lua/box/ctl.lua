-- box.ctl: waiting for read-only / read-write, restarting replication.
--
-- Loaded with (blocking, wait, box).
local blocking, wait, box = ...

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

local function install()
    rawset(box, 'ctl', ctl)
end

return {install = install}
