"""Tarantool's `console` module (console.lua is its Lua face): the admin console over
sockets, console.eval, console.connect, console.start.

Every console, local or remote, is a ConsoleEngine (lua/console.py): the one evaluator
of typed lines, with its own output format, delimiter and language. console.listen
serves 2.6.0's text protocol: a two-line greeting, then per line (up to the delimiter
and a LF or CR) the reply exactly as 2.6.0 writes it — a YAML document, or Lua text
ended by the Lua end-of-stream marker (';', console.eos()). The listener and each
connection are fibers; each connection is a box.session of type 'console' (admin).
console.eval, which net.box's console connections call over IPROTO, answers with the
engine of the calling session, so that session's `\\set output` holds for the next.
"""
from __future__ import annotations

import importlib
import os
import re
import socket
import sys
from typing import TYPE_CHECKING, Any

from spindle.core import log
from spindle.core.fiber.coio import (
    CoSocket, SocketError, address_text, listen, listen_unix, run_in_thread,
)
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.net.session import ADMIN, SESSION_KEY, Session, current_session, format_peer
from spindle.core.version import TARANTOOL_VERSION
from spindle.lua.instance import ExitRequested

from ..runtime import Multi, read_source
from ..serialize import NULL, display_table

if TYPE_CHECKING:
    from spindle.lua.console import ConsoleEngine, Reply

# Imported on first use (_console_api): the evaluator brings the YAML renderer, which
# a script that never opens a console does not pay for at start.
CONSOLE_KEY = "console"     # = spindle.lua.console.CONSOLE_KEY (checked there)
YAML_EOS = "\n...\n"       # the end-of-stream markers of the two output formats
LUA_EOS = ";"

GREETING = "%-63s\n%-63s\n" % (f"Tarantool {TARANTOOL_VERSION} (Lua console)",
                               "type 'help' for interactive help")
LINE_MAX = 64 << 20     # a "line" past this with no end is garbage: drop the client

# box.session.push() on a console socket: 2.6.0 tags a YAML push document so; in Lua
# output its formatter concatenates the value's text, and nil makes that fail (push
# then returns nil and that message)
PUSH_TAG = ("!push!", "tag:tarantool.io/push,2018")
PUSH_NIL_ERROR = ("builtin/box/console.lua:205: attempt to concatenate local 'value' "
                  "(a nil value)")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


class ConsoleServer:
    """One console.listen(): the listening socket and its acceptor fiber."""

    def __init__(self, module: ConsoleModule, sock: CoSocket, unix_path: str | None):
        self.module = module
        self.sock = sock
        self.unix_path = unix_path
        self.fd = sock.fileno()
        self.address = address_text(sock.name())
        self.fiber = module.sched.spawn(self._accept, name="console", start=False)

    def _accept(self) -> None:
        try:
            while self.sock is not None:     # None: closed before this fiber began
                conn, peer = self.sock.accept()
                self.module.sched.spawn(self.module.serve_client, conn, peer,
                                        name="console/" + (format_peer(peer) or "unix/:"),
                                        start=False)
        except OSError as exc:   # the socket was closed under us
            log.verbose("console: accept: %s", exc)
        finally:
            self.close()

    def close(self, unlink: bool = False) -> bool:
        """Stop listening; `unlink`: server:close() removes the socket file, as
        2.6.0's does (an instance that exits leaves it, as 2.6.0 leaves it)."""
        if self.sock is None:
            return False
        sock, self.sock = self.sock, None
        sock.close()
        if unlink and self.unix_path is not None:
            try:
                os.unlink(self.unix_path)
            except OSError:
                pass
        log.info("stopped")
        fiber = self.fiber
        if fiber is not self.module.sched.current and fiber.status != "dead":
            self.module.sched.cancel(fiber)
        return True


class LineReader:
    """Lines as 2.6.0's console reads them from a client: up to the delimiter and a
    LF or a CR, whichever comes first; the delimiter and that byte are cut off."""

    def __init__(self, conn: CoSocket):
        self.conn = conn
        self.buffer = bytearray()

    def read(self, delimiter: str) -> str | None:
        """The next line; None at the end of input or on the `~.` escape."""
        delim = delimiter.encode("utf-8", "surrogateescape")
        searched = 0
        while True:
            ends = [at for at in (self.buffer.find(delim + b"\n", searched),
                                  self.buffer.find(delim + b"\r", searched)) if at >= 0]
            if ends:
                end = min(ends) + len(delim) + 1
                raw = bytes(self.buffer[:end])
                del self.buffer[:end]
                if raw == b"~.\n":
                    return None    # ssh's escape: close this connection
                return raw[:-len(delim) - 1].decode("utf-8", "surrogateescape")
            searched = max(0, len(self.buffer) - len(delim))
            if len(self.buffer) > LINE_MAX:
                return None
            chunk = self.conn.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk


class ConsoleModule:
    def __init__(self, instance):
        self.instance = instance
        self.sched = instance.sched
        self.runtime = instance.runtime
        self.lua_eos = LUA_EOS              # console.eos(): one for every session
        self.hooks: dict[str, Any] = {}     # on_start, on_client_disconnect
        self.servers: dict[int, ConsoleServer] = {}
        self._server_ids = 0
        self.started = False

    # ------------------------------------------------------------- building

    def lua_module(self):
        runtime = self.runtime
        natives = {
            "has_console": lambda: self._console() is not None,
            "started": lambda: self.started,
            "get_delimiter": lambda: self._console().delimiter,
            "set_delimiter": self._set_delimiter,
            "set_ac": lambda flag: setattr(self._console(), "ac", bool(flag)),
            "eos": self._eos,
            "parse_output": self._parse_output,
            "complete": self._complete,
            "server_close": lambda sid: self._server(sid).close(unlink=True),
            "server_name": self._server_name,
            "server_text": lambda sid: f"fd {self._server(sid).fd}, aka "
                                       f"{self._server(sid).address}",
        }
        bridged = {name: runtime.bridge(fn) for name, fn in natives.items()}
        bridged["set_hook"] = runtime.bridge(self._set_hook, convert_args=False)
        blocking = {"listen": self.listen, "eval": self.eval, "connect": self.connect,
                    "start": self.start}
        chunk = runtime.load(read_source("modules/console.lua"), "@builtin/box/console.lua")
        return chunk(runtime.table(bridged), runtime.table(blocking), runtime.wait)

    # -------------------------------------------------------------- natives

    def _console(self) -> ConsoleEngine | None:
        fiber = self.sched.current
        return fiber.storage.get(CONSOLE_KEY) if fiber is not None else None

    def _set_delimiter(self, delimiter: str) -> None:
        self._console().delimiter = delimiter

    def _eos(self, value: Any = None) -> Multi:
        engine = self._console() or getattr(self.instance.iproto.sessions.current(),
                                            "console_engine", None)
        output = engine.output if engine is not None else "yaml"
        fmt = output if output in ("yaml", "lua") else "yaml"
        if value is None:
            return Multi((YAML_EOS if fmt == "yaml" else self.lua_eos, None))
        if fmt == "yaml":
            return Multi((None, "console.eos(): is immutable for output yaml"))
        self.lua_eos = str(value)
        return Multi((None, None))

    @staticmethod
    def _parse_output(value: str) -> Multi:
        """console.set_default_output's check: (nil, fmt, opts) or (message)."""
        from spindle.lua.console import parse_output
        error, fmt, opts = parse_output(value)
        return Multi((error,)) if error is not None else Multi((None, fmt, opts))

    def _set_hook(self, kind, fn) -> None:
        self.hooks[_text(kind)] = fn

    def _complete(self, text: Any, pos1: Any = 0, pos2: Any = None):
        """2.6.0's completion_handler(str, pos1, pos2): nil, or {common prefix,
        candidate...}, each the whole text up to the cursor with the name completed
        (a function's followed by '(')."""
        from spindle.lua.completion import complete
        text = "" if text is None else str(text)
        end = len(text) if pos2 is None else max(0, min(int(pos2), len(text)))
        before = text[:end]
        found = complete(self.runtime, before)
        if not found:
            return None
        word = re.search(r"[A-Za-z_0-9]*\Z", before).group(0)
        head = before[:len(before) - len(word)]
        matches = [head + c.name + ("(" if c.kind == "function" else "") for c in found]
        return [os.path.commonprefix(matches)] + matches

    def _server(self, sid: int) -> ConsoleServer:
        return self.servers[int(sid)]

    def _server_name(self, sid: int) -> dict:
        server = self._server(sid)
        if server.unix_path is not None:
            return {"family": "AF_UNIX", "type": "SOCK_STREAM", "protocol": 0,
                    "host": "unix/", "port": server.unix_path}
        host, _, port = server.address.rpartition(":")
        return {"family": "AF_INET", "type": "SOCK_STREAM", "protocol": 0,
                "host": host, "port": int(port)}

    # --------------------------------------------------------------- listen

    def listen(self, uri: Any = None) -> Multi:
        """console.listen(uri): (server id) or (nil, 2.6.0's error message)."""
        if uri is None:
            host, port = "unix/", "/tmp/tarantool-console.sock"
        else:
            parsed = _parse_listen(_text(uri))
            if parsed is None:
                return Multi((None, 'Usage: console.listen("[host:]port")', 857))
            host, port = parsed
        try:
            if host == "unix/":
                sock = listen_unix(self.sched, port)
            else:
                sock = listen(self.sched, host, int(port))
        except OSError as exc:
            where = f"unix/:{port}" if host == "unix/" else f"{host}:{port}"
            return Multi((None, f"failed to create server {where}: "
                                f"{os.strerror(exc.errno or 0)}", 865))
        self._server_ids += 1
        server = ConsoleServer(self, sock, port if host == "unix/" else None)
        self.servers[self._server_ids] = server
        log.info("started")
        return Multi((self._server_ids,))

    def serve_client(self, conn: CoSocket, peer: Any) -> None:
        """One client of console.listen: greeting, then line after line."""
        sessions = self.instance.iproto.sessions
        # a unix socket's client has no address: 2.6.0 names it so
        session = Session(self.sched, format_peer(peer) or "unix/:(socket)", ADMIN)
        session.type = "console"
        session.fd = conn.fileno()
        session.bind(self.sched.current)
        engine = self.engine_for(session)
        engine.fiber_name = self.sched.current.name
        session.console_push = lambda packed: self.push(conn, engine, packed)
        # a peer's pushes while this console is connected on (console.connect)
        engine.push_output = lambda text: conn.write(text.encode("utf-8", "surrogateescape"))
        try:
            try:
                sessions.connected(session)
                sessions.on_auth(session, "admin", True)
            except Exception as exc:   # noqa: BLE001 - an on_connect trigger refused it
                log.error("%s: %s", getattr(exc, "type", "LuajitError"),
                          getattr(exc, "message", exc))
                sessions.live.pop(session.id, None)
                return
            try:
                conn.write(GREETING.encode())
                self._client_loop(conn, engine)
            except (OSError, BoxError) as exc:   # the client went away mid-reply
                log.verbose("console: %s: %s", session.peer, exc)
            finally:
                if engine.remote is not None:
                    engine.remote.close()
                sessions.disconnected(session)
        finally:
            session.closed = True
            conn.close()

    def _client_loop(self, conn: CoSocket, engine: ConsoleEngine) -> None:
        reader = LineReader(conn)
        while True:
            line = reader.read(engine.delimiter)
            if line is None:
                return
            try:
                reply = engine.execute(line)
            except ExitRequested:
                raise
            except Exception as exc:   # noqa: BLE001 - the session lives on
                reply = engine._reply(error=getattr(exc, "message", None) or str(exc))
            if reply.quit:
                if reply.text:
                    conn.write(reply.text.encode("utf-8", "surrogateescape"))
                return
            conn.write(self.wire_text(engine, reply).encode("utf-8", "surrogateescape"))

    def wire_text(self, engine: ConsoleEngine, reply: Reply) -> str:
        """A reply as 2.6.0 writes it on a console socket: Lua output ends with the
        end-of-stream marker alone (the local console's print adds the newline)."""
        text = reply.text
        if engine.remote is None and engine.output == "lua" and text.endswith(";\n"):
            return text[:-2] + self.lua_eos
        return text

    def push_text(self, engine: ConsoleEngine, packed) -> str | None:
        """box.session.push(value) in a console session as 2.6.0 writes it at once
        (the statement's reply follows later): a YAML document tagged !push!, or in Lua
        output '-- Push' and the value's line, with the end-of-stream marker. `packed`
        is {value} (a Lua table); None for nil in Lua output, which 2.6.0 fails on."""
        from spindle.lua.render import yaml_document
        if engine.output == "lua":
            if packed[1] is None:     # (box.NULL is not nil: it shows as box.NULL)
                return None
            display = display_table(self.runtime, packed, 1, null=NULL)[0]
            return "-- Push\n" + self.wire_text(engine, engine._reply(values=[display]))
        return yaml_document(display_table(self.runtime, packed, 1)[0], PUSH_TAG)

    def push(self, conn: CoSocket, engine: ConsoleEngine, packed) -> Any:
        """A push in a console.listen session: to its client."""
        text = self.push_text(engine, packed)
        if text is None:
            return Multi((None, PUSH_NIL_ERROR))    # nothing written, as there
        try:
            conn.write(text.encode("utf-8", "surrogateescape"))
        except OSError:
            raise ClientError(ErrorCode.ER_SESSION_CLOSED) from None
        return True

    def push_local(self, session: Session, engine: ConsoleEngine, packed) -> Any:
        """A push in the local console's `repl` session: written to the session's
        fd (a blocking write, so in a helper thread); a failed write is returned as
        2.6.0's SocketError, not raised."""
        text = self.push_text(engine, packed)
        if text is None:
            return Multi((None, PUSH_NIL_ERROR))
        data = text.encode("utf-8", "surrogateescape")
        try:
            sys.stdout.flush()      # (what the front end printed goes first)
            while data:
                data = data[run_in_thread(self.sched, os.write, session.fd, data):]
        except OSError as exc:
            error = SocketError(f"write, called on fd {session.fd}")
            error.errno = exc.errno or 0
            return Multi((None, self.runtime.error_to_lua(error)))
        return True

    def enter_repl(self, engine: ConsoleEngine) -> None:
        """The calling fiber's session becomes the local console's, of type `repl`
        (2.6.0's console.start does so): made with fd 1 (standard output) when the
        fiber has none yet; an existing background session keeps its id and its
        console fd reads 0 (standard input, which a terminal also writes to), as in
        2.6.0. box.session.push() in it writes to that fd."""
        fiber = self.sched.current
        session = current_session(fiber)
        if session is None:
            session = Session(self.sched, "", ADMIN)
            session.fd = 1
            session.bind(fiber)
        elif session.type == "background":
            session.fd = 0
        session.type = "repl"
        session.console_push = lambda packed: self.push_local(session, engine, packed)
        engine.statement_storage[SESSION_KEY] = session     # (statements run in fibers)

    # ----------------------------------------------------------------- eval

    def engine_for(self, session: Session) -> ConsoleEngine:
        """The console state of a session (made on first use), as 2.6.0 keeps the
        output format per session."""
        engine = getattr(session, "console_engine", None)
        if engine is None:
            engine = self.new_engine(wire=True)
            engine.statement_storage[SESSION_KEY] = session
            session.console_engine = engine
        return engine

    def new_engine(self, wire: bool) -> ConsoleEngine:
        """A ConsoleEngine (call from a fiber). The evaluator's first import (~60 ms:
        the YAML renderer) runs in a helper thread, not to stall the fiber loop."""
        module = sys.modules.get("spindle.lua.console")
        if module is None:
            module = run_in_thread(self.sched, importlib.import_module, "spindle.lua.console")
        return module.ConsoleEngine(self.instance, wire=wire)

    def eval(self, line: Any) -> str:
        """console.eval(line): the line's reply text in the calling session's format."""
        engine = self.engine_for(self.instance.iproto.sessions.current())
        outer = self._console()
        if outer is not None and outer is not engine:
            engine.statement_storage[CONSOLE_KEY] = outer   # console.delimiter() in it
        reply = engine.execute(_text(line))
        if reply.quit:
            return None
        return self.wire_text(engine, reply)

    # -------------------------------------------------------------- connect

    def connect(self, uri: Any, timeout: Any = None) -> bool:
        """console.connect(uri): the calling console's lines go to the peer."""
        return self.connect_engine(self._console(), uri, timeout)

    def connect_engine(self, engine: ConsoleEngine, uri: Any, timeout: Any = None) -> bool:
        from .console_remote import open_remote
        fmt = engine.output if engine.output in ("yaml", "lua") else "yaml"
        try:
            remote = open_remote(self.sched, _text(uri), fmt,
                                 None if timeout is None else float(timeout))
        except BaseException:
            self._client_disconnected(engine)
            raise
        remote.on_lost = self._client_disconnected
        engine.remote = remote
        log.info("connected to %s:%s", remote.host, remote.port)
        return True

    def _client_disconnected(self, engine: ConsoleEngine) -> None:
        """console.on_client_disconnect(self): the hook may set self.running = false,
        which ends that console (`spindle connect` ends with its peer anyway)."""
        if getattr(engine, "end_with_remote", False):
            engine.stopped = True
        hook = self.hooks.get("on_client_disconnect")
        if hook is None:
            return
        state = self._state(engine)
        try:
            self.runtime.call(hook, state)
        except Exception as exc:   # noqa: BLE001 - 2.6.0 runs it under pcall
            log.verbose("console: on_client_disconnect: %s", exc)
        if state[b"running"] is False:
            engine.stopped = True

    def _state(self, engine: ConsoleEngine):
        state = getattr(engine, "lua_state", None)
        if state is None:
            state = engine.lua_state = self.runtime.table({"running": True,
                                                           "prompt": b"tarantool"})
        return state

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        """console.start(): the interactive console on standard input, in the
        calling fiber, until it ends (the on_start hook may connect it first)."""
        frontend = getattr(self.instance, "console_frontend", None)
        if frontend is None:
            raise BoxError("console.start(): no terminal front end in this process")
        self.started = True
        engine = self.new_engine(wire=False)
        storage = self.sched.current.storage
        saved = storage.get(CONSOLE_KEY)
        try:
            hook = self.hooks.get("on_start")
            if hook is not None:
                storage[CONSOLE_KEY] = engine
                state = self._state(engine)
                self.runtime.call(hook, state)
                if state[b"running"] is False:
                    return
            self.enter_repl(engine)
            frontend(engine)
        finally:
            self.started = False
            if saved is None:
                storage.pop(CONSOLE_KEY, None)
            else:
                storage[CONSOLE_KEY] = saved


def _parse_listen(text: str) -> tuple[str, str] | None:
    """(host, port) of a console.listen URI, ('unix/', path) for a unix socket,
    None where 2.6.0's uri.parse finds no service."""
    text = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://", "", text.strip())
    text = re.sub(r"^[^@/\[\]]*@", "", text)
    if text.isdigit():
        return "0.0.0.0", text
    if text.startswith("unix/:"):
        return "unix/", text[len("unix/:"):]
    if text.startswith("/") or text.startswith("./"):
        return "unix/", text
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            return None
    if not port:
        return None
    if not port.isdigit():
        try:
            port = str(socket.getservbyname(port, "tcp"))
        except OSError:
            return None
    return host or "0.0.0.0", port


def build(instance):
    module = ConsoleModule(instance)
    instance.console = module
    return module.lua_module()
