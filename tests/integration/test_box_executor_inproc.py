"""The box executor (core/net/box_executor.py, with lua/iproto.py's CALL and EVAL) in
one process: a real Box, the Lua runtime and the IPROTO server on a scheduler thread,
driven by the official connector, asynctnt and raw packets. Schema objects and
functions are made with Lua.

This pins the executor without depending on the Lua box API; the same behaviour is
compared with Tarantool 2.6.0 end to end in tests/interop/test_box_connector_oracle.py.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import socket
import sys
import threading
from pathlib import Path

import pytest

from spindle.core.fiber import Cond
from spindle.lua.instance import Instance

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from iproto_fake_executor import RawClient  # noqa: E402

LUA_FUNCTIONS = """
function echo(...) return ... end
function whoami() return box.session.user(), box.session.euid(), box.session.type(),
    box.session.id() == box.session.id(), box.session.peer() ~= nil end
function fail() error('boom') end
function fail_box() box.error(box.error.ILLEGAL_PARAMS, 'my reason') end
function leave_txn() box_begin() end
function ret_table() return {1, 2, 3} end
function ret_tuples() return {{1}, {2}} end
function ret_mixed() return {{1}, 2, {3}} end
function ret_multi() return 1, {2, 3}, {a = 1} end
function ret_fn() return function() end end
function ret_big() return 2^70 end
function ret_binary() return '\\xff\\xfe' end
function get_storage() box.session.storage.n = (box.session.storage.n or 0) + 1
    return box.session.storage.n end
mod = {sub = {f = function(...) return 'sub', ... end}}
obj = {x = 5}
function obj:m(a) return self.x, a end
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BoxThread:
    """An Instance with a started Box listening on a free port, in its own thread."""

    def __init__(self, workdir: Path, read_only: bool = False):
        self.workdir = workdir
        self.port = free_port()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="spindle-tx", daemon=True)
        self.instance: Instance | None = None
        self.graceful = True      # False: leave the server to the scheduler's shutdown

    def __enter__(self) -> "BoxThread":
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("instance did not start")
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        self.instance = instance = Instance()
        sched = self.sched = instance.sched
        try:
            sched.run(self._main)
        except BaseException as exc:   # noqa: BLE001 - reported to the test thread
            self._error = exc
            self._ready.set()
        finally:
            sched.shutdown(timeout=2)
            sched.close()
            # The Lua state dies in the thread that used it, not in whichever thread
            # the garbage collector happens to run in later.
            self.instance = self.box = None
            del instance
            gc.collect()

    def _main(self) -> None:
        instance = self.instance
        directory = str(self.workdir)
        instance.run_chunk(f"box.cfg{{listen = '127.0.0.1:{self.port}', log_level = 2, "
                           f"memtx_dir = '{directory}', wal_dir = '{directory}'}}", "=cfg")
        self.box = box = instance.storage.box
        txns = box.engine.txns
        instance.runtime.globals[b"box_begin"] = instance.runtime.bridge(
            lambda: txns.begin() and None)
        instance.run_chunk(LUA_FUNCTIONS, "=functions")
        self._stop = Cond(self.sched)
        self._stopping = False
        self._ready.set()
        while not self._stopping:
            self._stop.wait()
        if self.graceful:
            instance.iproto.stop()
        instance.storage.stop()
        self.sched.stop()          # as the launcher does; shutdown() cancels the rest

    def call(self, fn, *args, timeout: float = 10):
        future: concurrent.futures.Future = concurrent.futures.Future()

        def in_fiber():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:   # noqa: BLE001
                future.set_exception(exc)
        self.sched.call_soon_threadsafe(
            lambda: self.sched.spawn(in_fiber, name="test-call", start=False))
        return future.result(timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            def request():
                self._stopping = True
                self._stop.broadcast()
            self.sched.call_soon_threadsafe(request)
            self._thread.join(15)
            assert not self._thread.is_alive(), "instance thread did not stop"


SCHEMA_LUA = """
box.schema.user.create('tester', {password = 'secret'})
box.schema.user.grant('tester', 'read,write,execute', 'universe')
box.schema.user.create('reader', {password = 'r'})
box.schema.user.create('nosession', {password = 'x'})
box.schema.user.revoke('nosession', 'session', 'universe')
local s = box.schema.space.create('test', {format = {{'id', 'unsigned'},
                                                     {'value', 'string', is_nullable = true}}})
s:create_index('primary', {parts = {1, 'unsigned'}})
s:create_index('by_value', {parts = {2, 'string'}, unique = false})
box.schema.user.grant('reader', 'read', 'space', 'test')
box.schema.func.create('echo')
box.schema.user.grant('reader', 'execute', 'function', 'echo')
"""


@pytest.fixture
def node(tmp_path):
    with BoxThread(tmp_path) as node:
        node.call(node.instance.run_chunk, SCHEMA_LUA, "=schema")
        yield node


def connect(node, user=None, password=None):
    import tarantool
    return tarantool.Connection("127.0.0.1", node.port, user=user, password=password)


def error_of(fn):
    from tarantool.error import DatabaseError
    with pytest.raises(DatabaseError) as info:
        fn()
    return info.value.code, info.value.message


# ---------------------------------------------------------------------------

def test_dml_and_select_through_the_connector(node):
    conn = connect(node, "tester", "secret")
    try:
        assert list(conn.insert("test", (1, "a"))) == [[1, "a"]]
        assert list(conn.replace("test", (2, "b"))) == [[2, "b"]]
        assert list(conn.insert("test", (3, "c"))) == [[3, "c"]]
        assert list(conn.select("test")) == [[1, "a"], [2, "b"], [3, "c"]]
        assert list(conn.select("test", 2)) == [[2, "b"]]
        assert list(conn.select("test", [2], iterator=5)) == [[2, "b"], [3, "c"]]
        assert list(conn.select("test", [2], iterator=3)) == [[1, "a"]]
        assert list(conn.select("test", [], iterator=2, offset=1, limit=1)) == [[2, "b"]]
        assert list(conn.select("test", "b", index="by_value")) == [[2, "b"]]
        assert list(conn.update("test", 1, [("=", 1, "z")])) == [[1, "z"]]
        assert list(conn.update("test", 9, [("=", 1, "z")])) == []
        assert list(conn.upsert("test", (4, "d"), [("=", 1, "u")])) == []
        assert list(conn.upsert("test", (4, "d"), [("=", 1, "u")])) == []
        assert list(conn.select("test", 4)) == [[4, "u"]]
        assert list(conn.delete("test", 2)) == [[2, "b"]]
        assert list(conn.delete("test", 2)) == []
        assert error_of(lambda: conn.insert("test", (1, "x"))) == (
            3, "Duplicate key exists in unique index 'primary' in space 'test'")
        assert error_of(lambda: conn.insert("test", ("x", "x"))) == (
            23, "Tuple field 1 type does not match one required by operation: "
                "expected unsigned")
        assert error_of(lambda: conn.select(9999)) == (36, "Space '9999' does not exist")
        assert error_of(lambda: conn.update("test", 1, [("=", 0, 5)])) == (
            94, "Attempt to modify a tuple field which is part of index 'primary' "
                "in space 'test'")
    finally:
        conn.close()
    # the data went through the engine and the WAL
    assert node.call(lambda: node.box.engine.space("test").select([4])) == [(4, "u")]
    assert node.call(lambda: node.box.vclock.signature) > 0


def test_calls_and_eval(node):
    conn = connect(node, "tester", "secret")
    try:
        assert list(conn.call("echo", 1, "x", [2], None, {"a": 1})) == [1, "x", [2], None,
                                                                        {"a": 1}]
        assert list(conn.call("mod.sub.f", 9)) == ["sub", 9]
        assert list(conn.call("obj:m", 9)) == [5, 9]
        assert list(conn.call("ret_multi")) == [1, [2, 3], {"a": 1}]
        assert list(conn.call("ret_big")) == [2.0 ** 70]
        assert list(conn.eval("return ...", 1, 2)) == [1, 2]
        assert list(conn.eval("return box.session.user()")) == ["tester"]
        assert error_of(lambda: conn.call("nosuch")) == (33, "Procedure 'nosuch' is not defined")
        assert error_of(lambda: conn.call("mod.sub.g")) == (
            33, "Procedure 'mod.sub.g' is not defined")
        assert error_of(lambda: conn.call("fail")) == (32, "functions:5: boom")
        assert error_of(lambda: conn.call("fail_box")) == (1, "Illegal parameters, my reason")
        assert error_of(lambda: conn.call("ret_fn")) == (32, "unsupported Lua type 'function'")
        assert error_of(lambda: conn.eval("return +")) == (
            32, "eval:1: unexpected symbol near '+'")
        assert error_of(lambda: conn.eval("error('x')")) == (32, "eval:1: x")
        assert error_of(lambda: conn.call("leave_txn")) == (
            30, "Transaction is active at return from function")
        assert list(conn.call("get_storage")) == [1]
        assert list(conn.call("get_storage")) == [2]
        user, euid, kind, same, has_peer = conn.call("whoami")
        assert (user, kind, same, has_peer) == ("tester", "binary", True, True)
        conn.call_16 = True
        assert list(conn.call("ret_table")) == [[1, 2, 3]]
        assert list(conn.call("ret_tuples")) == [[1], [2]]
        assert list(conn.call("ret_mixed")) == [[1], [2], [3]]
        assert list(conn.call("ret_multi")) == [[1], [2, 3], [{"a": 1}]]
        assert list(conn.call("echo", 5)) == [[5]]
    finally:
        conn.close()


def test_access_and_auth(node):
    import tarantool
    from tarantool.error import DatabaseError
    guest = connect(node)
    try:
        assert error_of(lambda: guest.select(512)) == (
            42, "Read access to space 'test' is denied for user 'guest'")
        assert error_of(lambda: guest.insert(512, (1, "a"))) == (
            42, "Write access to space 'test' is denied for user 'guest'")
        assert error_of(lambda: guest.call("whoami")) == (
            42, "Execute access to function 'whoami' is denied for user 'guest'")
        assert error_of(lambda: guest.eval("return 1")) == (
            42, "Execute access to universe '' is denied for user 'guest'")
        assert error_of(lambda: guest.authenticate("tester", "bad")) == (
            47, "Incorrect password supplied for user 'tester'")
        assert error_of(lambda: guest.authenticate("nosuch", "x")) == (
            45, "User 'nosuch' is not found")
        assert error_of(lambda: guest.authenticate("nosession", "x")) == (
            42, "Session access to universe '' is denied for user 'nosession'")
    finally:
        guest.close()
    reader = connect(node, "reader", "r")
    try:
        assert list(reader.select("test")) == []
        assert list(reader.call("echo", 7)) == [7]
        assert error_of(lambda: reader.insert("test", (1, "a"))) == (
            42, "Write access to space 'test' is denied for user 'reader'")
        assert error_of(lambda: reader.call("whoami")) == (
            42, "Execute access to function 'whoami' is denied for user 'reader'")
    finally:
        reader.close()
    with pytest.raises(DatabaseError):
        tarantool.Connection("127.0.0.1", node.port, user="tester", password="wrong")


def test_read_only_refuses_writes(node):
    conn = connect(node, "tester", "secret")
    try:
        conn.insert("test", (1, "a"))
        node.call(lambda: node.box.set_read_only("config", True))
        assert error_of(lambda: conn.insert("test", (2, "b"))) == (
            7, "Can't modify data because this instance is in read-only mode.")
        assert list(conn.select("test")) == [[1, "a"]]
        node.call(lambda: node.box.set_read_only("config", False))
        assert list(conn.insert("test", (2, "b"))) == [[2, "b"]]
    finally:
        conn.close()


def test_vote_ballot(node):
    with RawClient(node.port) as client:
        header, body, _ = client.call(68, sync=3)
    assert header[0] == 0 and header[1] == 3
    ballot = body[0x29]
    assert list(ballot) == [1, 4, 2, 3]
    assert ballot[1] is False and ballot[4] is False
    assert ballot[2] == node.call(lambda: node.box.vclock.to_wire())


def test_pipelined_asynctnt(node):
    import asynctnt

    async def run():
        conn = asynctnt.Connection(host="127.0.0.1", port=node.port, username="tester",
                                   password="secret")
        await conn.connect()
        try:
            inserts = [conn.insert("test", [i, str(i)]) for i in range(1, 301)]
            await asyncio.gather(*inserts)
            calls = [conn.call("echo", [i]) for i in range(200)]
            results = await asyncio.gather(*calls)
            assert [list(r.body) for r in results] == [[i] for i in range(200)]
            selected = await conn.select("test", [])
            return len(selected.body)
        finally:
            await conn.disconnect()
    assert asyncio.run(run()) == 300


def test_listen_moves_and_stops(node):
    old = node.port
    new = free_port()
    node.call(lambda: node.instance.run_chunk(f"box.cfg{{listen = '127.0.0.1:{new}'}}", "=x"))
    with RawClient(new) as client:
        assert client.call(64, sync=1)[0][0] == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", old), timeout=2).close()
    assert node.call(lambda: node.instance.iproto.listen_address()) == f"127.0.0.1:{new}"
    node.call(lambda: node.instance.run_chunk("box.cfg{listen = ''}", "=x"))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", new), timeout=2).close()
    assert node.call(lambda: node.instance.iproto.listen_address()) is None


def test_lua_strings_are_sent_as_msgpack_str(node):
    """Tarantool's serializer sends every Lua string as MsgPack str, UTF-8 or not."""
    with RawClient(node.port) as client:
        client.auth("tester", "secret", sync=1)
        client.request(10, {0x22: "ret_binary", 0x21: []}, sync=2)
        raw = client.read_raw()
    assert raw.endswith(b"\x81\x30\xdd\x00\x00\x00\x01\xa2\xff\xfe")


def test_scheduler_shutdown_closes_the_listener_and_connections(tmp_path):
    node = BoxThread(tmp_path)
    with node:
        node.graceful = False
        client = RawClient(node.port)
    try:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", node.port), timeout=2).close()
        client.sock.settimeout(5)
        assert client.is_closed()
    finally:
        client.close()


def test_listen_on_a_busy_port_fails_and_keeps_the_old_one(node):
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        def reconfigure():
            return node.instance.run_chunk(
                f"local ok, e = pcall(box.cfg, {{listen = '127.0.0.1:{port}'}}) "
                "return ok, tostring(e), e.type, box.cfg.listen", "=x")
        ok, message, kind, listen = node.call(reconfigure)
    finally:
        busy.close()
    assert (ok, message, kind) == (False, b"binary: failed to bind, called on fd -1",
                                   b"SocketError")
    assert listen == f"127.0.0.1:{node.port}".encode()
    with RawClient(node.port) as client:
        assert client.call(64, sync=1)[0][0] == 0


def _dml_replies(node) -> list[bytes]:
    """Raw replies of a DML sequence with successes and errors, the space emptied first."""
    node.call(node.instance.run_chunk, "box.space.test:truncate()", "=truncate")
    space = node.call(node.instance.run_chunk, "return box.space.test.id", "=id")[0]
    requests = [
        (2, {0x10: space, 0x21: [1, "a"]}),                   # INSERT
        (2, {0x10: space, 0x21: [1, "dup"]}),                 # duplicate key
        (2, {0x10: space, 0x21: ["x", "a"]}),                 # field type
        (3, {0x10: space, 0x21: [2, "b"]}),                   # REPLACE
        (4, {0x10: space, 0x20: [1], 0x21: [["=", 2, "z"]]}), # UPDATE
        (4, {0x10: space, 0x20: [1], 0x21: [["=", 1, 5]]}),   # primary key change
        (9, {0x10: space, 0x21: [3, "c"], 0x28: [["=", 2, "u"]]}),   # UPSERT
        (5, {0x10: space, 0x20: [2]}),                        # DELETE
        (5, {0x10: space, 0x20: [2]}),                        # nothing to delete
    ]
    replies = []
    with RawClient(node.port) as client:
        for sync, (kind, body) in enumerate(requests, 1):
            client.request(kind, body, sync)
            raw = client.read_raw()
            replies.append(raw[:24] + raw[28:])     # without the header's schema version
    return replies


def test_dml_served_in_place_answers_as_in_a_fiber_of_its_own(node):
    """A DML request on a space without triggers is served by the connection's reader;
    with a trigger it gets a fiber of its own: the replies are the same bytes."""
    node.call(node.instance.run_chunk,
              "box.schema.user.grant('guest', 'read,write', 'space', 'test')", "=grant")
    in_place = _dml_replies(node)
    node.call(node.instance.run_chunk, "trigger = box.space.test:on_replace("
              "function() fibers_seen = require('fiber').self():name() end)", "=trigger")
    in_fiber = _dml_replies(node)
    assert in_place == in_fiber
    assert node.call(node.instance.run_chunk, "return fibers_seen", "=seen") == (
        b"iproto.request",)
    node.call(node.instance.run_chunk, "box.space.test:on_replace(nil, trigger)", "=off")
    assert _dml_replies(node) == in_place


def test_plain_dml_only_without_lua_sync_or_fsync(node):
    """What may be served in the reader fiber: a user space without triggers, not
    synchronous, and not while commits wait for fsync."""
    from spindle.core.net import requests as rq
    executor = node.instance.iproto.executor
    box = node.instance.storage.box
    space_id = box.engine.find_space("test").id

    def plain():
        return node.call(executor.plain_dml, rq.Insert(None, space_id, [1]))
    assert plain()
    assert not node.call(executor.plain_dml, rq.Insert(None, 280, [1]))   # _space
    node.call(node.instance.run_chunk, "trigger = box.space.test:on_replace("
              "function() end)", "=trigger")
    assert not plain()
    node.call(node.instance.run_chunk, "box.space.test:on_replace(nil, trigger)", "=off")
    assert plain()
    box.cfg["wal_mode"] = "fsync"      # as a restart with it would leave it
    try:
        assert not plain()
    finally:
        box.cfg["wal_mode"] = "write"
