"""A spindle process serving IPROTO from a startup script (box.cfg.listen), driven by
the official `tarantool` connector and asynctnt: DML, selects, calls, eval, access
checks, authentication, read-only refusal, pipelining, re-listening, shutdown."""
from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from box_process import SPINDLE, BoxProcess, free_port  # noqa: E402

SCRIPT = """\
local port = arg[1]
box.cfg{log_level = 5}
box.schema.user.create('tester', {password = 'secret'})
box.schema.user.grant('tester', 'read,write,execute,create,drop', 'universe')
box.schema.user.create('reader', {password = 'r'})
box.schema.user.grant('reader', 'read', 'space', '_space')
local s = box.schema.space.create('test', {format = {{'id', 'unsigned'},
                                                     {'value', 'string', is_nullable = true}}})
s:create_index('primary', {parts = {1, 'unsigned'}})
s:create_index('by_value', {parts = {2, 'string'}, unique = false})
box.schema.user.grant('reader', 'read', 'space', 'test')
function echo(...) return ... end
function whoami() return box.session.user(), box.session.type(), box.session.id() end
function fail() error('boom') end
function insert_many(n)
    for i = 1, n do box.space.test:replace{1000 + i, 'x' .. i} end
    return box.space.test:count()
end
box.cfg{listen = '127.0.0.1:' .. port}
"""


@pytest.fixture
def node(tmp_path):
    proc = BoxProcess(SPINDLE, SCRIPT, tmp_path / "spindle")
    try:
        yield proc.wait_ready()
    finally:
        proc.stop()


def connect(node, user=None, password=None):
    import tarantool
    return tarantool.Connection("127.0.0.1", node.port, user=user, password=password)


def error_of(fn):
    from tarantool.error import DatabaseError
    with pytest.raises(DatabaseError) as info:
        fn()
    return info.value.code, info.value.message


def test_data_calls_and_eval(node):
    conn = connect(node, "tester", "secret")
    try:
        assert list(conn.insert("test", (1, "a"))) == [[1, "a"]]
        assert list(conn.replace("test", (2, "b"))) == [[2, "b"]]
        assert list(conn.select("test")) == [[1, "a"], [2, "b"]]
        assert list(conn.select("test", "b", index="by_value")) == [[2, "b"]]
        assert list(conn.select("test", [1], iterator=6)) == [[2, "b"]]
        assert list(conn.update("test", 1, [("=", 1, "z")])) == [[1, "z"]]
        assert list(conn.upsert("test", (3, "c"), [("=", 1, "u")])) == []
        assert list(conn.delete("test", 2)) == [[2, "b"]]
        assert list(conn.select("test")) == [[1, "z"], [3, "c"]]
        assert error_of(lambda: conn.insert("test", (1, "x")))[0] == 3
        assert error_of(lambda: conn.insert("test", ("x", "x")))[0] == 23
        assert list(conn.call("echo", 1, [2], {"a": 3})) == [1, [2], {"a": 3}]
        assert list(conn.call("insert_many", 10)) == [12]
        assert error_of(lambda: conn.call("fail")) == (32, "box.lua:14: boom")
        assert error_of(lambda: conn.call("nosuch")) == (33, "Procedure 'nosuch' is not defined")
        assert list(conn.eval("return box.space.test:get{1}")) == [[1, "z"]]
        assert list(conn.eval("return ...", "x", 2)) == ["x", 2]
        user, kind, sid = conn.call("whoami")
        assert (user, kind) == ("tester", "binary") and sid > 0
    finally:
        conn.close()
    # DDL done over IPROTO is seen by the next connection's schema
    conn = connect(node, "tester", "secret")
    try:
        conn.eval("box.schema.space.create('other'):create_index('pk')")
        assert list(conn.insert("other", (1,))) == [[1]]
    finally:
        conn.close()


def test_guest_and_wrong_password(node):
    import tarantool
    from tarantool.error import DatabaseError, NetworkError
    guest = connect(node)
    try:
        assert guest.ping() is not None
        assert error_of(lambda: guest.select(512)) == (
            42, "Read access to space 'test' is denied for user 'guest'")
        assert error_of(lambda: guest.call("echo", 1)) == (
            42, "Execute access to function 'echo' is denied for user 'guest'")
        assert error_of(lambda: guest.eval("return 1")) == (
            42, "Execute access to universe '' is denied for user 'guest'")
        assert error_of(lambda: guest.authenticate("tester", "bad")) == (
            47, "Incorrect password supplied for user 'tester'")
    finally:
        guest.close()
    with pytest.raises((DatabaseError, NetworkError)) as info:
        tarantool.Connection("127.0.0.1", node.port, user="tester", password="wrong")
    assert "Incorrect password supplied for user 'tester'" in str(info.value)
    reader = connect(node, "reader", "r")
    try:
        assert list(reader.select("test")) == []
        assert error_of(lambda: reader.insert("test", (1, "a"))) == (
            42, "Write access to space 'test' is denied for user 'reader'")
    finally:
        reader.close()


def test_read_only(node):
    conn = connect(node, "tester", "secret")
    try:
        conn.insert("test", (1, "a"))
        conn.eval("box.cfg{read_only = true}")
        assert error_of(lambda: conn.insert("test", (2, "b"))) == (
            7, "Can't modify data because this instance is in read-only mode.")
        assert error_of(lambda: conn.call("insert_many", 1))[0] == 7
        assert list(conn.select("test")) == [[1, "a"]]
        conn.eval("box.cfg{read_only = false}")
        assert list(conn.insert("test", (2, "b"))) == [[2, "b"]]
    finally:
        conn.close()


def test_many_pipelined_requests_with_asynctnt(node):
    """(That the reader gives the loop back between batches of a full socket is
    counted in test_iproto_server.py, in requests rather than milliseconds.)"""
    import asynctnt

    async def run():
        conn = asynctnt.Connection(host="127.0.0.1", port=node.port, username="tester",
                                   password="secret")
        await conn.connect()
        try:
            writes = [conn.insert("test", [i, f"v{i}"]) for i in range(1, 1001)]
            done = await asyncio.gather(*writes)
            assert [r.body[0][0] for r in done] == list(range(1, 1001))
            mixed = []
            for i in range(500):
                mixed.append(conn.call("echo", [i]))
                mixed.append(conn.select("test", [i + 1]))
                mixed.append(conn.ping())
            results = await asyncio.gather(*mixed)
            for i in range(500):
                assert list(results[3 * i].body) == [i]
                assert list(results[3 * i + 1].body[0]) == [i + 1, f"v{i + 1}"]
            everything = await conn.select("test", [], limit=5000)
            return len(everything.body)
        finally:
            await conn.disconnect()
    assert asyncio.run(run()) == 1000


def test_relisten_and_shutdown(node):
    new_port = free_port()
    conn = connect(node, "tester", "secret")
    try:
        conn.eval(f"box.cfg{{listen = '127.0.0.1:{new_port}'}}")
    finally:
        conn.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", node.port), timeout=2).close()
    node.port = new_port
    conn = connect(node, "tester", "secret")
    try:
        assert list(conn.eval("return box.cfg.listen")) == [f"127.0.0.1:{new_port}"]
        with pytest.raises(Exception):
            conn.eval("os.exit(0)")
    finally:
        conn.close()
    assert node.proc.wait(10) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", new_port), timeout=2).close()


UNIX_SCRIPT = """\
box.cfg{log_level = 2}
box.schema.user.grant('guest', 'execute', 'universe')
function peer() return box.session.peer(), box.session.type(), box.session.user() end
box.cfg{listen = arg[1]}
"""


def test_unix_socket(tmp_path):
    import tarantool
    path = str(tmp_path / "box.sock")
    node = BoxProcess(SPINDLE, UNIX_SCRIPT, tmp_path / "spindle", unix_path=path)
    try:
        node.wait_ready()
        conn = tarantool.Connection(None, path)
        try:
            assert list(conn.call("peer")) == ["unix/:(socket)", "binary", "guest"]
            conn.eval("box.cfg{listen = ''}")
        finally:
            conn.close()
        assert not Path(path).exists()
    finally:
        node.stop()
