-- The requests of one net.box connection, kept on the Lua side of transport.py: the
-- sync counter, the frames of the requests sent, the futures in flight by sync, the
-- reading of the usual replies and the waiting for one, as 2.6.0's net_box.lua keeps
-- them in Lua.
--
-- Why here and not in Python: a request crosses between Lua and Python only when it
-- must (~1.5 us a crossing). Frames queue in a Lua table that transport.py takes in
-- one piece at the next turn of the loop (take_out); the worker hands over every
-- whole reply it has read in one string (replies), read here frame by frame; a fiber
-- crosses only to park (blocking.wait_reply) and is named, by sync, in the string of
-- woken syncs the read returns. What is not usual stays with transport.py: a length
-- prefix other than `ce` + uint32, a header other than the fixed-width one every
-- 2.6.0 reply has, a sync this table does not know (the schema fetch's, the auth's),
-- a schema version that changed: the read stops there and the worker's strict path
-- takes that packet (and hands it back through dispatch() when it is ours).
--
-- A future (net_box.lua's) is the table in flight: _sync, _done, _status and _raw
-- (the reply's type and body), _pushes (box.session.push messages), _err (its
-- connection failed, or it was discarded), _waiting (fibers parked on it).
--
-- Loaded with (native, blocking, wait): transport.py's natives (send_now, want_flush,
-- flush, state_error, reply_error, no_connection) and its wait_reply, run through the
-- driver's wait(). Returns the functions transport.py and net_box.lua call.
local native, blocking, wait = ...

local byte, sub, char, concat = string.byte, string.sub, string.char, table.concat
local bit = require('bit')
local band, rshift = bit.band, bit.rshift
local fiber_clock = require('fiber').clock
local max = math.max

local TIMEOUT_INFINITY = 500 * 365 * 86400      -- net_box.lua's
local TYPE_ERROR = 0x8000       -- of a reply's type: an error

local CHUNK = 0x80              -- IPROTO_CHUNK: a box.session.push() message
local SYNC_MASK = 0x7FFFFFFF    -- transport.py's next_sync wraps the same way
-- A batch this long is written at once instead of at the end of the loop turn: the
-- peer starts on it while the fibers still running make the rest. 50 fibers calling
-- through one connection made 25% more calls/s so (scripts/bench/netbox.py, see
-- docs/PERFORMANCE.md); each write more is a syscall, so not much shorter.
local FLUSH_BATCH = 16

local function be32(s, p)
    local a, b, c, d = byte(s, p, p + 3)
    return ((a * 256 + b) * 256 + c) * 256 + d
end

local function u32(v)
    return char(rshift(v, 24), band(rshift(v, 16), 0xFF), band(rshift(v, 8), 0xFF),
                band(v, 0xFF))
end

-- (transport.py sets max_packet, and state and schema_version as they change; the
-- table holds no reference to the transport: each would keep the other for ever)
local function new()
    return {inflight = {}, count = 0, next_sync = 1, out = {}, out_n = 0,
            state = 'initial', schema_version = 0, gone = false, max_packet = 0}
end

-- The next sync (transport.py's own requests take theirs here too).
local function new_sync(w)
    local sync = w.next_sync
    w.next_sync = band(sync + 1, SYNC_MASK)
    return sync
end

-- perform_async_request(): `f` goes out on `transport` as request `rtype` with
-- `body`. `now`: its fiber waits for it at once, so with nothing else in flight or
-- queued it is written at once (a turn of the loop sooner); else it joins the frames
-- written together at the end of the loop turn, or when there are FLUSH_BATCH.
local function send(w, transport, f, rtype, body, now)
    local state = w.state
    if state ~= 'active' and state ~= 'fetch_schema' then
        box.error(native.state_error(transport))
    end
    local sync = new_sync(w)
    -- `ce <len>` and the header {TYPE, SYNC} with the sync as a uint32: the bytes
    -- transport.encode_request writes (every type net.box sends is a fixint)
    local frame = '\xce' .. u32(9 + #body) .. '\x82\x00' .. char(rtype) .. '\x01\xce'
        .. u32(sync) .. body
    f._sync, f._done = sync, false
    local count = w.count
    w.inflight[sync], w.count = f, count + 1
    if now and count == 0 and w.out_n == 0 then
        native.send_now(transport, frame)
        return
    end
    local n = w.out_n + 1
    w.out[n], w.out_n = frame, n
    if n == 1 then
        native.want_flush(transport)
    elseif n >= FLUSH_BATCH then
        native.flush(transport)
    end
end

-- The frames queued since the last call, as one string (nil: none).
local function take_out(w)
    local n = w.out_n
    if n == 0 then
        return nil
    end
    local out = w.out
    local data = n == 1 and out[1] or concat(out, '', 1, n)
    w.out, w.out_n = {}, 0
    return data
end

-- One reply to the future `f`; its sync goes into `woken` when a fiber waits on it.
local function settle(w, f, status, sync, body, woken)
    if status == CHUNK then
        local pushes = f._pushes
        if pushes == nil then
            pushes = {}
            f._pushes = pushes
        end
        pushes[#pushes + 1] = body or '\x80'
    else
        w.inflight[sync], w.count = nil, w.count - 1
        f._done, f._status, f._raw = true, status, body or '\x80'
    end
    if (f._waiting or 0) > 0 then      -- (a count: 0 once its fibers stopped waiting)
        woken[#woken + 1] = sync
    end
end

-- Every whole reply at the start of `s` that is usual and ours (see the top); the
-- bytes taken and the woken syncs (a string of numbers, or nil).
local function replies(w, s)
    local n, p = #s, 1
    local inflight, max_packet = w.inflight, w.max_packet
    local woken = {}
    while p + 4 <= n and byte(s, p) == 0xce do
        local len = be32(s, p + 1)
        local h = p + 5
        local stop = h + len - 1
        if stop > n or len < 23 or len > max_packet then
            break
        end
        -- 83 00 ce <type> 01 cf <sync> 05 ce <schema version>
        local m, k0, t, k1, tsync, k5, tv = byte(s, h, h + 2)
        if m ~= 0x83 or k0 ~= 0x00 or t ~= 0xce then
            break
        end
        k1, tsync = byte(s, h + 7, h + 8)
        k5, tv = byte(s, h + 17, h + 18)
        if k1 ~= 0x01 or tsync ~= 0xcf or k5 ~= 0x05 or tv ~= 0xce then
            break
        end
        local sync = be32(s, h + 9) * 4294967296 + be32(s, h + 13)
        local f = inflight[sync]
        if f == nil then
            break
        end
        local version = be32(s, h + 19)
        if version > 0 and version ~= w.schema_version and w.state == 'active' then
            break           -- transport.py reloads the schema after this reply
        end
        settle(w, f, be32(s, h + 3), sync, len > 23 and sub(s, h + 23, stop) or nil, woken)
        p = stop + 1
    end
    return p - 1, woken[1] ~= nil and concat(woken, ' ') or nil
end

-- One reply transport.py read (any header; nobody's is dropped): the woken syncs.
local function dispatch(w, status, sync, body)
    local f = w.inflight[sync]
    if f == nil then
        return nil
    end
    local woken = {}
    settle(w, f, status, sync, body, woken)
    return woken[1] ~= nil and concat(woken, ' ') or nil
end

-- The connection failed or closed: every request in flight ends with `err`
-- (transport.py then wakes the fibers parked on them).
local function fail_all(w, err)
    local inflight = w.inflight
    w.inflight, w.count, w.out, w.out_n = {}, 0, {}, 0
    for _, f in pairs(inflight) do
        f._done, f._err = true, err
    end
end

-- future:discard(): the reply, if it ever comes, goes nowhere.
local function discard(w, f, err)
    if not f._done then
        if w.inflight[f._sync] == f then
            w.inflight[f._sync], w.count = nil, w.count - 1
        end
        f._done, f._err = true, err
    end
end

---------------------------------------------------------------- waiting for one

-- The reply of a request: its raw body, or nil and its error, or nil and nil while it
-- is on its way.
local function outcome(f)
    if f._done then
        local err = f._err
        if err == nil then
            local status = f._status
            if band(status, TYPE_ERROR) == 0 then
                return f._raw
            end
            err = native.reply_error(status, f._raw)
            f._err = err
        end
        return nil, err
    end
    if f._wire.gone then
        return nil, native.no_connection()
    end
    return nil, nil
end

local function is_ready(f)
    return f._done or f._wire.gone
end

-- Park until `f` is answered or pushed to (`pushes`: until it has more than that
-- many), its connection is gone or `deadline` (fiber.clock(); nil: none) passes;
-- false when the deadline passed first.
local function wait_for(f, deadline, pushes)
    local w = f._wire
    while not f._done and not w.gone do
        if pushes ~= nil and f._pushes ~= nil and #f._pushes > pushes then
            return true
        end
        local timeout = TIMEOUT_INFINITY
        if deadline ~= nil then
            timeout = deadline - fiber_clock()
            if timeout <= 0 then
                return false
            end
        end
        f._waiting = (f._waiting or 0) + 1
        local alive = wait(blocking.wait_reply, f._transport, f._sync, timeout)
        f._waiting = f._waiting - 1
        if not alive then
            w.gone = true
        end
    end
    return true
end

-- a timeout as wait_for's deadline
local function deadline_of(timeout)
    if timeout == nil or timeout >= TIMEOUT_INFINITY / 2 then
        return nil
    end
    return fiber_clock() + max(0, timeout)
end

return {new = new, new_sync = new_sync, send = send, take_out = take_out,
        replies = replies, dispatch = dispatch, fail_all = fail_all, discard = discard,
        outcome = outcome, is_ready = is_ready, wait_for = wait_for,
        deadline_of = deadline_of}
