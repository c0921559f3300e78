-- Tarantool's socket module (2.6.0's builtin/socket.lua): socket objects over
-- Spindle's cooperative sockets. Loaded with `native` (non-blocking Python calls on
-- the socket of a descriptor, answering a result or nil plus an errno), `blocking`
-- (iowait and getaddrinfo, run only through wait(): they park the fiber), wait, and
-- the constant tables; returns the module.
--
-- Conventions as 2.6.0's: a failed call returns nil (or false) and leaves its errno
-- in s:errno() / s:error() and in errno(); argument errors are raised with the
-- positions 2.6.0's builtin/socket.lua gives them.
local native, blocking, wait, internal = ...

local ffi = require('ffi')
local errno = require('errno')
local type, tostring, tonumber, error, pairs, ipairs = type, tostring, tonumber, error,
                                                       pairs, ipairs
local format, find, sub = string.format, string.find, string.sub
local min = math.min

local TIMEOUT_INFINITY = 500 * 365 * 86400
local LIMIT_INFINITY = 2147483647
local READAHEAD = 16320

local function located(line, message)
    error('builtin/socket.lua:' .. line .. ': ' .. message, 0)
end

-- a Lua runtime error 2.6.0's code would run into, at its place
local function misuse(line, what, value)
    located(line, format(what, type(value)))
end

-- Objects: a table holding a `struct gc_socket` cdata, whose finalizer hands the
-- descriptor of a forgotten socket to `graveyard`; the next call closes those
-- (a finalizer must not call into Python).
pcall(ffi.cdef, 'struct gc_socket { int fd; };')
local graveyard = {}
local gc_socket_t = ffi.metatype('struct gc_socket', {
    __gc = function(g)
        if g.fd >= 0 then
            graveyard[#graveyard + 1] = g.fd
        end
    end,
})

local function reap()
    if graveyard[1] ~= nil then
        local fds = graveyard
        graveyard = {}
        native.reap(fds)
    end
end

local socket_mt
local methods = {}

local function is_closed(self)
    return self._gc_socket.fd < 0
end

local function check_socket(self)
    local g = type(self) == 'table' and self._gc_socket
    if type(g) == 'cdata' and ffi.istype(gc_socket_t, g) then
        if g.fd < 0 then
            located(88, 'attempt to use closed socket')
        end
        return g.fd
    end
    located(93, self ~= nil and 'Usage: socket:method(), called with non-socket'
                             or 'Usage: socket:method()')
end

local function make_socket(fd, itype)
    reap()
    return setmetatable({_gc_socket = ffi.new(gc_socket_t, {fd = fd}), itype = itype},
                        socket_mt)
end

-- a failure: remember its errno on the socket and in errno()
local function failed(self, code, result)
    self._errno = code
    errno(code)
    return result
end

local function ivalue(table, key)
    if type(key) == 'number' then
        return key
    end
    return table[key]
end

local function iflags(table, flags)
    if flags == nil then
        return 0
    end
    if type(flags) ~= 'table' then
        flags = {flags}
    end
    local result = 0
    for _, f in pairs(flags) do
        if table[f] == nil then
            return nil
        end
        result = bit.bor(result, table[f])
    end
    return result
end

local function protocol_number(name)
    if type(name) == 'number' then
        return name
    elseif type(name) ~= 'string' then
        errno(errno.EINVAL)
        return nil
    end
    local number = internal.protocols[name]
    if number == nil then
        errno(errno.EPROTOTYPE)
    end
    return number
end

-- calls -------------------------------------------------------------------------

function methods.close(self)
    local fd = check_socket(self)
    self._errno = nil
    self._gc_socket.fd = -1
    local ok, code = native.close(fd)
    if ok == nil then
        return failed(self, code, false)
    end
    return true
end

function methods.errno(self)
    check_socket(self)
    return self._errno or 0
end

function methods.error(self)
    check_socket(self)
    if self._errno == nil then
        return nil
    end
    return errno.strerror(self._errno)
end

local function call(self, result_on_failure, fn, ...)
    self._errno = nil
    local result, extra = fn(...)
    if result == nil then
        return failed(self, extra, result_on_failure)
    end
    if extra == nil then
        return result         -- (one value, as the console shows it)
    end
    return result, extra
end

function methods.sysconnect(self, host, port)
    local fd = check_socket(self)
    return call(self, false, native.connect, fd, tostring(host), tostring(port))
end

function methods.bind(self, host, port)
    local fd = check_socket(self)
    return call(self, false, native.bind, fd, tostring(host), tostring(port))
end

function methods.listen(self, backlog)
    local fd = check_socket(self)
    if backlog ~= nil and type(backlog) ~= 'number' then
        misuse(377, "bad argument #2 to 'listen' (cannot convert '%s' to 'int')", backlog)
    end
    return call(self, false, native.listen, fd, backlog or 256)
end

-- syswrite(string) or syswrite(pointer, size): what one send took
function methods.syswrite(self, data, size)
    local fd = check_socket(self)
    if type(data) == 'cdata' and size ~= nil then
        data = ffi.string(data, size)
    elseif type(data) ~= 'string' then
        located(271, 'Usage: socket:syswrite(data) or socket:syswrite(const char *, size)')
    end
    return call(self, nil, native.syswrite, fd, data)
end

-- sysread([size]) -> string, sysread(pointer, size) -> length: what one read got
function methods.sysread(self, buf, size)
    local fd = check_socket(self)
    if type(buf) == 'cdata' and size ~= nil then
        local data = call(self, nil, native.sysread, fd, size)
        if data == nil then
            return nil
        end
        ffi.copy(buf, data, #data)
        return #data
    end
    size = buf or READAHEAD
    if type(size) ~= 'number' then
        misuse(295, 'attempt to compare %s with number', size)
    end
    if size < 0 then
        located(296, 'socket:sysread(): size can not be negative')
    end
    return call(self, nil, native.sysread, fd, size)
end

function methods.nonblock(self, mode)
    local fd = check_socket(self)
    return call(self, nil, native.nonblock, fd, mode)
end

function methods.shutdown(self, how)
    local fd = check_socket(self)
    local variants = {R = 0, READ = 0, receive = 0, W = 1, WRITE = 1, send = 1,
                      RW = 2, READ_WRITE = 2, both = 2, [0] = 0, [1] = 1, [2] = 2}
    return call(self, false, native.shutdown, fd, variants[how] or 2)
end

-- name() and peer() leave errno 0 on success, as 2.6.0's do
local function address(self, fn, fd)
    local result = call(self, nil, fn, fd)
    if result ~= nil then
        errno(0)
    end
    return result
end

function methods.name(self)
    return address(self, native.name, check_socket(self))
end

function methods.peer(self)
    return address(self, native.peer, check_socket(self))
end

function methods.fd(self)
    return check_socket(self)
end

-- waiting ------------------------------------------------------------------------

local function iowait(self, what, timeout)
    local fd = check_socket(self)
    if timeout ~= nil and type(timeout) ~= 'number' then
        misuse(348, "bad argument #3 to 'iowait' (number expected, got %s)", timeout)
    end
    self._errno = nil
    local events = wait(blocking.iowait, fd, what, timeout or TIMEOUT_INFINITY)
    if events == 0 then
        self._errno = errno.ETIMEDOUT      -- errno() itself keeps what it had
    end
    return events
end

function methods.readable(self, timeout)
    return iowait(self, 1, timeout) ~= 0
end

function methods.writable(self, timeout)
    return iowait(self, 2, timeout) ~= 0
end

function methods.wait(self, timeout)
    local events = iowait(self, 3, timeout)
    if events == 0 then
        return 0
    end
    return (bit.band(events, 1) ~= 0 and 'R' or '') .. (bit.band(events, 2) ~= 0 and 'W' or '')
end

-- options ------------------------------------------------------------------------

local function level_number(level)
    if type(level) == 'number' then
        return level
    elseif type(level) ~= 'string' then
        errno(errno.EINVAL)
        return nil
    elseif level == 'SOL_SOCKET' or level == 'socket' then
        return internal.SOL_SOCKET
    end
    level = (level:match('IPPROTO_([A-Z]*)') or level:match('SOL_([A-Z]*)') or level):lower()
    return protocol_number(level)
end

local function option(self, level, name, line)
    local info = ivalue(internal.SO_OPT[level] or {}, name)
    if info == nil then
        located(line, format('Unknown socket option name: %s', tostring(name)))
    end
    return info
end

function methods.setsockopt(self, level, name, value)
    local fd = check_socket(self)
    level = level_number(level)
    if level == nil then
        return failed(self, errno(), false)
    end
    local info = option(self, level, name, 465)
    if not info.rw then
        located(469, format('Socket option %s is read only', name))
    end
    if type(value) == 'boolean' then
        value = value and 1 or 0
    elseif type(value) ~= 'number' then
        misuse(483, "cannot convert '%s' to 'int'", value)
    end
    return call(self, false, native.setsockopt, fd, level, info.iname, value)
end

function methods.getsockopt(self, level, name)
    local fd = check_socket(self)
    level = level_number(level)
    if level == nil then
        return failed(self, errno(), nil)
    end
    local info = option(self, level, name, 521)
    if name == 'SO_LINGER' then
        located(557, 'Use s:linger()')
    end
    return call(self, nil, native.getsockopt, fd, level, info.iname)
end

function methods.linger(self, active, timeout)
    local fd = check_socket(self)
    if active ~= nil then
        timeout = timeout or 0
    end
    self._errno = nil
    local on, seconds = native.linger(fd, active, timeout)
    if on == nil then
        return failed(self, seconds, nil)
    end
    return on, seconds
end

-- accept, read, write --------------------------------------------------------------

function methods.accept(self)
    local fd = check_socket(self)
    self._errno = nil
    local client_fd, from = native.accept(fd)
    if client_fd == nil then
        return failed(self, from, nil)
    end
    return make_socket(client_fd, self.itype), from
end

local TRANSIENT = {[errno.EAGAIN] = true, [errno.EWOULDBLOCK] = true, [errno.EINTR] = true}
local FATAL = {[errno.EBADF] = true, [errno.EINVAL] = true, [errno.EOPNOTSUPP] = true,
               [errno.ENOTSOCK] = true}

local function by_limit(buffer, limit)
    if #buffer >= limit then
        return limit
    end
end

-- whatever is buffered (LuaSocket's receive('*a'))
local function by_any(buffer, limit)
    if limit == 0 then
        return 0
    end
    if #buffer > 0 then
        return #buffer
    end
end

local function by_delimiter(buffer, limit, delimiters)
    if limit == 0 then
        return 0
    end
    if #buffer == 0 then
        return nil
    end
    local shortest
    for _, delimiter in ipairs(delimiters) do
        local at = find(buffer, delimiter, 1, true)
        if at ~= nil then
            local length = at + #delimiter - 1
            if shortest == nil or length < shortest then
                shortest = length
            end
        end
    end
    if shortest ~= nil and shortest <= limit then
        return shortest
    elseif limit <= #buffer then
        return limit
    end
end

local function take(self, length)
    local buffer = self._rbuf
    self._rbuf = sub(buffer, length + 1)
    self._errno = nil
    return sub(buffer, 1, length)
end

-- Read until `check` finds a whole answer in the read buffer, the peer closes
-- (the rest of the buffer), an error (nil) or the timeout (nil, ETIMEDOUT).
local function read(self, limit, timeout, check, extra)
    if type(limit) ~= 'number' then
        misuse(686, 'attempt to compare %s with number', limit)
    end
    if limit < 0 then
        located(687, 'socket:read(): limit can not be negative')
    end
    limit = min(limit, LIMIT_INFINITY)
    local fd = check_socket(self)
    self._rbuf = self._rbuf or ''
    local length = check(self._rbuf, limit, extra)
    if length ~= nil then
        return take(self, length)
    end
    local clock = require('fiber').clock
    local deadline = clock() + timeout
    repeat
        local chunk, code = native.sysread(fd, min(limit - #self._rbuf, READAHEAD))
        if chunk == '' then
            return take(self, #self._rbuf)
        elseif chunk ~= nil then
            self._rbuf = self._rbuf .. chunk
            length = check(self._rbuf, limit, extra)
            if length ~= nil then
                return take(self, length)
            end
        else
            failed(self, code)
            if not TRANSIENT[code] then
                return nil
            end
        end
    until not methods.readable(self, deadline - clock())
    return nil
end

function methods.read(self, opts, timeout)
    check_socket(self)
    timeout = timeout or TIMEOUT_INFINITY
    if type(opts) == 'number' then
        return read(self, opts, timeout, by_limit)
    elseif type(opts) == 'string' then
        return read(self, LIMIT_INFINITY, timeout, by_delimiter, {opts})
    elseif type(opts) == 'table' then
        local chunk = opts.chunk or opts.size or LIMIT_INFINITY
        local delimiter = opts.delimiter or opts.line
        if delimiter == nil then
            return read(self, chunk, timeout, by_limit)
        elseif type(delimiter) == 'string' then
            return read(self, chunk, timeout, by_delimiter, {delimiter})
        elseif type(delimiter) == 'table' then
            return read(self, chunk, timeout, by_delimiter, delimiter)
        end
    end
    located(752, 'Usage: s:read(delimiter|chunk|{delimiter = x, chunk = x}, timeout)')
end

function methods.write(self, octets, timeout)
    local fd = check_socket(self)
    timeout = timeout or TIMEOUT_INFINITY
    if type(octets) ~= 'string' then
        misuse(763, "attempt to get length of local 'octets' (a %s value)", octets)
    end
    if #octets == 0 then
        return 0
    end
    local clock = require('fiber').clock
    local deadline = clock() + timeout
    local done = 0
    repeat
        local written, code = native.syswrite(fd, done == 0 and octets or sub(octets, done + 1))
        if written == 0 then
            return done
        elseif written ~= nil then
            self._errno = nil
            done = done + written
            if done == #octets then
                return done
            end
        else
            failed(self, code)
            if not TRANSIENT[code] then
                return nil
            end
        end
    until not methods.writable(self, deadline - clock())
    return nil
end

function methods.send(self, octets, flags)
    local fd = check_socket(self)
    if type(octets) ~= 'string' and type(octets) ~= 'number' then
        misuse(792, "bad argument #1 to 'len' (string expected, got %s)", octets)
    end
    local bits = iflags(internal.SEND_FLAGS, flags)
    return call(self, nil, native.send, fd, tostring(octets), bits or 0)
end

-- the size to receive: given, 512 for a stream, the next datagram's for UDP
local function recv_size(self, fd, size)
    if size ~= nil then
        if type(size) ~= 'number' and tonumber(size) == nil then
            -- (2.6.0 fails in the buffer it allocates)
            error(format("builtin/buffer.lua:229: attempt to perform arithmetic on local " ..
                         "'size' (a %s value)", type(size)), 0)
        end
        return tonumber(size)
    end
    if self.itype ~= internal.SO_TYPE.SOCK_DGRAM then
        return 512
    end
    return call(self, nil, native.peek_size, fd)
end

-- recv and recvfrom: the flags and the size checked alike, then the native's call
local function receive(self, size, flags, receiver)
    local fd = check_socket(self)
    local bits = iflags(internal.SEND_FLAGS, flags)
    if bits == nil then
        self._errno = errno.EINVAL     -- (errno() itself is left alone)
        return nil
    end
    size = recv_size(self, fd, size)
    if size == nil then
        return nil
    end
    return call(self, nil, receiver, fd, size, bits)
end

function methods.recv(self, size, flags)
    return receive(self, size, flags, native.recv)
end

function methods.recvfrom(self, size, flags)
    return receive(self, size, flags, native.recvfrom)
end

function methods.sendto(self, host, port, octets, flags)
    local fd = check_socket(self)
    local bits = iflags(internal.SEND_FLAGS, flags)
    if bits == nil then
        self._errno = errno.EINVAL     -- (errno() itself is left alone)
        return nil
    end
    self._errno = nil
    if octets == nil or octets == '' then
        return true
    end
    return call(self, nil, native.sendto, fd, tostring(host), tostring(port),
                tostring(octets), bits)
end

socket_mt = {
    __index = methods,
    __tostring = function(self)
        local fd = check_socket(self)
        local saved = self._errno
        local text = format('fd %d', fd)
        local name = methods.name(self)
        if name ~= nil then
            text = format('%s, aka %s:%s', text, name.host, name.port)
        end
        local peer = methods.peer(self)
        if peer ~= nil then
            text = format('%s, peer %s:%s', text, peer.host, peer.port)
        end
        self._errno = saved
        return text
    end,
    __serialize = function(self)
        local fd = check_socket(self)
        return {fd = fd, peer = methods.peer(self), name = methods.name(self)}
    end,
}

-- module functions ---------------------------------------------------------------

local function socket_new(domain, kind, protocol)
    local idomain = ivalue(internal.DOMAIN, domain)
    if idomain == nil then
        errno(errno.EINVAL)
        return nil
    end
    local itype = ivalue(internal.SO_TYPE, kind)
    if itype == nil then
        errno(errno.EINVAL)
        return nil
    end
    local iproto = protocol_number(protocol)
    if iproto == nil then
        return nil
    end
    local fd, code = native.new(idomain, itype, iproto)
    if fd == nil then
        errno(code)
        return nil
    end
    return make_socket(fd, itype)
end

-- the rest of the module (getaddrinfo, tcp_connect, tcp_server, iowait) is
-- socket_tcp.lua's, loaded with these
return {socket_new = socket_new, methods = methods, is_closed = is_closed,
        check_socket = check_socket, ivalue = ivalue, iflags = iflags,
        protocol_number = protocol_number, located = located, TRANSIENT = TRANSIENT,
        FATAL = FATAL, TIMEOUT_INFINITY = TIMEOUT_INFINITY,
        LIMIT_INFINITY = LIMIT_INFINITY, read = read, by_limit = by_limit,
        by_delimiter = by_delimiter, by_any = by_any}
