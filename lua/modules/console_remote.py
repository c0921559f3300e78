"""console.connect: a console whose lines go to another instance (Tarantool or Spindle).

Two kinds of peer, told apart by the greeting, as 2.6.0's console.connect does:

* a console port ("Lua console" greeting): the text protocol. The connection first
  says `\\set output <format>` and `require("console").delimiter("$EOF$")`, then
  sends each line followed by `$EOF$\\n` and reads the reply up to the end-of-stream
  marker of the peer's output format ('\\n...\\n' for YAML, ';' for Lua), skipping
  box.session.push() messages;
* a binary port: AUTH when the URI has credentials, then each line as an IPROTO EVAL
  of `return require("console").eval(...)`, whose result is the formatted text.

Everything runs in the calling fiber over core/fiber/coio.py sockets.
"""
from __future__ import annotations

import itertools
import re
from typing import Any

from spindle.core import log
from spindle.core.fiber import Latch
from spindle.core.fiber.coio import CoSocket, SocketError, connect
from spindle.core.iproto.auth import encode_auth_request
from spindle.core.iproto.constants import IprotoKey, IprotoType, is_error_type
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.greeting import GREETING_SIZE, PROTOCOL_BINARY, decode_greeting
from spindle.core.iproto.msgpack import pack, unpack
from spindle.core.iproto.replication import decode_error
from spindle.core.iproto.xrow import XRow, decode_frame_length, decode_row
from spindle.core.replication.uri import parse_uri
from spindle.lua.console import (NETBOX_DELIMITER, SWITCH_FORMATS, TABLE_FORMATS, Reply,
                                 switched_output)
from spindle.lua.serialize import NULL

from .console import LUA_EOS, YAML_EOS

PROTOCOL_CONSOLE = "Lua console"
PUSH_TAG = re.compile(r"%TAG !push! ")           # a YAML push document's tag line
EVAL_WRAPPER = 'return require("console").eval(...)'
_LUA_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\0": "\\0"}
_SET_OUTPUT = re.compile(r"\\(?:set|s)\s+(?:output|o)\s+(\S+)\s*\Z")


class RemoteConsole:
    """What the two kinds of peer share: the address, the state, execute()."""

    def __init__(self, sock: CoSocket, host: str, port: Any):
        self.sock = sock
        self.host = host
        self.port = port
        self.state = "active"
        self.error: str | None = None
        self.on_lost = None        # called with the engine when the peer is gone
        # one exchange at a time on the connection: a statement, or a completion
        # the REPL thread asked for while the user types
        self.latch = Latch(sock.sched)

    @property
    def prompt(self) -> str:
        return f"{self.host}:{self.port}"

    def eval(self, line: str, on_push=None) -> str | None:
        raise NotImplementedError

    def execute(self, engine, text: str) -> Any:
        """One line of the console that connected: the peer's answer, or (peer
        gone) the error in the console's own format, and the console local again."""
        if not engine.wire:
            local = self._local_command(engine, text)
            if local is not None:
                return local
        if self.state == "active":
            self.latch.lock()
            try:
                output = self.eval(text, getattr(engine, "push_output", None))
            except BoxError as exc:
                output, failure = None, exc.message
            except OSError as exc:
                self._fail(str(exc))
                output, failure = None, None
            else:
                failure = None
            finally:
                self.latch.unlock()
            if self.state == "active":
                if failure is not None:
                    return engine._reply(error=failure)
                return _reply(engine, output)
        error = self.error
        self.close()
        engine.remote = None
        if self.on_lost is not None:
            self.on_lost(engine)
        reply = engine._reply(error=error) if error else Reply(text="")
        if getattr(engine, "stopped", False):   # on_client_disconnect ended the console
            reply.quit = True
        return reply

    def _local_command(self, engine, text: str) -> Any:
        """Spindle's own console keeps \\watch and table output for itself:
        a watch re-sends its expression, a table is drawn from the YAML values."""
        stripped = text.strip()
        if stripped in ("\\q", "\\quit") and getattr(engine, "end_with_remote", False):
            return Reply(quit=True)   # `spindle connect`: leave (console.connect sends it)
        if stripped.startswith("\\watch"):
            return engine._watch(stripped)
        if stripped[1:] == "x" or stripped[1:] in SWITCH_FORMATS:
            # tt connect's \x: \set output to the format it picks (the peer's own
            # for yaml and lua, this console's for the tables)
            current = engine.output if engine.output in TABLE_FORMATS else \
                getattr(self, "peer_output", "yaml")
            return self.execute(engine, f"\\set output {switched_output(current, stripped[1:])}")
        match = _SET_OUTPUT.match(stripped)
        if match and match.group(1) in TABLE_FORMATS:
            reply = self.execute_plain(engine, "\\set output yaml")
            if reply.error is None:
                engine.output = match.group(1)
            return reply
        if match:
            engine.output = "yaml"    # back to the peer's own formats
            self.peer_output = match.group(1).partition(",")[0]
        return None

    def execute_plain(self, engine, text: str) -> Any:
        saved, engine.output = engine.output, "yaml"
        try:
            reply = self.execute(engine, text)
        finally:
            if engine.output == "yaml":
                engine.output = saved
        return reply

    def complete(self, text: str) -> list[tuple[str, str]]:
        """Completions of the word ending `text`, from the peer's own Lua state
        (2.6.0's console.completion_handler there), as (name, kind) pairs; none
        while a statement is in flight or when the peer does not answer in YAML."""
        if self.state != "active" or not self.latch.trylock():
            return []
        literal = '"' + "".join(_LUA_ESCAPES.get(ch, ch) for ch in text) + '"'
        try:
            output = self.eval('return require("console").completion_handler('
                               f"{literal}, 0, {len(text.encode())})")
        except (BoxError, OSError):
            return []
        finally:
            self.latch.unlock()
        import yaml
        try:
            found = _load_yaml(output)
        except yaml.YAMLError:
            return []
        if not (isinstance(found, list) and found and isinstance(found[0], list)):
            return []
        head = text[:len(text) - len(re.search(r"[A-Za-z_0-9]*\Z", text).group(0))]
        result = []
        for candidate in found[0][1:]:
            if isinstance(candidate, str) and candidate.startswith(head):
                name = candidate[len(head):]
                kind = "function" if name.endswith("(") else ""
                result.append((name.rstrip("("), kind))
        return result

    def _fail(self, message: str) -> None:
        self.state = "error"
        self.error = self.error or message

    def close(self) -> None:
        if self.state != "closed":
            self.state = "closed" if self.state == "active" else self.state
            try:
                self.sock.close()
            except OSError:
                pass


def _load_yaml(text: str) -> Any:
    """A reply document read back (libyaml's loader: the pure Python one takes tens
    of milliseconds on its first use, which a fiber must not hold the loop for)."""
    import yaml
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _reply(engine, output: str | None) -> Any:
    """The peer's text as a Reply; under table output also its values (the YAML
    document read back) for the shell to draw. No text at all is 2.6.0's
    format(false, nil): an error null."""
    if output is None:
        return engine._reply(error=NULL)
    reply = Reply(text=output)
    if engine.output in TABLE_FORMATS and output.startswith("---"):
        import yaml
        try:
            values = _load_yaml(output)
        except yaml.YAMLError:
            return reply
        if isinstance(values, list):
            if len(values) == 1 and isinstance(values[0], dict) and set(values[0]) == {"error"}:
                reply.error = values[0]["error"]
            else:
                reply.values, reply.layout = values, engine.output
    return reply


class TextRemote(RemoteConsole):
    """A console port, as 2.6.0's wrap_text_socket talks to one."""

    def __init__(self, sock: CoSocket, host: str, port: Any, fmt: str, timeout):
        super().__init__(sock, host, port)
        self.fmt = fmt
        self.eos = YAML_EOS if fmt == "yaml" else LUA_EOS
        self._buffer = bytearray()
        self.timeout = timeout
        try:
            for command in (f"\\set output {fmt}\n",
                            f'require("console").delimiter("{NETBOX_DELIMITER}")\n'):
                self._write(command)
                if self._read() is None:
                    break
        except (BoxError, OSError) as exc:
            self._fail(getattr(exc, "message", str(exc)))

    def _write(self, text: str) -> None:
        try:
            self.sock.write(text.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            self._fail(exc.strerror or str(exc))
            raise

    def _read(self) -> str | None:
        """The next reply, up to and with the end-of-stream marker; None (and the
        connection in error) when the peer closes first."""
        marker = self.eos.encode()
        while True:
            at = self._buffer.find(marker)
            if at >= 0:
                end = at + len(marker)
                text = bytes(self._buffer[:end]).decode("utf-8", "surrogateescape")
                del self._buffer[:end]
                return text
            chunk = self.sock.recv(65536)
            if not chunk:
                self._fail("Peer closed")
                return None
            self._buffer += chunk

    def eval(self, line: str, on_push=None) -> str:
        """The peer's reply to `line`; its box.session.push() messages before it go
        to `on_push` (a console socket's client gets them, as 2.6.0's print_f
        passes them on) or nowhere."""
        if self.state != "active":     # the set-up exchange already failed
            raise BoxError(self.error or "Peer closed")
        match = _SET_OUTPUT.match(line.strip())
        if match:   # the reply to it comes in the new format: follow its marker
            fmt = match.group(1).split(",", 1)[0]
            if fmt in ("yaml", "lua"):
                self.fmt, self.eos = fmt, (YAML_EOS if fmt == "yaml" else LUA_EOS)
        try:
            self._write(line + NETBOX_DELIMITER + "\n")
        except OSError:
            raise BoxError(self.error or "Peer closed") from None
        while True:
            text = self._read()
            if text is None:
                raise BoxError(self.error or "Peer closed")
            if ((self.fmt == "yaml" and PUSH_TAG.match(text))
                    or (self.fmt == "lua" and text.startswith("-- Push"))):
                if on_push is not None:     # box.session.push() output: not the reply
                    on_push(text)
                continue
            return text


class BinaryRemote(RemoteConsole):
    """A binary port: each line an IPROTO EVAL of the console's own evaluator."""

    def __init__(self, sock: CoSocket, host: str, port: Any, timeout):
        super().__init__(sock, host, port)
        self._syncs = itertools.count(1)
        self._buffer = bytearray()
        self.timeout = timeout

    def authenticate(self, user: str, password: str, salt: bytes) -> None:
        sync = next(self._syncs)
        self.sock.write(encode_auth_request(user, password, salt, sync), self.timeout)
        self._result(sync)

    def eval(self, line: str, on_push=None) -> str | None:
        # (a push of the peer's console.eval comes as an IPROTO chunk: skipped)
        sync = next(self._syncs)
        body = pack({IprotoKey.EXPR: EVAL_WRAPPER, IprotoKey.TUPLE: [line]})
        try:
            self.sock.write(XRow(type=IprotoType.EVAL, body=body).encode_frame(sync))
            data = self._result(sync)
        except OSError as exc:
            self._fail(exc.strerror or str(exc))
            raise BoxError(self.error) from None
        except SocketError as exc:
            self._fail(exc.message)
            raise
        text = data[0] if isinstance(data, list) and data else None
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        if not isinstance(text, str):
            return None   # the peer's console.eval said nothing (\\quit there)
        return text

    def _result(self, sync: int) -> Any:
        """The DATA of the reply to `sync` (pushes and stray replies skipped); an
        error reply is raised as the peer's error."""
        while True:
            row = self._read_row()
            if row.sync != sync:
                continue
            if is_error_type(row.type):
                raise decode_error(row)
            if row.type != IprotoType.OK:
                continue    # IPROTO_CHUNK: a box.session.push() of the request
            body = unpack(row.body) if row.body else {}
            return body.get(IprotoKey.DATA) if isinstance(body, dict) else None

    def _read_row(self) -> XRow:
        while True:
            framed = decode_frame_length(bytes(self._buffer[:9]))
            if framed is not None:
                length, start = framed
                if len(self._buffer) >= start + length:
                    packet = bytes(self._buffer[start:start + length])
                    del self._buffer[:start + length]
                    row, _ = decode_row(packet, 0, len(packet))
                    return row
            chunk = self.sock.recv(65536)
            if not chunk:
                self._fail("Peer closed")
                raise SocketError("Peer closed")
            self._buffer += chunk


def open_remote(sched, uri: Any, fmt: str = "yaml", timeout: float | None = None
                ) -> RemoteConsole:
    """Connect to `uri` ([user[:password]@]host:port, a port, unix/:path) and
    check it answers, as console.connect does; errors as 2.6.0 raises them."""
    text = str(uri)
    try:
        parsed = parse_uri(text)
    except ValueError:
        raise BoxError('Usage: console.connect("[login:password@][host:]port")') from None
    try:
        sock = connect(sched, parsed.host, parsed.port, timeout)
        greeting = decode_greeting(sock.readn(GREETING_SIZE, timeout))
    except (BoxError, OSError) as exc:
        log.verbose("console.connect(%s): %s", parsed.display(), exc)
        if "sock" in locals():
            sock.close()
        raise ClientError(ErrorCode.ER_NO_CONNECTION) from None
    host = parsed.host
    remote: RemoteConsole
    try:
        if greeting.protocol == PROTOCOL_CONSOLE:
            remote = TextRemote(sock, host, parsed.port, fmt, timeout)
        elif greeting.protocol == PROTOCOL_BINARY:
            remote = BinaryRemote(sock, host, parsed.port, timeout)
            if parsed.user:
                remote.authenticate(parsed.user, parsed.password or "", greeting.salt)
        else:
            raise ClientError(ErrorCode.ER_NO_CONNECTION)
        remote.eval("return true")     # the connection and the rights work
    except BaseException:
        sock.close()
        raise
    return remote
