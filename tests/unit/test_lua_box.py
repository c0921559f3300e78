"""The Lua face of the box (lua/box): box.cfg starting the database, box.space and its
objects, tuples, transactions, triggers, iterators, box.schema, box.info, snapshots
and recovery by a second instance on the same directory."""
from __future__ import annotations

import os

import pytest

from spindle.core import log
from spindle.core.iproto.errors import BoxError
from spindle.lua.instance import Instance


class Runner:
    """One instance; `lua(code)` runs a chunk as the main fiber and returns plain
    Python results."""

    def __init__(self, work_dir):
        self.work_dir = str(work_dir)
        os.makedirs(self.work_dir, exist_ok=True)      # box.cfg refuses a missing one
        self.instance = Instance()
        self.sched = self.instance.sched

    def lua(self, code: str, *args):
        instance, sched = self.instance, self.sched

        def main():
            try:
                results = instance.run_chunk(code, "=test", list(args))
                return [instance.runtime.to_py(value) for value in results]
            finally:
                sched.stop()
        return sched.run(main)

    def cfg(self, extra: str = ""):
        return self.lua(f"box.cfg{{work_dir = '{self.work_dir}', log_level = 1{extra}}}")

    def close(self):
        if self.sched is None:
            return
        storage = self.instance.storage

        def stop():
            try:
                storage.stop()
            finally:
                self.sched.stop()
        self.sched.run(stop)
        self.sched.shutdown(timeout=1.0)
        self.sched.close()
        self.sched = None


@pytest.fixture
def runners(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)       # box.cfg changes directory to work_dir
    monkeypatch.setattr(log, "level", log.level)     # box.cfg sets the global level
    made = []

    def make(work_dir=None):
        runner = Runner(work_dir or tmp_path / "data")
        made.append(runner)
        return runner
    yield make
    for runner in made:
        runner.close()


@pytest.fixture
def box(runners):
    runner = runners()
    runner.cfg()
    runner.lua("""
        s = box.schema.space.create('test', {format = {{'id', 'unsigned'},
                                                       {'name', 'string', is_nullable = true}}})
        s:create_index('pk')
    """)
    return runner


def error_of(runner, code):
    with pytest.raises(BoxError) as info:
        runner.lua(code)
    return info.value.message


# ------------------------------------------------------------------ box.cfg

def test_box_needs_cfg_first_then_the_database_is_up(runners):
    runner = runners()
    assert "Please call box.cfg{} first" in error_of(runner, "return box.space")
    assert runner.lua("return box.tuple.new{1, 'x'}") == [[1, "x"]]   # usable before
    runner.cfg()
    assert runner.lua("return box.info.status, box.info().status, box.space._space.id") == \
        ["running", "running", 280]
    assert os.path.exists(os.path.join(runner.work_dir, "00000000000000000000.snap"))


def test_a_failing_first_box_cfg_ends_the_process(runners, tmp_path):
    """2.6.0's box_cfg(): the storage part failing is fatal, pcall or not (the
    oracle test is tests/interop/test_storage_panic_oracle.py): nothing is left
    started, the cwd is back, and the instance exits with 1."""
    runner = runners()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    runner.lua(f"pcall(box.cfg, {{work_dir = '{blocker}/sub', log_level = 1}}) "
               "error('a pcall caught it')")      # the fiber ends with the process
    assert runner.instance.exit_code == 1
    assert os.getcwd() == str(tmp_path)


def test_dynamic_options_read_only_and_checkpoint(box):
    box.lua("box.cfg{read_only = true}")
    assert box.lua("return box.info.ro") == [True]
    assert error_of(box, "box.space.test:insert{1}") == \
        "Can't modify data because this instance is in read-only mode."
    assert "read-only" in error_of(box, "box.schema.space.create('x')")
    box.lua("box.cfg{read_only = false, checkpoint_interval = 60, checkpoint_count = 3}")
    storage = box.instance.storage
    assert storage.box.checkpointer.schedule.interval == 60
    assert storage.box.gc.checkpoint_count == 3
    assert box.lua("return box.space.test:insert{1}") == [[1]]


def test_log_option_writes_to_a_file_in_work_dir(runners):
    runner = runners()
    runner.cfg(", log = 'spindle.log', log_level = 5")
    runner.lua("require('log').info('hello from the test')")
    with open(os.path.join(runner.work_dir, "spindle.log")) as log_file:
        assert "hello from the test" in log_file.read()


# ------------------------------------------------------------ box.space, DML

def test_space_objects_and_dml(box):
    assert box.lua("""
        local s = box.space.test
        return s.id, s.name, s.engine, s.field_count, s.temporary, s.is_local,
               s.enabled, s.index.pk.id, s.index[0].name, s.index[0].parts[1].fieldno
    """) == [512, "test", "memtx", 0, False, False, True, 0, "pk", 1]
    assert box.lua("return s:insert{1, 'a'}, s:replace{2, 'b'}, s:put{3, 'c'}") == \
        [[1, "a"], [2, "b"], [3, "c"]]
    assert box.lua("return s:update(1, {{'=', 2, 'A'}}), s:update(9, {{'=', 2, 'x'}})") == \
        [[1, "A"]]
    assert box.lua("s:upsert({1, 'z'}, {{'=', 2, 'U'}}) return s:get(1)") == [[1, "U"]]
    assert box.lua("return s:delete{2}, s:count(), s:len(), s:bsize() > 0") == \
        [[2, "b"], 2, 2, True]
    assert box.lua("return s:select({1}, {iterator = 'GE'})") == [[[1, "U"], [3, "c"]]]
    assert error_of(box, "s:insert{1, 'dup'}") == \
        "Duplicate key exists in unique index 'pk' in space 'test'"
    assert error_of(box, "s.insert{5}") == \
        "builtin/box/schema.lua:1291: Use space:insert(...) instead of space.insert(...)"
    assert error_of(box, "s.index.pk.select()") == \
        "builtin/box/schema.lua:1310: Use index:select(...) instead of index.select(...)"
    assert error_of(box, "s:insert{'x'}") == \
        "Tuple field 1 type does not match one required by operation: expected unsigned"
    assert "attempt to index field 'nope'" in error_of(box, "box.space.nope:select()")
    assert error_of(box, "s:select(1, {iterator = 'XX'})") == "Unknown iterator type 'XX'"


# Field values for insert/replace: the plain-fields path of space.lua (fields passed
# one by one, the result built in Lua) must give what the general path gives.
PUT_FIELDS = [
    "'a', 1, -1, 0, 0.5, -2.25, true, false, ''",
    "2^53, -2^53, 2^53 + 2, -2^53 - 2, 1e300, -0.0, 0/0, 1/0, -1/0",
    "'\\xff\\xfe', 'ü', '\\0'",
    "box.NULL, 3",
    "{1, 2}, setmetatable({}, {__serialize = 'map'})",
    "require('msgpack').NULL, 4",
    "18446744073709551615ULL, -1LL",
]


@pytest.mark.parametrize("fields", PUT_FIELDS)
@pytest.mark.parametrize("method", ["insert", "replace"])
@pytest.mark.parametrize("in_txn", [False, True])
def test_put_of_plain_fields_equals_the_general_path(box, fields, method, in_txn):
    """The general path is taken for a table whose metatable is not a tuple's."""
    box.lua("any = box.schema.space.create('any') any:create_index('pk')")
    plain, general = box.lua(f"""
        local function describe(ok, r)
            if not ok then return {{'error', tostring(r)}} end
            local out = {{}}
            for i = 1, #r do
                local v = r[i]
                out[i] = type(v) .. ' ' .. (type(v) == 'table' and require('json').encode(v)
                                            or tostring(v))
            end
            return {{out, box.tuple.is(r)}}
        end
        local function put(t)
            any:delete{{1}}
            table.insert(t, 1, 1)
            if {str(in_txn).lower()} then box.begin() end
            local ok, r = pcall(any.{method}, any, t)
            if {str(in_txn).lower()} then box.commit() end
            return {{describe(ok, r), describe(pcall(any.get, any, 1)), any:bsize()}}
        end
        return put({{{fields}}}), put(setmetatable({{{fields}}}, {{__serialize = 'seq'}}))
    """)
    assert plain == general


def test_put_of_plain_fields_keeps_the_values_of_the_call(box):
    """The result is made of the values passed, not of the table as a trigger left
    it; extra keys make a map (an error), holes the general path."""
    assert box.lua("""
        local t = {1, 'a'}
        s:on_replace(function() t[2] = 'changed' end)
        local r = s:insert(t)
        s:on_replace(nil, s:on_replace()[1])
        return r, t[2]
    """) == [[1, "a"], "changed"]
    assert error_of(box, "s:insert{2, 'b', x = 1}") == "Tuple/Key must be MsgPack array"
    assert box.lua("return s:insert{3, nil, 5}") == [[3, None, 5]]
    assert box.lua("""
        box.cfg{read_only = true}
        local _, e1 = pcall(s.insert, s, {4})
        box.begin()
        local _, e2 = pcall(s.replace, s, {4})
        box.rollback()
        box.cfg{read_only = false}
        return e1.message, e2.message
    """) == ["Can't modify data because this instance is in read-only mode."] * 2


def test_get_of_a_missing_key_returns_no_value(box):
    assert box.lua("return select('#', s:get{99}), select('#', s:delete{99})") == [0, 0]


def test_box_space_follows_ddl_and_its_rollback(box):
    assert box.lua("""
        local s2 = box.schema.space.create('other')
        s2:rename('renamed')
        return box.space.other == nil, box.space.renamed.id == s2.id, s2.name
    """) == [True, True, "renamed"]
    box.lua("box.space.renamed:drop()")
    assert box.lua("return box.space.renamed") == [None]
    assert box.lua("""
        box.begin()
        box.schema.space.create('tmp')
        local inside = box.space.tmp ~= nil
        box.rollback()
        return inside, box.space.tmp == nil
    """) == [True, True]
    # DDL as plain DML on the system spaces shows up too
    assert box.lua("""
        box.space._space:insert{600, 1, 'raw', 'memtx', 0, setmetatable({}, {__serialize = 'map'}), {}}
        box.space._index:insert{600, 0, 'primary', 'tree', {unique = true}, {{0, 'unsigned'}}}
        return box.space.raw.index.primary.id, box.space[600]:insert{7}
    """) == [0, [7]]


def test_index_objects(box):
    box.lua("""
        for i = 1, 6 do s:insert{i, 'n' .. (i % 3)} end
        sec = s:create_index('sec', {parts = {2, 'string'}, unique = false})
        h = s:create_index('h', {type = 'hash', parts = {1, 'unsigned'}})
    """)
    assert box.lua("return sec.id, sec.unique, sec.type, h.type, h.parts[1].type") == \
        [1, False, "TREE", "HASH", "unsigned"]
    assert box.lua("return sec:select('n1'), sec:count('n1'), h:get(4)") == \
        [[[1, "n1"], [4, "n1"]], 2, [4, "n1"]]
    assert box.lua("return sec:min(), sec:max(), s.index.pk:len()") == \
        [[3, "n0"], [5, "n2"], 6]
    assert error_of(box, "h:min()") == \
        "Index 'h' (HASH) of space 'test' (memtx) does not support min()"
    box.lua("sec:rename('byname') h:drop()")
    assert box.lua("return s.index.sec, s.index.byname.id, s.index.h, s:len()") == \
        [None, 1, None, 6]
    assert "Get() doesn't support partial keys" in error_of(box, "s.index.byname:get('n1')")


# ------------------------------------------------------------------- tuples

def test_tuples(box):
    box.lua("t = s:insert{4, 'z'}")
    assert box.lua("return t[1], t.name, #t, t:unpack()") == [4, "z", 2, 4, "z"]
    assert box.lua("return t:totable(), t:tomap({names_only = true})") == \
        [[4, "z"], {"id": 4, "name": "z"}]
    assert box.lua("return t:update({{'=', 'name', 'q'}}), t:transform(2, 1)") == \
        [[4, "q"], [4]]
    assert box.lua("return t:find('z'), t:findall(4), tostring(t), t:bsize()") == \
        [2, [1], "[4, 'z']", 4]
    assert box.lua("return box.tuple.is(t), box.tuple.is({}), t == s:get{4}") == \
        [True, False, True]
    assert box.lua("return box.tuple.new(1, nil, 'x'), box.tuple.new{{a = {1}}}") == \
        [[1, None, "x"], [{"a": [1]}]]
    assert error_of(box, "box.tuple.new{print}") == "unsupported Lua type 'function'"
    assert box.lua("local n = 0 for i, v in t:pairs() do n = n + i end return n") == [3]


# ------------------------------------------------------------- transactions

def test_transactions(box):
    assert box.lua("""
        box.begin() s:insert{1} local sp = box.savepoint() s:insert{2}
        box.rollback_to_savepoint(sp) s:insert{3} box.commit()
        return s:select()
    """) == [[[1], [3]]]
    assert box.lua("return box.atomic(function(x) s:insert{x} return x * 2 end, 20)") == [40]
    assert "fail" in error_of(box, "box.atomic(function() s:insert{21} error('fail') end)")
    assert box.lua("return s:get{21}, box.is_in_txn()") == [None, False]
    assert box.lua("""
        local seen
        box.begin()
        box.on_commit(function(iterator)
            seen = {}
            for i, old, new, space_id in iterator() do
                table.insert(seen, {i, old and old[1] or 0, new and new[1] or 0, space_id})
            end
        end)
        s:replace{1, 'x'} s:delete{20}
        box.commit()
        return seen
    """) == [[[1, 1, 1, 512], [2, 20, 0, 512]]]
    assert box.lua("""
        local rolled = false
        box.begin() box.on_rollback(function() rolled = true end)
        s:replace{1, 'y'} box.rollback()
        return rolled, s:get{1}
    """) == [True, [1, "x"]]
    assert "Usage inside a transaction" in error_of(box, "box.on_commit(function() end)")
    assert error_of(box, "box.rollback_to_savepoint({})") == \
        "Usage: box.rollback_to_savepoint(savepoint)"
    assert "active transaction" in error_of(box, "box.begin() box.begin()")


def test_a_fiber_that_ends_in_a_transaction_rolls_it_back(box):
    assert box.lua("""
        local fiber = require('fiber')
        local f = fiber.new(function() box.begin() s:insert{50} end)
        f:set_joinable(true)
        f:join()
        return s:get{50} == nil, box.is_in_txn()
    """) == [True, False]


def test_autocommit_waits_for_the_wal_while_other_fibers_run(box):
    assert box.lua("""
        local fiber = require('fiber')
        local done = 0
        for i = 1, 10 do
            fiber.create(function() s:insert{100 + i} done = done + 1 end)
        end
        while done < 10 do fiber.sleep(0.001) end
        return s:count(), box.info.vclock[1] >= 10
    """) == [10, True]


# ----------------------------------------------------------------- triggers

def test_on_replace_and_before_replace(box):
    assert box.lua("""
        local log = {}
        local f = s:on_replace(function(old, new, name, op)
            table.insert(log, {old and old[1] or 0, new and new.name or '-', name, op})
        end)
        s:insert{1, 'a'} s:replace{1, 'b'} s:delete{1}
        s:on_replace(nil, f)
        return log, #s:on_replace()
    """) == [[[0, "a", "test", "INSERT"], [1, "b", "test", "REPLACE"],
              [1, "-", "test", "DELETE"]], 0]
    assert box.lua("""
        local skip = s:before_replace(function(old, new) return nil end)
        local r1 = select('#', s:insert{2, 'x'})
        s:before_replace(nil, skip)
        local change = s:before_replace(function(old, new)
            return box.tuple.new{new[1], 'changed'} end)
        local r2 = s:insert{3, 'y'}
        s:before_replace(nil, change)
        return r1, s:get{2}, r2, s:get{3}
    """) == [0, None, [3, "changed"], [3, "changed"]]
    assert error_of(box, """
        s:before_replace(function() return {1} end)
        s:insert{4}
    """) == "Invalid return value of space:before_replace trigger: expected tuple or nil, " \
            "got table"
    box.lua("s:before_replace(nil, s:before_replace()[1])")
    assert error_of(box, "s:on_replace(nil, print)") == "trigger reset: Trigger is not found"
    assert error_of(box, "s:on_replace(5)") == "trigger reset: incorrect arguments"
    # a trigger error undoes the statement; a trigger may not yield
    assert "boom" in error_of(box, """
        s:on_replace(function() error('boom') end) s:insert{5}""")
    box.lua("s:on_replace(nil, s:on_replace()[1])")
    assert box.lua("return s:get{5} == nil") == [True]
    assert "fiber yield is not allowed here" in error_of(box, """
        s:on_replace(function() require('fiber').sleep(0) end) s:insert{6}""")
    box.lua("s:on_replace(nil, s:on_replace()[1])")


def test_a_trigger_can_write_in_the_same_transaction(box):
    assert box.lua("""
        local audit = box.schema.space.create('audit')
        audit:create_index('pk')
        s:on_replace(function(old, new) audit:replace{new[1], 'seen'} end)
        s:insert{1, 'a'}
        return audit:select()
    """) == [[[1, "seen"]]]


# ---------------------------------------------------------------- iterators

def test_pairs_sees_changes_made_during_the_loop(box):
    box.lua("for i = 1, 40 do s:insert{i} end")
    assert box.lua("""
        local seen = {}
        for _, t in s:pairs({5}, {iterator = 'GE'}) do
            table.insert(seen, t[1])
            if t[1] % 2 == 0 then s:delete{t[1] + 1} end
            if t[1] == 10 then s:insert{100} end
        end
        return #seen, seen[1], seen[2], seen[3], seen[#seen]
    """) == [20, 5, 6, 8, 100]
    # a pairs() loop over every iterator type gives what select() gives
    assert box.lua("""
        for _, it in ipairs({'EQ', 'REQ', 'GE', 'GT', 'LE', 'LT', 'ALL'}) do
            local a = {}
            for _, t in s:pairs({20}, {iterator = it}) do table.insert(a, t[1]) end
            local b = {}
            for _, t in ipairs(s:select({20}, {iterator = it})) do table.insert(b, t[1]) end
            if table.concat(a, ',') ~= table.concat(b, ',') then return it end
        end
        return 'same'
    """) == ["same"]
    assert "does not support requested iterator type" in \
        error_of(box, "s:pairs({}, {iterator = 'BITS_ALL_SET'})")


# --------------------------------------------------------------- box.schema

def test_users_roles_functions(box):
    box.lua("""
        box.schema.user.create('bob', {password = 'x'})
        box.schema.user.grant('bob', 'read', 'space', 'test')
        box.schema.role.create('r1')
        box.schema.func.create('f1')
    """)
    assert box.lua("""
        return box.schema.user.exists('bob'), box.schema.user.exists('nope'),
               box.schema.role.exists('r1'), box.schema.func.exists('f1')
    """) == [True, False, True, True]
    assert box.lua("return box.schema.user.info('bob')") == [[
        ["execute", "role", "public"], ["read", "space", "test"],
        ["session,usage", "universe", ""], ["alter", "user", "bob"]]]
    box.lua("box.schema.user.drop('bob') box.schema.role.drop('r1') box.schema.func.drop('f1')")
    assert box.lua("return box.schema.user.exists('bob')") == [False]
    assert error_of(box, "box.schema.space.create('test')") == "Space 'test' already exists"
    assert box.lua("return box.schema.create_space == box.schema.space.create") == [True]


# ------------------------------------------------- info, snapshot, recovery

def test_info_snapshot_and_recovery_by_a_second_instance(runners, box):
    box.lua("s:insert{1, 'a'} s:insert{2, 'b'}")
    assert box.lua("return box.snapshot()") == ["ok"]
    box.lua("s:replace{2, 'bb'} s:delete{1} box.space.test:create_index('n', "
            "{parts = {2, 'string'}, unique = false})")
    vclock = box.lua("return box.info.vclock")[0]
    assert box.lua("return #box.info.gc().checkpoints, box.info.gc().signature") == [2, 0]
    info = box.lua("return box.info()")[0]
    assert info["status"] == "running" and info["package"] == "Tarantool"
    assert info["replication"][1]["uuid"] == info["uuid"]
    box.close()
    again = runners(box.work_dir)
    again.cfg()
    assert again.lua("return box.space.test:select(), box.space.test.index.n:select('bb'), "
                     "box.info.vclock") == [[[2, "bb"]], [[2, "bb"]], vclock]


# DML runs through wait() where Lua can yield, and through the natives where it cannot
# (a trigger): both must give the same results and errors.
_DML_SEQUENCE = """
    local s, out = box.space.test, {}
    local function try(f, ...)
        local ok, res = pcall(f, ...)
        if ok then
            out[#out + 1] = res == nil and 'nil' or res:totable()
        else
            out[#out + 1] = {res.code, res.message}
        end
    end
    try(s.insert, s, {KEY, 'a'})
    try(s.insert, s, {KEY, 'dup'})
    try(s.insert, s, {KEY + 1, 'b', 1.5, true})
    try(s.insert, s, {KEY + 2, {1, 2}})
    try(s.insert, s, {'bad'})
    try(s.replace, s, {KEY, 'c'})
    try(s.update, s, {KEY}, {{'=', 2, 'd'}})
    try(s.upsert, s, {KEY + 3, 'e'}, {{'=', 2, 'f'}})
    try(s.delete, s, {KEY + 1})
    try(s.delete, s, {KEY + 100})
    try(s.get, s, {KEY})
    return out
"""


def test_dml_from_a_trigger_gives_what_it_gives_where_lua_can_yield(box):
    box.lua("sequence = loadstring(...)", _DML_SEQUENCE)
    direct = box.lua("""
        KEY = 1
        box.begin()
        local out = sequence()
        box.commit()
        return out
    """)
    from_trigger = box.lua("""
        KEY = 101
        local t = box.schema.space.create('trig')
        t:create_index('pk')
        local out
        t:on_replace(function()
            out = sequence()
            local ok, err = pcall(box.commit)
            out[#out + 1] = {ok, tostring(err)}
        end)
        box.begin()
        t:insert{1}
        box.commit()
        return out
    """)

    def rekey(rows, delta):
        return [[row[0] - delta, *row[1:]] if isinstance(row, list) and row
                and isinstance(row[0], int) and row[0] > 50 else row for row in rows]
    assert rekey(from_trigger[0][:-1], 100) == direct[0]
    assert from_trigger[0][-1] == [False, "Can not commit transaction in a nested statement"]
    assert box.lua("return box.space.test:len()") == [4]     # 1, 4, 101, 104


@pytest.mark.parametrize("restart", [False, True], ids=["bootstrap", "recovery"])
def test_the_greeting_carries_the_instance_uuid_before_the_box_starts(runners, monkeypatch,
                                                                      restart):
    """`listen` binds before recovery or bootstrap: a peer connecting then must be
    greeted with the UUID the instance is about to have (tests/interop/
    test_greeting_uuid_oracle.py has 2.6.0's side), not a made-up one."""
    from spindle.core.instance.box import Box
    if restart:
        first = runners()
        first.cfg()
        first.close()
    runner = runners()
    seen = []
    start = Box.start

    def starting(box, cfg):
        seen.append(runner.instance.iproto.server.instance_uuid())
        return start(box, cfg)
    monkeypatch.setattr(Box, "start", starting)
    runner.cfg(", listen = '127.0.0.1:0'")
    assert seen == [runner.instance.storage.box.instance_uuid]
