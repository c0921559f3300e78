-- Tarantool 2.6.0's net.box module over Spindle's transport (transport.py).
--
-- The connection object, its futures and triggers live here, its space and index
-- objects (from the peer's schema) in net_box_schema.lua, net.box.self in
-- net_box_self.lua, the requests in flight in net_box_wire.lua; the socket and the
-- state machine are transport.py's. Not here (ER_UNSUPPORTED): the deprecated console
-- connections, wrap() of a socket, SQL. Request bodies are encoded and responses
-- decoded here with the msgpack module, as 2.6.0's net.box does, so results carry
-- the same values (int64 cdata, box.NULL, map/array hints, decoded extensions);
-- with the `buffer` option a response's raw body goes into that buffer.ibuf
-- instead (see into_buffer).
-- Error texts and the positions they carry are 2.6.0's (builtin/box/net_box.lua,
-- and builtin/box/schema.lua for the argument checks shared with box.space).
--
-- Loaded with (native, blocking, wait, wire, tuple, call_global, load_schema_part,
-- load_self_part, checks): `wire` the functions of net_box_wire.lua (the requests in
-- flight), the two loaders the chunks of net_box_schema.lua and net_box_self.lua.
-- Returns the module.
local native, blocking, wait, wire, tuple, call_global, load_schema_part, load_self_part,
    checks = ...

local ffi = require('ffi')
local msgpack = require('msgpack')
local fiber = require('fiber')
local log = require('log')
local encode, decode = msgpack.encode, msgpack.decode
local type, pairs, ipairs, next, select, tostring, tonumber = type, pairs, ipairs, next,
    select, tostring, tonumber
local setmetatable, getmetatable, rawequal, unpack, error = setmetatable, getmetatable,
    rawequal, unpack, error
local string_format = string.format
local fiber_clock = fiber.clock
local make_mt, bless = tuple.make_mt, tuple.bless
local base_mt = tuple.base_mt
local max = math.max

local E_PROC_LUA = box.error.PROC_LUA
local E_MORE_THAN_ONE_TUPLE = box.error.MORE_THAN_ONE_TUPLE
local E_TIMEOUT = box.error.TIMEOUT
local TIMEOUT_INFINITY = 500 * 365 * 86400
local DEFAULT_CONNECT_TIMEOUT = 10

-- IPROTO request types and body keys
local SELECT, INSERT, REPLACE, UPDATE, DELETE = 1, 2, 3, 4, 5
local CALL_16, EVAL, UPSERT, CALL, PING = 6, 8, 9, 10, 64
local DATA = 0x30
local ITER = {EQ = 0, REQ = 1, ALL = 2, LT = 3, LE = 4, GE = 5, GT = 6,
              BITS_ALL_SET = 7, BITS_ANY_SET = 8, BITS_ALL_NOT_SET = 9,
              OVERLAPS = 10, NEIGHBOR = 11}

----------------------------------------------------------------------- bodies

-- luamp_convert_key: a table (a tuple too) as it is, nil as [], a scalar as [key]
local function key_of(key)
    if rawequal(key, nil) then
        return '\x90'
    end
    if type(key) == 'table' then
        return encode(key)
    end
    return '\x91' .. encode(key)
end

-- luamp_convert_tuple: a table, else "Tuple/Key must be MsgPack array"
local function tuple_of(t)
    if type(t) ~= 'table' then
        box.error(box.error.TUPLE_NOT_ARRAY)
    end
    return encode(t)
end

local encoders = {}
function encoders.ping() return '' end
-- {FUNCTION_NAME = name, TUPLE = args}: the part up to the arguments kept per name
-- (a program calls few functions, many times)
local call_heads, call_heads_count = {}, 0
function encoders.call(name, args)
    local head = call_heads[name]
    if head == nil then
        head = '\x82\x22' .. encode(name) .. '\x21'
        if call_heads_count >= 1000 then
            call_heads, call_heads_count = {}, 0
        end
        call_heads[name], call_heads_count = head, call_heads_count + 1
    end
    return head .. encode(args)
end
function encoders.eval(expr, args)
    return '\x82\x27' .. encode(expr) .. '\x21' .. encode(args)
end
function encoders.insert(space_id, t)
    return '\x82\x10' .. encode(space_id) .. '\x21' .. tuple_of(t)
end
function encoders.delete(space_id, index_id, key)
    return '\x83\x10' .. encode(space_id) .. '\x11' .. encode(index_id) .. '\x20'
        .. key_of(key)
end
-- update and upsert operations count fields from 1 (INDEX_BASE), as Lua does
function encoders.update(space_id, index_id, key, ops)
    return '\x85\x10' .. encode(space_id) .. '\x11' .. encode(index_id) .. '\x15\x01\x20'
        .. key_of(key) .. '\x21' .. tuple_of(ops)
end
function encoders.upsert(space_id, t, ops)
    return '\x84\x10' .. encode(space_id) .. '\x15\x01\x21' .. tuple_of(t) .. '\x28'
        .. tuple_of(ops)
end
function encoders.select(space_id, index_id, iterator, offset, limit, key)
    return '\x86\x10' .. encode(space_id) .. '\x11' .. encode(index_id) .. '\x14'
        .. encode(iterator) .. '\x13' .. encode(offset) .. '\x12' .. encode(limit)
        .. '\x20' .. key_of(key)
end

--------------------------------------------------------------------- decoders

-- Each takes the response body (a MsgPack string) and the request's tuple
-- metatable; returns the result, or nil and an error code (get with two tuples).
local function data_of(raw)
    return (decode(raw))[DATA]
end

local function tuples_of(raw, mt)
    local data = data_of(raw)
    if data ~= nil then
        mt = mt or base_mt
        for i = 1, #data do
            setmetatable(data[i], mt)
        end
    end
    return data
end

local decoders = {
    ping = function() return nil end,
    call_17 = data_of,
    eval = data_of,
    call_16 = tuples_of,
    select = tuples_of,
    upsert = function() return nil end,
    count = function(raw) return data_of(raw)[1] end,
}
local function one_tuple(raw, mt)
    local data = data_of(raw)
    return bless(data and data[1], mt)
end
decoders.insert, decoders.replace, decoders.delete, decoders.update =
    one_tuple, one_tuple, one_tuple, one_tuple
local function get_tuple(raw, mt)
    local data = data_of(raw)
    if data ~= nil and data[2] ~= nil then
        return nil, E_MORE_THAN_ONE_TUPLE
    end
    return bless(data and data[1], mt)
end
decoders.get, decoders.min, decoders.max = get_tuple, get_tuple, get_tuple

------------------------------------------------------------- opts.buffer

-- The `buffer` option of 2.6.0: the response body (a push's too) is appended to the
-- ibuf as it came, or with `skip_header` without its {IPROTO_DATA = ...} map header
-- and key (the data array alone); the request returns the byte count instead of a
-- result. A buffer without :alloc() is a Lua error in 2.6.0's worker fiber: the
-- connection ends in `error` with its words, and the request fails with them.
local string_byte, string_sub = string.byte, string.sub

local function buffer_error(transport, buffer)
    local message
    local kind = type(buffer)
    if kind ~= 'cdata' and kind ~= 'table' and kind ~= 'string' and kind ~= 'userdata' then
        message = string_format("attempt to index local 'buffer' (a %s value)", kind)
    else
        message = "attempt to call method 'alloc' (a nil value)"
    end
    message = 'builtin/box/net_box.lua:642: ' .. message
    native.abort(transport, message)
    return box.error.new({code = box.error.UNKNOWN, reason = message})
end

-- the byte count written, or nil and the error
local function into_buffer(transport, buffer, raw, skip_header)
    if skip_header then
        local c = string_byte(raw, 1)
        local from = c == 0xde and 4 or c == 0xdf and 6 or 2
        if c == 0x80 or #raw < from then
            raw = ''                    -- an empty body (ping's) has no data
        else
            local _, after_key = decode(raw, from)
            raw = string_sub(raw, after_key)
        end
    end
    local ok, alloc = pcall(function() return buffer.alloc end)
    if not ok or alloc == nil then
        return nil, buffer_error(transport, buffer)
    end
    ffi.copy(buffer:alloc(#raw), raw, #raw)
    return #raw
end

-- a push's message as on_push and future:pairs() hand it: the byte count in a buffer
local function push_of(transport, push, buffer, skip_header)
    if buffer ~= nil then
        local count, err = into_buffer(transport, buffer, push, skip_header)
        if err ~= nil then
            box.error(err)
        end
        return count
    end
    return data_of(push)[1]
end

---------------------------------------------------------------------- futures

local future_methods = {}
local future_mt = {__index = future_methods}
local wire_send = wire.send

local outcome, is_ready, wait_for, deadline_of = wire.outcome, wire.is_ready,
    wire.wait_for, wire.deadline_of

-- Keep the outcome of an answered request, its body decoded (outcome()'s raw body,
-- or nil and its error); return result, or nil and the error.
local function keep(f, raw, err)
    if raw == nil then
        f._settled, f._error = true, err
        return nil, err
    end
    local result, code
    if f._buffer ~= nil then
        result, code = into_buffer(f._transport, f._buffer, raw, f._skip_header)
        if code ~= nil then
            f._settled, f._error = true, code
            return nil, code
        end
    else
        result, code = decoders[f._method](raw, f._mt)
    end
    if code ~= nil then
        f._settled, f._error = true, box.error.new({code = code})
        return nil, f._error
    end
    f._settled, f._result = true, result
    return result
end

local function settle(f)
    if f._settled then
        if f._error ~= nil then
            return nil, f._error
        end
        return f._result
    end
    local raw, err = outcome(f)
    if raw == nil and err == nil then
        return nil, box.error.new(E_PROC_LUA, 'Response is not ready')
    end
    return keep(f, raw, err)
end

function future_methods:is_ready()
    local ready = is_ready(self)
    if ready and self._buffer ~= nil and not self._settled then
        settle(self)            -- the body is in the buffer once the response is in
    end
    return ready
end

function future_methods:result()
    if not is_ready(self) then
        return nil, box.error.new(E_PROC_LUA, 'Response is not ready')
    end
    return settle(self)
end

function future_methods:wait_result(timeout)
    if timeout then
        if type(timeout) ~= 'number' or timeout < 0 then
            error('builtin/box/net_box.lua:408: Usage: future:wait_result(timeout)', 0)
        end
    end
    if self._settled then
        return settle(self)
    end
    if not is_ready(self) and not wait_for(self, deadline_of(timeout)) then
        return nil, box.error.new(E_TIMEOUT)
    end
    return keep(self, outcome(self))
end

function future_methods:discard()
    wire.discard(self._wire, self, native.discarded())
end

-- future:pairs([timeout]): the pushed messages, then the result (box.NULL, error on
-- an error or a timeout), as 2.6.0 iterates them.
local function future_next(it, i)
    if i == box.NULL then
        return nil, nil
    end
    i = i + 1
    local f = it.future
    local deadline = fiber_clock() + it.timeout
    while true do
        local push = f._pushes and f._pushes[i]
        if push ~= nil then
            return i, push_of(f._transport, push, f._buffer, f._skip_header)
        end
        if is_ready(f) then
            if i > #(f._pushes or {}) + 1 then
                return nil, nil
            end
            local result, err = settle(f)
            if err then
                return box.NULL, err
            end
            return i, result
        end
        if not wait_for(f, deadline, i - 1) then
            return box.NULL, box.error.new(E_TIMEOUT)
        end
    end
end

function future_methods:pairs(timeout)
    if timeout then
        if type(timeout) ~= 'number' or timeout < 0 then
            error('builtin/box/net_box.lua:391: Usage: future:pairs(timeout)', 0)
        end
    else
        timeout = TIMEOUT_INFINITY
    end
    return future_next, {future = self, timeout = timeout}, 0
end

--------------------------------------------------------------------- triggers

-- internal.trigger of 2.6.0: conn:on_connect(new[, old]) and friends.
local function is_callable(f)
    if type(f) == 'function' then
        return true
    end
    local mt = type(f) == 'table' and getmetatable(f)
    return mt and type(mt.__call) == 'function' or false
end

local trigger_mt = {
    __call = function(list, new, old)
        if new ~= nil and not is_callable(new) then
            error(string_format('builtin/internal.trigger.lua:23: Usage: %s(callable)',
                                list.name), 0)
        end
        if old ~= nil and not is_callable(old) then
            error('builtin/internal.trigger.lua:26: Usage: trigger(new_callable, '
                  .. 'old_callable)', 0)
        end
        if new == nil and old == nil then
            local copy = {}
            for i, f in ipairs(list) do
                copy[i] = f
            end
            return copy
        end
        for pos, f in ipairs(list) do
            if old ~= nil and old == f then
                if new == nil then
                    table.remove(list, pos)
                else
                    list[pos] = new
                end
                return old
            end
        end
        if old ~= nil then
            error(string_format('builtin/internal.trigger.lua:%d: %s: trigger is not found',
                                new == nil and 44 or 54, list.name), 0)
        end
        table.insert(list, new)
    end,
    __index = {
        run = function(list, ...)
            for _, f in ipairs(list) do
                f(...)
            end
        end,
    },
}

local function new_trigger(name)
    return setmetatable({name = name}, trigger_mt)
end

----------------------------------------------------------------- argument checks

local function check_remote_arg(remote, method)
    if type(remote) ~= 'table' then
        box.error(E_PROC_LUA, string_format('Use remote:%s(...) instead of remote.%s(...):',
                                            method, method))
    end
end

local function check_call_args(args)
    if args ~= nil and type(args) ~= 'table' then
        error('builtin/box/net_box.lua:1115: Use remote:call(func_name, {arg1, arg2, ...}, '
              .. 'opts) instead of remote:call(func_name, arg1, arg2, ...)', 0)
    end
end

local function check_eval_args(args)
    if args ~= nil and type(args) ~= 'table' then
        error('builtin/box/net_box.lua:1122: Use remote:eval(expression, {arg1, arg2, ...}, '
              .. 'opts) instead of remote:eval(expression, arg1, arg2, ...)', 0)
    end
end

--------------------------------------------------------------------- requests

local remote_methods = {}

-- A future of the connection's, its request sent (`now`: its fiber waits for it).
local function new_future(remote, method, opts, mt, rtype, body, now)
    local f = setmetatable({_wire = remote._wire, _transport = remote._transport,
                            _method = method, _mt = mt, _buffer = opts and opts.buffer,
                            _skip_header = opts and opts.skip_header}, future_mt)
    wire_send(f._wire, f._transport, f, rtype, body, now)
    return f
end

-- A synchronous request whose box.session.push() messages go to opts.on_push(ctx,
-- message) as they come, then its result.
local function request_with_pushes(remote, method, opts, mt, rtype, body, timeout)
    local deadline = fiber_clock() + (timeout or TIMEOUT_INFINITY)
    if remote._wire.state ~= 'active' then
        wait(blocking.wait_state, remote._transport, 'active',
             max(0, deadline - fiber_clock()))
    end
    local f = new_future(remote, method, opts, mt, rtype, body, true)
    local seen = 0
    while true do
        local push = f._pushes and f._pushes[seen + 1]
        if push ~= nil then
            seen = seen + 1
            opts.on_push(opts.on_push_ctx,
                         push_of(remote._transport, push, opts.buffer, opts.skip_header))
        elseif is_ready(f) then
            break
        elseif not wait_for(f, deadline, seen) then
            box.error(E_TIMEOUT)
        end
    end
    local result, err = settle(f)
    if err ~= nil then
        box.error(err)
    end
    return result
end

-- remote:_request() without is_async: wait for `active`, send, wait for the response
-- and for a schema reload it started; its raw body, or its error raised. `timeout`
-- covers all of it.
local function perform_request(remote, method, mt, rtype, body, timeout)
    local w = remote._wire
    local deadline = deadline_of(timeout)
    if w.state ~= 'active' then
        wait(blocking.wait_state, remote._transport, 'active',
             deadline and max(0, deadline - fiber_clock()))
    end
    local f = new_future(remote, method, nil, mt, rtype, body, true)
    if not is_ready(f) and not wait_for(f, deadline) then
        box.error(E_TIMEOUT)
    end
    local raw, err = outcome(f)
    if err ~= nil then
        box.error(err)
    end
    if w.state == 'fetch_schema' then
        wait(blocking.wait_state, remote._transport, 'active',
             deadline and max(0, deadline - fiber_clock()))
    end
    return raw
end

-- remote:_request(): a future with is_async, else the decoded result (the
-- transport waits for `active`, the response and a schema reload it started).
local function request(remote, method, opts, mt, rtype, body)
    local timeout
    if opts then
        if opts.is_async then
            if opts.on_push or opts.on_push_ctx then
                error('builtin/box/net_box.lua:1167: To handle pushes in an async request '
                      .. 'use future:pairs()', 0)
            end
            return new_future(remote, method, opts, mt, rtype, body, false)
        end
        timeout = opts.timeout
    end
    if timeout == nil and next(remote._deadlines) ~= nil then
        local deadline = remote._deadlines[fiber.self()]
        timeout = deadline and max(0, deadline - fiber_clock())
    end
    if opts and opts.on_push then
        return request_with_pushes(remote, method, opts, mt, rtype, body, timeout)
    end
    local raw = perform_request(remote, method, mt, rtype, body, timeout)
    if opts and opts.buffer ~= nil then
        local count, err = into_buffer(remote._transport, opts.buffer, raw, opts.skip_header)
        if err ~= nil then
            box.error(err)
        end
        return count
    end
    local result, code = decoders[method](raw, mt)
    if code ~= nil then
        box.error({code = code})    -- (no message: 2.6.0 gives it none)
    end
    return result
end

function remote_methods:close()
    check_remote_arg(self, 'close')
    wait(blocking.close, self._transport)
end

function remote_methods:on_schema_reload(...)
    check_remote_arg(self, 'on_schema_reload')
    return self._on_schema_reload(...)
end

function remote_methods:on_disconnect(...)
    check_remote_arg(self, 'on_disconnect')
    return self._on_disconnect(...)
end

function remote_methods:on_connect(...)
    check_remote_arg(self, 'on_connect')
    return self._on_connect(...)
end

function remote_methods:is_connected()
    check_remote_arg(self, 'is_connected')
    return self.state == 'active' or self.state == 'fetch_schema'
end

function remote_methods:wait_connected(timeout)
    check_remote_arg(self, 'wait_connected')
    return wait(blocking.wait_state, self._transport, 'active', timeout)
end

function remote_methods:wait_state(state, timeout)
    check_remote_arg(self, 'wait_state')
    if timeout == nil then
        local deadline = self._deadlines[fiber.self()]
        timeout = deadline and max(0, deadline - fiber_clock())
    end
    return wait(blocking.wait_state, self._transport, state, timeout)
end

function remote_methods:ping(opts)
    check_remote_arg(self, 'ping')
    return (pcall(request, self, 'ping', opts, nil, PING, ''))
end

function remote_methods:reload_schema()
    check_remote_arg(self, 'reload_schema')
    self:ping()
end

function remote_methods:call_16(func_name, ...)
    check_remote_arg(self, 'call')
    return (request(self, 'call_16', nil, nil, CALL_16,
                    encoders.call(tostring(func_name), {...})))
end

function remote_methods:call(func_name, args, opts)
    check_remote_arg(self, 'call')
    check_call_args(args)
    local res = request(self, 'call_17', opts, nil, CALL,
                        encoders.call(tostring(func_name), args or {}))
    if type(res) ~= 'table' or opts and opts.is_async then
        return res
    end
    return unpack(res)
end

function remote_methods:eval_16(code, ...)
    check_remote_arg(self, 'eval')
    return unpack((request(self, 'eval', nil, nil, EVAL, encoders.eval(code, {...}))))
end

function remote_methods:eval(code, args, opts)
    check_remote_arg(self, 'eval')
    check_eval_args(args)
    local res = request(self, 'eval', opts, nil, EVAL, encoders.eval(code, args or {}))
    if type(res) ~= 'table' or opts and opts.is_async then
        return res
    end
    return unpack(res)
end

-- SQL is out of Spindle's scope (as box.execute)
for _, name in ipairs({'execute', 'prepare', 'unprepare'}) do
    remote_methods[name] = function(self)
        check_remote_arg(self, name)
        box.error(box.error.UNSUPPORTED, 'Spindle', 'SQL')
    end
end

local compat_warning_said = false

-- conn:timeout(t) (deprecated since 1.7.4): a deadline for the calling fiber's
-- next requests
function remote_methods:timeout(timeout)
    check_remote_arg(self, 'timeout')
    if not compat_warning_said then
        compat_warning_said = true
        log.warn('netbox:timeout(timeout) is deprecated since 1.7.4, '
                 .. 'please use space:<request>(..., {timeout = t}) instead.')
    end
    self._deadlines[fiber.self()] = timeout and fiber_clock() + timeout
    return self
end

-------------------------------------------------------------- spaces, indexes

local space_metatable, index_metatable, install_schema = load_schema_part({
    request = request, encoders = encoders, make_mt = make_mt, base_mt = base_mt,
    -- box.internal's argument checks, box.space's own (lua/box/space.lua)
    check_space_arg = checks.check_space_arg, check_index_arg = checks.check_index_arg,
    check_primary_index = checks.check_primary_index,
    check_iterator_type = checks.check_iterator_type,
    ITER = ITER, SELECT = SELECT, INSERT = INSERT, REPLACE = REPLACE, UPDATE = UPDATE,
    DELETE = DELETE, UPSERT = UPSERT, CALL = CALL})
remote_methods._install_schema = install_schema

------------------------------------------------------------------- connecting

local function remote_serialize(self)
    return {host = self.host, port = self.port, opts = next(self.opts) and self.opts,
            state = self.state, error = self.error, protocol = self.protocol,
            schema_version = self.schema_version, peer_uuid = self.peer_uuid,
            peer_version_id = self.peer_version_id}
end

local remote_mt = {__index = remote_methods, __serialize = remote_serialize,
                   __metatable = false}

local function parse_connect_params(host_or_uri, ...)
    local port, opts = ...
    if type(host_or_uri) == 'table' then
        host_or_uri, port, opts = ...
    end
    if type(port) == 'table' then
        opts, port = port, nil
    end
    local copy = {}
    for k, v in pairs(opts or {}) do
        copy[k] = v
    end
    opts = copy
    local host = host_or_uri
    if port == nil then
        local uri = native.parse_uri(tostring(host))
        if uri == nil then
            box.error(E_PROC_LUA, 'usage: connect(uri[, opts] | host, port[, opts])')
        end
        host, port = uri.host, uri.service
        if opts.user == nil and opts.password == nil then
            opts.user, opts.password = uri.login, uri.password
        end
    end
    return host, port, opts
end

local function connect(...)
    local host, port, opts = parse_connect_params(...)
    if opts.console then        -- (2.6.0: deprecated since 1.10)
        box.error(box.error.UNSUPPORTED, 'Spindle',
                  "net.box console connections (use require('console').connect())")
    end
    local user, password = opts.user, opts.password
    opts.password = nil
    if user == nil and password ~= nil then
        box.error(E_PROC_LUA, 'net.box: user is not defined')
    end
    if user ~= nil and password == nil then
        password = ''
    end
    local remote = {host = host, port = port, opts = opts, state = 'initial'}
    -- The transport keeps the callback; the callback reaches the connection
    -- through a weak reference, so a connection nobody holds can be collected.
    local ref = setmetatable({remote = remote}, {__mode = 'v'})
    local last_reconnect_error
    local worker_gone = false
    local w = wire.new()            -- the requests in flight (net_box_wire.lua)
    local function callback(what, ...)
        if what == 'worker_gone' then
            worker_gone, w.gone = true, true
            return
        end
        local remote = ref.remote       -- (nil once the connection was collected)
        if remote == nil then
            return
        end
        if what == 'state_changed' then
            local state, err = ...
            local was_connected = remote._is_connected
            if state == 'active' then
                if not was_connected then
                    remote._is_connected = true
                    remote._on_connect:run(remote)
                end
            elseif state == 'error' or state == 'error_reconnect' or state == 'closed' then
                if was_connected then
                    remote._is_connected = false
                    remote._on_disconnect:run(remote)
                end
            end
            -- (set after the triggers ran: they see the state before, as in 2.6.0)
            remote.state, remote.error = state, err
            if state == 'error_reconnect' then
                -- the same error again only in the verbose log (gh-3175)
                if err ~= last_reconnect_error then
                    log.warn('%s:%s: %s', host or '', port or '', err)
                    last_reconnect_error = err
                else
                    log.verbose('%s:%s: %s', host or '', port or '', err)
                end
            end
        elseif what == 'handshake' then
            local protocol, uuid, version_id = ...
            if protocol ~= 'Binary' then
                return 'Unsupported protocol: ' .. protocol
            end
            remote.protocol, remote.peer_uuid, remote.peer_version_id =
                protocol, uuid, version_id
        elseif what == 'will_fetch_schema' then
            return true
        elseif what == 'fetch_connect_timeout' then
            return opts.connect_timeout or DEFAULT_CONNECT_TIMEOUT
        elseif what == 'did_fetch_schema' then
            local version, spaces, indexes, collations = ...
            remote:_install_schema(version, data_of(spaces), data_of(indexes),
                                   collations and data_of(collations))
        elseif what == 'reconnect_timeout' then
            local after = opts.reconnect_after
            if type(after) == 'number' and after > 0 then
                return after
            end
        end
    end
    setmetatable(remote, remote_mt)
    remote._deadlines = setmetatable({}, {__mode = 'k'})
    remote._space_mt = space_metatable(remote)
    remote._index_mt = index_metatable(remote)
    if opts.call_16 then
        remote.call, remote.eval = remote.call_16, remote.eval_16
    end
    remote._on_schema_reload = new_trigger('on_schema_reload')
    remote._on_disconnect = new_trigger('on_disconnect')
    remote._on_connect = new_trigger('on_connect')
    remote._is_connected = false
    remote._wire = w
    local transport = wait(blocking.start, host, port, user, password, callback, w)
    remote._transport = transport
    -- A connection collected unclosed stops: its worker and its socket go (2.6.0).
    -- Once the worker is gone (closed, failed, or the process ending: the Lua state
    -- is closed after Python has let go of everything) there is nothing to stop.
    remote._gc_hook = ffi.gc(ffi.new('char[1]'), function()
        if not worker_gone then
            local err = native.collected(transport)
            if err ~= nil then          -- (nil: the requests ended already)
                wire.fail_all(w, err)
            end
        end
    end)
    if opts.wait_connected ~= false then
        wait(blocking.wait_state, remote._transport, 'active', tonumber(opts.wait_connected))
    end
    return remote
end

local this_module = {connect = connect, new = connect}

-- netbox.wrap(socket, greeting, opts): a connection over a socket made elsewhere
function this_module.wrap()
    box.error(box.error.UNSUPPORTED, 'Spindle', 'net.box.wrap')
end

function this_module.timeout(timeout, ...)
    if type(timeout) == 'table' then
        timeout = ...
    end
    if not timeout then
        return this_module
    end
    local function timed_connect(...)
        local host, port, opts = parse_connect_params(...)
        if opts.wait_connected ~= false then
            opts.wait_connected = timeout
        end
        return connect(host, port, opts)
    end
    return setmetatable({connect = timed_connect, new = timed_connect},
                        {__index = this_module})
end

this_module.self = load_self_part({
    check_remote_arg = check_remote_arg, check_call_args = check_call_args,
    check_eval_args = check_eval_args, call_global = call_global})

return this_module
