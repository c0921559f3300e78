"""The fio module against Tarantool 2.6.0: the same Lua on both, the same output.

Each case prints pcall's results: strings quoted, lists sorted, errors as their type,
errno and message, stat objects by their kind and size. Every script works in its own
directory (`d/`), so paths in the messages are the same on both sides.
"""
from __future__ import annotations

from . import module_oracle

PRELUDE = r"""
fio = require('fio')
fio.umask(18)
fio.mkdir('d')
local function describe(v)
    local kind = type(v)
    if kind == 'string' then
        -- each side runs in its own directory: show it as <cwd>
        local cwd = fio.cwd()
        local at = v:find(cwd, 1, true)
        if at then v = v:sub(1, at - 1) .. '<cwd>' .. v:sub(at + #cwd) end
        return string.format('%q', v)
    end
    if kind == 'cdata' or kind == 'table' then
        local ok, base = pcall(function() return v.base_type end)
        if ok and base ~= nil then
            return string.format('error %s errno=%s %s', v.type, tostring(v.errno), v.message)
        end
    end
    if kind == 'table' and v.mode ~= nil and v.is_dir then
        return string.format('stat(dir=%s reg=%s link=%s size=%s perm=%o)', tostring(v:is_dir()),
                             tostring(v:is_reg()), tostring(v:is_link()),
                             v:is_dir() and '-' or tostring(v.size), v.mode % 4096)
    end
    if kind == 'table' then
        local items = {}
        for _, x in pairs(v) do items[#items + 1] = tostring(x) end
        table.sort(items)
        return '{' .. table.concat(items, ',') .. '}'
    end
    return kind .. ' ' .. tostring(v)
end
"""


def assert_same_output(script: str, tmp_path, lines: int = 5) -> str:
    return "\n".join(module_oracle.assert_same_output(script, tmp_path, lines,
                                                      prelude=PRELUDE + module_oracle.SHOW))


def test_paths(tmp_path):
    assert_same_output(r"""
show('pathjoin', fio.pathjoin, 'a', '', '/b/', 'c//')
show('pathjoin none', fio.pathjoin)
show('pathjoin empty', fio.pathjoin, '', '')
show('pathjoin root', fio.pathjoin, '/', 'a')
show('pathjoin slashes', fio.pathjoin, '//a//', '/')
show('pathjoin numbers', fio.pathjoin, 1, 2)
show('pathjoin nil first', fio.pathjoin, nil, 'a')
show('pathjoin nil later', fio.pathjoin, 'a', nil, 'b')
show('basename', fio.basename, '/a/b.lua', '.lua')
show('basename classes', fio.basename, 'abc.txt', 't')
show('basename dir', fio.basename, '/a/b/')
show('basename empty', fio.basename, '')
show('basename number', fio.basename, 5)
show('dirname', fio.dirname, '/a/b/')
for _, p in ipairs({'abc', '/', '', '//a//b//', 'a/b', '/a', 'a/', '//', '///', '//a', '///a',
                    'a//', 'a//b', '.', '..', '/a/.', 'a/b/c//'}) do
    show('dirname ' .. p, fio.dirname, p)
end
show('dirname number', fio.dirname, 5)
show('abspath', fio.abspath, '/a/../b/./c')
show('abspath dots', fio.abspath, '/../..')
show('abspath relative', function() return fio.abspath('x/../y') == fio.cwd() .. '/y' end)
show('abspath nil', fio.abspath)
show('abspath table', fio.abspath, {})
show('cwd', function() return fio.cwd() == os.getenv('PWD') end)
show('chdir missing', fio.chdir, 'd/none')
show('chdir nil', fio.chdir)
show('umask', fio.umask)
show('umask set', fio.umask, 63)
show('umask back', fio.umask, 18)
show('umask bad', fio.umask, 'x')
""", tmp_path)


def test_file_system_calls_and_errors(tmp_path):
    assert_same_output(r"""
show('mkdir', fio.mkdir, 'd/x')
show('mkdir again', fio.mkdir, 'd/x')
show('mkdir mode', fio.mkdir, 'd/y', tonumber('700', 8))
show('stat y', fio.stat, 'd/y')
show('mkdir nil', fio.mkdir)
show('mkdir table', fio.mkdir, {})
show('rmdir', fio.rmdir, 'd/y')
show('rmdir missing', fio.rmdir, 'd/y')
show('rmdir nil', fio.rmdir)
show('rmdir not empty', fio.rmdir, 'd')
show('unlink missing', fio.unlink, 'd/nofile')
show('unlink number', fio.unlink, 5)
show('unlink nil', fio.unlink)
show('link missing', fio.link, 'd/nofile', 'd/l')
show('link one', fio.link, 'd/nofile')
show('symlink', fio.symlink, 'nofile', 'd/sl')
show('symlink again', fio.symlink, 'nofile', 'd/sl')
show('readlink', fio.readlink, 'd/sl')
show('readlink missing', fio.readlink, 'd/nosl')
show('readlink not link', fio.readlink, 'd')
show('readlink nil', fio.readlink)
show('lstat', fio.lstat, 'd/sl')
show('stat dangling', fio.stat, 'd/sl')
show('lstat missing', fio.lstat, 'd/none')
show('lstat nil', fio.lstat)
show('lstat table', fio.lstat, {})
show('stat number', fio.stat, 1)
show('stat nil', fio.stat)
show('stat bool', fio.stat, true)
show('rename', fio.rename, 'd/sl', 'd/sl2')
show('rename missing', fio.rename, 'd/sl', 'd/sl3')
show('rename one', fio.rename, 'd/sl')
show('chmod', fio.chmod, 'd/x', tonumber('751', 8))
show('stat x', fio.stat, 'd/x')
show('chmod string', fio.chmod, 'd/x', '493')
show('stat x', fio.stat, 'd/x')
show('chmod missing', fio.chmod, 'd/none', 1)
show('chmod nil', fio.chmod, 'd/none')
show('chown missing', fio.chown, 'd/none', 0, 0)
show('chown names', fio.chown, 'd/x', 'root', 'root')
show('chown unknown user', fio.chown, 'd/x', 'nosuchuser_24', 'root')
show('chown unknown group', fio.chown, 'd/x', 'root', 'nosuchgroup_24')
show('chown numeric string', fio.chown, 'd/none', '0', 0)
show('chown negative ids', fio.chown, 'd/x', -1, -1)
show('chown negative ids missing', fio.chown, 'd/none', -5, -5)
show('stat with a NUL', fio.stat, 'probe.lua\0x')
show('stat empty', fio.stat, '')
show('chown nil', fio.chown, 'd/x')
show('truncate missing', fio.truncate, 'd/none', 0)
show('truncate dir', fio.truncate, 'd/x')
show('truncate nil', fio.truncate)
show('truncate table length', fio.truncate, 'd/none', {})
show('mkdir string mode', fio.mkdir, 'd/sm', 'abc')
show('sync', fio.sync)
show('utime missing', fio.utime, 'd/none', 1, 2)
show('utime', fio.utime, 'd/x', 1, 2)
show('times', function() local s = fio.stat('d/x') return s.atime, s.mtime end)
show('utime one', fio.utime, 'd/x', 7)
show('times', function() local s = fio.stat('d/x') return s.atime, s.mtime end)
show('utime now', function() fio.utime('d/x') return math.abs(fio.stat('d/x').mtime - os.time()) < 5 end)
show('utime nil', fio.utime)
show('utime bad atime', fio.utime, 'd/x', 'a', 2)
show('utime bad mtime', fio.utime, 'd/x', 1, {})
show('listdir', fio.listdir, 'd')
show('listdir missing', fio.listdir, 'd/none')
show('listdir file', fio.listdir, 'probe.lua')
show('listdir nil', fio.listdir)
show('listdir number', fio.listdir, 5)
show('glob', fio.glob, 'd/*')
show('glob none', fio.glob, 'd/zz*')
show('glob number', fio.glob, 5)
show('glob nil', fio.glob)
fio.mkdir('d/gd') fio.mkdir('d/gd/.h') fio.mkdir('d/gd/sub')
for _, name in ipairs({'d/gd/a', 'd/gd/.x', 'd/gd/sub/b', 'd/gd/g\\x'}) do
    fio.open(name, {'O_CREAT', 'O_WRONLY'}):close()
end
for _, p in ipairs({'d/gd/.*', 'd/gd/*', 'd/gd/*/*', 'd/gd/[a]', 'd/gd/[!a]*', 'd/gd/[^a]*',
                    'd/gd/[', 'd/gd/**', 'd/gd/', 'd/gd/?', 'd/gd/\\a', 'd/gd/g\\*',
                    'd/gd/a*/', 'd/gd/s*/', 'd/gd/{a,b}'}) do
    show('glob ' .. p, fio.glob, p)
end
show('tempdir', function()
    local t = fio.tempdir()
    return type(t), fio.path.is_dir(t), fio.basename(t):match('^%w%w%w%w%w%w$') ~= nil,
           fio.stat(t).mode % 4096, fio.rmdir(t)
end)
show('path', fio.path.exists('d'), fio.path.exists('none'), fio.path.is_dir('d'),
     fio.path.is_file('probe.lua'), fio.path.is_link('d/sl2'), fio.path.lexists('d/sl2'),
     fio.path.exists('d/sl2'), fio.path.is_dir(5), fio.path.is_file('d'))
show('exists nil', fio.path.exists)
show('lexists nil', fio.path.lexists)
show('is_dir nil', fio.path.is_dir)
show('is_file nil', fio.path.is_file)
show('is_link nil', fio.path.is_link)
show('stat fields', function()
    local s = fio.stat('probe.lua')
    local names = {}
    for k, v in pairs(s) do names[#names + 1] = k .. ':' .. type(v) end
    table.sort(names)
    return table.concat(names, ' '), s:is_reg(), s:is_dir(), s:is_chr(), s:is_blk(),
           s:is_fifo(), s:is_sock(), s:is_link(), s.is_dir({})
end)
show('dev null', function() local s = fio.stat('/dev/null') return s:is_chr(), s:is_reg() end)
""", tmp_path)


def test_trees(tmp_path):
    assert_same_output(r"""
show('mktree', fio.mktree, 'd/m/n/o')
show('mktree exists', fio.mktree, 'd/m/n')
show('mktree over a file', fio.mktree, 'probe.lua/x')
show('mktree nil', fio.mktree)
show('mktree number', fio.mktree, 5)
local f = fio.open('d/m/file', {'O_CREAT', 'O_WRONLY'}, tonumber('640', 8))
f:write('content') f:close()
fio.symlink('file', 'd/m/link')
show('copyfile', fio.copyfile, 'd/m/file', 'd/copy')
show('copy mode', fio.stat, 'd/copy')
show('copyfile into dir', fio.copyfile, 'd/m/file', 'd/m/n')
show('copied', fio.listdir, 'd/m/n')
show('copyfile missing', fio.copyfile, 'd/none', 'd/x')
show('copyfile no target dir', fio.copyfile, 'probe.lua', 'nodir/x')
show('copyfile one', fio.copyfile, 'probe.lua')
show('copytree', fio.copytree, 'd/m', 'e/m2')
show('copied tree', fio.listdir, 'e/m2')
show('copied link', fio.readlink, 'e/m2/link')
show('copied data', function() local h = fio.open('e/m2/n/file') return h:read() end)
show('copytree again', fio.copytree, 'd/m', 'e/m2')
show('copytree missing', fio.copytree, 'd/none', 'd/z')
show('copytree file', fio.copytree, 'probe.lua', 'd/z')
show('copytree nil', fio.copytree, nil)
show('rmtree', fio.rmtree, 'e')
show('gone', fio.path.exists, 'e')
show('rmtree missing', fio.rmtree, 'e')
show('rmtree nil', fio.rmtree)
""", tmp_path)


def test_handles(tmp_path):
    assert_same_output(r"""
local fh = fio.open('d/f', {'O_RDWR', 'O_CREAT'}, tonumber('644', 8))
show('type', type(fh), fh.fh ~= nil, fh.fh >= 0)
show('write', fh.write, fh, 'hello world')
show('write number', fh.write, fh, 12345)
show('write nil', fh.write, fh)
show('seek', fh.seek, fh, 0)
show('seek cur', fh.seek, fh, 2, 'SEEK_CUR')
show('seek bad whence', fh.seek, fh, 2, 'SEEK_X')
show('seek end', fh.seek, fh, 0, fio.c.seek.SEEK_END)
show('seek negative', fh.seek, fh, -100)
show('seek string', fh.seek, fh, '3')
show('read', fh.read, fh, 4)
show('read rest', fh.read, fh)
show('read string size', fh.read, fh, 'x')
show('pread string size', fh.pread, fh, 'x', 0)
show('pread no offset', fh.pread, fh, 3)
show('pread string offset', fh.pread, fh, 3, 'x')
show('seek string', fh.seek, fh, 'x')
show('seek nothing', fh.seek, fh)
show('method on a table', fh.write, {}, 'x')
show('read table size', fh.read, fh, {})
show('read at end', fh.read, fh, 10)
show('pread', fh.pread, fh, 5, 6)
show('pread past end', fh.pread, fh, 5, 600)
show('pwrite', fh.pwrite, fh, 'XY', 1)
show('pread all', fh.pread, fh, 100, 0)
show('fstat', fh.stat, fh)
show('truncate', fh.truncate, fh, 3)
show('size', function() return fh:stat().size end)
show('truncate 0', fh.truncate, fh)
show('size', function() return fh:stat().size end)
show('fsync', fh.fsync, fh)
show('fdatasync', fh.fdatasync, fh)
show('serialize', function() return require('json').encode(fh) == '{"fh":' .. fh.fh .. '}' end)
show('close', fh.close, fh)
show('fh', fh.fh)
show('close again', fh.close, fh)
show('read closed', fh.read, fh, 4)
show('read closed all', fh.read, fh)
show('write closed', fh.write, fh, 'x')
show('pwrite closed', fh.pwrite, fh, 'x', 0)
show('seek closed', fh.seek, fh, 0)
show('stat closed', fh.stat, fh)
show('fsync closed', fh.fsync, fh)
show('fdatasync closed', fh.fdatasync, fh)
show('pread closed', fh.pread, fh, 1, 0)
show('truncate closed', fh.truncate, fh, 0)
show('open missing', fio.open, 'd/none')
show('open dir for writing', fio.open, 'd', 'O_WRONLY')
show('open bad flag', fio.open, 'd/f', {'O_FOO'})
show('open bool flag', fio.open, 'd/f', true)
show('open bad mode', fio.open, 'd/g', {'O_CREAT', 'O_WRONLY'}, {'S_FOO'})
show('open nil', fio.open)
show('open number', fio.open, 5)
show('numeric flags', function()
    local f = fio.open('d/g', bit.bor(fio.c.flag.O_CREAT, fio.c.flag.O_WRONLY),
                       {'S_IRUSR', 'S_IWUSR'})
    f:write('abc') f:close()
    return fio.stat('d/g')
end)
show('excl', fio.open, 'd/g', {'O_CREAT', 'O_EXCL'})
show('flag string', function() return fio.open('d/g', 'O_RDONLY'):read() end)
show('default mode', function()
    fio.open('d/h', {'O_CREAT', 'O_WRONLY'}):close()
    return fio.stat('d/h')
end)
show('append', function()
    local f = fio.open('d/g', {'O_WRONLY', 'O_APPEND'})
    f:write('def') f:close()
    return fio.open('d/g'):read()
end)
show('trunc', function()
    local f = fio.open('d/g', {'O_WRONLY', 'O_TRUNC'})
    f:close()
    return fio.stat('d/g').size
end)
show('read-only write', function() return fio.open('d/g', 'O_RDONLY'):write('abc') end)
show('write-only read', function() return fio.open('d/h', 'O_WRONLY'):read(3) end)
show('read a directory', function() return fio.open('d'):read(3) end)
show('collected', function()
    for _ = 1, 200 do fio.open('d/g') end
    collectgarbage() collectgarbage()
    return fio.open('d/g') ~= nil
end)
show('last error', function() fio.stat('d/none') return tostring(box.error.last()) end)
show('errno', function()
    local errno = require('errno')
    local out = {}
    fio.stat('d/none') out[#out + 1] = errno()
    fio.open('d', {'O_WRONLY'}) out[#out + 1] = errno()
    fio.mkdir('d') out[#out + 1] = errno()
    fio.listdir('d/none') out[#out + 1] = errno()
    return unpack(out)
end)
""", tmp_path)


def test_handles_with_buffers(tmp_path):
    # read/pread into a char pointer (an ibuf's reserve()), write/pwrite from one
    assert_same_output(r"""
local buffer, ffi = require('buffer'), require('ffi')
local f = fio.open('d/b', {'O_CREAT', 'O_RDWR', 'O_TRUNC'}, tonumber('644', 8))
f:write('0123456789abcdef')
local ib = buffer.ibuf()
local p = ib:reserve(64)
f:seek(0)
show('read into', function() local n = f:read(p, 5) return n, ffi.string(p, n) end)
show('read rest into', function() local n = f:read(p) return n, ffi.string(p, n) end)
show('pread into', function() local n = f:pread(p, 3, 1) return n, ffi.string(p, n) end)
show('pread past end', function() return f:pread(p, 3, 100) end)
ffi.copy(p, 'XYZW', 4)
show('write from', f.write, f, p, 2)
show('pwrite from', f.pwrite, f, p, 3, 4)
show('content', function() return f:pread(100, 0) end)
show('char array size', f.pread, f, ffi.new('char[16]'), 4, 0)
f:close()
show('read into closed', f.read, f, p, 3)
""", tmp_path)


def test_fio_where_lua_cannot_yield(tmp_path):
    # a module's body run by require() and a table.sort comparator: 2.6.0's fio
    # works there (its fibers are not Lua coroutines)
    assert_same_output(r"""
local f = io.open('mymod.lua', 'w')
f:write("local fio = require('fio') local h = fio.open('probe.lua') " ..
        "local head = h:read(6) h:close() " ..
        "return {dir = fio.stat('d'):is_dir(), head = head, " ..
        "missing = tostring(select(2, fio.stat('none'))), list = fio.listdir('d')}")
f:close()
package.path = './?.lua;' .. package.path
show('required', function() local m = require('mymod') return m.dir, m.head, m.missing, m.list end)
show('sort', function()
    local t = {3, 1, 2}
    table.sort(t, function(a, b) return fio.path.exists('d') and a < b end)
    return t
end)
print(1) print(2) print(3) print(4)
""", tmp_path)


def test_constants(tmp_path):
    assert_same_output(r"""
for _, group in ipairs({'flag', 'mode', 'seek'}) do
    local names = {}
    for k, v in pairs(fio.c[group]) do names[#names + 1] = k .. '=' .. v end
    table.sort(names)
    print(group, table.concat(names, ' '))
end
local names = {}
for k, v in pairs(fio) do names[#names + 1] = k .. ':' .. type(v) end
table.sort(names)
print(table.concat(names, ' '))
names = {}
for k in pairs(fio.path) do names[#names + 1] = k end
table.sort(names)
print(table.concat(names, ' '))
print(1) print(2) print(3) print(4)
""", tmp_path)


def test_big_file_round_trip(tmp_path):
    assert_same_output(r"""
local chunk = string.rep('0123456789abcdef', 65536)   -- 1 MB
local f = fio.open('d/big', {'O_CREAT', 'O_RDWR', 'O_TRUNC'}, tonumber('644', 8))
for _ = 1, 8 do f:write(chunk) end
show('size', function() return f:stat().size end)
f:seek(0)
local same = 0
for _ = 1, 8 do if f:read(#chunk) == chunk then same = same + 1 end end
show('read back', same)
show('whole', function() f:seek(0) return #f:read() end)
show('pread middle', f.pread, f, 16, 3 * #chunk + 8)
f:close()
print(1) print(2) print(3)
""", tmp_path)


def test_a_fiber_blocked_in_fio_does_not_block_the_others(tmp_path):
    # A FIFO: opening it for reading waits for a writer, reading waits for data. The
    # reader can only get through once the other fiber, which counts its own steps,
    # has opened and written; both orders of events are printed and must agree.
    out = assert_same_output(r"""
local fiber = require('fiber')
os.execute('mkfifo d/p')
local events = {}
local reader = fiber.create(function()
    local f = fio.open('d/p', 'O_RDONLY')
    events[#events + 1] = 'reader opened'
    local data = f:read(5)
    events[#events + 1] = 'reader got ' .. tostring(data)
    f:close()
end)
for i = 1, 5 do
    events[#events + 1] = 'tick ' .. i
    fiber.sleep(0.01)
end
local w = fio.open('d/p', 'O_WRONLY')
events[#events + 1] = 'writer opened'
for i = 6, 8 do
    events[#events + 1] = 'tick ' .. i
    fiber.sleep(0.01)
end
w:write('hello')
events[#events + 1] = 'written'
w:close()
while reader:status() ~= 'dead' do fiber.sleep(0.01) end
for _, e in ipairs(events) do
    if e == 'reader opened' then print('reader opened after writer: ' .. tostring(events[_ - 1] ~= nil)) end
end
local seen = {}
for _, e in ipairs(events) do seen[e] = _ end
print('ticks before writer', seen['writer opened'] > seen['tick 5'])
print('reader opened after writer', seen['reader opened'] > seen['tick 5'])
print('reader got data after write', seen['reader got hello'] ~= nil and seen['reader got hello'] > seen['tick 8'])
print('count', #events)
""", tmp_path, lines=3)
    assert "reader got data after write\ttrue" in out
