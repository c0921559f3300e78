-- Tarantool's `uri` module: parse(string) into 2.6.0's fields (scheme, login, password,
-- host, service, path, query, fragment, ipv4, ipv6, unix) and format(table[, with
-- password]). The parser accepts what 2.6.0's accepts:
--   /absolute/path                   a unix socket (also [login[:password]@]unix/:path)
--   digits                           a port alone
--   scheme://[userinfo@]host[:port][/path][?query][#fragment]
--   [userinfo@]host[:port][/path][?query][#fragment]
-- where a host is a name (RFC 3986's unreserved, %-escapes and sub-delims), a dotted
-- IPv4 address or a bracketed IPv6 one, and a port is digits or letters. As in 2.6.0,
-- "scheme://" that heads no valid authority is read by the second form (its scheme
-- kept): "file:///etc/passwd" is host "file", path "///etc/passwd".
local type, tostring, error, select = type, tostring, error, select
local find, sub, match, format = string.find, string.sub, string.match, string.format

local NAME = "[%w%-%._~!%$&'%(%)%*%+,;=]"       -- unreserved and sub-delims
local PCHAR = "[%w%-%._~!%$&'%(%)%*%+,;=:@/]"   -- path characters (and '/')

-- the length of a run of `class` characters or %XX escapes at position pos
local function run(s, pos, class)
    local start = pos
    while true do
        local c = sub(s, pos, pos)
        if c == '%' and find(s, '^%x%x', pos + 1) then
            pos = pos + 3
        elseif c ~= '' and find(c, class) then
            pos = pos + 1
        else
            return pos - start
        end
    end
end

local function is_ipv4(host)
    local a, b, c, d = match(host, '^(%d%d?%d?)%.(%d%d?%d?)%.(%d%d?%d?)%.(%d%d?%d?)$')
    return a ~= nil and tonumber(a) < 256 and tonumber(b) < 256 and tonumber(c) < 256
        and tonumber(d) < 256
end

-- [userinfo@]host[:port] then path, query, fragment from pos to the end, into uri;
-- false when the rest is not of that form
local function authority_and_rest(s, pos, uri)
    -- userinfo: login[:password]@, when an '@' follows a valid userinfo
    local login_len = run(s, pos, NAME)
    if login_len > 0 then
        local after = pos + login_len
        local password_len = 0
        if sub(s, after, after) == ':' then
            password_len = run(s, after + 1, NAME)
            if sub(s, after + 1 + password_len, after + 1 + password_len) == '@' then
                uri.login, uri.password = sub(s, pos, after - 1),
                    sub(s, after + 1, after + password_len)
                pos = after + password_len + 2
            end
        elseif sub(s, after, after) == '@' then
            uri.login = sub(s, pos, after - 1)
            pos = after + 1
        end
    end
    if sub(s, pos, pos + 5) == 'unix/:' and pos + 6 <= #s then
        local path = sub(s, pos + 6)
        uri.host, uri.service, uri.unix = 'unix/', path, path
        return true
    end
    if sub(s, pos, pos) == '[' then
        local close = find(s, ']', pos, true)
        if close == nil then return false end
        local address = sub(s, pos + 1, close - 1)
        if not find(address, '^[%x:%.]+$') or not find(address, ':') then
            return false
        end
        uri.host, uri.ipv6 = address, address
        pos = close + 1
    else
        local host_len = run(s, pos, NAME)
        if host_len == 0 then return false end
        uri.host = sub(s, pos, pos + host_len - 1)
        if is_ipv4(uri.host) then uri.ipv4 = uri.host end
        pos = pos + host_len
    end
    if sub(s, pos, pos) == ':' then
        local port = match(s, '^%d+', pos + 1) or match(s, '^%a+', pos + 1) or ''
        if port ~= '' then uri.service = port end
        pos = pos + 1 + #port
    end
    if sub(s, pos, pos) == '/' then
        local len = run(s, pos, PCHAR)
        uri.path = sub(s, pos, pos + len - 1)
        pos = pos + len
    end
    if sub(s, pos, pos) == '?' then
        local len = run(s, pos + 1, "[%w%-%._~!%$&'%(%)%*%+,;=:@/%?]")
        uri.query = sub(s, pos + 1, pos + len)
        pos = pos + 1 + len
    end
    if sub(s, pos, pos) == '#' then
        local len = run(s, pos + 1, "[%w%-%._~!%$&'%(%)%*%+,;=:@/%?]")
        uri.fragment = sub(s, pos + 1, pos + len)
        pos = pos + 1 + len
    end
    return pos == #s + 1
end

local function parse(s)
    if s == '' then
        return nil
    end
    if sub(s, 1, 1) == '/' then
        return {host = 'unix/', service = s, unix = s}
    end
    if find(s, '^%d+$') then
        return {service = s}
    end
    local scheme = match(s, '^(%a[%w%+%-%.]*)://')
    if scheme ~= nil then
        local uri = {scheme = scheme}
        if authority_and_rest(s, #scheme + 4, uri) then
            return uri
        end
    end
    local uri = {scheme = scheme}
    if authority_and_rest(s, 1, uri) then
        return uri
    end
    return nil
end

local M = {}

function M.parse(...)
    local s = ...
    if s == nil then
        error('builtin/uri.lua:38: Usage: uri.parse(string)', 0)
    end
    if type(s) ~= 'string' then
        error(format("builtin/uri.lua:41: bad argument #2 to 'uri_parse' " ..
                     "(cannot convert '%s' to 'const char *')", type(s)), 0)
    end
    return parse(s)
end

function M.format(uri, write_password)
    if type(uri) ~= 'table' and type(uri) ~= 'string' then
        error(format("builtin/uri.lua:63: attempt to index local 'uri' (a %s value)",
                     type(uri)), 0)
    end
    local function field(name)
        local value = uri[name]
        if value ~= nil and type(value) ~= 'string' then
            error(format("builtin/uri.lua:69: cannot convert '%s' to 'const char *'",
                         type(value)), 0)
        end
        return value
    end
    local scheme, login, password, host, service = field('scheme'), field('login'),
        field('password'), field('host'), field('service')
    local path, query, fragment = field('path'), field('query'), field('fragment')
    local parts = {}
    if scheme ~= nil then parts[#parts + 1] = scheme .. '://' end
    if host ~= nil then
        if login ~= nil then
            parts[#parts + 1] = login
            if write_password and password ~= nil then
                parts[#parts + 1] = ':' .. password
            end
            parts[#parts + 1] = '@'
        end
        parts[#parts + 1] = host
        if service ~= nil then parts[#parts + 1] = ':' .. service end
    end
    if path ~= nil then parts[#parts + 1] = path end
    if query ~= nil then parts[#parts + 1] = '?' .. query end
    if fragment ~= nil then parts[#parts + 1] = '#' .. fragment end
    return table.concat(parts)
end

return M
