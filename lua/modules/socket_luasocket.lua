-- 2.6.0's LuaSocket emulation in the socket module: socket.tcp(), socket.connect()
-- and socket.bind() (reached through the module's metatable, so pairs() does not
-- list them), giving objects with LuaSocket's methods: tcp{master} (bind, listen,
-- connect), tcp{server} (accept) and tcp{client} (receive, send, shutdown). Built
-- on the socket objects of socket.lua; loaded with its helpers and the module.
local core, module = ...

local errno = require('errno')
local type, tostring, error, setmetatable, ipairs = type, tostring, error, setmetatable,
                                                    ipairs
local format, sub = string.format, string.sub

local methods, check_socket, read = core.methods, core.check_socket, core.read
local TRANSIENT, TIMEOUT_INFINITY = core.TRANSIENT, core.TIMEOUT_INFINITY
local LIMIT_INFINITY = core.LIMIT_INFINITY

local function located(line, message)
    error('builtin/socket.lua:' .. line .. ': ' .. message, 0)
end

local function clock()
    return require('fiber').clock()
end

local function fail(self)
    return nil, methods.error(self)
end

local function close(self)
    if not methods.close(self) then
        return fail(self)
    end
    return 1
end

-- (host, port as text, family as 'inet' / 'inet6' / 'unix')
local function address(self, getter)
    local where = getter(self)
    if where == nil then
        return fail(self)
    end
    return where.host, tostring(where.port), where.family:match('AF_(.*)'):lower()
end

local function getsockname(self) return address(self, methods.name) end
local function getpeername(self) return address(self, methods.peer) end

local function settimeout(self, value)
    check_socket(self)
    self.timeout = value      -- (LuaSocket's mode argument is ignored, as in 2.6.0)
    return 1
end

local function setoption(self, option, value)
    local done
    if option == 'reuseaddr' then
        done = methods.setsockopt(self, 'socket', 'SO_REUSEADDR', value)
    elseif option == 'keepalive' then
        done = methods.setsockopt(self, 'socket', 'SO_KEEPALIVE', value)
    elseif option == 'linger' then
        -- (2.6.0 takes only `on` of a {on, timeout} table)
        done = methods.linger(self, type(value) == 'table' and value.on or value)
    elseif option == 'tcp-nodelay' then
        done = methods.setsockopt(self, 'tcp', 'TCP_NODELAY', value)
    else
        located(1342, format('Unknown socket option name: %s', tostring(option)))
    end
    if not done then
        return fail(self)
    end
    return 1
end

local client_mt, server_mt

-- receive(number | '*l' | '*a' [, prefix]): nil, 'closed', partial at end of stream
local function receive(self, pattern, prefix)
    check_socket(self)
    prefix = prefix or ''
    local timeout = self.timeout or TIMEOUT_INFINITY
    if type(pattern) == 'number' then
        local data = read(self, pattern, timeout, core.by_limit)
        if data == nil then
            return fail(self)
        elseif #data < pattern then
            return nil, 'closed', prefix .. data
        end
        return prefix .. data
    elseif pattern == '*l' or pattern == nil then
        local data = read(self, LIMIT_INFINITY, timeout, core.by_delimiter, {'\n'})
        if data == nil then
            return fail(self)
        elseif #data > 0 and data:byte(#data) == 10 then
            return prefix .. sub(data, 1, #data - 1)
        end
        return nil, 'closed', prefix .. data
    elseif pattern == '*a' then
        local parts = {prefix}
        local deadline = clock() + timeout
        repeat
            local data = read(self, LIMIT_INFINITY, timeout, core.by_any)
            if data == nil then
                if not TRANSIENT[self._errno] then
                    return fail(self)
                end
            elseif data == '' then
                break
            else
                parts[#parts + 1] = data
            end
        until not methods.readable(self, deadline - clock())
        if #parts == 1 then
            return nil, 'closed', table.concat(parts)
        end
        return table.concat(parts)
    end
    located(1494, 'Usage: socket:receive(pattern, [, prefix])')
end

local function send(self, data, i, j)
    if i ~= nil then
        data = sub(data, i, j)
    end
    local sent = methods.write(self, data, self.timeout)
    if not sent then
        return fail(self)
    end
    return (i or 1) + sent - 1
end

local function shutdown(self, how)
    if not methods.shutdown(self, how) then
        return fail(self)
    end
    return 1
end

local function bind(self, host, port)
    if not methods.bind(self, host, port) then
        return fail(self)
    end
    return 1
end

local function listen(self, backlog)
    if not methods.listen(self, backlog) then
        return fail(self)
    end
    setmetatable(self, server_mt)
    return 1
end

-- connect(host, port): IPv4 addresses only, as 2.6.0's
local function connect(self, host, port)
    check_socket(self)
    local deadline = clock() + (self.timeout or TIMEOUT_INFINITY)
    local addresses = module.getaddrinfo(host, port, deadline - clock(),
                                         {family = 'AF_INET', type = 'SOCK_STREAM'})
    if addresses == nil or #addresses == 0 then
        self._errno = errno.EINVAL
        return fail(self)
    end
    for _, remote in ipairs(addresses) do
        if core.connect_socket(self, remote.host, remote.port, deadline - clock()) then
            return 1
        end
    end
    return fail(self)
end

local function accept(self)
    check_socket(self)
    local deadline = clock() + (self.timeout or TIMEOUT_INFINITY)
    repeat
        local client = methods.accept(self)
        if client ~= nil then
            return setmetatable(client, client_mt)
        end
        if not TRANSIENT[methods.errno(self)] then
            break
        end
    until not methods.readable(self, deadline - clock())
    return fail(self)
end

local function named(kind)
    return function(self)
        return format('tcp{%s}: fd=%d', kind, check_socket(self))
    end
end

-- (an unconnected tcp{master} has receive and send too, as in 2.6.0: LuaSocket's
-- own implementation has them, and some modules rely on it)
local master_mt = {
    __index = {close = close, getsockname = getsockname, getpeername = getpeername,
               settimeout = settimeout, setoption = setoption, bind = bind,
               listen = listen, connect = connect, receive = receive, send = send},
    __tostring = named('master'), __serialize = named('master'),
}
server_mt = {
    __index = {close = close, getsockname = getsockname, getpeername = getpeername,
               settimeout = settimeout, setoption = setoption, accept = accept},
    __tostring = named('server'), __serialize = named('server'),
}
client_mt = {
    __index = {close = close, getsockname = getsockname, getpeername = getpeername,
               settimeout = settimeout, setoption = setoption, receive = receive,
               send = send, shutdown = shutdown},
    __tostring = named('client'), __serialize = named('client'),
}

local function tcp()
    local s = core.socket_new('AF_INET', 'SOCK_STREAM', 'tcp')
    if s == nil then
        return nil, errno.strerror()
    end
    return setmetatable(s, master_mt)
end

local function luasocket_connect(host, port)
    if host == nil or port == nil then
        located(1556, 'Usage: luasocket.connect(host, port)')
    end
    local s = core.tcp_connect(host, port)
    if s == nil then
        return nil, errno.strerror()
    end
    return setmetatable(s, client_mt)
end

local function luasocket_bind(host, port, backlog)
    if host == nil or port == nil then
        located(1568, 'Usage: luasocket.bind(host, port [, backlog])')
    end
    local s = core.server_bind(host, port, function() return backlog end)
    if s == nil then
        return nil, errno.strerror()
    end
    return setmetatable(s, server_mt)
end

getmetatable(module).__index = {tcp = tcp, connect = luasocket_connect,
                                bind = luasocket_bind}
return module
