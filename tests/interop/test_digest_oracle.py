"""The digest module against Tarantool 2.6.0: the same Lua on both, the same output
(binary results in hex). Every function with empty and binary input, the argument
checks with 2.6.0's words, the crc32 and murmur objects, guava's buckets, base64's
options and its lenient decoder, pbkdf2 and aes256cbc. MD4 is refused by the
platform's OpenSSL 3 under 2.6.0: Spindle refuses it the same way (and its errors
stay in the OpenSSL queue as there)."""
from __future__ import annotations

from .module_oracle import assert_same_output

HEAD = "local digest = require('digest')\n"


def test_sha_and_md_digests(tmp_path):
    assert_same_output(HEAD + r"""
for _, a in ipairs({'md4','md5','sha1','sha224','sha256','sha384','sha512'}) do
  show(a, digest[a], 'abc')
  show(a..'_hex', digest[a..'_hex'], 'abc')
  show(a..' empty', digest[a..'_hex'], '')
  show(a..' num', digest[a], 123)
  show(a..'_hex num', digest[a..'_hex'], 123)
  show(a..' nil', digest[a])
  show(a..' tbl', digest[a], {})
  show(a..' two', digest[a..'_hex'], 'a', 'b')
end
show('binary', digest.sha256_hex, '\0\1\2\255')
show('long', digest.md5_hex, string.rep('abc', 100000))
""", tmp_path)


def test_crc32(tmp_path):
    assert_same_output(HEAD + r"""
show('crc32', digest.crc32, 'abc')
show('crc32 empty', digest.crc32, '')
show('crc32 num', digest.crc32, 123)
show('crc32 nil', digest.crc32)
show('crc32 tbl', digest.crc32, {})
show('crc_begin', function() return digest.crc32.crc_begin end)
show('crc32_update', digest.crc32_update, 4294967295, 'abc')
show('crc32_update 0', digest.crc32_update, 0, 'abc')
show('crc32_update str', digest.crc32_update, '5', 'abc')
show('crc32_update nil', digest.crc32_update, nil, 'abc')
show('crc32_update nostr', digest.crc32_update, 1)
show('crc32_update num', digest.crc32_update, 1, 5)
show('crc32_update neg', digest.crc32_update, -1, 'abc')
show('crc32_update big', digest.crc32_update, 2^40, 'abc')
local c = digest.crc32.new()
show('new result', c.result, c)
show('new update', c.update, c, 'ab')
show('new update2', c.update, c, 'c')
show('new result2', c.result, c)
show('new update num', c.update, c, 12)
show('new update nil', c.update, c)
show('new result3', c.result, c)
show('new dot', c.update, 'x')
show('new dot result', c.result)
show('new type', function() return type(c) end)
show('new keys', function() local r = {} for k in pairs(c) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('new mt', function() return getmetatable(c) ~= nil end)
for _, v in ipairs({'x', '0x10', ' 7 ', {}, true, false, 1.5, -1.5, 2^32+7, 1LL, -1LL, 2^63, 2^64, -2^63, 2^53+1, 0/0, 1/0, '1e3', 5ULL}) do
  show('crc32_update ' .. type(v) .. ' ' .. (type(v) == 'table' and '' or tostring(v)), digest.crc32_update, v, 'abc')
end
show('crc32 two', digest.crc32, 'abc', 'def')
show('crc32 call', function() return digest.crc32('abc') end)
local c = digest.crc32.new()
show('crc mt', function() local r = {} for k,v in pairs(mt) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('crc mt index', function() local r = {} for k,v in pairs(mt.__index) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('crc value', function() return c.value end)
c:update('abc')
show('crc copy', function() local d = c:copy() d:update('x') return c:result(), d:result() end)
show('crc clear', function() c:clear() return c:result() end)
show('crc new arg', function() local d = digest.crc32.new(5) d:update('abc') return d:result() end)
show('crc update ret', function() return c:update('abc') end)
show('crc dmt', function() local r = {} for k,v in pairs(getmetatable(digest.crc32)) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('crc tostring', function() return tostring(c):match('^table') ~= nil end)
show('crc new dot', function() return digest.crc32.new():result() end)
show('crc new call', function() return digest.crc32:new():result() end)
show('binary', digest.crc32, '\0\255\0')
""", tmp_path)


def test_base64(tmp_path):
    assert_same_output(HEAD + r"""
show('base64', digest.base64_encode, 'hello world')
show('base64 empty', digest.base64_encode, '')
show('base64 long', digest.base64_encode, string.rep('x', 100))
show('base64 nowrap', digest.base64_encode, string.rep('x', 100), {nowrap = true})
show('base64 nopad', digest.base64_encode, 'a', {nopad = true})
show('base64 urlsafe', digest.base64_encode, '\255\254\253\252\251', {urlsafe = true})
show('base64 urlsafe long', digest.base64_encode, string.rep('\255', 80), {urlsafe = true})
show('base64 all', digest.base64_encode, string.rep('\255', 80), {urlsafe = true, nopad=true, nowrap=true})
show('base64 num', digest.base64_encode, 123)
show('base64 nil', digest.base64_encode)
show('base64 bad opts', digest.base64_encode, 'a', 'x')
show('base64 opts false', digest.base64_encode, 'a', {nopad = false})
show('base64 opts 0', digest.base64_encode, 'a', {nopad = 0})
show('base64 57', digest.base64_encode, string.rep('y', 57))
show('base64 58', digest.base64_encode, string.rep('y', 58))
show('base64 76', digest.base64_encode, string.rep('y', 76))
show('b64dec', digest.base64_decode, 'aGVsbG8gd29ybGQ=')
show('b64dec nopad', digest.base64_decode, 'aGVsbG8gd29ybGQ')
show('b64dec std', digest.base64_decode, '//79/Ps=')
show('b64dec junk', digest.base64_decode, 'aG!!VsbG8=')
show('b64dec newline', digest.base64_decode, 'aGVs\nbG8=')
show('b64dec empty', digest.base64_decode, '')
show('b64dec num', digest.base64_decode, 123)
show('b64dec nil', digest.base64_decode)
show('b64dec bad', digest.base64_decode, '====')
show('b64dec a', digest.base64_decode, 'a')
show('b64dec ab', digest.base64_decode, 'ab')
show('b64dec mid pad', digest.base64_decode, 'YQ==YQ==')
show('b64dec space', digest.base64_decode, ' Y Q = = ')
show('b64dec urlsafe', digest.base64_decode, '__79_Ps')
show('roundtrip', function()
    local s = ''
    for i = 0, 255 do s = s .. string.char(i) end
    return digest.base64_decode(digest.base64_encode(s)) == s,
           digest.base64_decode(digest.base64_encode(s, {urlsafe = true})) == s
end)
""", tmp_path)


def test_urandom_murmur_guava(tmp_path):
    assert_same_output(HEAD + r"""
show('urandom 0', function() return #digest.urandom(0) end)
show('urandom 16', function() return #digest.urandom(16) end)
show('urandom nil', digest.urandom)
show('urandom str', function() return #digest.urandom('5') end)
show('urandom x', digest.urandom, 'x')
show('urandom 1.5', function() return #digest.urandom(1.5) end)
show('murmur', digest.murmur, 'abc')
show('murmur empty', digest.murmur, '')
show('murmur seed', digest.murmur, 'abc', 0)
show('murmur num', digest.murmur, 123)
show('murmur nil', digest.murmur)
show('murmur seedstr', digest.murmur, 'abc', '5')
show('murmur seedbad', digest.murmur, 'abc', 'x')
show('murmur default_seed', function() return digest.murmur.default_seed end)
local m = digest.murmur.new()
show('murmur new result', m.result, m)
show('murmur new update', m.update, m, 'ab')
show('murmur new update', m.update, m, 'c')
show('murmur new result', m.result, m)
show('murmur new update num', m.update, m, 5)
show('murmur new seed', function() local x = digest.murmur.new(0) x:update('abc') return x:result() end)
show('murmur new seed tbl', function() local x = digest.murmur.new({seed=0}) x:update('abc') return x:result() end)
show('murmur new seed str', function() local x = digest.murmur.new('x') x:update('abc') return x:result() end)
show('murmur new keys', function() local r = {} for k in pairs(m) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('murmur copy', function() return m.copy and m:copy():result() end)
show('murmur clear', function() return m.clear and m:clear() end)
show('murmur reset', function() return m.reset and m:reset() end)
show('murmur after', m.result, m)
for _, s in ipairs({0, 1, 2, 100, 123456789, -1, 2^40}) do
  for _, b in ipairs({1, 2, 10, 1000, 0, -1}) do
    show('guava ' .. s .. ' ' .. b, digest.guava, s, b)
  end
end
show('guava nil', digest.guava)
show('guava str', digest.guava, 'x', 5)
show('guava strnum', digest.guava, '5', '10')
show('guava 1.5', digest.guava, 1.5, 10.7)
show('guava ll', digest.guava, 12345678901234LL, 100)
local mt = getmetatable(c)
local m = digest.murmur.new()
local mt2 = getmetatable(m)
show('mur mt', function() local r = {} for k,v in pairs(mt2) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('mur mt index', function() local r = {} for k,v in pairs(mt2.__index) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('mur fields', function() return type(m.seed), m.seed[0], m.total_length, m.default_seed end)
m:update('abcde')
show('mur fields2', function() return m.total_length, m.default_seed, m:result() end)
show('mur opts', digest.murmur, 'abc', {seed = 0})
show('mur tbl', function() return digest.murmur({seed=0}) end)
show('mur dmt', function() local r = {} for k,v in pairs(getmetatable(digest.murmur)) do r[#r+1]=k end table.sort(r) return table.concat(r, ',') end)
show('mur copy', function() local d = m:copy() d:update('x') return m:result(), d:result(), d.total_length end)
show('mur seedneg', function() local d = digest.murmur.new({seed=-1}) d:update('abc') return d:result(), d.seed[0] end)
show('mur seedbig', function() local d = digest.murmur.new({seed=2^40+3}) d:update('abc') return d:result(), d.seed[0] end)
show('mur seedstr', function() local d = digest.murmur.new({seed='7'}) d:update('abc') return d:result(), d.seed[0] end)
show('mur seedx', function() local d = digest.murmur.new({seed='x'}) d:update('abc') return d:result(), d.seed[0] end)
show('mur chunks', function() local d = digest.murmur.new() for i = 1, 10 do d:update(string.rep(string.char(i), i)) end return d:result(), d.total_length end)
show('mur whole', digest.murmur, (function() local t = {} for i = 1, 10 do t[#t+1] = string.rep(string.char(i), i) end return table.concat(t) end)())
show('mur new call', function() return digest.murmur:new():result() end)
""", tmp_path)


def test_pbkdf2_and_aes256cbc(tmp_path):
    assert_same_output(HEAD + r"""
show('pbkdf2', digest.pbkdf2, 'pass', 'salt')
show('pbkdf2_hex', digest.pbkdf2_hex, 'pass', 'salt')
show('pbkdf2 iter', digest.pbkdf2_hex, 'pass', 'salt', 10)
show('pbkdf2 iter len', digest.pbkdf2_hex, 'pass', 'salt', 10, 16)
show('pbkdf2 len big', digest.pbkdf2_hex, 'pass', 'salt', 10, 100)
show('pbkdf2 len 0', digest.pbkdf2_hex, 'pass', 'salt', 10, 0)
show('pbkdf2 iter 0', digest.pbkdf2_hex, 'pass', 'salt', 0)
show('pbkdf2 num', digest.pbkdf2_hex, 1, 'salt')
show('pbkdf2 nil', digest.pbkdf2_hex, 'pass')
show('pbkdf2 nil all', digest.pbkdf2)
show('pbkdf2 iterstr', digest.pbkdf2_hex, 'pass', 'salt', '3')
show('pbkdf2 iterbad', digest.pbkdf2_hex, 'pass', 'salt', 'x')
show('pbkdf2 empty', digest.pbkdf2_hex, '', '')
show('aes enc', digest.aes256cbc.encrypt, 'hello', string.rep('k', 32), string.rep('i', 16))
show('aes enc empty', digest.aes256cbc.encrypt, '', string.rep('k', 32), string.rep('i', 16))
show('aes dec', digest.aes256cbc.decrypt, digest.aes256cbc.encrypt('hello', string.rep('k', 32), string.rep('i', 16)), string.rep('k', 32), string.rep('i', 16))
show('aes short key', digest.aes256cbc.encrypt, 'hello', 'k', string.rep('i', 16))
show('aes short iv', digest.aes256cbc.encrypt, 'hello', string.rep('k', 32), 'i')
show('aes nil', digest.aes256cbc.encrypt, 'hello')
show('aes num', digest.aes256cbc.encrypt, 5, string.rep('k', 32), string.rep('i', 16))
show('aes dec bad', digest.aes256cbc.decrypt, 'garbage', string.rep('k', 32), string.rep('i', 16))
show('aes dec bad16', digest.aes256cbc.decrypt, string.rep('g', 16), string.rep('k', 32), string.rep('i', 16))
show('aes long key', digest.aes256cbc.encrypt, 'hello', string.rep('k', 40), string.rep('i', 20))
show('aes nil all', digest.aes256cbc.encrypt)
""", tmp_path)


def test_large_strings_read_in_place(tmp_path):
    """Strings past 64 KiB reach Python as their address and length (no copy)."""
    assert_same_output(HEAD + r"""
local crypto = require('crypto')
local big = string.rep('0123456789abcdef\0\255', 10000)
print(#big, digest.sha256_hex(big), digest.md5_hex(big), digest.crc32(big), digest.murmur(big))
print(crypto.hmac.sha256_hex('key', big))
local c = digest.crc32.new() c:update(big) c:update('x') c:update(big) print(c:result())
local m = digest.murmur.new() m:update(big) m:update('x') m:update(big)
print(m:result(), m.total_length)
local d = crypto.digest.sha512.new() d:update(big) d:update('x') print(string.hex(d:result()))
print(digest.crc32_update(12345, big), #digest.base64_encode(big))
for _, n in ipairs({65535, 65536, 65537}) do
    local s = string.rep('z', n)
    print(n, digest.sha1_hex(s), digest.crc32(s), digest.murmur(s))
end
""", tmp_path, min_lines=8)
