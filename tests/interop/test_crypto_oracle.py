"""The crypto module against Tarantool 2.6.0: the same Lua on both, the same output
(binary results in hex). Digests and HMACs one-shot and as objects (init, update,
result, free; use after result), every cipher and mode with good and bad keys and
IVs (2.6.0's CryptoError words), decryption failures, unknown names, and the
OpenSSL error queue as 2.6.0 reads it after a refused MD4 or DES."""
from __future__ import annotations

from .module_oracle import assert_same_output


def test_digests_and_hmacs(tmp_path):
    assert_same_output(r"""
local crypto = require('crypto')
local function keys(t) local r = {} for k,v in pairs(t) do r[#r+1]=tostring(k) end table.sort(r) return table.concat(r, ',') end
show('cipher_algo', function() return crypto.cipher_algo end)
show('cipher_mode', function() return crypto.cipher_mode end)
show('digest mt', function() return keys(getmetatable(crypto.digest) or {}) end)
show('digest.sha1 keys', function() return keys(crypto.digest.sha1), keys(getmetatable(crypto.digest.sha1) or {}) end)
show('hmac.sha1 keys', function() return keys(crypto.hmac.sha1), keys(getmetatable(crypto.hmac.sha1) or {}) end)
show('cipher.aes128.cbc keys', function() return keys(crypto.cipher.aes128.cbc), keys(getmetatable(crypto.cipher.aes128.cbc) or {}) end)
show('cipher.none keys', function() return keys(crypto.cipher.none) end)
show('cipher.des keys', function() return keys(crypto.cipher.des) end)
show('sha256', crypto.digest.sha256, 'abc')
show('sha256 call', function() return crypto.digest.sha256('abc') end)
show('ripemd160', crypto.digest.ripemd160, 'abc')
show('sha256 num', crypto.digest.sha256, 5)
show('sha256 nil', crypto.digest.sha256)
local d = crypto.digest.sha256:new()
show('dnew keys', function() return keys(getmetatable(d)), keys(getmetatable(d).__index or {}) end)
show('dnew init', d.init, d)
show('dnew update', d.update, d, 'ab')
show('dnew update', d.update, d, 'c')
show('dnew result', d.result, d)
show('dnew result again', d.result, d)
show('dnew update after', d.update, d, 'x')
show('dnew free', d.free, d)
show('dnew update num', function() local x = crypto.digest.sha256:new() return x:update(5) end)
show('dnew result noinit', function() local x = crypto.digest.sha256:new() return x:result() end)
show('dnew copy', function() local x = crypto.digest.sha256:new() x:update('ab') local y = x:copy() y:update('c') return x:result(), y:result() end)
show('dnew dot', function() return crypto.digest.sha256.new():result() end)
show('hmac', crypto.hmac.sha256, 'key', 'abc')
show('hmac_hex', crypto.hmac.sha256_hex, 'key', 'abc')
show('hmac call', function() return crypto.hmac.sha256('key', 'abc') end)
show('hmac nokey', crypto.hmac.sha256, nil, 'abc')
show('hmac numkey', crypto.hmac.sha256, 5, 'abc')
show('hmac nostr', crypto.hmac.sha256, 'key')
show('hmac numstr', crypto.hmac.sha256, 'key', 5)
show('hmac emptykey', crypto.hmac.sha256, '', 'abc')
show('hmac hex nokey', crypto.hmac.sha256_hex, nil, 'abc')
local h = crypto.hmac.sha256.new('key')
show('hnew keys', function() return keys(h), keys(getmetatable(h).__index or {}) end)
show('hnew update', h.update, h, 'abc')
show('hnew result', h.result, h)
show('hnew numkey', function() return crypto.hmac.sha256.new(5) end)
show('hnew init', function() local x = crypto.hmac.sha256.new('k') x:update('a') x:init('key') x:update('abc') return x:result() end)

""", tmp_path)


def test_ciphers(tmp_path):
    assert_same_output(r"""
local crypto = require('crypto')
local K16, IV = string.rep('k', 16), string.rep('i', 16)
for _, algo in ipairs({'aes128', 'aes192', 'aes256', 'des', 'none'}) do
  for _, mode in ipairs({'cbc', 'cfb', 'ecb', 'ofb'}) do
    local c = crypto.cipher[algo] and crypto.cipher[algo][mode]
    if c then
      local klen = ({aes128=16, aes192=24, aes256=32, des=8, none=0})[algo]
      local key = string.rep('k', klen)
      local ivlen = (mode == 'ecb' or algo == 'none') and 0 or (algo == 'des' and 8 or 16)
      local iv = string.rep('i', ivlen)
      show(algo..'.'..mode..' enc', c.encrypt, 'hello world', key, iv)
      show(algo..'.'..mode..' enc empty', c.encrypt, '', key, iv)
      show(algo..'.'..mode..' enc 16', c.encrypt, string.rep('z', 16), key, iv)
      local ok, enc = pcall(c.encrypt, 'hello world', key, iv)
      if ok then show(algo..'.'..mode..' dec', c.decrypt, enc, key, iv) end
      show(algo..'.'..mode..' badkey', c.encrypt, 'x', 'k', iv)
      show(algo..'.'..mode..' badiv', c.encrypt, 'x', key, 'i')
      show(algo..'.'..mode..' nokey', c.encrypt, 'x')
      show(algo..'.'..mode..' noiv', c.encrypt, 'x', key)
      show(algo..'.'..mode..' iv ecb', c.encrypt, 'x', key, string.rep('i', 16))
    else
      print(algo, mode, 'absent')
    end
  end
end

""", tmp_path)


def test_failures_and_the_openssl_queue(tmp_path):
    assert_same_output(r"""
local crypto = require('crypto')
local digest = require('digest')
local K, IV = string.rep('k', 32), string.rep('i', 16)
show('aes dec bad', digest.aes256cbc.decrypt, 'garbage', K, IV)
show('aes dec bad16', digest.aes256cbc.decrypt, string.rep('g', 16), K, IV)
show('aes dec bad16 again', digest.aes256cbc.decrypt, string.rep('g', 16), K, IV)
local ok, e = pcall(crypto.cipher.aes128.cbc.encrypt, 'x', 'k', IV)
print(e.type, e.code, e.message, e.base_type)
local ok, e = pcall(crypto.cipher.aes256.cbc.decrypt, 'garbage', K, IV)
print(e.type, e.code, e.message)
show('md4', digest.md4, 'abc')
show('aes dec bad16 after md4', digest.aes256cbc.decrypt, string.rep('g', 16), K, IV)
show('aes dec bad16 after md4', digest.aes256cbc.decrypt, string.rep('g', 16), K, IV)
show('aes dec bad16 after md4', digest.aes256cbc.decrypt, string.rep('g', 16), K, IV)
show('sha256 after', digest.sha256_hex, 'abc')
show('md4', digest.md4, 'abc')
show('md4', digest.md4, 'abc')
show('cmd4', crypto.digest.md4, 'abc')
show('cmd4 new', function() return crypto.digest.md4.new() end)
show('hmd4', crypto.hmac.md4, 'k', 'abc')
show('hmd4', crypto.hmac.md4_hex, 'k', 'abc')
local c = crypto.cipher.aes128.cbc.new
show('cnew', function() local x = crypto.cipher.aes128.cbc.new(); return x end)

""", tmp_path)


def test_more_argument_checks(tmp_path):
    """Keys and IVs that are not strings, CBC's empty ciphertext, digest's pbkdf2,
    urandom, murmur.new and guava at their edges."""
    assert_same_output(r"""
local crypto, digest = require('crypto'), require('digest')
local K, IV = string.rep('k', 16), string.rep('i', 16)
show('iv num', crypto.cipher.aes128.cbc.encrypt, 'x', K, 5)
show('iv tbl', crypto.cipher.aes128.cbc.encrypt, 'x', K, {})
show('key tbl', crypto.cipher.aes128.cbc.encrypt, 'x', {}, IV)
show('key bool', crypto.cipher.aes128.cbc.encrypt, 'x', true, IV)
show('key num iv num', crypto.cipher.aes128.cbc.encrypt, 'x', 5, 5)
show('pbkdf2 len str', digest.pbkdf2_hex, 'p', 's', 1, 'x')
show('pbkdf2 iters neg', digest.pbkdf2, 'p', 's', -1)
show('pbkdf2 len neg', digest.pbkdf2, 'p', 's', 1, -1)
show('pbkdf2 iters float', digest.pbkdf2_hex, 'p', 's', 2.5, 8)
show('urandom tbl', digest.urandom, {})
show('urandom bool', digest.urandom, true)
show('urandom cdata', function() return #digest.urandom(3LL) end)
show('murmur new bool', digest.murmur.new, true)
show('hmac update after', function() local h = crypto.hmac.sha1.new('k') h:result() return h:update(5) end)
show('hmac result twice', function() local h = crypto.hmac.sha1.new('k') h:result() return h:result() end)
show('digest update after free', function() local h = crypto.digest.sha1.new() h:free() return h:update('x') end)
show('digest init after result', function() local h = crypto.digest.sha1.new() h:update('a') h:result() h:init() h:update('abc') return h:result() end)
show('hmac new bool', crypto.hmac.sha1.new, true)
show('hmac new num', crypto.hmac.sha1.new, 5)
show('digest.aes256cbc keys', function() local r = {} for k in pairs(digest.aes256cbc) do r[#r+1] = k end table.sort(r) return table.concat(r, ',') end)
show('crypto index', function() return crypto.digest ~= nil, rawget(crypto, 'digest') end)
show('ecb dec bad', crypto.cipher.aes128.ecb.decrypt, 'short', K, '')
show('cbc dec empty', crypto.cipher.aes128.cbc.decrypt, '', K, IV)
show('cfb dec', crypto.cipher.aes128.cfb.decrypt, 'anything', K, IV)
show('none dec', crypto.cipher.none.cbc.decrypt, 'anything', '', '')
show('des dec', crypto.cipher.des.cbc.decrypt, 'anything', '12345678', '12345678')
show('guava bad buckets', digest.guava, 1, 'x')
show('guava big state', digest.guava, 2^63, 100)
show('guava 2^64', digest.guava, 2^64, 100)
show('guava ULL', digest.guava, 18446744073709551615ULL, 100)
show('guava neg ll', digest.guava, -5LL, 100)
show('guava buckets big', digest.guava, 12345, 2^40)
show('guava buckets 2^31-1', digest.guava, 12345, 2147483647)
show('murmur new seed bool', function() local m = digest.murmur.new({seed = true}) m:update('abc') return m:result() end)

""", tmp_path)
