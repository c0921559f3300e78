"""The pwd module against Tarantool 2.6.0: the same Lua on both, the same output
(tables printed with sorted keys: the serializers' key order is not pwd's)."""
from __future__ import annotations

import difflib

from .oracle import both

SCRIPT = r"""
local pwd = require('pwd')
local function dump(v)
    if type(v) ~= 'table' then return type(v) == 'string' and string.format('%q', v) or tostring(v) end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local out = {}
    for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. '=' .. dump(v[k]) end
    return '{' .. table.concat(out, ', ') .. '}'
end
local function show(label, f, ...)
    local r = {pcall(f, ...)}
    local out = {label, tostring(r[1])}
    for i = 2, table.maxn(r) do out[#out + 1] = dump(r[i]) end
    print(table.concat(out, ' | '))
end
local names = {}
for k, v in pairs(pwd) do names[#names + 1] = k .. ':' .. type(v) end
table.sort(names)
print(table.concat(names, ' '))
show('getpw 0', pwd.getpw, 0)
show('getpw root', pwd.getpw, 'root')
show('getpw me', pwd.getpw)
show('getpw daemon', pwd.getpw, 'daemon')
show('getpw fraction', pwd.getpw, 0.5)
show('getpw -1', pwd.getpw, -1)
show('getpw unknown name', pwd.getpw, 'nosuchuser_24')
show('getpw unknown id', pwd.getpw, 99999)
show('getpw numeric string', pwd.getpw, '0')
show('getpw table', pwd.getpw, {})
show('getpw bool', pwd.getpw, true)
show('getgr 0', pwd.getgr, 0)
show('getgr root', pwd.getgr, 'root')
show('getgr mine', pwd.getgr)
show('getgr unknown name', pwd.getgr, 'nosuchgroup_24')
show('getgr unknown id', pwd.getgr, 99999)
show('getgr table', pwd.getgr, {})
show('getpwall', function()
    local all = pwd.getpwall()
    local out = {}
    for i, u in ipairs(all) do out[i] = dump(u) end
    return #all, table.concat(out, '\n')
end)
show('getgrall', function()
    local all = pwd.getgrall()
    local out = {}
    for i, g in ipairs(all) do out[i] = dump(g) end
    return #all, table.concat(out, '\n')
end)
os.exit(0)
"""


def test_pwd_as_tarantool(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert real.stdout.count("\n") > 20
    assert ours.stdout.splitlines() == real.stdout.splitlines(), "\n".join(
        difflib.unified_diff(real.stdout.splitlines(), ours.stdout.splitlines(), lineterm=""))
