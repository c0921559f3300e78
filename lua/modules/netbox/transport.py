"""The wire side of net.box: one IPROTO connection as 2.6.0's net_box.lua transport
runs it, on Spindle's fibers.

A worker fiber per connection (named `host:port (net.box)` as in 2.6.0) connects
(core/fiber/coio.connect), reads the greeting, authenticates (chap-sha1 of
core/iproto/auth.py), fetches the schema (_vspace, _vindex, _vcollation) and then
reads responses. The requests of net.box's API live on the Lua side
(net_box_wire.lua): their syncs, their frames, the futures in flight and the reading
of their usual replies, as 2.6.0's net_box.lua keeps them; here the socket, the
state machine, the handshake and the schema fetch (whose requests are this file's).
Requests are pipelined: a fiber that sends one appends its frame to the outgoing
batch, which goes out in one write at the next turn of the event loop, and parks
until its response is read (or the connection fails, or its timeout runs out). So a
request blocks only its fiber, and many fibers (or is_async futures) share one socket.

State machine (2.6.0's): initial -> auth -> fetch_schema <-> active; on an error
error_reconnect (when reconnect_after is set) or error; close() -> closed. Every
change is reported to the Lua side (net_box.lua) through its callback, which sets
conn.state and conn.error and runs the on_connect/on_disconnect triggers; a change
to error, error_reconnect or closed fails every request in flight with that error.

Request and response bodies are MsgPack strings the Lua side encodes and decodes
(with the msgpack module, as 2.6.0's net.box decodes with msgpack): here only the
headers the Lua side leaves (xrow.decode_row for any but the usual fixed-width one),
the error replies (MP_ERROR by core/iproto/msgpack.error_unpack) and the schema
version are read.
"""
from __future__ import annotations

import errno as errno_codes
import os
import struct
from typing import Any

from spindle.core import log
from spindle.core.fiber import Cond
from spindle.core.fiber.coio import CoSocket, SocketError, connect
from spindle.core.fiber.fiber import Fiber
from spindle.core.iproto.auth import encode_auth_body, scramble
from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.iproto.errors import (
    BoxError, ClientError, ErrorCode, FiberIsCancelled, TimedOut,
)
from spindle.core.iproto.greeting import GREETING_SIZE, decode_greeting
from spindle.core.iproto.msgpack import (
    MsgpackError, error_unpack, mp_next, pack, unpack_exact,
)
from spindle.core.iproto.xrow import decode_row
from spindle.core.net.protocol import PACKET_SIZE_MAX, FrameReader, PacketError

TIMEOUT_INFINITY = 500 * 365 * 86400.0      # net_box.lua's
DEFAULT_CONNECT_TIMEOUT = 10
VSPACE_ID, VINDEX_ID, VCOLLATION_ID = 281, 289, 277
ITER_ALL = 2
FINAL_STATES = frozenset(("closed", "error"))
_ERRNO_MASK = 0x7FFF
_TYPE_ERROR = int(IprotoType.TYPE_ERROR)
_REPLY_HEAD_MARK = b"\x83\x00\xce"
_REPLY_HEAD_SIZE = 23
_unpack_reply_head = struct.Struct(">I2xQ2xI").unpack_from
_pack_request_head = struct.Struct(">BIBBBBBI").pack
_unpack_u32 = struct.Struct(">I").unpack_from


class _WorkerDone(Exception):
    """The worker ends (a trigger failed while it reported an error)."""


class LinkError(Exception):
    """The connection is lost: (code, message) become the state's error."""

    def __init__(self, code: int, message: str | None):
        super().__init__(message)
        self.code, self.message = code, message


def state_error(code: int | None, message: str | None) -> BoxError:
    """box.error.new({code = code, reason = message}) of 2.6.0: a ClientError with
    that code and message (an empty one when there is none: a request before the
    connection got anywhere)."""
    return BoxError(message or "", code if code is not None else ErrorCode.ER_NO_CONNECTION)


def encode_request(request_type: int, sync: int, body: bytes) -> bytes:
    """A request frame: `ce <len>`, the header {TYPE, SYNC} with the sync as a u32
    (fixed widths, as xrow.frame() writes the length; every request type net.box
    sends is below 0x80), the body."""
    return _pack_request_head(0xCE, 9 + len(body), 0x82, 0, request_type, 1, 0xCE, sync) + body


class Request:
    """One request of the schema fetch in flight: a select of _vspace (part 1),
    _vindex (2) or _vcollation (3)."""

    __slots__ = ("sync", "schema_part")

    def __init__(self, sync: int, schema_part: int):
        self.sync = sync
        self.schema_part = schema_part


class Transport:
    def __init__(self, runtime, host: str, port: Any, user: str | None,
                 password: str | None, callback, wire, wire_fns):
        self.runtime = runtime
        self.sched = runtime.sched
        self.host, self.port = host, port
        self.user, self.password = user, password
        self.callback = callback             # Lua: callback(event, ...)
        # the Lua side's requests (net_box_wire.lua): its table and functions
        self.wire = wire
        wire[b"max_packet"] = PACKET_SIZE_MAX
        self._wire_replies, self._wire_dispatch = wire_fns[b"replies"], wire_fns[b"dispatch"]
        self._wire_take_out, self._wire_fail_all = wire_fns[b"take_out"], wire_fns[b"fail_all"]
        self._wire_new_sync = wire_fns[b"new_sync"]
        # by sync: the fiber (or list of fibers) parked on a request (wait_reply)
        self.waiters: dict[int, Any] = {}
        self.state = "initial"
        self.last_code: int | None = None
        self.last_error: str | None = None
        self.state_cond = Cond(self.sched)
        self.requests: dict[int, Request] = {}    # the schema fetch's
        self.worker: Fiber | None = None
        self.sock: CoSocket | None = None
        self.frames: FrameReader | None = None
        self._schema_version = 0
        self.peer_version_id = 0
        self._out: list[bytes] = []
        self._flush_queued = False
        self._writer: Fiber | None = None
        self._schema: dict[int, bytes] | None = None
        self._schema_syncs: set[int] = set()     # the selects of the fetch under way
        self._schema_seen: int | None = None
        self._schema_wanted = 0

    @property
    def schema_version(self) -> int:
        """The version of the schema installed (the Lua side's reading of replies
        stops at a reply of another one)."""
        return self._schema_version

    @schema_version.setter
    def schema_version(self, version: int) -> None:
        self._schema_version = version
        self.wire[b"schema_version"] = version

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if self.state != "initial" or self.worker is not None:
            return
        name = f"{self.host}:{self.port} (net.box)"
        self.worker = self.sched.spawn(self._worker_f, name=name)

    def stop(self) -> None:
        """close(): state closed (unless it already ended in error), the worker gone.
        From the worker itself (a trigger closing its connection) the worker is
        cancelled at once, as 2.6.0's worker_fiber:cancel() of the running fiber:
        what the trigger was part of goes no further."""
        me = self.sched.current
        if self.state not in FINAL_STATES:
            self._set_state("closed", ErrorCode.ER_NO_CONNECTION, "Connection closed")
        worker, self.worker = self.worker, None
        if worker is not None and worker.status != "dead":
            self.sched.cancel(worker)
        self._close_socket()
        if worker is me and worker is not None:
            raise FiberIsCancelled()

    def abort(self, message: str) -> None:
        """A Lua error in 2.6.0's worker (a request's `buffer` without :alloc()):
        its pcall around the protocol ends the connection in `error` with the
        message (no reconnect), the requests in flight failing with it."""
        if self.state not in FINAL_STATES:
            self._set_state("error", ErrorCode.ER_UNKNOWN, message)
        worker, self.worker = self.worker, None
        if worker is not None and worker.status != "dead":
            self.sched.cancel(worker)
        self._close_socket()

    def collected(self) -> Any:
        """The connection object was garbage-collected unclosed (2.6.0's gc hook):
        closed without a word to Lua (nobody is left to hear it), the worker
        cancelled (it closes the socket). Runs inside Lua's collector: never
        blocks, never raises. Returns the error the requests in flight end with
        (the gc hook hands it to net_box_wire.fail_all), or None."""
        try:
            failed = None
            if self.state not in FINAL_STATES:
                self.state, self.last_code = "closed", ErrorCode.ER_NO_CONNECTION
                self.last_error = "Connection closed"
                self.wire[b"state"] = b"closed"
                self.state_cond.broadcast()
                self.requests = {}
                failed = self.runtime.error_object(
                    state_error(self.last_code, self.last_error))
                self._wake_all()
            worker, self.worker = self.worker, None
            if worker is not None and worker.status != "dead":
                self.sched.cancel(worker)
            return failed
        except Exception as exc:   # noqa: BLE001 - nothing may escape a __gc
            log.error("net.box: %s", exc)
            return None

    def alive(self) -> bool:
        """2.6.0's `worker_fiber ~= nil`."""
        return self.worker is not None and self.worker.status != "dead"

    def wait_state(self, target, timeout: float | None) -> bool:
        """Wait until the state is `target` (a name, or a set of names) or final;
        whether it is the target."""
        targets = {target} if isinstance(target, str) else target
        deadline = _deadline(self.sched, timeout)
        while self.state not in targets and self.state not in FINAL_STATES:
            if not self.state_cond.wait(_remaining(self.sched, deadline)):
                break
        return self.state in targets

    def _set_state(self, state: str, code: int | None = None, message: str | None = None) -> None:
        """set_state(): the Lua side hears of it (and runs the triggers, whose error
        is raised here, as in 2.6.0, after the waiters were told)."""
        self.state, self.last_code, self.last_error = state, code, message
        self.wire[b"state"] = state.encode()
        try:
            self.runtime.call(self.callback, "state_changed", state, message)
        finally:
            self.state_cond.broadcast()
            if state in ("error", "error_reconnect", "closed"):
                self.requests = {}
                self._wire_fail_all(self.wire,
                                    self.runtime.error_object(state_error(code, message)))
                self._wake_all()

    def _fail(self, state: str, code: int | None, message: str | None) -> None:
        """The worker's move to error or error_reconnect; a trigger failing in it
        ends the worker, its error logged (as a 2.6.0 fiber's error is)."""
        try:
            self._set_state(state, code, message)
        except FiberIsCancelled:
            raise
        except Exception as exc:   # noqa: BLE001 - logged as a dying fiber's error
            log.error("%s", getattr(exc, "message", exc))
            self.state = "error"
            raise _WorkerDone() from None

    def _event(self, *args) -> Any:
        results = self.runtime.call(self.callback, *args)
        return results[0] if results else None

    # ---------------------------------------------------------- the worker

    def _worker_f(self) -> None:
        me = self.sched.current
        try:
            self._run()
        finally:
            self._close_socket()
            if self.worker is me:
                self.worker = None
            try:
                # (the Lua side's gc hook has nothing left to stop)
                self.runtime.invoke(self.callback, "worker_gone")
            except Exception as exc:   # noqa: BLE001 - the worker ends anyway
                log.error("net.box: %s", exc)
            # futures of a dead worker are ready (with NO_CONNECTION)
            self._wake_all()

    def _run(self) -> None:
        try:
            self._loop()
        except _WorkerDone:
            pass

    def _loop(self) -> None:
        while True:
            try:
                greeting = self._establish()
            except LinkError as failure:
                self._close_socket()        # (one that gave no greeting in time)
                timeout = self._reconnect_timeout()
                if timeout is None:
                    self._fail("error", ErrorCode.ER_NO_CONNECTION, failure.message)
                    return
                self._fail("error_reconnect", ErrorCode.ER_NO_CONNECTION, failure.message)
            else:
                try:
                    self._protocol(greeting)
                except LinkError as failure:            # error_sm()
                    self._close_socket()
                    if self.state != "closed":
                        if self._reconnect_timeout() is not None:
                            self._fail("error_reconnect", failure.code, failure.message)
                        else:
                            self._fail("error", failure.code, failure.message)
                except FiberIsCancelled:
                    raise
                except BoxError as exc:
                    # what cannot be read, or a trigger's error: 2.6.0's pcall around
                    # the protocol fails and the connection ends in `error`
                    self._close_socket()
                    if self.state not in FINAL_STATES:
                        self._fail("error", ErrorCode.ER_UNKNOWN, exc.message)
                self._close_socket()
                timeout = self._reconnect_timeout()
            if timeout is None or self.state != "error_reconnect":
                return
            self.sched.sleep(timeout)
            if self._reconnect_timeout() is None or self.state != "error_reconnect":
                return

    def _reconnect_timeout(self) -> float | None:
        value = self._event("reconnect_timeout")
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    def _establish(self):
        """establish_connection(): the socket and the greeting, in connect_timeout."""
        timeout = self._event("fetch_connect_timeout")
        timeout = DEFAULT_CONNECT_TIMEOUT if not isinstance(timeout, (int, float)) else timeout
        begin = self.sched.clock()
        try:
            sock = connect(self.sched, self.host, self.port, timeout)
        except TimedOut:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, os.strerror(errno_codes.ETIMEDOUT)) from None
        except SocketError as exc:
            code = getattr(exc, "errno", 0)
            text = os.strerror(code) if code else exc.message.removeprefix("getaddrinfo: ")
            raise LinkError(ErrorCode.ER_NO_CONNECTION, text) from None
        except OSError as exc:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, os.strerror(exc.errno or 0)) from None
        self.sock = sock
        self.frames = FrameReader(sock)
        try:
            data = sock.readn(GREETING_SIZE, max(0.0, timeout - (self.sched.clock() - begin)))
        except TimedOut:
            raise LinkError(ErrorCode.ER_NO_CONNECTION,
                            os.strerror(errno_codes.ETIMEDOUT)) from None
        except SocketError:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, "Invalid greeting") from None
        except OSError as exc:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, os.strerror(exc.errno or 0)) from None
        try:
            return decode_greeting(data)
        except ClientError:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, "Invalid greeting") from None

    def _close_socket(self) -> None:
        sock, self.sock = self.sock, None
        self._out.clear()
        if sock is not None:
            sock.close()
        writer = self._writer
        if writer is not None and writer is not self.sched.current:
            self.sched.cancel(writer)       # (parked on the socket just closed)

    def _protocol(self, greeting) -> None:
        self.peer_version_id = greeting.version_id
        refused = self._event("handshake", greeting.protocol, greeting.uuid,
                              greeting.version_id)
        if refused is not None:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, refused)
        self._set_state("auth")
        schema_version = 0
        if self.user is not None and self.password is not None:
            self._send(encode_request(IprotoType.AUTH, self._new_sync(),
                                      encode_auth_body(self.user,
                                                       scramble(greeting.salt, self.password))))
            status, _, schema_version, body = self._read_reply()
            if status != IprotoType.OK:
                raise LinkError(ErrorCode.ER_NO_CONNECTION, _error_24(body))
        self._set_state("fetch_schema")
        self._fetch_schema(schema_version)
        self._read_loop()

    def _read_loop(self) -> None:
        """The replies after the handshake. The whole usual replies to the Lua side's
        requests at the start of the buffer go to it in one call
        (net_box_wire.replies), which takes as many as it can; anything else is read
        here one packet at a time by the strict path."""
        frames = self.frames
        assert frames is not None
        max_packet, wire, replies = frames.max_packet, self.wire, self._wire_replies
        while True:
            buf, pos = frames.peek()
            available = len(buf) - pos
            if available and buf[pos] == 0xCE:
                if available < 5 or available - 5 < _unpack_u32(buf, pos + 1)[0] <= max_packet:
                    self._fill()            # (the first packet is not whole yet)
                    continue
                taken, woken = replies(wire, bytes(buf[pos:]))
                if woken is not None:
                    self._wake(woken)
                if taken:
                    frames.skip(taken)
                    continue
            elif not available:
                self._fill()
                continue
            self._dispatch(self._read_reply())

    def _fill(self) -> None:
        """Read more from the socket (the read loop's), as _read_reply reads."""
        frames = self.frames
        if self.sock is None or frames is None:       # closed under the worker
            raise LinkError(ErrorCode.ER_NO_CONNECTION, self.last_error or "Peer closed")
        try:
            more = frames.fill()
        except SocketError:
            more = False
        except OSError as exc:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, os.strerror(exc.errno or 0)) from None
        if not more:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, "Peer closed")

    def _read_reply(self) -> tuple[int, int, int, bytes | None]:
        """The next reply: (status, sync, schema version, body)."""
        frames = self.frames
        if self.sock is None or frames is None:       # closed under the worker
            raise LinkError(ErrorCode.ER_NO_CONNECTION, self.last_error or "Peer closed")
        try:
            packet = frames.read_packet()
        except (EOFError, SocketError):
            packet = None
        except PacketError as exc:
            raise exc.error from None
        except OSError as exc:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, os.strerror(exc.errno or 0)) from None
        if packet is None:
            raise LinkError(ErrorCode.ER_NO_CONNECTION, "Peer closed")
        if packet[:3] == _REPLY_HEAD_MARK and packet[7:9] == b"\x01\xcf" \
                and packet[17:19] == b"\x05\xce":
            # the header every 2.6.0 (and Spindle) reply has: 83 00 ce.. 01 cf.. 05 ce..
            status, sync, version = _unpack_reply_head(packet, 3)
            return status, sync, version, packet[_REPLY_HEAD_SIZE:] or None
        row = decode_row(packet, 0, len(packet), exact=True)[0]
        return row.type, row.sync, row.schema_version, row.body

    # ------------------------------------------------------------ responses

    def _dispatch(self, reply: tuple[int, int, int, bytes | None]) -> None:
        status, sync, version, body = reply
        request = self.requests.pop(sync, None)
        if request is not None:
            if status != IprotoType.CHUNK:      # (a select pushes nothing)
                self._schema_reply(request, version, body,
                                   reply_error(status, body) if status & _TYPE_ERROR else None)
        else:
            # one of the Lua side's requests (a push too), or nobody's
            woken = self._wire_dispatch(self.wire, status, sync, body)
            if woken is not None:
                self._wake(woken)
        if self.state == "active" and version > 0 and version != self.schema_version:
            # The schema changed: load the new one (requests keep flowing meanwhile).
            self._set_state("fetch_schema")
            self._fetch_schema(0)

    def _fetch_schema(self, version: int) -> None:
        """Ask for _vspace, _vindex and (2.2.1+) _vcollation; the replies come to
        _schema_reply through the read loop."""
        if not self._event("will_fetch_schema"):
            self.schema_version = version
            self._set_state("active")
            return
        self._schema = {}
        self._schema_seen = None
        self._schema_syncs = set()
        parts = [VSPACE_ID, VINDEX_ID]
        if self.peer_version_id >= (2 << 16 | 2 << 8 | 1):
            parts.append(VCOLLATION_ID)
        for part, space_id in enumerate(parts, 1):
            sync = self._new_sync()
            self.requests[sync] = Request(sync, schema_part=part)
            self._schema_syncs.add(sync)
            self._send(encode_request(IprotoType.SELECT, sync, _select_all_body(space_id)))
        self._schema_wanted = len(parts)

    def _schema_reply(self, request: Request, version: int, body: bytes | None,
                      error: BoxError | None) -> None:
        schema = self._schema
        if schema is None or request.sync not in self._schema_syncs:
            return      # a reply to a fetch started over since
        if error is not None:
            if request.schema_part == 3 and error.code == ErrorCode.ER_NO_SUCH_SPACE:
                self._schema_wanted -= 1        # a peer without _vcollation
            else:
                raise LinkError(ErrorCode.ER_NO_CONNECTION, _error_24(body))
        else:
            if self._schema_seen is None:
                self._schema_seen = version
            elif self._schema_seen != version:
                # the schema changed while it was fetched: start over
                self._fetch_schema(0)
                return
            schema[request.schema_part] = body or b"\x80"
        if len(schema) == self._schema_wanted:
            self._schema = None
            version = self._schema_seen or 0
            self._event("did_fetch_schema", version, schema[1], schema[2], schema.get(3))
            self.schema_version = version
            self._set_state("active")

    # -------------------------------------------------------------- requests

    def _new_sync(self) -> int:
        """The next sync of the connection (the Lua side keeps the counter)."""
        return self._wire_new_sync(self.wire)

    def send_now(self, data: bytes) -> None:
        """A request whose fiber waits for it at once, with nothing else of the Lua
        side in flight or queued: written at once when nothing of this side is
        either (else with the batch of the next loop turn)."""
        sock = self.sock
        if not self.requests and not self._out and self._writer is None \
                and sock is not None:
            try:
                sent = sock.send_nowait(data)
            except OSError:
                return      # the reader sees the broken connection
            if sent == len(data):
                return
            data = data[sent:]
        self._send(data)

    def want_flush(self) -> None:
        """The Lua side queued the first frame of a batch (take_out gives them)."""
        if not self._flush_queued:
            self._flush_queued = True
            self.sched.call_soon(self._flush)

    def wait_reply(self, sync, timeout) -> bool:
        """Park until the Lua side's request `sync` is answered or pushed to, the
        connection changes to a failed state, or `timeout` runs out; whether the
        worker still runs (if not, no answer will come). The parked fiber is kept by
        sync (a list of them when several wait on one future): a wait of every
        synchronous call, so no Cond object for it."""
        worker = self.worker
        if worker is None or worker.status == "dead":
            return False
        sched = self.sched
        me = sched.current
        me.testcancel()
        waiters = self.waiters
        parked = waiters.get(sync)
        if parked is None:
            waiters[sync] = me
        elif type(parked) is list:
            parked.append(me)
        else:
            waiters[sync] = [parked, me]
        try:
            sched.wait(None if timeout > _ENDLESS else timeout)
        finally:
            parked = waiters.get(sync)
            if parked is me:
                del waiters[sync]
            elif type(parked) is list and me in parked:
                parked.remove(me)
                if not parked:
                    del waiters[sync]
        me.testcancel()
        worker = self.worker
        return worker is not None and worker.status != "dead"

    def _wake(self, woken: bytes) -> None:
        """Wake the fibers parked on the requests the Lua side named (syncs, as a
        string of numbers)."""
        waiters, wakeup = self.waiters, self.sched.wakeup
        for sync in woken.split():
            parked = waiters.pop(int(sync), None)
            if parked is None:
                continue
            if type(parked) is list:
                for fiber in parked:
                    wakeup(fiber)
            else:
                wakeup(parked)

    def _wake_all(self) -> None:
        waiters, self.waiters = self.waiters, {}
        for parked in waiters.values():
            for fiber in parked if type(parked) is list else (parked,):
                self.sched.wakeup(fiber)

    # -------------------------------------------------------------- sending

    def _send(self, data: bytes) -> None:
        """Queue a frame; the queue goes out in one write at the next loop turn."""
        self._out.append(data)
        if not self._flush_queued:
            self._flush_queued = True
            self.sched.call_soon(self._flush)

    def _take_out(self) -> bytes:
        """Everything queued, this side's frames and the Lua side's, as one string."""
        lua = self._wire_take_out(self.wire)
        out = self._out
        if lua is not None:
            if not out:
                return lua
            out.append(lua)
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        return data

    def _flush(self) -> None:
        """(On the hub, at the end of the loop turn the batch began in.)"""
        self._flush_queued = False
        self.flush()

    def flush(self) -> None:
        """Write what is queued and the socket takes now; the rest is the writer
        fiber's, which waits until the socket can take more."""
        sock = self.sock
        if sock is None or self._writer is not None:
            return      # (a writer at work takes what is queued after its write)
        data = self._take_out()
        if not data:
            return
        try:
            sent = sock.send_nowait(data)
        except OSError:
            return      # the reader sees the broken connection and fails everyone
        if sent < len(data):
            self._out.append(data[sent:])
            self._writer = self.sched.spawn(self._writer_f, sock, name="net.box writer")

    def _writer_f(self, sock: CoSocket) -> None:
        try:
            while self.sock is sock:
                data = self._take_out()
                if not data:
                    break
                try:
                    sock.write(data)
                except (OSError, BoxError):
                    return
        finally:
            self._writer = None


# ------------------------------------------------------------------ helpers

_ENDLESS = TIMEOUT_INFINITY / 2


def endless(timeout: float | None) -> bool:
    """No timeout at all: None, or about TIMEOUT_INFINITY (what is left of it after
    a while too), which the poller would refuse as a wait."""
    return timeout is None or timeout > _ENDLESS


def _deadline(sched, timeout: float | None) -> float | None:
    if timeout is None or endless(timeout):
        return None
    return sched.clock() + max(0.0, timeout)


def _remaining(sched, deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - sched.clock())


def _select_all_body(space_id: int) -> bytes:
    # {SPACE_ID, INDEX_ID 0, ITERATOR ALL, OFFSET 0, LIMIT 0xFFFFFFFF, KEY []}
    return pack({IprotoKey.SPACE_ID: space_id, IprotoKey.INDEX_ID: 0,
                 IprotoKey.ITERATOR: ITER_ALL, IprotoKey.OFFSET: 0,
                 IprotoKey.LIMIT: 0xFFFFFFFF, IprotoKey.KEY: []})


def _body_values(body: bytes | None) -> dict[int, tuple[int, int]]:
    """Where each top-level key's value lies in a reply body: key -> (start, end)."""
    if not body or not 0x80 <= body[0] <= 0x8F and body[0] not in (0xDE, 0xDF):
        return {}
    try:
        first = body[0]
        if first <= 0x8F:
            count, pos = first & 0x0F, 1
        elif first == 0xDE:
            count, pos = int.from_bytes(body[1:3], "big"), 3
        else:
            count, pos = int.from_bytes(body[1:5], "big"), 5
        found = {}
        for _ in range(count):
            key, pos = unpack_exact(body, pos, len(body))
            end = mp_next(body, pos, len(body))
            if type(key) is int:
                found[key] = (pos, end)
            pos = end
        return found
    except (MsgpackError, ValueError, IndexError):
        return {}


def _error_24(body: bytes | None) -> str | None:
    where = _body_values(body).get(IprotoKey.ERROR_24)
    if where is None:
        return None
    try:
        value, _ = unpack_exact(body, where[0], where[1])
    except MsgpackError:
        return None
    return value if isinstance(value, str) else None


def reply_error(status: int, body: bytes | None) -> BoxError:
    """The error of an error reply: its MP_ERROR stack (IPROTO_ERROR) when it has
    one, else a ClientError of its code and ERROR_24 message."""
    where = _body_values(body).get(IprotoKey.ERROR)
    if where is not None and body is not None:
        error = error_unpack(body[where[0]:where[1]])
        if error is not None:
            return error
    code = status & _ERRNO_MASK
    message = _error_24(body)
    return ClientError(code) if message is None else BoxError(message, code)
