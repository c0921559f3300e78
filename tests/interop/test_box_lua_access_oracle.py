"""Access checks of box.space operations run from Lua (issue 23), against 2.6.0.

2.6.0 checks every space read (select, get, count, min, max, random, len, pairs)
and every DML (insert, replace, update, upsert, delete) made from Lua against the
effective user: box.session.su to a user without grants is refused, then passes
once read, then write, is granted. A persistent function called over IPROTO by
guest that reads a space guest may not read gets the same AccessDeniedError as
the IPROTO SELECT would.
"""
from __future__ import annotations

import tarantool

from .oracle import both, serve_both

SCRIPT = r"""
box.cfg{log_level = 1}
local s = box.schema.space.create('s')
s:create_index('pk')
s:create_index('sk', {parts = {2, 'unsigned'}, unique = false})
s:insert{1, 10}
s:insert{2, 20}
box.schema.user.create('u')
local function show(label, ok, ...)
    local out = {label, tostring(ok)}
    for i = 1, select('#', ...) do
        local v = select(i, ...)
        if type(v) == 'cdata' or type(v) == 'table' then v = require('json').encode(v) end
        table.insert(out, tostring(v))
    end
    print(table.concat(out, ' | '))
end
local ops = {
    {'select', function() return box.space.s:select{} end},
    {'select sk', function() return box.space.s.index.sk:select{10} end},
    {'get', function() return box.space.s:get{1} end},
    {'count', function() return box.space.s:count() end},
    {'len', function() return box.space.s:len() end},
    {'min', function() return box.space.s.index.pk:min() end},
    {'max', function() return box.space.s.index.pk:max() end},
    {'random', function() return box.space.s.index.pk:random(1) end},
    {'index bsize', function() return box.space.s.index.pk:bsize() > 0 end},
    {'pairs', function()
        local n = 0
        for _, t in box.space.s:pairs() do n = n + t[1] end
        return n
    end},
    {'insert', function() return box.space.s:insert{3, 30} end},
    {'replace', function() return box.space.s:replace{3, 31} end},
    {'update', function() return box.space.s:update({3}, {{'=', 2, 32}}) end},
    {'upsert', function() return box.space.s:upsert({4, 40}, {{'+', 2, 1}}) end},
    {'delete', function() return box.space.s:delete{4} end},
    {'insert in txn', function()
        box.begin()
        local ok, err = pcall(box.space.s.insert, box.space.s, {5, 50})
        box.commit()
        if not ok then error(err) end
        return box.space.s:delete{5}
    end},
    {'truncate', function() return box.space.s:truncate() end},
}
local function run(stage)
    print('-- ' .. stage)
    for _, op in ipairs(ops) do
        if op[1] ~= 'truncate' or stage == 'write' then
            show(op[1], box.session.su('u', pcall, op[2]))
        end
    end
end
run('no grants')
box.schema.user.grant('u', 'read', 'space', 's')
run('read')
box.schema.user.grant('u', 'write', 'space', 's')
run('write')
box.schema.user.revoke('u', 'read', 'space', 's')
show('select after revoke', box.session.su('u', pcall, ops[1][2]))
-- admin, and a user with universe privileges, need nothing more
box.schema.user.create('boss')
box.schema.user.grant('boss', 'read,write', 'universe')
show('boss select', box.session.su('boss', pcall, ops[1][2]))
show('boss insert', box.session.su('boss', pcall, function() return box.space.s:insert{6, 60} end))
show('admin select', pcall(ops[1][2]))
show('guest _space', box.session.su('guest', pcall, function()
    return #box.space._space:select{} > 0 end))
show('guest _vspace', box.session.su('guest', pcall, function()
    return box.space._vspace:get{box.space.s.id} == nil end))
os.exit(0)
"""


def test_lua_space_access_as_2_6_0(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert "-- write" in real.stdout
    assert ours.stdout == real.stdout, ours.stderr


SERVER = """\
local port = arg[1]
box.cfg{log_level = 2}
local s = box.schema.space.create('secret')
s:create_index('pk')
s:insert{1, 'hidden'}
local o = box.schema.space.create('open')
o:create_index('pk')
o:insert{1, 'shown'}
box.schema.user.grant('guest', 'read', 'space', 'open')
box.schema.func.create('peek', {body = 'function(name) return box.space[name]:select{} end'})
box.schema.func.create('poke', {body = 'function(name) return box.space[name]:replace{2} end'})
box.schema.func.create('peek_setuid', {setuid = true,
                       body = 'function(name) return box.space[name]:select{} end'})
-- a fiber a guest's call creates has no session of its own: 2.6.0 makes one on
-- demand, as admin (session_create_on_demand), whoever created the fiber
function spawn(name)
    local fiber = require('fiber')
    local done = fiber.channel(1)
    fiber.create(function()
        local ok, err = pcall(function() return box.space[name]:replace{3} end)
        done:put({ok, tostring(err), box.session.euid(), box.session.uid()})
    end)
    return done:get(10)
end
box.schema.func.create('spawn')
for _, f in ipairs({'peek', 'poke', 'peek_setuid', 'spawn'}) do
    box.schema.user.grant('guest', 'execute', 'function', f)
end
box.cfg{listen = '127.0.0.1:' .. port}
"""


def test_function_called_by_guest_is_checked_as_2_6_0(tmp_path):
    def scenario(port: int) -> list:
        conn = tarantool.connect("127.0.0.1", port)
        log = []
        try:
            for fn, arg in (("peek", "open"), ("peek", "secret"), ("poke", "open"),
                            ("poke", "secret"), ("peek_setuid", "secret"),
                            ("spawn", "secret")):
                try:
                    log.append((fn, arg, "ok", list(conn.call(fn, [arg]).data)))
                except tarantool.error.DatabaseError as exc:
                    log.append((fn, arg, "error", exc.args[0], exc.args[1]))
        finally:
            conn.close()
        return log

    real, ours = serve_both(SERVER, tmp_path, scenario)
    assert any(entry[2] == "error" for entry in real)
    assert ours == real
