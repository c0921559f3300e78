"""Persistent functions (issue 23 item 3) against 2.6.0: box.schema.func.create/
exists/drop with their options and errors (a body that does not compile is refused
as 2.6.0 refuses it), box.func by name and id with the fields 2.6.0 shows, and
func:call() with execute access and setuid."""
from __future__ import annotations

from .oracle import both

SCRIPT = r"""
box.cfg{log_level = 1}
function double(x) return x * 2 end
function whoami() return box.session.effective_user() end
print(pcall(box.schema.func.create, 'double'))
print(box.schema.func.exists('double'), box.schema.func.exists('nope'))
print(pcall(box.schema.func.create, 'double'))
print(pcall(box.schema.func.create, 'double', {if_not_exists = true}))
print(pcall(box.schema.func.create, 'sum', {body = 'function(a, b) return a + b end',
                                            is_deterministic = true}))
print(pcall(box.schema.func.create, 'bad', {body = 'function(a, b) return a +'}))
print(box.schema.func.exists('bad'))
box.schema.func.create('whoami', {setuid = true})
print(box.func.sum ~= nil, box.func.double ~= nil, box.func[box.func.sum.id] == box.func.sum)
for _, name in ipairs({'sum', 'double', 'whoami'}) do
    local fields = {}
    for k, v in pairs(box.func[name]) do
        if k == 'exports' then
            v = ('lua=%s sql=%s'):format(tostring(v.lua), tostring(v.sql))
        end
        if k ~= 'id' then                 -- ids differ: 2.6.0 has more built-in funcs
            table.insert(fields, k .. '=' .. tostring(v))
        end
    end
    table.sort(fields)
    print(name, table.concat(fields, ', '))
end
print(pcall(function() return box.func.sum:call({1, 2}) end))
print(pcall(function() return box.func.double:call({21}) end))
print(select(2, pcall(box.func.sum.call, box.func.sum, 1)):match('Use func:call%(table%)'))
print(pcall(box.func.double.call, box.func.double))
local t = box.space._func.index.name:get{'sum'}
print(#t, t[3], t[4], t[5], t[6], t[7], t[9], t[10], t[12])
box.schema.user.create('u')
print(box.session.su('u', pcall, box.func.sum.call, box.func.sum, {1, 2}))
box.schema.user.grant('u', 'execute', 'function', 'whoami')
print(box.session.su('u', pcall, box.func.whoami.call, box.func.whoami))
print(pcall(box.schema.func.drop, 'nope'))
print(pcall(box.schema.func.drop, 'nope', {if_exists = true}))
print(pcall(box.schema.func.drop, 'sum'))
print(box.func.sum, box.schema.func.exists('sum'))
os.exit(0)
"""


def test_persistent_functions_as_2_6_0(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert (ours.returncode, ours.stdout) == (0, real.stdout), ours.stderr
