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
