"""One client scenario against real Tarantool 2.6.0 and against Spindle.

Both start from the same startup script in their own temporary directory and
listen on a free loopback port. The official `tarantool` connector and asynctnt
then run the same steps on each: authentication (right and wrong password),
DDL through eval, DML, selects with every iterator type, calls (CALL and CALL_16)
and eval, and errors (duplicate key, wrong field type, no such space or index,
access denied, read-only, Lua errors). The logs of results, error codes, messages
and error types must be equal.
"""
from __future__ import annotations

import asyncio
import decimal
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from .oracle import serve_both

TARANTOOL = shutil.which("tarantool")

SCRIPT = """\
local port = arg[1]
box.cfg{log_level = 2}
box.schema.user.create('tester', {password = 'secret'})
box.schema.user.grant('tester', 'read,write,execute,create,drop,alter', 'universe')
box.schema.user.create('reader', {password = 'r'})
box.schema.role.create('myrole')
function echo(...) return ... end
function fail() error('boom') end
function fail_box() box.error(box.error.ILLEGAL_PARAMS, 'my reason') end
function fail_nil() error() end
function multi() return 1, {2, 3}, {a = 1}, 'x' end
function ret_table() return {1, 2, 3} end
function ret_tuples() return box.space.test:select({}, {limit = 2}) end
function ret_mixed() return {{1}, 2, box.tuple.new({3})} end
function ret_empty() return {} end
function ret_nothing() end
function ret_nil() return nil end
function ret_map() return {a = 1} end
function ret_tuple() return box.tuple.new({7, 'x'}) end
function ret_fn() return function() end end
-- a __serialize function stands for its table (luaL_tofield): box.info is one
function ret_serialized()
    return setmetatable({}, {__serialize = function() return {1, {a = 2}} end})
end
function ret_info_shape()
    local info = box.info
    return type(info), info.status, info.id
end
function whoami() return box.session.user(), box.session.type(), box.session.uid(),
                         box.session.euid() end
function whoami_setuid() return box.session.user(), box.session.uid(), box.session.euid() end
function txn_open() box.begin() box.space.test:replace{99, 'open'} end
mod = {sub = {f = function(...) return 'sub', ... end}}
obj = {x = 5}
function obj:m(a) return self.x, a end
box.cfg{listen = '127.0.0.1:' .. port}
"""

DDL = """
local s = box.schema.space.create('test', {format = {{'id', 'unsigned'}, {'value', 'string'},
                                                     {'n', 'number', is_nullable = true}}})
s:create_index('primary', {parts = {1, 'unsigned'}})
s:create_index('secondary', {parts = {2, 'string'}, unique = false})
s:create_index('h', {type = 'hash', parts = {1, 'unsigned'}})
local p = box.schema.space.create('pairs')
p:create_index('pk', {parts = {1, 'unsigned', 2, 'string'}})
local e = box.schema.space.create('ext', {format = {{'id', 'uuid'}, {'d', 'decimal'}}})
e:create_index('pk', {parts = {1, 'uuid'}})
box.schema.func.create('echo')
box.schema.func.create('double', {body = 'function(a) return a * 2, box.session.euid() end'})
box.schema.func.create('whoami_setuid', {setuid = true})
box.schema.user.grant('reader', 'execute', 'function', 'whoami_setuid')
return s.id, p.id
"""

ITERATORS = {"EQ": 0, "REQ": 1, "ALL": 2, "LT": 3, "LE": 4, "GE": 5, "GT": 6,
             "BITS_ALL_SET": 7, "BITS_ANY_SET": 8, "BITS_ALL_NOT_SET": 9, "OVERLAPS": 10,
             "NEIGHBOR": 11, "12 (invalid)": 12}
CALLS = ["echo", "multi", "ret_table", "ret_tuples", "ret_mixed", "ret_empty", "ret_nothing",
         "ret_nil", "ret_map", "ret_tuple", "ret_fn", "ret_serialized", "ret_info_shape",
         "fail", "fail_box", "fail_nil",
         "whoami", "txn_open", "mod.sub.f", "obj:m", "obj.m", "mod:sub", "mod.sub.g",
         "nosuch", "box.info.ro", "box.session.user", "double", "whoami_setuid"]


@pytest.fixture(scope="module", autouse=True)
def tarantool_present():
    if TARANTOOL is None:
        pytest.fail("the tarantool binary (2.6.0) is required by the oracle tests")


def run_both(tmp_path, scenario):
    return serve_both(SCRIPT, tmp_path, scenario)


# ---------------------------------------------------------------------------
# The official connector.

def plain(value):
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Log:
    def __init__(self):
        self.entries = []

    def step(self, name, fn):
        from tarantool.error import DatabaseError
        try:
            result = fn()
            data = getattr(result, "data", result)
            self.entries.append((name, "ok", plain(data)))
        except DatabaseError as exc:
            info = exc.extra_info
            self.entries.append((name, "error", exc.code, exc.message,
                                 info.type if info is not None else None))
        except Exception as exc:   # noqa: BLE001 - client-side failures compared by type
            self.entries.append((name, "exception", type(exc).__name__))


def connector_scenario(port: int) -> list:
    import tarantool
    log = Log()
    step = log.step

    guest = tarantool.Connection("127.0.0.1", port)
    try:
        step("guest ping", lambda: [guest.ping()] and None)
        step("guest select _space", lambda: guest.select(280))
        step("guest select _vspace", lambda: guest.select(281, [], iterator=2))
        step("guest select _vuser", lambda: guest.select(305, [], iterator=2))
        step("guest call", lambda: guest.call("echo", 1))
        step("guest eval", lambda: guest.eval("return 1"))
        step("auth wrong password", lambda: guest.authenticate("tester", "bad"))
        step("auth unknown user", lambda: guest.authenticate("nosuch", "x"))
        step("auth role", lambda: guest.authenticate("myrole", "x"))
        step("auth ok", lambda: [guest.authenticate("tester", "secret")] and None)
        step("tester select _vuser", lambda: guest.select(305, [], iterator=2))
    finally:
        guest.close()

    conn = tarantool.Connection("127.0.0.1", port, user="tester", password="secret")
    try:
        step("ddl", lambda: conn.eval(DDL))
        step("ddl again", lambda: conn.eval(DDL))
        for row in [(1, "a"), (2, "b"), (3, "c"), (4, "b", 1.5), (5, "e", -3)]:
            step(f"insert {row}", lambda row=row: conn.insert("test", row))
        step("insert duplicate", lambda: conn.insert("test", (1, "x")))
        step("insert wrong type", lambda: conn.insert("test", ("x", "y")))
        step("insert wrong type 2", lambda: conn.insert("test", (9, 10)))
        step("insert missing field", lambda: conn.insert("test", (9,)))
        step("insert not nullable nil", lambda: conn.insert("test", (9, None)))
        step("replace", lambda: conn.replace("test", (2, "bb")))
        step("update", lambda: conn.update("test", 1, [("=", 1, "aa"), ("=", 2, 7)]))
        step("update arith", lambda: conn.update("test", 1, [("+", 2, 3)]))
        step("update arith on string", lambda: conn.update("test", 1, [("+", 1, 3)]))
        step("update missing", lambda: conn.update("test", 42, [("=", 1, "z")]))
        step("update primary key", lambda: conn.update("test", 1, [("=", 0, 100)]))
        step("update bad op", lambda: conn.update("test", 1, [("?", 1, 1)]))
        step("update non-unique", lambda: conn.update("test", "b", [("=", 2, 1)],
                                                       index="secondary"))
        step("upsert insert", lambda: conn.upsert("test", (7, "g"), [("=", 1, "u")]))
        step("upsert update", lambda: conn.upsert("test", (7, "g"), [("=", 1, "u")]))
        step("delete", lambda: conn.delete("test", 5))
        step("delete missing", lambda: conn.delete("test", 5))
        step("delete bad key", lambda: conn.delete("test", "x"))
        step("delete by hash", lambda: conn.delete("test", 7, index="h"))
        for name, iterator in ITERATORS.items():
            step(f"select primary {name}", lambda it=iterator: conn.select(
                "test", [3], iterator=it))
            step(f"select secondary {name}", lambda it=iterator: conn.select(
                "test", ["b"], index="secondary", iterator=it))
            step(f"select hash {name}", lambda it=iterator: conn.select(
                "test", [3], index="h", iterator=it))
        step("select hash all", lambda: conn.select("test", [], index="h", iterator=2))
        step("select offset limit", lambda: conn.select("test", [], iterator=2, offset=1,
                                                         limit=2))
        step("select limit 0", lambda: conn.select("test", [], iterator=2, limit=0))
        step("select reverse offset", lambda: conn.select("test", [4], iterator=4, offset=1))
        step("select partial pk", lambda: conn.select("pairs", [1], iterator=0))
        step("select too many parts", lambda: conn.select("test", [1, 2]))
        step("select bad key type", lambda: conn.select("test", ["x"]))
        step("select no such index", lambda: conn.select("test", [1], index=9))
        step("select no such space", lambda: conn.select(9999, [1]))
        step("insert no such space", lambda: conn.insert(9999, (1,)))
        step("insert pairs", lambda: conn.insert("pairs", (1, "x")))
        step("select pairs", lambda: conn.select("pairs", [1, "x"]))
        for name in CALLS:
            step(f"call {name}", lambda name=name: conn.call(name, 9))
        conn.call_16 = True
        for name in CALLS:
            step(f"call16 {name}", lambda name=name: conn.call(name, 9))
        conn.call_16 = False
        step("eval", lambda: conn.eval("return ...", 1, "two", [3]))
        step("eval select", lambda: conn.eval("return box.space.test:select()"))
        step("eval syntax", lambda: conn.eval("return +"))
        step("eval error", lambda: conn.eval("error('x')"))
        step("eval box.error", lambda: conn.eval("box.error(box.error.NO_SUCH_USER, 'zz')"))
        step("eval nothing", lambda: conn.eval("local a = 1"))
        step("eval after txn", lambda: conn.select("test", [99]))
        step("grant reader read", lambda: conn.eval(
            "box.schema.user.grant('reader', 'read', 'space', 'test')"))
        step("read only on", lambda: conn.eval("box.cfg{read_only = true}"))
        step("insert read only", lambda: conn.insert("test", (10, "ro")))
        step("lua insert read only", lambda: conn.eval("box.space.test:insert{10, 'ro'}"))
        step("select read only", lambda: conn.select("test", [1]))
        step("read only off", lambda: conn.eval("box.cfg{read_only = false}"))
        step("insert after read only", lambda: conn.insert("test", (10, "rw")))
        step("final data", lambda: conn.select("test", [], iterator=2))
        key = uuid.UUID("8f0f7ad4-1e8a-4b34-9cf8-6a3b0c8a0f12")
        step("insert uuid decimal", lambda: conn.insert("ext", (key, decimal.Decimal("1.25"))))
        step("insert uuid wrong type", lambda: conn.insert("ext", ("x", decimal.Decimal(1))))
        step("select uuid", lambda: conn.select("ext", [key]))
        step("echo uuid decimal", lambda: conn.call("echo", key, decimal.Decimal("-0.5")))

    finally:
        conn.close()

    reader = tarantool.Connection("127.0.0.1", port, user="reader", password="r")
    try:
        step("reader select", lambda: reader.select("test", [1]))
        step("reader insert", lambda: reader.insert("test", (11, "r")))
        step("reader call", lambda: reader.call("echo", 1))
        step("reader eval", lambda: reader.eval("return 1"))
        step("reader setuid", lambda: reader.call("whoami_setuid"))
        step("reader double", lambda: reader.call("double", 2))
        step("reader select _vspace", lambda: reader.select(281, [512]))
    finally:
        reader.close()
    try:
        tarantool.Connection("127.0.0.1", port, user="tester", password="wrong")
        log.entries.append(("connect wrong password", "connected"))
    except Exception as exc:   # noqa: BLE001 - the connector wraps the AUTH error
        log.entries.append(("connect wrong password", type(exc).__name__, str(exc)))
    return log.entries


def test_tarantool_connector_sees_the_same(tmp_path):
    expected, got = run_both(tmp_path, connector_scenario)
    assert len(got) == len(expected)
    for theirs, ours in zip(expected, got):
        assert ours == theirs
    assert ("auth ok", "ok", None) in got


# ---------------------------------------------------------------------------
# asynctnt

def asynctnt_scenario(port: int) -> list:
    import asynctnt
    from asynctnt.exceptions import TarantoolDatabaseError

    async def run() -> list:
        log = []

        async def step(name, coro):
            try:
                response = await coro
                body = response.body if hasattr(response, "body") else response
                log.append((name, "ok", plain_asynctnt(body)))
            except TarantoolDatabaseError as exc:
                log.append((name, "error", exc.code, exc.message))

        bad = asynctnt.Connection(host="127.0.0.1", port=port, username="tester",
                                  password="wrong", reconnect_timeout=0, ping_timeout=0)
        try:
            await bad.connect()
            log.append(("wrong password", "connected"))
        except TarantoolDatabaseError as exc:
            log.append(("wrong password", "error", exc.code, exc.message))
        finally:
            await bad.disconnect()

        conn = asynctnt.Connection(host="127.0.0.1", port=port, username="tester",
                                   password="secret", auto_refetch_schema=False,
                                   ping_timeout=0)
        await conn.connect()
        try:
            await step("ddl", conn.eval(DDL))
            await conn.refetch_schema()
            await step("insert", conn.insert("test", [1, "a"]))
            await step("insert duplicate", conn.insert("test", [1, "b"]))
            await step("insert wrong type", conn.insert("test", ["x", "b"]))
            await step("replace", conn.replace("test", [2, "b", 2.5]))
            await step("update", conn.update("test", [1], [["=", 2, 5]]))
            await step("upsert", conn.upsert("test", [3, "c"], [["+", 2, 1]]))
            await step("delete", conn.delete("test", [2]))
            for name, iterator in ITERATORS.items():
                await step(f"select {name}", conn.select("test", [2], iterator=iterator))
            await step("select index", conn.select("test", ["a"], index="secondary"))
            await step("select no such space", conn.select(9999, []))
            await step("call", conn.call("echo", [1, "x", [2]]))
            await step("call16", conn.call16("ret_table"))
            await step("call16 multi", conn.call16("multi"))
            await step("call error", conn.call("fail"))
            await step("call nosuch", conn.call("nosuch"))
            await step("eval", conn.eval("return ...", [1, 2]))
            await step("eval error", conn.eval("error('x')"))
            pipelined = await asyncio.gather(*[conn.call("echo", [i]) for i in range(100)])
            log.append(("pipelined", [plain_asynctnt(r.body) for r in pipelined]))
        finally:
            await conn.disconnect()

        guest = asynctnt.Connection(host="127.0.0.1", port=port, ping_timeout=0)
        await guest.connect()
        try:
            await step("guest select", guest.select(512, []))
            await step("guest eval", guest.eval("return 1"))
        finally:
            await guest.disconnect()
        return log

    return asyncio.run(run())


def plain_asynctnt(value):
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        return value
    return [plain_asynctnt(v) for v in value]


def test_asynctnt_sees_the_same(tmp_path):
    expected, got = run_both(tmp_path, asynctnt_scenario)
    assert len(got) == len(expected)
    for theirs, ours in zip(expected, got):
        assert ours == theirs


# ---------------------------------------------------------------------------
# VOTE: the ballot a 2.6.0 replica asks for before joining.

def vote_scenario(port: int) -> list:
    import msgpack
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
    from iproto_fake_executor import RawClient
    out = []
    with RawClient(port) as client:
        for sync in (1, 2):
            if sync == 2:
                client.auth("tester", "secret", sync=10)
                client.call(8, {0x27: "box.cfg{read_only = true}", 0x21: []}, sync=11)
            client.send(b"\xce\x00\x00\x00\x05\x82\x00\x44\x01" + bytes([sync]))
            raw = client.read_raw()
            unpacker = msgpack.Unpacker(strict_map_key=False)
            unpacker.feed(raw[5:])
            header = unpacker.unpack()
            out.append((header[0], header[1], raw[5 + unpacker.tell():]))   # body bytes
        header, body, _ = client.call(67, sync=3)     # VOTE_DEPRECATED
        out.append((header[0], body))
    return out


def test_vote_ballot_is_the_same(tmp_path):
    expected, got = run_both(tmp_path, vote_scenario)
    assert got == expected
