"""A fake box for exercising the iproto layer end to end, plus test harness.

`FakeExecutor` implements the executor interface (spindle.core.net.executor) with a
tiny in-memory space `test` (id 512: id unsigned, value string nullable, primary
TREE index on field 1), `_vspace`/`_vindex` rows for connectors that load the
schema, users guest/admin/tester(password 'secret')/nosession, and a few
functions. Errors it raises carry the file/line the real Tarantool 2.6.0 reports
for the same error (measured), so replies can be compared byte for byte.

`ServerThread` runs a Scheduler with an IprotoServer on 127.0.0.1:0 in a thread,
for blocking clients (the official connector, raw sockets); `RawClient` is a
blocking raw IPROTO client with deadlines.
"""
from __future__ import annotations

import concurrent.futures
import socket
import struct
import threading
import time
from typing import Any

import msgpack

from spindle.core.fiber import Cond, Scheduler
from spindle.core.iproto import auth as chap
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.net import requests as rq
from spindle.core.net.iproto_server import IprotoServer
from spindle.core.net.session import AuthUser

TEST_SPACE_ID = 512
VSPACE_ID, VINDEX_ID = 281, 289
INSTANCE_UUID = "11111111-1111-4111-8111-111111111111"

# (file, line) of errors as 2.6.0 reports them
AT_ACCESS_SPACE = ("./src/box/space.c", 91)
AT_ACCESS_EXECUTE = ("./src/box/session.cc", 332)
AT_ACCESS_SESSION = ("./src/box/session.cc", 307)
AT_NO_SUCH_SPACE = ("./src/box/schema.h", 84)
AT_NO_SUCH_INDEX = ("./src/box/space.h", 335)
AT_TUPLE_FOUND = ("./src/box/memtx_tree.c", 577)
AT_FIELD_TYPE = ("./src/box/tuple_format.c", 1193)
AT_FIELD_MISSING = ("./src/box/tuple_format.c", 1048)
AT_KEY_PART_TYPE = ("./src/box/key_def.h", 532)
AT_KEY_PART_COUNT = ("./src/box/index.cc", 116)
AT_ITERATOR = ("./src/box/memtx_tree.c", 985)
AT_UPDATE_OP = ("./src/box/xrow_update_field.c", 665)
AT_NO_SUCH_PROC = ("./src/box/lua/call.c", 116)
AT_LUA = ("./src/lua/utils.c", 1005)


def lua_chunk_name(path: str) -> str:
    """How LuaJIT names a file in errors (luaO_chunkid, LUA_IDSIZE 60): a path
    longer than 59 characters keeps its tail behind '...'."""
    return path if len(path) <= 59 else "..." + path[-56:]


def located(err: BoxError, where: tuple[str, int]) -> BoxError:
    err.file, err.line = where
    return err


class AccessDeniedError(BoxError):
    type = "AccessDeniedError"

    def __init__(self, access: str, object_type: str, object_name: str, user: str,
                 where=AT_ACCESS_SPACE):
        super().__init__(f"{access} access to {object_type} '{object_name}' is denied "
                         f"for user '{user}'", ErrorCode.ER_ACCESS_DENIED)
        self.fields = {"object_type": object_type, "object_name": object_name,
                       "access_type": access}
        self.file, self.line = where


class LuajitError(BoxError):
    type = "LuajitError"

    def __init__(self, message: str):
        super().__init__(message, ErrorCode.ER_PROC_LUA)
        self.file, self.line = AT_LUA


class CustomError(BoxError):
    type = "CustomError"


class FakeSpace:
    def __init__(self, space_id: int, name: str):
        self.id, self.name = space_id, name
        self.rows: dict[int, list] = {}

    def check_tuple(self, tup: list) -> None:
        if not tup:
            raise located(ClientError(ErrorCode.ER_FIELD_MISSING, "1"), AT_FIELD_MISSING)
        if not _is_uint(tup[0]):
            raise located(ClientError(ErrorCode.ER_FIELD_TYPE, "1", "unsigned"), AT_FIELD_TYPE)
        if len(tup) > 1 and tup[1] is not None and not isinstance(tup[1], str):
            raise located(ClientError(ErrorCode.ER_FIELD_TYPE, "2", "string"), AT_FIELD_TYPE)

    def check_key(self, key: list, exact: bool) -> None:
        if exact and len(key) != 1:
            raise located(ClientError(ErrorCode.ER_EXACT_MATCH, 1, len(key)), AT_KEY_PART_COUNT)
        if len(key) > 1:
            raise located(ClientError(ErrorCode.ER_KEY_PART_COUNT, 1, len(key)),
                          AT_KEY_PART_COUNT)
        if key and not _is_uint(key[0]):
            raise located(ClientError(ErrorCode.ER_KEY_PART_TYPE, 0, "unsigned"),
                          AT_KEY_PART_TYPE)

    def check_index(self, index_id: int) -> None:
        if index_id != 0:
            raise located(ClientError(ErrorCode.ER_NO_SUCH_INDEX_ID, index_id, self.name),
                          AT_NO_SUCH_INDEX)

    def select(self, req: rq.Select) -> list:
        self.check_index(req.index_id)
        self.check_key(req.key, exact=False)
        keys = sorted(self.rows)
        it, key = req.iterator, req.key
        if it > 6:
            raise located(ClientError(ErrorCode.ER_UNSUPPORTED_INDEX_FEATURE, "primary", "TREE",
                                      self.name, "memtx", "requested iterator type"),
                          AT_ITERATOR)
        if key and it in (0, 1):
            keys = [k for k in keys if k == key[0]]
        elif key:
            test = {3: lambda k: k < key[0], 4: lambda k: k <= key[0],
                    5: lambda k: k >= key[0], 6: lambda k: k > key[0]}.get(it)
            keys = [k for k in keys if test is None or test(k)]
        if it in (1, 3, 4):
            keys.reverse()
        return [self.rows[k] for k in keys[req.offset:req.offset + req.limit]]

    def insert(self, tup: list, replace: bool) -> list:
        self.check_tuple(tup)
        if not replace and tup[0] in self.rows:
            raise located(ClientError(ErrorCode.ER_TUPLE_FOUND, "primary", self.name),
                          AT_TUPLE_FOUND)
        self.rows[tup[0]] = list(tup)
        return [list(tup)]

    def update(self, key: list, ops: list, base: int) -> list:
        self.check_key(key, exact=True)
        old = self.rows.get(key[0])
        if old is None:
            return []
        new = _apply_ops(old, ops, base)
        if new[0] != old[0]:
            raise located(ClientError(ErrorCode.ER_CANT_UPDATE_PRIMARY_KEY, "primary",
                                      self.name), AT_TUPLE_FOUND)
        self.check_tuple(new)
        self.rows[key[0]] = new
        return [new]

    def delete(self, key: list) -> list:
        self.check_key(key, exact=True)
        old = self.rows.pop(key[0], None)
        return [] if old is None else [old]


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _apply_ops(tup: list, ops: list, base: int) -> list:
    new = list(tup)
    for n, op in enumerate(ops, 1):
        if not isinstance(op, (list, tuple)) or len(op) < 3 or op[0] not in ("=", "+", "-"):
            name = op[0] if isinstance(op, (list, tuple)) and op else "?"
            raise located(ClientError(ErrorCode.ER_UNKNOWN_UPDATE_OP, n, f'"{name}"'),
                          AT_UPDATE_OP)
        code, field_no, value = op[0], op[1] - base, op[2]
        if field_no == len(new) and code == "=":
            new.append(value)
        elif 0 <= field_no < len(new):
            new[field_no] = (value if code == "=" else
                             new[field_no] + value if code == "+" else new[field_no] - value)
        else:
            raise located(ClientError(ErrorCode.ER_NO_SUCH_FIELD_NO, op[1]), AT_UPDATE_OP)
    return new


_VSPACE_ROW = [TEST_SPACE_ID, 1, "test", "memtx", 0, {},
               [{"name": "id", "type": "unsigned"},
                {"type": "string", "name": "value", "is_nullable": True}]]
_VINDEX_ROW = [TEST_SPACE_ID, 0, "primary", "tree", {"unique": True}, [[0, "unsigned"]]]


class FakeExecutor:
    """Enough of a box for the protocol layer; every method runs in a fiber."""

    instance_uuid = INSTANCE_UUID

    def __init__(self, sched: Scheduler, schema_version: int = 80):
        self.sched = sched
        self._schema_version = schema_version
        self.users = {
            "guest": AuthUser(0, "guest", chap.password_hash("")),
            "admin": AuthUser(1, "admin", None),
            "tester": AuthUser(32, "tester", chap.password_hash("secret")),
            "nosession": AuthUser(33, "nosession", chap.password_hash("x")),
        }
        self.space = FakeSpace(TEST_SPACE_ID, "test")
        self.lua_location = ("fake.lua", 1)   # where Lua-raised errors claim to come from
        self.gate_open = False
        self.gate = Cond(sched)
        self.executed = 0
        self.auth_events: list[tuple[str, bool]] = []
        self.connected: list[int] = []
        self.disconnected: list[int] = []

    # ------------------------------------------------------------ interface

    def schema_version(self) -> int:
        return self._schema_version

    def find_user(self, name: str) -> AuthUser | None:
        return self.users.get(name)

    def check_session(self, session, user: AuthUser) -> None:
        if user.name == "nosession":
            raise AccessDeniedError("Session", "universe", "", user.name, AT_ACCESS_SESSION)

    def on_auth(self, session, user_name: str, ok: bool) -> None:
        self.auth_events.append((user_name, ok))

    def on_connect(self, session) -> None:
        self.connected.append(session.id)

    def on_disconnect(self, session) -> None:
        self.disconnected.append(session.id)

    def execute(self, session, req: rq.Request) -> Any:
        self.executed += 1
        user = session.effective_user.name
        if isinstance(req, (rq.Vote, rq.VoteDeprecated)):
            if isinstance(req, rq.VoteDeprecated):
                return {0x26: {1: 20}}
            return {0x29: {1: False, 4: False, 2: {1: 20}, 3: {}}}
        if isinstance(req, rq.Eval):
            return self._eval(session, req, user)
        if isinstance(req, rq.Call):
            return self._call(session, req, user)
        if isinstance(req, rq.Execute):
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "Fake executor", "SQL")
        if req.space_id in (VSPACE_ID, VINDEX_ID) and isinstance(req, rq.Select):
            row = _VSPACE_ROW if req.space_id == VSPACE_ID else _VINDEX_ROW
            visible = user != "guest" and (not req.key or req.key[0] == TEST_SPACE_ID)
            return [row] if visible and req.limit > 0 else []
        if req.space_id != TEST_SPACE_ID:
            raise located(ClientError(ErrorCode.ER_NO_SUCH_SPACE, str(req.space_id)),
                          AT_NO_SUCH_SPACE)
        space = self.space
        if user == "guest":
            access = "Read" if isinstance(req, rq.Select) else "Write"
            raise AccessDeniedError(access, "space", space.name, user)
        if isinstance(req, rq.Select):
            return space.select(req)
        if isinstance(req, rq.Insert):
            return space.insert(req.tuple, replace=isinstance(req, rq.Replace))
        if isinstance(req, rq.Update):
            space.check_index(req.index_id)
            return space.update(req.key, req.ops, req.index_base)
        if isinstance(req, rq.Upsert):
            space.check_tuple(req.tuple)
            if req.tuple[0] in space.rows:
                space.update([req.tuple[0]], req.ops, req.index_base)
            else:
                space.insert(req.tuple, replace=False)
            return []
        if isinstance(req, rq.Delete):
            space.check_index(req.index_id)
            return space.delete(req.key)
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "Fake executor", type(req).__name__)

    # ------------------------------------------------------------ functions

    def _call(self, session, req: rq.Call, user: str) -> list:
        if user == "guest":
            raise AccessDeniedError("Execute", "function", req.name, user, AT_ACCESS_EXECUTE)
        fn = getattr(self, "fn_" + req.name, None)
        if fn is None:
            raise located(ClientError(ErrorCode.ER_NO_SUCH_PROC, len(req.name), req.name),
                          AT_NO_SUCH_PROC)
        result = fn(session, *req.args)
        if isinstance(req, rq.Call16):
            return [v if isinstance(v, (list, tuple)) else [v] for v in result]
        return result

    def _eval(self, session, req: rq.Eval, user: str) -> list:
        if user == "guest":
            raise AccessDeniedError("Execute", "universe", "", user, AT_ACCESS_EXECUTE)
        if req.expr == "return ...":
            return list(req.args)
        if req.expr == "return box.session.user(), box.session.id()":
            return [session.user.name, session.id]
        if req.expr.startswith('error("') and req.expr.endswith('")'):
            raise LuajitError(f"eval:1: {req.expr[7:-2]}")
        raise LuajitError(f"eval:1: fake executor cannot run {req.expr!r}")

    def fn_echo(self, session, *args) -> list:
        return list(args)

    def fn_wait_gate(self, session) -> list:
        while not self.gate_open:
            self.gate.wait()
        return ["opened"]

    def fn_open_gate(self, session) -> list:
        self.gate_open = True
        self.gate.broadcast()
        return [True]

    def fn_sleep(self, session, seconds) -> list:
        self.sched.sleep(seconds)
        return [seconds]

    def fn_session_info(self, session) -> list:
        return [session.id, session.user.name, session.effective_user.name, session.peer,
                session.sync]

    def fn_push(self, session, *values) -> list:
        for value in values:
            session.push(value)
        return [len(values)]

    def fn_chained(self, session) -> list:
        """Like Lua: e = box.error.new(ILLEGAL_PARAMS, 'outer'); e:set_prev(
        box.error.new{code=1001, reason='inner'}); e:raise()."""
        where = (lua_chunk_name(self.lua_location[0]), self.lua_location[1])
        inner = located(BoxError("inner", 1001), where)
        outer = located(ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "outer"), where)
        outer.prev = inner
        raise outer

    def fn_custom(self, session) -> list:
        """Like Lua: box.error{type='MyError', reason='custom reason', code=77}."""
        err = located(CustomError("custom reason", 77),
                      (lua_chunk_name(self.lua_location[0]), self.lua_location[1]))
        err.fields = {"custom_type": "MyError"}
        raise err

    def fn_python_bug(self, session) -> list:
        raise KeyError("oops")

    def fn_bad_result(self, session) -> Any:
        return [object()]

    def fn_su_whoami(self, session) -> list:
        with session.su(session.user.__class__(1, "admin")):
            inner = session.effective_user.name
        return [inner, session.effective_user.name]


# ---------------------------------------------------------------------------
# Harness: a server in a thread, and a raw blocking client.

class ServerThread:
    """Runs Scheduler + FakeExecutor + IprotoServer in a thread (the tx thread)."""

    def __init__(self, executor_factory=FakeExecutor, **server_options):
        self._factory = executor_factory
        self._options = server_options
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.sched: Scheduler | None = None
        self.executor = None
        self.server: IprotoServer | None = None
        self.port = 0
        self.stopped_clean = None
        self._thread = threading.Thread(target=self._run, name="spindle-tx", daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("server thread did not start")
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        sched = self.sched = Scheduler()
        try:
            sched.run(self._main)
        except BaseException as exc:   # noqa: BLE001 - reported to the test thread
            self._error = exc
            self._ready.set()
        finally:
            sched.shutdown(timeout=2)
            sched.close()

    def _main(self) -> None:
        self.executor = self._factory(self.sched)
        self.server = IprotoServer(self.sched, self.executor, "127.0.0.1", 0,
                                   **self._options).start()
        self.port = self.server.port
        self._stop_cond = Cond(self.sched)
        self._stop_requested = False
        self._ready.set()
        while not self._stop_requested:
            self._stop_cond.wait()
        self.stopped_clean = self.server.stop(timeout=5)

    def call(self, fn, *args, timeout: float = 10) -> Any:
        """Run fn(*args) in a fiber of the server thread and return its result."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def in_fiber():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:   # noqa: BLE001
                future.set_exception(exc)
        self.sched.call_soon_threadsafe(lambda: self.sched.spawn(in_fiber, name="test-call",
                                                                 start=False))
        return future.result(timeout)

    def wait_for(self, predicate, timeout: float = 10, what: str = "condition") -> Any:
        """Poll predicate() (run in the server thread) until truthy or the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.call(predicate)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.005)

    def stop(self) -> None:
        if self._thread.is_alive() and self.sched is not None:
            def request_stop():
                self._stop_requested = True
                self._stop_cond.broadcast()
            self.sched.call_soon_threadsafe(request_stop)
            self._thread.join(15)
            if self._thread.is_alive():
                raise RuntimeError("server thread did not stop")


class RawClient:
    """A blocking IPROTO client speaking raw packets; every read has a deadline."""

    def __init__(self, port: int, timeout: float = 5.0, host: str = "127.0.0.1"):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.greeting = self.recv_exact(128)
        import base64
        self.salt = base64.b64decode(self.greeting[64:108])

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError(f"EOF after {len(out)} of {n} bytes")
            out += chunk
        return out

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, request_type: int, body: Any = None, sync: int = 1, **header) -> None:
        head = {0: request_type, 1: sync}
        head.update({int(k[1:]) if k.startswith("k") else k: v for k, v in header.items()})
        packed = msgpack.packb(head) + (b"" if body is None else
                                        msgpack.packb(body, use_bin_type=True))
        self.send(b"\xce" + struct.pack(">I", len(packed)) + packed)

    def read_raw(self) -> bytes:
        """One reply packet, with its length prefix (raises EOFError on close)."""
        prefix = self.recv_exact(5)
        assert prefix[0] == 0xCE, prefix
        return prefix + self.recv_exact(struct.unpack(">I", prefix[1:])[0])

    def read(self) -> tuple[dict, Any, bytes]:
        raw = self.read_raw()
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False,
                                    unicode_errors="surrogateescape")
        unpacker.feed(raw[5:])
        header = unpacker.unpack()
        try:
            body = unpacker.unpack()
        except msgpack.OutOfData:
            body = None
        return header, body, raw

    def call(self, request_type: int, body: Any = None, sync: int = 1, **header):
        self.request(request_type, body, sync, **header)
        return self.read()

    def auth(self, user: str, password: str, sync: int = 1):
        self.send(chap.encode_auth_request(user, password, self.salt, sync))
        return self.read()

    def is_closed(self) -> bool:
        """True if the server closed the connection (EOF) within the timeout."""
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return data == b""
