"""Functional indexes against 2.6.0 (issue 23): `create_index(..., {func = ...})` with
a persistent function, deterministic and sandboxed; the keys it returns (one, or
several with opts.is_multikey) serve select/get/pairs/count/min/max, are computed at
insert/replace/update/upsert/delete and in transactions that roll back; the refusals
and errors (ER_WRONG_INDEX_OPTIONS, ER_MODIFY_INDEX, ER_FUNC_INDEX_FUNC,
ER_FUNC_INDEX_FORMAT, a function an index uses cannot be dropped) in 2.6.0's words;
the `_index` and `_func_index` rows; and the same answers after a restart (the
snapshot has `_index` before `_func`, the WAL after it)."""
from __future__ import annotations

from .oracle import SPINDLE, both, run_script, tarantool_binary

PRELUDE = """
box.cfg{log_level = 1}
io.stdout:setvbuf('no')
local json = require('json')
function try(name, fn, ...)
    local r = {pcall(fn, ...)}
    if r[1] then
        print(name, 'ok', json.encode({select(2, unpack(r))}))
    else
        local e = r[2]
        local code = (type(e) == 'cdata' or type(e) == 'table') and e.code or ''
        print(name, 'err', tostring(e), code)
    end
end
"""

DEFINITIONS = PRELUDE + """
local s = box.schema.space.create('s', {format = {{'id', 'unsigned'}, {'a', 'string'},
                                                  {'b', 'string'}}})
s:create_index('pk')
box.schema.func.create('nd', {body = 'function(t) return {t.a} end', is_sandboxed = true})
box.schema.func.create('ns', {body = 'function(t) return {t.a} end', is_deterministic = true})
box.schema.func.create('g', {body = 'function(t) return {t.a} end',
                             is_deterministic = true, is_sandboxed = true})
try('sandboxed_no_body', function()
    box.schema.func.create('nobody', {is_deterministic = true, is_sandboxed = true}) end)
try('c_body', function() box.schema.func.create('cf', {language = 'C', body = 'x'}) end)
box.schema.func.create('nobody', {is_deterministic = true})
try('not_deterministic', function() s:create_index('i1', {func = 'nd', parts = {{1, 'string'}}}) end)
try('not_sandboxed', function() s:create_index('i1', {func = 'ns', parts = {{1, 'string'}}}) end)
try('no_body', function() s:create_index('i1', {func = 'nobody', parts = {{1, 'string'}}}) end)
try('no_func', function() s:create_index('i1', {func = 'zz', parts = {{1, 'string'}}}) end)
try('primary', function()
    local x = box.schema.space.create('x')
    x:create_index('pk', {func = 'g', parts = {{1, 'string'}}})
end)
try('hash', function() s:create_index('i1', {type = 'hash', func = 'g', parts = {{1, 'string'}}}) end)
try('good', function() s:create_index('i1', {func = 'g', parts = {{1, 'string'}}}) end)
print(json.encode(box.space._index:get{s.id, 1}[5].func), box.space._index:get{s.id, 1}[6][1][2])
print(json.encode(box.space._func_index:select{}))
print(s.index.i1.func.name, s.index.i1.func.fid == box.func.g.id, s.index.i1.parts[1].type)
try('drop_used', function() box.schema.func.drop('g') end)
s:insert{1, 'x', 'y'}
s:insert{2, 'b', 'y'}
s:insert{3, 'a', 'y'}
try('dup', function() return s:insert{4, 'a', 'z'} end)
try('select', function() return s.index.i1:select() end)
try('get', function() return s.index.i1:get{'b'} end)
try('ge', function() return s.index.i1:select({'b'}, {iterator = 'GE'}) end)
try('lt', function() return s.index.i1:select({'x'}, {iterator = 'LT'}) end)
try('count', function() return s.index.i1:count() end)
try('count_gt', function() return s.index.i1:count({'a'}, {iterator = 'GT'}) end)
try('min', function() return s.index.i1:min() end)
try('max', function() return s.index.i1:max() end)
try('len', function() return s.index.i1:len() end)
try('update', function() return s:update(1, {{'=', 2, 'c'}}) end)
try('delete', function() return s:delete(2) end)
try('after', function() return s.index.i1:select() end)
try('pairs', function()
    local r = {}
    for _, t in s.index.i1:pairs({'a'}, {iterator = 'GT'}) do table.insert(r, t) end
    return r
end)
try('index_update', function() return s.index.i1:update('a', {{'=', 3, 'q'}}) end)
try('index_delete', function() return s.index.i1:delete('a') end)
try('rollback', function()
    box.begin()
    s:insert{10, 'r', 'y'}
    s:update(1, {{'=', 2, 'z'}})
    s:delete(1)
    box.rollback()
    return s.index.i1:select()
end)
try('commit', function()
    box.begin()
    s:insert{11, 'm', 'y'}
    s:replace{1, 'd', 'y'}
    box.commit()
    return s.index.i1:select()
end)
try('drop_index', function() s.index.i1:drop() return #box.space._func_index:select{} end)
try('drop_func', function() box.schema.func.drop('g') return box.func.g end)
os.exit(0)
"""

KEYS = PRELUDE + """
local s = box.schema.space.create('s', {format = {{'id', 'unsigned'}, {'a'}, {'b'}}})
s:create_index('pk')
box.schema.func.create('f', {body = [[function(t)
    local a = t[2]
    if a == 'raise' then error('boom') end
    if a == 'boxerr' then box.error(box.error.NO_SUCH_USER, 'u') end
    if a == 'nil' then return nil end
    if a == 'none' then return end
    if a == 'num' then return 5 end
    if a == 'str' then return 'x' end
    if a == 'two' then return {1}, {2} end
    if a == 'empty' then return {} end
    if a == 'short' then return {'x'} end
    if a == 'long' then return {'x', 1, 3} end
    if a == 'wrongtype' then return {1, 'x'} end
    if a == 'map' then return {a = 1} end
    if a == 'global' then rawset(string, 'mine', 1) return {tostring(fiber), 1} end
    return {a, t[3]}
end]], is_deterministic = true, is_sandboxed = true})
try('create', function() s:create_index('i1', {func = 'f', parts = {{1, 'string'}, {2, 'unsigned'}}}) end)
for i, a in ipairs({'raise', 'boxerr', 'nil', 'none', 'num', 'str', 'two', 'empty', 'short',
                    'long', 'wrongtype', 'map', 'global'}) do
    try(a, function() return s:insert{i, a, 1} end)
end
print('sandbox', string.mine)
try('ok', function() return s:insert{100, 'ok', 1} end)
try('ok2', function() return s:insert{101, 'ok', 2} end)
try('dup', function() return s:insert{102, 'ok', 2} end)
try('bad_part', function() return s:insert{103, 'ok', 'x'} end)
try('update_raise', function() return s:update(100, {{'=', 2, 'raise'}}) end)
try('select', function() return s.index.i1:select() end)
try('partial', function() return s.index.i1:select{'ok'} end)
try('bad_key', function() return s.index.i1:select{1} end)
try('get_partial', function() return s.index.i1:get{'ok'} end)
try('get', function() return s.index.i1:get{'ok', 2} end)
try('upsert_insert', function() return s:upsert({104, 'raise', 1}, {{'=', 3, 1}}) end)
try('upsert_update', function() return s:upsert({100, 'raise', 1}, {{'=', 2, 'raise'}}) end)
try('replace', function() return s:replace{100, 'zz', 3} end)
try('select', function() return s.index.i1:select() end)
-- a multikey function: a table of keys
box.schema.func.create('m', {body = [[function(t)
    local r = {}
    if t[2] == 'bad' then return {{1}, 'x'} end
    if t[2] == 'flat' then return {1, 2} end
    if t[2] == 'notable' then return 7 end
    for _, v in ipairs(t[2]) do table.insert(r, {v}) end
    return r
end]], is_deterministic = true, is_sandboxed = true, opts = {is_multikey = true}})
local m = box.schema.space.create('m')
m:create_index('pk')
m:insert{1, {3, 1, 2, 1}}
try('mi', function() m:create_index('mi', {func = 'm', unique = false, parts = {{1, 'unsigned'}}}) end)
try('mu', function() m:create_index('mu', {func = 'm', parts = {{1, 'unsigned'}}}) end)
try('m2', function() return m:insert{2, {5, 6}} end)
try('m3', function() return m:insert{3, {4, 2}} end)
try('m4', function() return m:insert{4, 'bad'} end)
try('m5', function() return m:insert{5, 'flat'} end)
try('m6', function() return m:insert{6, 'notable'} end)
try('m7', function() return m:insert{7, {}} end)
try('m8', function() return m:insert{8, {2, 9}} end)
try('select', function() return m.index.mi:select() end)
try('ge', function() return m.index.mi:select({2}, {iterator = 'GE'}) end)
try('le', function() return m.index.mi:select({5}, {iterator = 'LE'}) end)
try('eq', function() return m.index.mi:select({2}) end)
try('count', function() return m.index.mi:count() end)
try('count1', function() return m.index.mi:count({1}) end)
try('len', function() return m.index.mi:len() end)
try('unique', function() return m.index.mu:select() end)
try('get', function() return m.index.mu:get{6} end)
try('update', function() return m:update(2, {{'=', 2, {7}}}) end)
try('after', function() return m.index.mi:select() end)
try('drop', function() return m.index.mu:drop() end)
try('alter', function() return m.index.mi:alter{parts = {{1, 'integer'}}} end)
try('select', function() return m.index.mi:select() end)
box.snapshot()
m:insert{20, {20, 21}}
s:insert{200, 'wal', 7}
os.exit(0)
"""

RESTARTED = PRELUDE + """
local s, m = box.space.s, box.space.m
try('s', function() return s.index.i1:select() end)
try('m', function() return m.index.mi:select({6}, {iterator = 'GE'}) end)
try('insert', function() return m:insert{21, {22, 0}} end)
try('bad', function() return m:insert{22, 'bad'} end)
try('min', function() return m.index.mi:min() end)
print(m.index.mi.func.name)
os.exit(0)
"""


def _same(script: str, tmp_path):
    real, ours = both(script, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == real.stdout.splitlines()
    return real, ours


def test_definitions_reads_and_writes_as_2_6_0(tmp_path):
    real, _ = _same(DEFINITIONS, tmp_path)
    assert "referenced function doesn't satisfy functional index function constraints" \
        in real.stdout


def test_keys_errors_multikey_and_restart_as_2_6_0(tmp_path):
    real, _ = _same(KEYS, tmp_path)
    assert "to many values were returned" in real.stdout
    again_real = run_script(tarantool_binary(), RESTARTED, tmp_path / "tarantool", "again.lua")
    again_ours = run_script(SPINDLE, RESTARTED, tmp_path / "spindle", "again.lua")
    assert again_real.returncode == 0, again_real.stderr
    assert again_ours.returncode == 0, again_ours.stderr
    assert again_ours.stdout == again_real.stdout


SANDBOX = """
box.cfg{log_level = 1}
box.schema.func.create('g', {body = 'function(x) return box ~= nil, type(require), '
                             .. 'math.floor(x), string.upper("a") end',
                             is_deterministic = true, is_sandboxed = true})
box.schema.func.create('h', {body = 'function(x) return box ~= nil, type(require) end'})
print(box.func.g:call({2.5}))
print(box.func.h:call({2.5}))
box.schema.func.create('m', {body = 'function() string.zzz = 1 return 1 end',
                             is_sandboxed = true})
box.func.m:call()
print(string.zzz)
os.exit(0)
"""


def test_sandboxed_bodies_as_2_6_0(tmp_path):
    """A sandboxed body (what a functional index's function must be) sees only
    2.6.0's sandbox, copies of its tables, through func:call too."""
    _same(SANDBOX, tmp_path)
