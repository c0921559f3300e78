"""box.runtime, box.stat, box.slab, box.backup, box.info.listen and box.info.memory
against 2.6.0 (issue 23 item 5): the same script on both, outputs compared; sizes
that legitimately differ (memory) by shape: keys, types, how they move."""
from __future__ import annotations

import json

from .oracle import both, serve_both

# Prints "name json" lines; a table's numbers become their type where the sizes of
# the two implementations differ, counts stay.
PRELUDE = r"""
local json = require('json')
local function shape(t)
    if type(t) ~= 'table' then return type(t) end
    local r = {}
    for k, v in pairs(t) do r[tostring(k)] = shape(v) end
    return r
end
local function out(name, value) print(name .. ' ' .. json.encode(value)) end
local function try(fn, ...)
    local ok, err = pcall(fn, ...)
    return {ok, ok and '' or tostring(err)}
end
"""


def lines(proc) -> dict[str, object]:
    result = {}
    for line in proc.stdout.splitlines():
        name, _, value = line.partition(" ")
        if value[:1] in "[{\"" or value in ("true", "false", "null") or value[:1].isdigit():
            result[name] = json.loads(value)
    return result


def run(script: str, tmp_path):
    real, ours = both(PRELUDE + script, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    return lines(real), lines(ours)


def test_before_box_cfg(tmp_path):
    real, ours = run("""
out('runtime', shape(box.runtime.info()))
local keys = {}
for k, v in pairs(box.runtime) do table.insert(keys, k .. ':' .. type(v)) end
out('runtime_keys', keys)
for _, name in ipairs({'stat', 'slab', 'backup'}) do
    local ok, err = pcall(function() return box[name] end)
    out('refused_' .. name, {ok, (tostring(err):match('Please call box.cfg{} first'))})
end
local info = box.runtime.info()
out('sane', {info.lua > 0, info.used > 0, info.maxalloc})
os.exit(0)
""", tmp_path)
    assert ours == real
    assert real["refused_stat"] == [False, "Please call box.cfg{} first"]


def test_stat_counts_lua_requests(tmp_path):
    real, ours = run("""
box.cfg{log_level = 1}
local s = box.schema.space.create('t')
s:create_index('pk')
out('stat_shape', shape(box.stat()))
out('net_shape', shape(box.stat.net()))
out('reset', {box.stat.reset()})
local function counts()
    local r = {}
    for k, v in pairs(box.stat()) do
        if k ~= 'ERROR' then r[k] = v.total end
    end
    return r
end
out('after_reset', counts())
s:insert{1} s:insert{2} s:replace{3} s:update(1, {{'=', 2, 'x'}})
s:upsert({4}, {}) s:delete(2)
out('dml', counts())
s:get(1) s:select() s:select(1)
for _ in s:pairs() do end
s.index.pk:min() s:count() s:len()
out('reads', counts())
box.begin() s:insert{10} box.rollback()
pcall(s.insert, s, {1})
out('txn_and_failed', counts())
local keys = {}
for k, v in pairs(box.stat) do table.insert(keys, k .. ':' .. type(v)) end
table.sort(keys)
out('stat_keys', keys)
out('vinyl', type(box.stat.vinyl()))
out('sql', box.stat.sql())
out('rps', {math.floor(box.stat().INSERT.rps) == box.stat().INSERT.rps})
os.exit(0)
""", tmp_path)
    assert ours == real
    assert real["dml"] == {**real["after_reset"], "INSERT": 2, "REPLACE": 1, "UPDATE": 1,
                           "UPSERT": 1, "DELETE": 1}


def test_slab_runtime_memory(tmp_path):
    real, ours = run("""
box.cfg{log_level = 1, memtx_memory = 32 * 1024 * 1024}
local s = box.schema.space.create('t')
s:create_index('pk')
out('slab_shape', shape(box.slab.info()))
out('memory_shape', shape(box.info.memory()))
out('runtime_shape', shape(box.runtime.info()))
out('stats_shape', shape(box.slab.stats()[1]))
local before = box.slab.info()
local mem_before = box.info.memory()
for i = 1, 2000 do s:insert{i, string.rep('x', 500)} end
local after = box.slab.info()
local mem_after = box.info.memory()
out('quota', {before.quota_size, after.quota_size})
out('grows', {after.arena_used > before.arena_used, after.items_used > before.items_used,
              after.items_used - before.items_used >= 2000 * 500,
              mem_after.data > mem_before.data, mem_after.data == after.items_used})
out('ratio', {type(after.arena_used_ratio), after.arena_used_ratio:match('^[%d.]+%%$') ~= nil,
              after.quota_used_ratio})
out('check', {box.slab.check()})
os.exit(0)
""", tmp_path)
    assert ours == real
    assert real["quota"] == [33554432, 33554432]


def test_memtx_memory_enforced(tmp_path):
    """Tuples past memtx_memory: 2.6.0's OutOfMemory; what was stored stays, and
    room made by deletes takes new tuples again. (Where exactly it fails depends on
    the allocator: 2.6.0's slab classes fill before the arena does.)"""
    real, ours = run("""
box.cfg{log_level = 1, memtx_memory = 32 * 1024 * 1024}
local s = box.schema.space.create('t')
s:create_index('pk')
local big = string.rep('x', 1000)
local n, err = 0, nil
for i = 1, 100000 do
    local ok, e = pcall(s.insert, s, {i, big})
    if not ok then err = e break end
    n = i
end
local e = err:unpack()
out('error', {e.type, e.base_type, e.message, e.errno, e.code,
              e.trace[1].file, e.trace[1].line})
out('kept', {s:len() == n, s:get(n)[2] == big, s:get(1)[2] == big, n > 10000})
out('bigger', {try(s.replace, s, {1, string.rep('y', 2000)})})
out('update', {try(s.update, s, {1}, {{'=', 2, string.rep('y', 5000)}})})
out('unchanged', {s:get(1)[2] == big})
out('stat_error_total', {box.stat().ERROR.total >= 0})
s:truncate()
out('after_truncate', {pcall(s.insert, s, {1, big})})
os.exit(0)
""", tmp_path)
    assert ours["error"] == real["error"]
    assert real["error"][2] == "Failed to allocate 1021 bytes in slab allocator for memtx_tuple"
    assert ours == real


def test_recovery_past_memtx_memory(tmp_path):
    """Data that does not fit memtx_memory at restart: 2.6.0 does not start (never
    a partial database): "can't initialize storage: Failed to allocate ..."."""
    fill = """
box.cfg{log_level = 1, memtx_memory = 128 * 1024 * 1024}
local s = box.schema.space.create('t')
s:create_index('pk')
local big = string.rep('x', 1000)
for i = 1, 40000 do s:insert{i, big} end
os.exit(0)
"""
    real, ours = both(fill, tmp_path)
    assert real.returncode == 0 and ours.returncode == 0, ours.stderr
    from .oracle import SPINDLE, run_script, tarantool_binary
    restart = "box.cfg{memtx_memory = 32 * 1024 * 1024} print('up') os.exit(0)"
    for binary, where in ((tarantool_binary(), "tarantool"), (SPINDLE, "spindle")):
        proc = run_script(binary, restart, tmp_path / where, name="restart.lua", timeout=120)
        assert "up" not in proc.stdout, where
        assert proc.returncode == 1, (where, proc.stderr[-2000:])
        assert ("can't initialize storage: Failed to allocate 1021 bytes in slab "
                "allocator for memtx_tuple") in proc.stderr, where


def test_backup(tmp_path):
    real, ours = run("""
box.cfg{log_level = 1, checkpoint_count = 1}
local s = box.schema.space.create('t')
s:create_index('pk')
out('first', box.backup.start())
out('again', try(box.backup.start))
out('stop', {box.backup.stop()})
out('stop_again', {box.backup.stop()})
box.snapshot()
s:insert{20}
out('pinned', box.backup.start())
box.snapshot()
s:insert{21}
box.snapshot()
local gc = box.info.gc()
local refs = {}
for _, c in ipairs(gc.checkpoints) do table.insert(refs, {c.signature, c.references}) end
out('checkpoints', refs)
local function files()
    local r = {}
    for name in io.popen('ls'):read('*a'):gmatch('%S+') do
        if name:match('%.snap$') or name:match('%.xlog$') then table.insert(r, name) end
    end
    return r
end
out('files_pinned', files())
box.backup.stop()
box.snapshot()
out('files_after', files())
out('too_old', try(box.backup.start, 5))
out('latest', box.backup.start(0))
box.backup.stop()
out('bad_arg', try(box.backup.start, 'x'))
out('negative', try(box.backup.start, -1))
out('numeric_string', box.backup.start('0'))
box.backup.stop()
os.exit(0)
""", tmp_path)
    assert ours == real
    assert real["again"] == [False, "Backup is already in progress"]


def test_info_listen(tmp_path):
    real, ours = run("""
box.cfg{log_level = 1}
out('none', {box.info.listen == nil})
box.cfg{listen = '127.0.0.1:0'}
out('bound', {box.info.listen:match('^127%.0%.0%.1:%d+$') ~= nil,
              box.info().listen == box.info.listen})
os.exit(0)
""", tmp_path)
    assert ours == real
    assert real["bound"] == [True, True]


SERVER = """
box.cfg{log_level = 1}
box.schema.space.create('t'):create_index('pk')
box.schema.user.grant('guest', 'read,write,execute', 'universe')
function stat_counts()
    local r = {}
    for k, v in pairs(box.stat()) do r[k] = v.total end
    local net = box.stat.net()
    return r, {net.CONNECTIONS.current, net.REQUESTS.total, net.SENT.total > 0,
               net.RECEIVED.total > 0, net.CONNECTIONS.total}
end
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""


def test_stat_counts_iproto_requests(tmp_path):
    def scenario(port):
        import tarantool
        conn = tarantool.Connection("127.0.0.1", port)
        try:
            conn.eval("box.stat.reset()")
            conn.insert("t", (1, "a"))
            conn.replace("t", (2, "b"))
            conn.select("t", 1)
            conn.select("t")
            conn.update("t", 1, [("=", 1, "c")])
            conn.upsert("t", (3,), [("+", 1, 1)])
            conn.delete("t", 2)
            conn.eval("return 1")
            counts, net = conn.call("stat_counts").data
            counts.pop("ERROR")
            return counts, net
        finally:
            conn.close()

    real, ours = serve_both(SERVER, tmp_path, scenario)
    assert ours[0] == real[0]
    assert real[0]["CALL"] == 1 and real[0]["EVAL"] == 1 and real[0]["INSERT"] == 1
    # one connection open; requests since the reset counted; bytes both ways
    assert ours[1][0] == real[1][0] == 1
    assert ours[1][2:4] == real[1][2:4] == [True, True]
