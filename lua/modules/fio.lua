-- Tarantool's fio module (2.6.0's src/lua/fio.lua and fio.c): paths, file handles
-- (`struct fio_handle` cdata), stat objects and whole-tree helpers. Loaded with
-- `native` (non-blocking Python functions), `blocking` (Python callables run only
-- through wait(), each doing its file system call in a helper thread and answering
-- the result or nil plus a SystemError), wait, the fio.c constant tables and
-- `inline` (the same calls made in place, for Lua that cannot yield).
--
-- 2.6.0 raises argument errors from two places: its C functions (no position) and
-- builtin/fio.lua (with that file's line); both are reproduced word for word.
local native, blocking, wait, constants, inline = ...

local ffi = require('ffi')
local type, tostring, tonumber, error, select = type, tostring, tonumber, error, select
local format, gsub, sub, gmatch = string.format, string.gsub, string.sub, string.gmatch
local band, bor = bit.band, bit.bor

local fio = {c = constants, path = {}}

-- A disk call: in a helper thread while the fiber waits, or in place where Lua
-- cannot yield (2.6.0 has no such places: its fibers are not Lua coroutines).
local isyieldable = coroutine.isyieldable
local function run(name, ...)
    if isyieldable() then
        return wait(blocking[name], ...)
    end
    return inline[name](...)
end

local function located(line, message)
    error('builtin/fio.lua:' .. line .. ': ' .. message, 0)
end

-- A C function's lua_isstring(): strings and numbers pass, as text.
local function text_arg(value, usage)
    local kind = type(value)
    if kind ~= 'string' and kind ~= 'number' then
        error(usage, 0)
    end
    return tostring(value)
end

-- lua_tointeger(): a number, a numeric string, else 0.
local function integer(value)
    return math.floor(tonumber(value) or 0)
end

local function ok_or_false(result, err)
    if err ~= nil then
        return false, err
    end
    return result
end

-- stat objects -------------------------------------------------------------

local S_IFMT = 0xF000
local stat_methods = {}
local function kind_test(bits)
    return function(self)
        return type(self) == 'table' and type(self.mode) == 'number'
            and band(self.mode, S_IFMT) == bits
    end
end
stat_methods.is_reg = kind_test(0x8000)
stat_methods.is_dir = kind_test(0x4000)
stat_methods.is_chr = kind_test(0x2000)
stat_methods.is_blk = kind_test(0x6000)
stat_methods.is_fifo = kind_test(0x1000)
stat_methods.is_link = kind_test(0xA000)
stat_methods.is_sock = kind_test(0xC000)
local stat_mt = {__index = stat_methods}

local function stat_result(st, err)
    if st == nil then
        return nil, err
    end
    return setmetatable(st, stat_mt)
end

function fio.stat(path)
    path = text_arg(path, 'Usage: fio.stat(pathname)')
    return stat_result(run('stat', path))
end

function fio.lstat(path)
    path = text_arg(path, 'pathname is absent')
    return stat_result(run('lstat', path))
end

-- file system calls ----------------------------------------------------------

function fio.mkdir(path, mode)
    path = text_arg(path, 'Usage fio.mkdir(pathname[, mode])')
    return ok_or_false(run('mkdir', path, mode == nil and 511 or integer(mode)))
end

function fio.rmdir(path)
    return ok_or_false(run('rmdir', text_arg(path, 'Usage: fio.rmdir(pathname)')))
end

function fio.unlink(path)
    return ok_or_false(run('unlink', text_arg(path, 'Usage: fio.unlink(pathname)')))
end

local function two_paths(call, a, b, usage)
    a, b = text_arg(a, usage), text_arg(b, usage)
    return ok_or_false(wait(call, a, b))
end

function fio.link(target, linkpath)
    return two_paths(blocking.link, target, linkpath, 'Usage: fio.link(target, linkpath)')
end

function fio.symlink(target, linkpath)
    return two_paths(blocking.symlink, target, linkpath,
                     'Usage: fio.symlink(target, linkpath)')
end

function fio.rename(old, new)
    return two_paths(blocking.rename, old, new, 'Usage: fio.rename(oldpath, newpath)')
end

function fio.readlink(path)
    return run('readlink', text_arg(path, 'Usage: fio.readlink(pathname)'))
end

function fio.chmod(path, mode)
    local usage = 'Usage: fio.chmod(pathname, mode)'
    path = text_arg(path, usage)
    if mode == nil then
        error(usage, 0)
    end
    return ok_or_false(run('chmod', path, integer(mode)))
end

-- owner and group: an id (a numeric string too) or a name, looked up; an unknown
-- name makes chown answer a lone nil, as 2.6.0 does.
local function account_id(value, lookup)
    local id = tonumber(value)
    if id ~= nil then
        -- converted to uid_t / gid_t; (uid_t)-1 is chown's "leave it"
        id = (id < 0 and math.ceil(id) or math.floor(id)) % 4294967296
        return id == 4294967295 and -1 or id
    end
    if type(value) ~= 'string' then
        return nil
    end
    return lookup(value)
end

function fio.chown(path, owner, group)
    local usage = 'Usage: fio.chown(pathname, owner, group)'
    path = text_arg(path, usage)
    if owner == nil or group == nil then
        error(usage, 0)
    end
    local uid = account_id(owner, native.getpwnam)
    if uid == nil then
        return nil
    end
    local gid = account_id(group, native.getgrnam)
    if gid == nil then
        return nil
    end
    return ok_or_false(run('chown', path, uid, gid))
end

function fio.truncate(path, length)
    path = text_arg(path, 'Usage: fio.truncate(pathname[, newlen])')
    return ok_or_false(run('truncate', path, integer(length)))
end

function fio.sync()
    return run('sync')
end

function fio.utime(path, atime, mtime)
    if type(path) ~= 'string' then
        located(510, 'Usage: fio.utime(filepath[, atime[, mtime]])')
    end
    if atime ~= nil and type(atime) ~= 'number' then
        located(513, 'fio.utime: atime should be a number')
    end
    if mtime ~= nil and type(mtime) ~= 'number' then
        located(514, 'fio.utime: mtime should be a number')
    end
    atime = atime or native.time()
    return ok_or_false(run('utime', path, atime, mtime or atime))
end

function fio.glob(pattern)
    return run('glob', text_arg(pattern, 'Usage: fio.glob(pattern)'))
end

function fio.tempdir()
    return run('tempdir')
end

function fio.cwd()
    return native.cwd()
end

function fio.chdir(path)
    if type(path) ~= 'string' then
        located(351, 'Usage: fio.chdir(path)')
    end
    return native.chdir(path)
end

function fio.umask(mask)
    if mask ~= nil and tonumber(mask) == nil then
        error("bad argument #1 to '?' (cannot convert 'nil' to 'int')", 0)
    end
    return native.umask(mask and tonumber(mask))
end

function fio.listdir(path)
    if type(path) ~= 'string' then
        located(358, 'Usage: fio.listdir(path)')
    end
    local names, err = run('listdir', path)
    if names == nil then
        return nil, format("can't listdir %s: %s", path, tostring(err))
    end
    return names
end

-- paths ------------------------------------------------------------------------

-- Parts joined by '/', empty parts skipped, repeated slashes squeezed and a
-- trailing one dropped; a nil part is an error naming its position.
function fio.pathjoin(...)
    local count = select('#', ...)
    local parts = {}
    for i = 1, count do
        local part = select(i, ...)
        if part == nil then
            located(#parts == 0 and 241 or 261,
                    'fio.pathjoin(): undefined path part ' .. i)
        end
        part = tostring(part)
        if part ~= '' then
            parts[#parts + 1] = part
        end
    end
    if #parts == 0 then
        return '.'
    end
    local path = gsub(table.concat(parts, '/'), '/+', '/')
    if path ~= '/' then
        path = gsub(path, '/$', '')
    end
    return path
end

function fio.basename(path, suffix)
    if type(path) ~= 'string' then
        located(282, 'Usage: fio.basename(path[, suffix])')
    end
    path = gsub(path, '.*/', '')
    if suffix ~= nil then
        suffix = tostring(suffix)
        if #suffix > 0 then
            -- 2.6.0 turns the suffix into a sequence of one-character classes and
            -- removes every match of it, wherever it is
            path = gsub(path, (gsub(suffix, '(.)', '[%1]')), '')
        end
    end
    return path
end

-- glibc's dirname(3): the path without its last component and trailing slashes;
-- a root of exactly two slashes stays '//' (POSIX leaves it to the system).
local function root_of(path)
    return (sub(path, 1, 2) == '//' and sub(path, 3, 3) ~= '/') and '//' or '/'
end

function fio.dirname(path)
    if type(path) ~= 'string' then
        located(301, 'Usage: fio.dirname(path)')
    end
    local trimmed = gsub(path, '/+$', '')
    if trimmed == '' then
        return path == '' and '.' or root_of(path)
    end
    local dir = trimmed:match('^(.*)/[^/]*$')
    if dir == nil then
        return '.'
    end
    dir = gsub(dir, '/+$', '')
    return dir == '' and root_of(path) or dir
end

function fio.abspath(path)
    if path == nil then
        located(329, 'Usage: fio.abspath(path)')
    end
    local kind = type(path)
    if kind ~= 'string' and kind ~= 'number' then
        located(334, "bad argument #1 to 'sub' (string expected, got " .. kind .. ')')
    end
    path = tostring(path)
    if sub(path, 1, 1) ~= '/' then
        path = fio.pathjoin(fio.cwd(), path)
    end
    local parts = {}
    for part in gmatch(path, '[^/]+') do
        if part == '..' then
            table.remove(parts)
        elseif part ~= '.' then
            parts[#parts + 1] = part
        end
    end
    return '/' .. table.concat(parts, '/')
end

-- trees ------------------------------------------------------------------------

local EEXIST_TEXT = 'File exists'
local ENOTDIR_TEXT = 'Not a directory'

function fio.mktree(path, mode)
    if type(path) ~= 'string' then
        located(377, 'Usage: fio.mktree(path[, mode])')
    end
    local current = '/'
    for dir in gmatch(fio.abspath(path), '[^/]+') do
        current = fio.pathjoin(current, dir)
        local st = fio.stat(current)
        if st == nil then
            local _, err = fio.mkdir(current, mode)
            -- someone else may have made it between the stat and the mkdir
            if err ~= nil and not fio.path.is_dir(current) then
                return false, format('Error creating directory %s: %s', current,
                                     tostring(err))
            end
        elseif not st:is_dir() then
            return false, format('Error creating directory %s: %s', current, EEXIST_TEXT)
        end
    end
    return true
end

function fio.rmtree(path)
    if type(path) ~= 'string' then
        located(408, 'Usage: fio.rmtree(path)')
    end
    path = fio.abspath(path)
    local names, err = fio.listdir(path)
    if names == nil then
        return nil, err
    end
    for _, name in ipairs(names) do
        local inner = fio.pathjoin(path, name)
        local st = fio.lstat(inner)
        if st ~= nil then
            if st:is_dir() then
                _, err = fio.rmtree(inner)
            else
                _, err = fio.unlink(inner)
            end
            if err ~= nil then
                return nil, err
            end
        end
    end
    _, err = fio.rmdir(path)
    if err ~= nil then
        return false, format('failed to remove %s: %s', path, tostring(err))
    end
    return true
end

function fio.copyfile(from, to)
    if type(from) ~= 'string' or type(to) ~= 'string' then
        located(438, 'Usage: fio.copyfile(from, to)')
    end
    if fio.path.is_dir(to) then
        to = fio.pathjoin(to, fio.basename(from))
    end
    local _, err = run('copyfile', from, to)
    if err ~= nil then
        return false, format('failed to copy %s to %s: %s', from, to, tostring(err))
    end
    return true
end

function fio.copytree(from, to)
    if type(from) ~= 'string' or type(to) ~= 'string' then
        located(453, 'Usage: fio.copytree(from, to)')
    end
    local st = fio.stat(from)
    if st == nil then
        return false, format('Directory %s does not exist', from)
    end
    if not st:is_dir() then
        return false, ENOTDIR_TEXT
    end
    local names, err = fio.listdir(from)
    if names == nil then
        return false, err
    end
    local _, reason = fio.mktree(to)
    if reason ~= nil then
        return false, reason
    end
    for _, name in ipairs(names) do
        local source, target = fio.pathjoin(from, name), fio.pathjoin(to, name)
        local inner = fio.lstat(source)
        if inner ~= nil then
            if inner:is_dir() then
                _, reason = fio.copytree(source, target)
            elseif inner:is_reg() then
                _, reason = fio.copyfile(source, target)
            elseif inner:is_link() then
                local link
                link, reason = fio.readlink(source)
                if link ~= nil then
                    _, reason = fio.symlink(link, target)
                    if reason ~= nil then
                        reason = "can't create symlink in place of existing file " .. target
                    end
                end
            end
            if reason ~= nil then
                return false, reason
            end
        end
    end
    return true
end

-- fio.path: answers from stat/lstat, raising their argument errors from here
local function path_check(line, test, use_lstat)
    return function(path)
        local kind = type(path)
        if kind ~= 'string' and kind ~= 'number' then
            located(line, use_lstat and 'pathname is absent' or 'Usage: fio.stat(pathname)')
        end
        local st = (use_lstat and fio.lstat or fio.stat)(path)
        if test == nil then
            return st ~= nil
        end
        return st ~= nil and test(st) or false
    end
end
fio.path.is_file = path_check(525, stat_methods.is_reg)
fio.path.is_link = path_check(530, stat_methods.is_link, true)
fio.path.is_dir = path_check(535, stat_methods.is_dir)
fio.path.exists = path_check(540)
fio.path.lexists = path_check(544, nil, true)

-- file handles -----------------------------------------------------------------

-- (pcall: another module may have declared close() already)
pcall(ffi.cdef, 'struct fio_handle { int fh; };')
pcall(ffi.cdef, 'int close(int fd);')
local methods = {}

function fio.open(path, flags, mode)
    if type(path) ~= 'string' then
        located(189, 'Usage: fio.open(path[, flags[, mode]])')
    end
    if type(flags) ~= 'table' then
        flags = {flags}
    end
    if type(mode) ~= 'table' then
        mode = {mode or band(0x1FF, fio.umask())}
    end
    local iflags, imode = 0, 0
    for _, flag in pairs(flags) do
        if type(flag) == 'number' then
            iflags = bor(iflags, flag)
        else
            local bits = constants.flag[flag]
            if bits == nil then
                located(204, 'fio.open(): unknown flag: ' .. tostring(flag))
            end
            iflags = bor(iflags, bits)
        end
    end
    for _, m in pairs(mode) do
        if type(m) == 'string' then
            local bits = constants.mode[m]
            if bits == nil then
                located(213, 'fio.open(): unknown mode: ' .. m)
            end
            imode = bor(imode, bits)
        else
            imode = bor(imode, tonumber(m))
        end
    end
    local fd, err = run('open', path, iflags, imode)
    if fd == nil then
        return nil, err
    end
    return ffi.new('struct fio_handle', fd)
end

-- The descriptor of a handle; a method called on something else works on -1 (a
-- bad descriptor), where 2.6.0 would take lua_tointeger(nil), fd 0.
local function fd(self)
    local fh = (type(self) == 'cdata' or type(self) == 'table') and self.fh
    return type(fh) == 'number' and fh or -1
end

-- 2.6.0 reserves `size` bytes in a buffer first, which fails so for a non-number
local function check_size(size)
    if type(size) ~= 'number' then
        local kind = type(size)
        if kind == 'cdata' then      -- LuaJIT names a cdata by its ctype
            kind = tostring(ffi.typeof(size)):match('^ctype<(.*)>$') or kind
        end
        error("builtin/buffer.lua:124: attempt to perform arithmetic on 'char *' and '"
              .. kind .. "'", 0)
    end
end

-- A buffer argument: a char pointer (an ibuf's reserve(), ffi.new('char[?]')).
local const_char_ptr_t = ffi.typeof('const char *')
local function is_buffer(value)
    return type(value) == 'cdata' and ffi.istype(const_char_ptr_t, value)
end

-- data read into a caller's buffer: its length
local function into(buf, data, err)
    if data == nil then
        return nil, err
    end
    ffi.copy(buf, data, #data)
    return #data
end

-- read([size]) -> string, read(buf[, size]) -> length: up to the file's size when
-- no size is given
function methods.read(self, buf, size)
    if not is_buffer(buf) then
        buf, size = nil, buf
    end
    if size ~= nil then
        check_size(size)
    end
    if size == nil then
        local st, err = self:stat()
        if st == nil then
            return nil, err
        end
        size = st.size
    end
    if buf ~= nil then
        return into(buf, run('read', fd(self), size))
    end
    return run('read', fd(self), size)
end

local function written(count, err)
    if count == nil then
        return false, err
    end
    return true
end

-- write(string) or write(buf, length)
function methods.write(self, data, length)
    if is_buffer(data) then
        data = ffi.string(data, length)
    end
    return written(run('write', fd(self), tostring(data)))
end

-- pread(size, offset) -> string, pread(buf, size, offset) -> length
function methods.pread(self, buf, size, offset)
    if not is_buffer(buf) then
        buf, size, offset = nil, buf, size
    end
    check_size(size)
    if buf ~= nil then
        return into(buf, run('pread', fd(self), size, integer(offset)))
    end
    return run('pread', fd(self), size, integer(offset))
end

-- pwrite(string, offset) or pwrite(buf, length, offset)
function methods.pwrite(self, data, length, offset)
    if is_buffer(data) then
        data = ffi.string(data, length)
    else
        offset = length
    end
    return written(run('pwrite', fd(self), tostring(data), integer(offset)))
end

function methods.seek(self, offset, whence)
    if whence == nil then
        whence = 'SEEK_SET'
    end
    if type(whence) == 'string' then
        local value = constants.seek[whence]
        if value == nil then
            located(136, 'fio.seek(): unknown whence: ' .. whence)
        end
        whence = value
    else
        whence = tonumber(whence)
    end
    return run('lseek', fd(self), integer(offset), whence or 0)
end

function methods.truncate(self, length)
    return ok_or_false(run('ftruncate', fd(self), integer(length)))
end

function methods.fsync(self)
    return ok_or_false(run('fsync', fd(self)))
end

function methods.fdatasync(self)
    return ok_or_false(run('fdatasync', fd(self)))
end

function methods.stat(self)
    return stat_result(run('fstat', fd(self)))
end

function methods.close(self)
    local result, err = run('close', fd(self))
    if err ~= nil then
        return false, err
    end
    self.fh = -1
    return result
end

function methods.__serialize(self)
    return {fh = self.fh}
end

ffi.metatype('struct fio_handle', {
    __index = methods,
    -- a collected handle closes its file with close(2) straight from C: a
    -- finalizer runs inside any allocation, where calling back into Python (or
    -- yielding, which 2.6.0 avoids the same way) is not safe
    __gc = function(handle)
        if handle.fh >= 0 then
            ffi.C.close(handle.fh)
        end
    end,
})

return fio
