-- Tarantool's socket module, second half (2.6.0's builtin/socket.lua): name
-- resolution, tcp_connect, tcp_server and socket.iowait over the socket objects of
-- socket.lua. Loaded with what socket.lua loaded plus the helpers it returns;
-- returns the module.
local native, blocking, wait, internal, core = ...

local errno = require('errno')
local type, tostring, tonumber, error, pairs, ipairs = type, tostring, tonumber, error,
                                                       pairs, ipairs
local format = string.format

local socket_new, methods, is_closed = core.socket_new, core.methods, core.is_closed
local ivalue, iflags, protocol_number = core.ivalue, core.iflags, core.protocol_number
local located, TRANSIENT, FATAL = core.located, core.TRANSIENT, core.FATAL
local TIMEOUT_INFINITY = core.TIMEOUT_INFINITY

local function getaddrinfo(host, port, timeout, opts)
    if type(timeout) == 'table' and opts == nil then
        opts, timeout = timeout, TIMEOUT_INFINITY
    elseif timeout == nil then
        timeout = TIMEOUT_INFINITY
    end
    if port == nil then
        port = 0
    end
    local family, kind, protocol, flags
    if opts ~= nil then
        if opts.type ~= nil then
            kind = ivalue(internal.SO_TYPE, opts.type)
            if kind == nil then
                errno(errno.EINVAL)
                return nil
            end
        end
        if opts.family ~= nil then
            family = ivalue(internal.DOMAIN, opts.family)
            if family == nil then
                errno(errno.EINVAL)
                return nil
            end
        end
        if opts.protocol ~= nil then
            protocol = protocol_number(opts.protocol)
            if protocol == nil then
                return nil
            end
        end
        if opts.flags ~= nil then
            flags = iflags(internal.AI_FLAGS, opts.flags)
            if flags == nil then
                errno(errno.EINVAL)
                return nil
            end
        end
    end
    local list, code = wait(blocking.getaddrinfo, host, port, timeout, family, kind,
                            protocol, flags)
    if list == nil then
        errno(code)
        return nil
    end
    errno(0)
    return list
end

-- connect `s`, waiting up to `timeout` for a connection in progress
local function connect_socket(s, host, port, timeout)
    if methods.sysconnect(s, host, port) then
        return true
    end
    if s._errno ~= errno.EINPROGRESS then
        return nil
    end
    if methods.writable(s, timeout) then
        s._errno = methods.getsockopt(s, 'SOL_SOCKET', 'SO_ERROR')
    end
    if s._errno ~= 0 then
        return nil
    end
    s._errno = nil
    return true
end

local function tcp_connect(host, port, timeout)
    if host == 'unix/' then
        local s = socket_new('AF_UNIX', 'SOCK_STREAM', 0)
        if s == nil then
            return nil
        end
        if not connect_socket(s, host, port, timeout) then
            local code = s._errno
            s:close()
            errno(code)
            return nil
        end
        errno(0)
        return s
    end
    local clock = require('fiber').clock
    timeout = timeout or TIMEOUT_INFINITY
    local stop = clock() + timeout
    local addresses = getaddrinfo(host, port, timeout, {type = 'SOCK_STREAM',
                                                         protocol = 'tcp'})
    if addresses == nil or #addresses == 0 then
        errno(errno.EINVAL)
        return nil
    end
    for _, remote in ipairs(addresses) do
        timeout = stop - clock()
        if timeout <= 0 then
            errno(errno.ETIMEDOUT)
            return nil
        end
        local s = socket_new(remote.family, remote.type, remote.protocol)
        if s ~= nil then
            if connect_socket(s, remote.host, remote.port, timeout) then
                errno(0)
                return s
            end
            local code = s:errno()
            s:close()
            errno(code)
        end
    end
    return nil
end

local function serve_client(server, client, from)
    local fiber = require('fiber')
    fiber.name(format('%s/%s:%s', server.name, from.host, from.port), {truncate = true})
    local ok, err = pcall(server.handler, client, from)
    if not is_closed(client) then
        client:shutdown()
        client:close()
    end
    if not ok then
        error(err)
    end
end

local function accept_loop(server, s, addr)
    local fiber, log = require('fiber'), require('log')
    fiber.name(format('%s/%s:%s', server.name, addr.host, addr.port), {truncate = true})
    log.info('started')
    while not is_closed(s) and s:readable() do
        if is_closed(s) then
            break
        end
        local client, from = s:accept()
        if client == nil then
            local code = s._errno
            if not TRANSIENT[code] then
                log.error('accept(%s) failed: %s', tostring(s), s:error())
            end
            if FATAL[code] then
                break
            end
        else
            fiber.create(serve_client, server, client, from)
        end
    end
    log.info('stopped')
end

local function bind_address(s, addr)
    if s:bind(addr.host, addr.port) then
        if addr.family == 'AF_UNIX' then
            -- close() removes the socket file bind() made, before the descriptor goes
            s.close = function(self)
                os.remove(addr.port)
                return methods.close(self)
            end
        end
        return true
    end
    if addr.family ~= 'AF_UNIX' or errno() ~= errno.EADDRINUSE then
        return false
    end
    -- a unix socket file left by a dead server is replaced; a live one is not
    local saved = errno()
    local probe = tcp_connect(addr.host, addr.port)
    if probe ~= nil then
        probe:close()
        errno(saved)
        return false
    end
    if errno() ~= errno.ECONNREFUSED then
        errno(saved)
        return false
    end
    require('log').info('tcp_server: remove dead UNIX socket: %s', addr.port)
    if not os.remove(addr.port) then
        errno(saved)
        return false
    end
    return bind_address(s, addr)
end

-- A listening socket on host:port (the first address that takes a socket);
-- `prepare(s)` may set it up and returns the backlog.
local function server_bind(host, port, prepare, timeout)
    timeout = timeout and tonumber(timeout) or TIMEOUT_INFINITY
    local addresses
    if host == 'unix/' then
        addresses = {{host = host, port = port, family = 'AF_UNIX', protocol = 0,
                      type = 'SOCK_STREAM'}}
    else
        addresses = getaddrinfo(host, port, timeout, {type = 'SOCK_STREAM',
                                                      flags = 'AI_PASSIVE'})
        if addresses == nil then
            return nil
        end
    end
    for _, addr in ipairs(addresses) do
        local s = socket_new(addr.family, addr.type, addr.protocol)
        if s ~= nil then
            local backlog
            if prepare then
                backlog = prepare(s)
            else
                s:setsockopt('SOL_SOCKET', 'SO_REUSEADDR', 1)
            end
            if not bind_address(s, addr) or not s:listen(backlog) then
                local code = errno()
                methods.close(s)
                errno(code)
                return nil
            end
            return s, addr
        end
    end
    errno(errno.EAFNOSUPPORT)
    return nil
end

local function tcp_server_usage()
    located(1112, 'Usage: socket.tcp_server(host, port, handler | opts)')
end

local function tcp_server(host, port, opts, timeout)
    local server = {}
    if type(opts) == 'function' then
        server.handler = opts
    elseif type(opts) == 'table' then
        if type(opts.handler) ~= 'function' or
                (opts.prepare ~= nil and type(opts.prepare) ~= 'function') then
            tcp_server_usage()
        end
        for k, v in pairs(opts) do
            server[k] = v
        end
    else
        tcp_server_usage()
    end
    server.name = server.name or 'server'
    local s, addr = server_bind(host, port, server.prepare, timeout)
    if s == nil then
        return nil
    end
    require('fiber').create(accept_loop, server, s, addr)
    return s, addr
end

-- socket.iowait(fd, events[, timeout]): wait on any descriptor; events are 1, 2, 3
-- or 'R', 'W', 'RW' (either case), answered in the same form
local EVENT_BITS = {R = 1, W = 2, RW = 3, WR = 3}
local function socket_iowait(fd, events, timeout)
    if fd == nil or events == nil or (type(events) ~= 'number'
            and EVENT_BITS[tostring(events):upper()] == nil) then
        error('Usage: iowait(fd, 1 | \'r\' | 2 | \'w\' | 3 | \'rw\' [, timeout])', 2)
    end
    local bits = type(events) == 'number' and events or EVENT_BITS[events:upper()]
    local ready = wait(blocking.iowait_fd, tonumber(fd), bits, timeout or TIMEOUT_INFINITY)
    if type(events) == 'number' then
        return ready
    end
    return (bit.band(ready, 1) ~= 0 and 'R' or '') .. (bit.band(ready, 2) ~= 0 and 'W' or '')
end

-- for socket_luasocket.lua
core.getaddrinfo, core.tcp_connect, core.server_bind = getaddrinfo, tcp_connect,
                                                      server_bind
core.connect_socket = connect_socket

return setmetatable({
    getaddrinfo = getaddrinfo,
    tcp_connect = tcp_connect,
    tcp_server = tcp_server,
    iowait = socket_iowait,
    internal = internal,
}, {
    __call = function(_, ...) return socket_new(...) end,
})
