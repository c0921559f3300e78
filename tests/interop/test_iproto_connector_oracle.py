"""Spindle's iproto layer (with the fake executor) against the real Tarantool 2.6.0.

The same raw packets go to both servers on fresh connections and the replies must
be identical byte for byte: greeting line 1, PING, AUTH (ok, wrong password,
unknown user, bad bodies), request validation errors, unknown request types,
schema-version checks, framing errors, and errors raised by the executor (whose
file/line the fake copies from 2.6.0). Then the official `tarantool` connector
and asynctnt run the same scenario against both and must see the same results
and the same error codes, messages and error-stack details.

Both servers start from the same state per test; the fake executor is told the
oracle's schema version so reply headers match too.
"""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from iproto_fake_executor import INSTANCE_UUID, FakeExecutor, RawClient, ServerThread  # noqa: E402

TARANTOOL = shutil.which("tarantool")
START_TIMEOUT = 20

ORACLE_LUA = """\
box.cfg{listen='127.0.0.1:0', instance_uuid='%(uuid)s', log_level=1}
box.schema.user.create('tester', {password='secret'})
box.schema.user.grant('tester', 'read,write,execute', 'universe')
box.schema.user.create('nosession', {password='x'})
box.schema.user.revoke('nosession', 'session', 'universe')
box.schema.role.create('myrole')
local s = box.schema.space.create('test', {format={{'id','unsigned'},{'value','string', is_nullable=true}}})
s:create_index('primary', {parts={1,'unsigned'}})
function echo(...) return ... end
function chained() local e1 = box.error.new({code=1001, reason='inner'}) local e2 = box.error.new(box.error.ILLEGAL_PARAMS, 'outer') e2:set_prev(e1) e2:raise() end
function custom() box.error({type='MyError', reason='custom reason', code=77}) end
io.stdout:write(tostring(box.info.listen), "\\n") io.stdout:flush()
"""
LUA_ERROR_LINE = 10     # line of chained() and custom()'s box.error calls, 1-based
LUA_ERROR_LINES = {"chained": 10, "custom": 11}


class Oracle:
    """A real tarantool 2.6.0 running ORACLE_LUA in a temporary directory."""

    def __init__(self, workdir: Path):
        self.script = workdir / "oracle.lua"
        self.script.write_text(ORACLE_LUA % {"uuid": INSTANCE_UUID})
        self.proc = subprocess.Popen([TARANTOOL, str(self.script)], cwd=workdir,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = _readline_with_deadline(self.proc, START_TIMEOUT)
        self.port = int(line.rsplit(":", 1)[1])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


def _readline_with_deadline(proc: subprocess.Popen, timeout: float) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            proc.kill()
            raise RuntimeError("tarantool did not report its listen address")
    finally:
        sel.close()
    line = proc.stdout.readline().decode().strip()
    if not line:
        raise RuntimeError("tarantool exited: " + proc.stderr.read().decode(errors="replace"))
    return line


@pytest.fixture(scope="module", autouse=True)
def tarantool_present():
    if TARANTOOL is None:
        pytest.fail("the tarantool binary (2.6.0) is required by the oracle tests")


@pytest.fixture
def pair(tmp_path):
    """(oracle port, spindle port) with equal initial state and schema version."""
    oracle = Oracle(tmp_path)
    try:
        with RawClient(oracle.port) as probe:
            header, _, _ = probe.call(64, sync=1)
        schema_version = header[5]

        def factory(sched):
            executor = FakeExecutor(sched, schema_version)
            executor.lua_location = (str(oracle.script), LUA_ERROR_LINE)
            return executor
        with ServerThread(factory) as spindle:
            yield oracle.port, spindle.port, spindle
        assert spindle.stopped_clean
    finally:
        oracle.stop()


# ---------------------------------------------------------------------------
# Raw packets.

def packet(header: dict, body=None, raw_body: bytes | None = None) -> bytes:
    payload = msgpack.packb(header) + (raw_body if raw_body is not None else
                                       b"" if body is None else
                                       msgpack.packb(body, use_bin_type=True))
    return b"\xce" + len(payload).to_bytes(4, "big") + payload


def transcript(port: int, steps: list) -> list:
    """Run steps on a fresh connection: ("send", bytes, n_replies), ("auth", user,
    password), ("eof",). Returns the greeting's first line and every reply, raw
    (replies to one burst ordered by sync: bytes 14..21 of a reply header)."""
    out = []
    with RawClient(port) as client:
        out.append(client.greeting[:64])
        for step in steps:
            if step[0] == "send":
                client.send(step[1])
                # a burst may complete out of order (writes wait for the WAL): by sync
                replies = [client.read_raw() for _ in range(step[2])]
                out.extend(sorted(replies, key=lambda r: (r[14:22], r)))
            elif step[0] == "auth":
                out.append(client.auth(step[1], step[2], sync=99)[2])
            elif step[0] == "eof":
                client.sock.settimeout(5)
                out.append("EOF" if client.is_closed() else "OPEN")
    return out


def one(header: dict, body=None, raw_body=None) -> list:
    return [("send", packet(header, body, raw_body), 1)]


def raw(data: bytes, replies: int = 1) -> list:
    return [("send", data, replies)]


AS_TESTER = [("auth", "tester", "secret")]
T = {"sp": 0x10, "idx": 0x11, "lim": 0x12, "off": 0x13, "it": 0x14, "base": 0x15,
     "key": 0x20, "tup": 0x21, "fn": 0x22, "user": 0x23, "expr": 0x27, "ops": 0x28}


def body(**kw) -> dict:
    return {T[k]: v for k, v in kw.items()}


SCRAMBLE = ["chap-sha1", b"x" * 20]

PROBES = {
    # the layer itself
    "ping": one({0: 64, 1: 5}),
    "ping schema mismatch": one({0: 64, 1: 5, 5: 1}),
    "ping body c1": one({0: 64, 1: 5}, raw_body=b"\xc1"),
    "ping truncated body": raw(b"\x06\x82\x00\x40\x01\x0b\x81"),
    "select schema mismatch": one({0: 1, 1: 5, 5: 1}, body(sp=512, lim=1, key=[])),
    "call schema mismatch": one({0: 10, 1: 5, 5: 1}, body(fn="echo", tup=[])),
    "auth schema mismatch": one({0: 7, 1: 5, 5: 1}, body(user="guest", tup=[])),
    **{f"unknown type {t}": one({0: t, 1: 6}) for t in
       (0, 12, 30, 31, 40, 41, 67 + 6, 99, 100, 128, 0x163, 2 ** 63)},
    "zero length packet": raw(b"\x00" + packet({0: 64, 1: 33}), 2),
    "header not a map": raw(b"\x02\x91\x00"),
    "header key str": raw(b"\x07\x82\x00\x40\xa1\x61\x01\x01"),
    "header key 0x53 after sync": raw(b"\x07\x83\x00\x40\x01\x07\x53\x01"),
    "header nil key 0x2c": raw(b"\x07\x83\x00\x40\x01\x07\x2c\xc0"),
    "header sync str": raw(b"\x06\x82\x00\x40\x01\xa1\x61"),
    "header bad type after sync": raw(b"\x06\x82\x01\x09\x00\xa1\x61"),
    "header truncated": raw(b"\x04\x82\x00\x40\x01"),
    "header float32 timestamp": raw(b"\x0a\x83\x00\x40\x01\x02\x04\xca\x00\x00\x00\x00"),
    "body trailing bytes": raw(b"\x0d\x82\x00\x01\x01\x0c\x83\x10\x01\x12\x01\x20\x90\x80"),
    "body truncated": raw(b"\x0b\x82\x00\x01\x01\x0d\x83\x10\x01\x12\x01\x20"),
    "dml body c1": raw(b"\x06\x82\x00\x01\x01\x0e\xc1"),
    "select no body": one({0: 1, 1: 7}),
    "select body array": one({0: 1, 1: 7}, [1]),
    "select no key": one({0: 1, 1: 7}, body(sp=512, lim=1)),
    "select no limit": one({0: 1, 1: 7}, body(sp=512, key=[])),
    "select space str": one({0: 1, 1: 7}, body(sp="a", lim=1, key=[])),
    "select key map": one({0: 1, 1: 7}, body(sp=512, lim=1, key={})),
    "select limit float": one({0: 1, 1: 7}, body(sp=512, lim=1.0, key=[])),
    "select space 2**32": one({0: 1, 1: 7}, body(sp=2 ** 32, lim=1, key=[])),
    "insert tuple map": one({0: 2, 1: 7}, body(sp=512, tup={})),
    "replace no space": one({0: 3, 1: 7}, body(tup=[1])),
    "update no ops": one({0: 4, 1: 7}, body(sp=512, key=[1])),
    "upsert no ops": one({0: 9, 1: 7}, body(sp=512, tup=[1])),
    "upsert nothing": one({0: 9, 1: 7}, {}),
    "delete no key": one({0: 5, 1: 7}, body(sp=512)),
    "type 257 is select": one({0: 257, 1: 6}),
    # uint32_t fields of 2.6.0's xrow_header: a wider value wraps (xrow.decode_header)
    "type 2**32+64 is ping": one({0: 2 ** 32 + 64, 1: 6}),
    "schema 2**32 is no schema": one({0: 64, 1: 5, 5: 2 ** 32}),
    "schema 2**32+1 mismatches": one({0: 1, 1: 5, 5: 2 ** 32 + 1}, body(sp=512, lim=1, key=[])),
    "call no body": one({0: 10, 1: 8}),
    "call empty": one({0: 10, 1: 8}, {}),
    "call name int": one({0: 10, 1: 8}, body(fn=5)),
    "call name nil": one({0: 10, 1: 8}, body(fn=None)),
    "call args map": one({0: 10, 1: 8}, body(fn="echo", tup={})),
    "call str key": one({0: 10, 1: 8}, {0x22: "echo", "k": 1}),
    "eval no body": one({0: 8, 1: 8}),
    "eval no expr": one({0: 8, 1: 8}, {}),
    "call16 no body": one({0: 6, 1: 8}),
    "execute no body": one({0: 11, 1: 8}),
    "execute empty": one({0: 11, 1: 8}, {}),
    "auth no body": one({0: 7, 1: 9}),
    "auth empty": one({0: 7, 1: 9}, {}),
    "auth body array": one({0: 7, 1: 9}, []),
    "auth no tuple": one({0: 7, 1: 9}, body(user="tester")),
    "auth no user": one({0: 7, 1: 9}, body(tup=SCRAMBLE)),
    "auth user int": one({0: 7, 1: 9}, body(user=5, tup=SCRAMBLE)),
    "auth tuple map": one({0: 7, 1: 9}, body(user="tester", tup={})),
    "auth tuple empty": one({0: 7, 1: 9}, body(user="tester", tup=[])),
    "auth tuple short": one({0: 7, 1: 9}, body(user="tester", tup=["chap-sha1"])),
    "auth scramble int": one({0: 7, 1: 9}, body(user="tester", tup=["chap-sha1", 5])),
    "auth scramble 19": one({0: 7, 1: 9}, body(user="tester", tup=["chap-sha1", b"x" * 19])),
    "auth scramble str": one({0: 7, 1: 9}, body(user="tester", tup=["chap-sha1", "x" * 20])),
    "auth other mechanism": one({0: 7, 1: 9}, body(user="tester", tup=["pap-sha256", b"x" * 20])),
    "auth guest no password": one({0: 7, 1: 9}, body(user="guest", tup=[])),
    "auth guest garbage": one({0: 7, 1: 9}, body(user="guest", tup=[1])),
    "auth unknown user": one({0: 7, 1: 9}, body(user="nosuch", tup=[])),
    "auth role": one({0: 7, 1: 9}, body(user="myrole", tup=SCRAMBLE)),
    "auth long name": one({0: 7, 1: 9}, body(user="n" * 100, tup=SCRAMBLE)),
    "auth admin": one({0: 7, 1: 9}, body(user="admin", tup=SCRAMBLE)),
    "auth no session right": one({0: 7, 1: 9}, body(user="nosession", tup=SCRAMBLE)),
    "auth ok": AS_TESTER,
    "auth wrong password": [("auth", "tester", "Secret")],
    "auth guest with password": [("auth", "guest", "x")],
    "auth ok then bad keeps user": AS_TESTER + [("auth", "tester", "bad")] + one(
        {0: 1, 1: 10}, body(sp=512, lim=10, key=[])),
    # framing: error reply with sync 0, then the connection is closed
    "length not uint": raw(packet({0: 64, 1: 1}) + b"\xa1") + [("eof",)],
    "length 2**40": raw(b"\xcf" + (2 ** 40).to_bytes(8, "big") + b"\x82") + [("eof",)],
    "length 2**31+1": raw(b"\xce\x80\x00\x00\x01\x82") + [("eof",)],
    # errors raised by the executor (fake copies 2.6.0's file/line)
    "guest select denied": one({0: 1, 1: 11}, body(sp=512, lim=1, key=[])),
    "guest insert denied": one({0: 2, 1: 11}, body(sp=512, tup=[1])),
    "guest call denied": one({0: 10, 1: 11}, body(fn="nosuch", tup=[])),
    "guest eval denied": one({0: 8, 1: 11}, body(expr="return 1", tup=[])),
    "no such space": one({0: 1, 1: 11}, body(sp=9999, lim=1, key=[])),
    "tester errors": AS_TESTER + [("send", b"".join([
        packet({0: 2, 1: 20}, body(sp=512, tup=[1, "a"])),
        packet({0: 2, 1: 21}, body(sp=512, tup=[1, "b"])),
        packet({0: 2, 1: 22}, body(sp=512, tup=["x", "b"])),
        packet({0: 2, 1: 23}, body(sp=512, tup=[])),
        packet({0: 1, 1: 24}, body(sp=512, idx=5, lim=1, key=[])),
        packet({0: 1, 1: 25}, body(sp=512, lim=1, key=["x"])),
        packet({0: 1, 1: 26}, body(sp=512, lim=1, key=[1, 2])),
        packet({0: 1, 1: 27}, body(sp=512, lim=1, key=[], it=7)),
        packet({0: 4, 1: 28}, body(sp=512, key=[1], tup=[["?", 1, 5]])),
        packet({0: 4, 1: 29}, body(sp=512, key=[1], tup=[["=", 0, 5]])),
        packet({0: 10, 1: 30}, body(fn="nosuch", tup=[])),
        packet({0: 8, 1: 31}, body(expr='error("boom")', tup=[])),
        packet({0: 10, 1: 32}, body(fn="chained", tup=[])),
    ]), 13)],
    "tester data": AS_TESTER + [("send", b"".join([
        packet({0: 3, 1: 40}, body(sp=512, tup=[7, "seven"])),
        packet({0: 1, 1: 41}, body(sp=512, lim=10, key=[7])),
        packet({0: 4, 1: 42}, body(sp=512, key=[7], tup=[["=", 2, "x"]], base=1)),
        packet({0: 9, 1: 43}, body(sp=512, tup=[8, "eight"], ops=[["=", 1, "y"]])),
        packet({0: 9, 1: 44}, body(sp=512, tup=[8, "eight"], ops=[["=", 1, "y"]])),
        packet({0: 1, 1: 45}, body(sp=512, lim=10, key=[], it=2)),
        packet({0: 5, 1: 46}, body(sp=512, key=[7])),
        packet({0: 5, 1: 47}, body(sp=512, key=[7])),
        packet({0: 10, 1: 48}, body(fn="echo", tup=[1, "x", [2], None, {"a": 1}, -5, 1.5])),
        packet({0: 6, 1: 49}, body(fn="echo", tup=[[1, 2], 3, None])),
        packet({0: 8, 1: 50}, body(expr="return ...", tup=[1, 2])),
        packet({0: 10, 1: 51}, body(fn="echo")),
    ]), 12)],
}


@pytest.mark.parametrize("name", list(PROBES))
def test_raw_replies_are_byte_identical(pair, name):
    oracle_port, spindle_port, _ = pair
    expected = transcript(oracle_port, PROBES[name])
    got = transcript(spindle_port, PROBES[name])
    assert got == expected


def test_custom_error_with_fields_identical(pair, tmp_path):
    oracle_port, spindle_port, spindle = pair
    spindle.call(lambda: setattr(spindle.executor, "lua_location",
                                 (str(tmp_path / "oracle.lua"), LUA_ERROR_LINES["custom"])))
    steps = AS_TESTER + one({0: 10, 1: 60}, body(fn="custom", tup=[]))
    assert transcript(spindle_port, steps) == transcript(oracle_port, steps)


def test_pipelined_replies_come_back_for_every_sync(pair):
    """Both servers answer a burst of 50 mixed requests, one reply per sync."""
    for port in pair[:2]:
        with RawClient(port) as client:
            client.auth("tester", "secret", sync=1)
            burst = b"".join(packet({0: 64 if i % 2 else 10, 1: 100 + i},
                                    None if i % 2 else body(fn="echo", tup=[i]))
                             for i in range(50))
            client.send(burst)
            syncs = sorted(client.read()[0][1] for _ in range(50))
            assert syncs == list(range(100, 150))


# ---------------------------------------------------------------------------
# The official connector and asynctnt.

def connector_scenario(port: int) -> list:
    import tarantool
    from tarantool.error import DatabaseError

    log = []

    def step(name, fn):
        try:
            result = fn()
            data = getattr(result, "data", result)
            log.append((name, "ok", None if name.startswith("ping") else data))
        except DatabaseError as exc:
            info = exc.extra_info
            log.append((name, "error", exc.code, exc.message,
                        info and (info.type, info.file, info.line, info.errno, info.fields)))
        except Exception as exc:   # noqa: BLE001 - client-side errors compared by type
            log.append((name, "exception", type(exc).__name__, str(exc)))

    conn = tarantool.Connection("127.0.0.1", port)
    try:
        step("ping", conn.ping)
        step("guest select", lambda: conn.select(512))
        step("guest insert", lambda: conn.insert(512, (1, "a")))
        step("guest call", lambda: conn.call("echo", 1))
        step("guest eval", lambda: conn.eval("return 1"))
        step("auth wrong password", lambda: conn.authenticate("tester", "bad"))
        step("auth unknown user", lambda: conn.authenticate("nosuch", "bad"))
        step("auth no session", lambda: conn.authenticate("nosession", "x"))
        step("auth ok", lambda: conn.authenticate("tester", "secret"))
        step("insert", lambda: conn.insert("test", (1, "a")))
        step("insert duplicate", lambda: conn.insert("test", (1, "b")))
        step("insert bad type", lambda: conn.insert("test", ("x", "b")))
        step("replace", lambda: conn.replace("test", (2, "b")))
        step("select all", lambda: conn.select("test"))
        step("select one", lambda: conn.select("test", 1))
        step("select limit offset", lambda: conn.select("test", [], limit=1, offset=1,
                                                       iterator="ALL"))
        step("update", lambda: conn.update("test", 1, [("=", 1, "z")]))
        step("update append", lambda: conn.update("test", 1, [("=", 2, "zz")]))
        step("update missing", lambda: conn.update("test", 9, [("=", 1, "z")]))
        step("update primary key", lambda: conn.update("test", 1, [("=", 0, 5)]))
        step("upsert insert", lambda: conn.upsert("test", (3, "c"), [("=", 1, "u")]))
        step("upsert update", lambda: conn.upsert("test", (3, "c"), [("=", 1, "u")]))
        step("delete", lambda: conn.delete("test", 2))
        step("delete missing", lambda: conn.delete("test", 2))
        step("select after", lambda: conn.select("test"))
        step("call echo", lambda: conn.call("echo", 1, "x", [2]))
        step("call nosuch", lambda: conn.call("nosuch", 1))
        step("eval", lambda: conn.eval("return ...", 1, 2))
        step("eval error", lambda: conn.eval('error("boom")'))
        step("select no such space", lambda: conn.select(9999))
        step("insert no such space", lambda: conn.insert(9999, (1,)))
        step("ping again", conn.ping)
    finally:
        conn.close()
    return log


def test_official_connector_sees_the_same(pair):
    oracle_port, spindle_port, _ = pair
    expected = connector_scenario(oracle_port)
    got = connector_scenario(spindle_port)
    assert got == expected
    assert ("auth ok", "ok", None) in got


def test_official_connector_login_on_connect(pair):
    import tarantool
    from tarantool.error import DatabaseError, NetworkError

    outcomes = []
    for port in pair[:2]:
        conn = tarantool.Connection("127.0.0.1", port, user="tester", password="secret")
        try:
            outcomes.append(list(conn.call("echo", "hi").data))
        finally:
            conn.close()
        try:
            tarantool.Connection("127.0.0.1", port, user="tester", password="wrong")
            outcomes.append("connected")
        except (DatabaseError, NetworkError) as exc:
            outcomes.append(("refused", type(exc).__name__, str(exc)))
    assert outcomes[:2] == outcomes[2:]
    assert outcomes[0] == ["hi"]


def _plain(value):
    """asynctnt's TarantoolTuple (and lists) as plain lists."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        return value
    return [_plain(v) for v in value]


def asynctnt_scenario(port: int) -> list:
    import asynctnt
    from asynctnt.exceptions import TarantoolDatabaseError

    async def run() -> list:
        log = []

        async def step(name, coro):
            try:
                response = await coro
                log.append((name, "ok", [_plain(t) for t in (response.body or [])]))
            except TarantoolDatabaseError as exc:
                frame = exc.error.trace[0] if exc.error and exc.error.trace else None
                log.append((name, "error", exc.code, exc.message, frame and (
                    frame.error_type, frame.file, frame.line, frame.code, frame.fields)))

        bad = asynctnt.Connection(host="127.0.0.1", port=port, username="tester",
                                  password="bad", reconnect_timeout=0)
        try:
            await bad.connect()
            log.append(("bad login", "connected"))
        except TarantoolDatabaseError as exc:
            log.append(("bad login", "error", exc.code, exc.message))
        finally:
            await bad.disconnect()

        conn = asynctnt.Connection(host="127.0.0.1", port=port, username="tester",
                                   password="secret", reconnect_timeout=0)
        await conn.connect()
        try:
            await step("ping", conn.ping())
            await step("insert", conn.insert("test", [10, "ten"]))
            await step("insert dup", conn.insert("test", [10, "ten"]))
            await step("select", conn.select("test", [10]))
            await step("call", conn.call("echo", [1, 2, "three"]))
            await step("call16", conn.call16("echo", [1, [2]]))
            await step("eval", conn.eval("return ...", [4, 5]))
            await step("eval error", conn.eval('error("boom")'))
            await step("call nosuch", conn.call("nosuch"))
            results = await asyncio.gather(*(conn.call("echo", [i]) for i in range(20)))
            log.append(("gather", [[_plain(t) for t in r.body] for r in results]))
        finally:
            await conn.disconnect()
        return log

    return asyncio.run(run())


def test_asynctnt_sees_the_same(pair):
    oracle_port, spindle_port, _ = pair
    expected = asynctnt_scenario(oracle_port)
    got = asynctnt_scenario(spindle_port)
    assert got == expected
    assert got[0][0] == "bad login" and got[0][2] == 47
