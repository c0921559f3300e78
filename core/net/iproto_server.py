"""The IPROTO server: acceptor, connections, request fibers (Tarantool's iproto.cc).

One acceptor fiber per listening socket. Per connection:

* the **reader** fiber sends the greeting, then cuts packets out of the input
  (`readahead`-sized reads), decodes and validates each one and starts **one fiber
  per request**, so a connection pipelines: replies go out in completion order,
  matched by SYNC. PING is answered by the reader itself, and so is SELECT when the
  executor says its SELECT never yields (`nonblocking_select`): such a request
  completes before the next packet is looked at whichever fiber runs it, so running
  it in place only saves the fiber. At most `net_msg_max` requests of a connection
  run at once and input is not read while its output backlog is above a high
  watermark (backpressure instead of unbounded buffers);
* output: a reply is sent at once (one non-blocking send) when nothing else is
  queued; while the reader works through a batch of buffered packets, replies
  gather and go out in one send when the batch ends. Whatever the socket does not
  take at once is left to the **writer** fiber, which sends what has gathered in
  one write whenever the socket is writable again;
* JOIN / SUBSCRIBE / FETCH_SNAPSHOT / REGISTER wait for the requests in flight,
  then hand the socket (and the bytes already read) to the executor's replication
  handler through a `ReplicationStream`;
* AUTH is checked by authentication.py's authenticate() (box/authentication.cc).

Garbage never takes the server down: a bad packet gets an error reply (2.6.0's
code, message and sync) and the connection goes on; a broken length prefix or one
above the size limit gets an error reply and the connection is closed. A
connection's socket is closed only when every fiber using it has ended, by the
last one to leave, so no fiber ever waits on a closed descriptor.
"""
from __future__ import annotations

import enum
import os
import time
import traceback
import uuid as uuid_module
from typing import Any, Callable

from spindle.core import log
from spindle.core.box.stat import NET, NET_CONNECTIONS, NET_RECEIVED, NET_REQUESTS, NET_SENT
from spindle.core.fiber import Cond
from spindle.core.fiber.coio import CoSocket, SocketError, listen, listen_unix
from spindle.core.iproto.auth import generate_salt
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode, FiberIsCancelled, TimedOut
from spindle.core.iproto.greeting import encode_greeting
from spindle.core.iproto.xrow import XRow

from .authentication import authenticate
from .protocol import (
    PACKET_SIZE_MAX, READAHEAD_DEFAULT, FrameReader, FramingError, PacketError, Where,
    client_error, decode_packet, encode_chunk, encode_error, encode_ok, encode_result,
)
from .requests import (
    Auth, Delete, Insert, Ping, Replace, ReplicationRequest, Request, Select, Update, Upsert,
    decode_request, decode_request_fast, unknown_request_type,
)
from .session import Session, format_peer

_DML_KINDS = frozenset({Insert, Replace, Update, Upsert, Delete})
_SUBSCRIBE = int(IprotoType.SUBSCRIBE)     # (an enum member read per request is slow)

NET_MSG_MAX_DEFAULT = 768             # box.cfg.net_msg_max default
OUTPUT_HIGH_WATERMARK = 4 << 20       # stop reading input while this much output waits
LINGER_DEFAULT = 5.0                  # closing: how long to try to flush pending replies
_BATCH_MAX = 256                      # packets handled before the reader yields
UNIX_HOST = "unix/"                   # IprotoServer(host=UNIX_HOST, port=path): a unix socket


class ConnState(enum.Enum):
    OPEN = "open"          # reading requests
    CLOSING = "closing"    # no more input; in-flight requests finish, output drains
    CLOSED = "closed"      # socket closed


class ReplicationStream:
    """The connection as a replication handler sees it while it owns it."""

    def __init__(self, conn: IprotoConnection, request: ReplicationRequest):
        self._conn = conn
        self.request = request
        self.session = conn.session
        self.reader: FrameReader = conn.reader
        self.sock = conn.sock
        self.peer = conn.session.peer
        self.close_after = request.type == _SUBSCRIBE

    def read_row(self, timeout: float | None = None) -> XRow | None:
        """The next row from the peer (ACKs, SUBSCRIBE after JOIN); None on EOF."""
        return self.reader.read_row(timeout)

    def write(self, data: bytes, timeout: float | None = None) -> None:
        self.sock.write(data, timeout)

    def write_row(self, row: XRow, sync: int | None = None, timeout: float | None = None
                  ) -> None:
        self.sock.write(row.encode_frame(sync), timeout)

    def write_error(self, err: BaseException, sync: int | None = None,
                    timeout: float | None = None) -> None:
        sync = self.request.sync if sync is None else sync
        self.sock.write(encode_error(err, sync, self._conn.server.schema_version()), timeout)

    def spawn(self, fn: Callable, *args, name: str = "relay") -> Any:
        """A helper fiber bound to the connection: the socket stays open until it
        ends, and server.stop() cancels it."""
        return self._conn.server._spawn(fn, *args, name=name, conn=self._conn)

    def close(self) -> None:
        """Close the connection once the handler returns."""
        self.close_after = True


class IprotoConnection:
    def __init__(self, server: IprotoServer, sock, address: Any):
        self.server = server
        self.sched = server.sched
        self.sock = sock
        self.state = ConnState.OPEN
        peer = format_peer(address)
        if not peer and server.host == UNIX_HOST:
            peer = "unix/:(socket)"          # what 2.6.0 shows for a unix socket peer
        self.session = Session(self.sched, peer,
                               schema_version=server.schema_version, push=self._push)
        self.session.fd = sock.fileno()
        self.reader = FrameReader(sock, server.readahead, server.max_packet)
        self.fibers: set = set()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._writing = False
        self._in_batch = False          # the reader is going through buffered packets
        self._broken = False            # the socket failed: output is dropped
        self._discard_replies = False   # the stream broke: nothing more is sent
        self._writer = None
        self._reader_fiber = None
        self._wake_writer = Cond(self.sched)
        self._changed = Cond(self.sched)    # in-flight count / output state changed
        self.in_flight = 0
        self.requests_served = 0
        self._plain_dml = server.plain_dml

    def __repr__(self) -> str:
        return f"<IprotoConnection {self.session.id} {self.session.peer} {self.state.value}>"

    def start(self) -> None:
        self._reader_fiber = self.server._spawn(self._reader_main, name="iproto.reader",
                                                conn=self)

    # ------------------------------------------------------------------ input

    def _reader_main(self) -> None:
        try:
            if self._greet():
                self._serve_input()
        except FiberIsCancelled:
            self.abort()
            return
        except (OSError, SocketError, TimedOut, EOFError) as exc:
            log.verbose("iproto: %s: %s", self.session.peer, exc)
        except Exception:   # noqa: BLE001 - a bug must not take the server down
            self.server.internal_errors += 1
            log.error("iproto: connection %s failed:\n%s", self.session.peer,
                      traceback.format_exc().rstrip())
        self._close_gracefully()

    def _greet(self) -> bool:
        """The greeting, then box.session.on_connect (2.6.0's order: a refusing
        trigger's error follows the greeting as a reply with sync 0, then the
        connection is closed)."""
        salt = generate_salt()
        self.session.salt = salt
        self.sock.write(encode_greeting(self.server.instance_uuid(), salt))
        NET[NET_SENT] += 128
        on_connect = getattr(self.server.executor, "on_connect", None)
        if on_connect is not None:
            try:
                on_connect(self.session)
            except FiberIsCancelled:
                raise
            except Exception as exc:   # noqa: BLE001 - refused: tell the client why
                self.sock.write(encode_error(exc, 0, self.server.schema_version()))
                return False
        self._writer = self.server._spawn(self._writer_main, name="iproto.writer", conn=self)
        return True

    def _must_pause(self) -> bool:
        return (self.in_flight >= self.server.net_msg_max
                or self._out_bytes > self.server.output_high_watermark)

    def _serve_input(self) -> None:
        try:
            self._read_requests()
        finally:
            self._in_batch = False
            if self._out:
                self._wake_writer.signal()

    def _read_requests(self) -> None:
        reader = self.reader
        since_yield = 0
        while self.state is ConnState.OPEN and not self._broken:
            if self._must_pause():
                self._end_batch()
                while self._must_pause() and not self._broken:
                    self._changed.wait()
                since_yield = 0
            if since_yield >= _BATCH_MAX:
                # A socket that always has data never blocks the reader: give the
                # loop back after each batch, as 2.6.0's net thread does per event.
                self._end_batch()
                self.sched.yield_()
                since_yield = 0
            try:
                packet = reader.next_buffered()
            except FramingError as exc:
                # As 2.6.0: the error goes out at once and replies not yet sent
                # (also of requests still running) are dropped with the connection.
                self._out.clear()
                self._out_bytes = 0
                self._in_batch = False
                self._queue(encode_error(exc.error, 0, self.server.schema_version()))
                self._discard_replies = True
                return
            if packet is None:
                # No yield here: fill() parks the reader when the socket has nothing,
                # and a socket that always has data is cut into batches above (the
                # count goes on across fills). A yield here cost every request an
                # extra loop iteration.
                self._end_batch()
                if reader.readahead != self.server._readahead:
                    reader.readahead = self.server.readahead
                if not reader.fill():
                    return
                continue
            since_yield += 1
            self._in_batch = True
            if not self._dispatch(packet):
                return

    def _dispatch(self, raw: bytes) -> bool:
        """Start serving one packet; False when the connection must close."""
        net = NET                       # box.stat.net(): the packet and its length prefix
        net[NET_REQUESTS] += 1
        net[NET_RECEIVED] += len(raw) + 5
        sync = 0
        try:
            request = decode_request_fast(raw)
            if request is None:
                packet = decode_packet(raw)
                sync = packet.row.sync
                request = decode_request(packet)
        except PacketError as exc:
            self._queue(encode_error(exc.error, exc.sync, self.server.schema_version()))
            return True
        except BoxError as exc:
            self._queue(encode_error(exc, sync, self.server.schema_version()))
            return True
        except Exception as exc:   # noqa: BLE001 - a decoder bug: answer, keep serving
            self.server.internal_errors += 1
            log.error("iproto: cannot decode a packet:\n%s", traceback.format_exc().rstrip())
            self._queue(encode_error(exc, sync, self.server.schema_version()))
            return True
        kind = type(request)
        if kind is Select and self.server.nonblocking_select:
            self._queue(self._serve_in_place(request))
            return True
        if kind is Ping:
            self._queue(self._answer_ping(request))
            return True
        if isinstance(request, ReplicationRequest):
            self._end_batch()
            return self._replicate(request)
        if kind in _DML_KINDS and self._runs_alone(request):
            self._serve_dml_in_place(request)
            return True
        self.in_flight += 1
        self.server._spawn(self._process, request, name="iproto.request", conn=self)
        return True

    def _serve_in_place(self, request) -> bytes:
        """A request that never yields (so never changes the schema), served by the
        reader: its reply."""
        server = self.server
        row = request.row
        sync = row.sync
        self.requests_served += 1
        version = server.schema_version()
        try:
            self.session.bind_request(self.sched.current, sync)
            if row.schema_version and row.schema_version != version:
                server.check_schema(row.schema_version)
            return encode_result(sync, version, server.executor.execute(self.session, request))
        except BoxError as exc:
            return encode_error(exc, sync, server.schema_version())
        except Exception as exc:   # noqa: BLE001 - reported to the client, logged here
            log.error("iproto: request %s failed:\n%s", type(request).__name__,
                      traceback.format_exc().rstrip())
            return encode_error(exc, sync, server.schema_version())

    def _runs_alone(self, request) -> bool:
        """A DML request the reader may serve itself: the client sent nothing after
        it (so no later request of this connection waits behind it, and its WAL
        write can go out at once instead of waiting for a batch) and the executor
        says no Lua runs in it (so no code can tell which fiber serves it)."""
        plain_dml = self._plain_dml
        return (plain_dml is not None and not self.reader.buffered() and not self.in_flight
                and plain_dml(request))

    def _serve_dml_in_place(self, request) -> None:
        """Serve a DML request in the reader: earlier replies go out first (the
        commit yields), then the reply is sent at once, without a fiber of its own
        and without the loop iteration that resuming the reader would cost."""
        self._end_batch()
        sync = request.row.sync
        server = self.server
        try:
            self.session.bind_request(self.sched.current, sync)
            if request.row.schema_version:
                server.check_schema(request.row.schema_version)
            result = server.executor.execute(self.session, request)
            reply = encode_result(sync, server.schema_version(), result)
        except FiberIsCancelled:
            raise                       # the reader is stopped: the connection ends
        except Exception as exc:   # noqa: BLE001 - reported to the client
            reply = self._failure_reply(request, exc, sync)
        self.requests_served += 1
        self._queue(reply)

    def _answer_ping(self, request: Request) -> bytes:
        """A PING (it has the header fields alone)."""
        sync = request.sync
        try:
            self.server.check_schema(request.schema_version)
        except BoxError as exc:
            return encode_error(exc, sync, self.server.schema_version())
        return encode_ok(sync, self.server.schema_version())

    # --------------------------------------------------------------- requests

    def _process(self, request) -> None:
        server = self.server
        row = request.row
        sync = row.sync
        reply = None
        try:
            self.session.bind_request(self.sched.current, sync)
            try:
                if row.schema_version:
                    server.check_schema(row.schema_version)
                if isinstance(request, Auth):
                    authenticate(server.executor, self.session, request)
                    reply = encode_ok(sync, server.schema_version())
                else:
                    result = server.executor.execute(self.session, request)
                    reply = encode_result(sync, server.schema_version(), result)
            except FiberIsCancelled as exc:
                if self.state is ConnState.OPEN and not server.stopping:
                    reply = encode_error(exc, sync, server.schema_version())
            except Exception as exc:   # noqa: BLE001 - reported to the client
                reply = self._failure_reply(request, exc, sync)
            if reply is not None:
                self._queue(reply)
        finally:
            self.in_flight -= 1
            self.requests_served += 1
            self._changed.broadcast()

    def _failure_reply(self, request, exc: Exception, sync: int) -> bytes:
        """The error reply of a failed request; what is no box error is a bug: logged."""
        if not isinstance(exc, BoxError):
            log.error("iproto: request %s failed:\n%s", type(request).__name__,
                      traceback.format_exc().rstrip())
        return encode_error(exc, sync, self.server.schema_version())

    # ------------------------------------------------------------ replication

    def _replicate(self, request: ReplicationRequest) -> bool:
        handler = getattr(self.server.executor, "replication", None)
        if handler is None:
            self._queue(encode_error(unknown_request_type(request.type), request.sync,
                                     self.server.schema_version()))
            return True
        # The handler writes straight to the socket: let earlier replies out first.
        while (self.in_flight or self._out or self._writing) and not self._broken:
            self._changed.wait()
        if self._broken:
            return False
        stream = ReplicationStream(self, request)
        try:
            handler(self.session, request, stream)
        except FiberIsCancelled:
            raise
        except (OSError, SocketError, TimedOut, EOFError) as exc:
            log.verbose("iproto: replication %s: %s", self.session.peer, exc)
            return False
        except Exception as exc:   # noqa: BLE001 - the peer learns why
            if not isinstance(exc, BoxError):
                log.error("iproto: replication handler failed:\n%s", traceback.format_exc())
            try:
                stream.write_error(exc)
            except (OSError, SocketError, TimedOut):
                return False
        return not stream.close_after

    # ----------------------------------------------------------------- output

    def _queue(self, data: bytes) -> None:
        if self._broken or self._discard_replies or self.state is ConnState.CLOSED:
            return
        out = self._out
        if out or self._writing or self._in_batch:
            out.append(data)
            self._out_bytes += len(data)
            if not self._in_batch:
                self._wake_writer.signal()
            return
        self._send_now(data)

    def _end_batch(self) -> None:
        """The reader stops taking packets for a while: send what its batch gathered."""
        self._in_batch = False
        out = self._out
        if out and not self._writing and not self._broken:
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            self._out_bytes = 0
            self._send_now(data)

    def _send_now(self, data: bytes) -> None:
        """One non-blocking send; the writer fiber takes over what the socket leaves."""
        try:
            sent = self.sock.send_nowait(data)
        except OSError as exc:
            self._output_failed(exc)
            return
        NET[NET_SENT] += sent
        if sent < len(data):
            rest = data[sent:]
            self._out.insert(0, rest)
            self._out_bytes += len(rest)
            self._wake_writer.signal()
        self._changed.broadcast()

    def _output_failed(self, exc: BaseException) -> None:
        log.verbose("iproto: write to %s failed: %s", self.session.peer, exc)
        self._broken = True
        self._out.clear()
        self._out_bytes = 0
        self._changed.broadcast()

    def _push(self, sync: int, value: Any) -> None:
        if self.state is not ConnState.OPEN or self._broken:
            raise ClientError(ErrorCode.ER_SESSION_CLOSED)
        self._queue(encode_chunk(sync, self.server.schema_version(), value))

    def _writer_main(self) -> None:
        try:
            while True:
                while not self._out:
                    if self.state is not ConnState.OPEN and self.in_flight == 0:
                        return
                    self._wake_writer.wait()
                data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
                self._out.clear()
                self._out_bytes = 0
                self._writing = True
                try:
                    self.sock.write(data)
                    NET[NET_SENT] += len(data)
                finally:
                    self._writing = False
                    self._changed.broadcast()
        except FiberIsCancelled:
            pass
        except (OSError, SocketError, TimedOut) as exc:
            self._output_failed(exc)

    # ------------------------------------------------------------------ close

    def _close_gracefully(self) -> None:
        """Stop reading, let requests in flight finish and their replies out (for at
        most `linger` seconds), then let the writer go; the last fiber closes."""
        if self.state is ConnState.OPEN:
            self.state = ConnState.CLOSING
        self._wake_writer.broadcast()
        deadline = self.sched.clock() + self.server.linger
        try:
            while self.in_flight and not self._broken:
                self._changed.wait()
            while (self._out or self._writing) and not self._broken:
                remaining = deadline - self.sched.clock()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
        except FiberIsCancelled:
            pass
        writer = self._writer
        if writer is not None and writer.status != "dead":
            self.sched.cancel(writer)

    def abort(self) -> None:
        """Cancel every fiber of the connection (server stop)."""
        if self.state is ConnState.OPEN:
            self.state = ConnState.CLOSING
        me = self.sched.current
        for fiber in list(self.fibers):
            if fiber is not me:
                self.sched.cancel(fiber)

    def _fiber_left(self) -> None:
        if not self.fibers and self.state is not ConnState.CLOSED and (
                self.state is ConnState.CLOSING or self._reader_fiber is None
                or self._reader_fiber.status == "dead"):
            self._finalize()

    def _finalize(self) -> None:
        self.state = ConnState.CLOSED
        self.session.closed = True
        self._out.clear()
        try:
            self.sock.close()
        except OSError:
            pass
        self.server._connection_closed(self)


class IprotoServer:
    """Listens on host:port (0 = ephemeral) and serves IPROTO through `executor`
    (see spindle.core.net.executor for what it must provide)."""

    def __init__(self, sched, executor, host: str = "127.0.0.1", port: int = 0, *,
                 readahead: int = READAHEAD_DEFAULT, net_msg_max: int = NET_MSG_MAX_DEFAULT,
                 max_packet: int = PACKET_SIZE_MAX,
                 output_high_watermark: int = OUTPUT_HIGH_WATERMARK,
                 linger: float = LINGER_DEFAULT):
        self.sched = sched
        self.executor = executor
        self.host = host
        self.requested_port = port
        self.readahead = readahead
        self.net_msg_max = net_msg_max
        self.max_packet = max_packet
        self.output_high_watermark = output_high_watermark
        self.linger = linger
        self.connections: list[IprotoConnection] = []
        self.stopping = False
        self.fibers: set = set()
        self._fibers_changed = Cond(sched)
        self._listener: CoSocket | None = None
        self._acceptor = None
        self._fallback_uuid = str(uuid_module.uuid4())
        self.accepted = 0
        self.internal_errors = 0     # bugs caught below the executor (tests assert 0)
        # The executor promises its SELECT never yields: the reader serves it itself.
        self.nonblocking_select = bool(getattr(executor, "nonblocking_select", False))
        # plain_dml(request) -> True when a DML request runs no Lua (see executor.py)
        self.plain_dml: Callable[[Request], bool] | None = getattr(executor, "plain_dml", None)

    # ---------------------------------------------------------------- config

    @property
    def readahead(self) -> int:
        return self._readahead

    @readahead.setter
    def readahead(self, value: int) -> None:
        self._readahead = max(int(value), 128)

    def schema_version(self) -> int:
        provider = getattr(self.executor, "schema_version", None)
        if provider is None:
            return 0
        return int(provider() if callable(provider) else provider)

    def instance_uuid(self) -> str:
        value = getattr(self.executor, "instance_uuid", None)
        if callable(value):
            value = value()
        return str(value) if value else self._fallback_uuid

    def check_schema(self, requested: int) -> None:
        """A request naming a schema version other than the current one is refused
        (2.6.0 prints the two numbers swapped; so do we)."""
        if requested:
            current = self.schema_version()
            if requested != current:
                raise client_error(Where.IPROTO_SCHEMA_VERSION,
                                   ErrorCode.ER_WRONG_SCHEMA_VERSION, requested, current)

    # ------------------------------------------------------------- lifecycle

    @property
    def address(self) -> tuple[str, Any]:
        """(host, port), or (UNIX_HOST, path) for a unix socket."""
        if self._listener is None:
            raise RuntimeError("the server is not listening")
        if self.host == UNIX_HOST:
            return UNIX_HOST, self.requested_port
        name = self._listener.name()
        return name[0], name[1]

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def uri(self) -> str:
        host, port = self.address
        if host == UNIX_HOST:
            return f"unix/:{port}"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def start(self) -> IprotoServer:
        """Bind and start accepting (fiber context not needed)."""
        if self._listener is not None:
            raise RuntimeError("the server is already started")
        if self.host == UNIX_HOST:
            self._listener = listen_unix(self.sched, str(self.requested_port))
        else:
            self._listener = listen(self.sched, self.host, self.requested_port)
        self.stopping = False
        self._acceptor = self._spawn(self._accept_loop, name="iproto.acceptor")
        log.info("binary: bound to %s", self.uri)
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Close the listener and every connection; wait (from a fiber) until all the
        server's fibers have ended. False if some did not end within `timeout`."""
        me = self.sched.current
        if me is None:
            raise RuntimeError("IprotoServer.stop() must be called from a fiber")
        self.stopping = True
        if self._acceptor is not None and self._acceptor is not me:
            self.sched.cancel(self._acceptor)
        for conn in list(self.connections):
            conn.abort()
        deadline = self.sched.clock() + timeout
        clean = True
        while self.fibers - {me}:
            remaining = deadline - self.sched.clock()
            if remaining <= 0:
                clean = False
                log.warn("iproto: %d fibers did not stop in %.1f s",
                         len(self.fibers - {me}), timeout)
                break
            self._fibers_changed.wait(remaining)
        if self._listener is not None and (self._acceptor is None
                                           or self._acceptor.status == "dead"):
            self._close_listener()
        return clean

    def stop_listening(self, timeout: float = 5.0) -> None:
        """Close the listening socket only: connections already accepted go on being
        served (a box.cfg.listen change). `start()` may then listen again, on a
        new `host`/`requested_port`. Waits (from a fiber) for the acceptor to end."""
        acceptor, me = self._acceptor, self.sched.current
        if acceptor is not None and acceptor is not me and acceptor.status != "dead":
            self.sched.cancel(acceptor)
            deadline = self.sched.clock() + timeout
            while acceptor.status != "dead" and me is not None:
                remaining = deadline - self.sched.clock()
                if remaining <= 0:
                    break
                self._fibers_changed.wait(remaining)
        self._acceptor = None
        self._close_listener()

    def _accept_loop(self) -> None:
        try:
            self._accept_until_stopped()
        finally:
            # Cancelled by stop() or by the scheduler's shutdown: the port is free
            # as soon as the acceptor is gone.
            self._close_listener()

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        try:
            listener.close()
        except OSError:
            pass
        if self.host == UNIX_HOST:
            try:
                os.unlink(str(self.requested_port))
            except OSError:
                pass

    def _accept_until_stopped(self) -> None:
        while not self.stopping:
            listener = self._listener
            if listener is None:   # closed meanwhile (stop_listening): nothing to accept
                return
            try:
                sock, address = listener.accept()
            except FiberIsCancelled:
                return
            except OSError as exc:      # EMFILE and friends: back off, keep serving
                log.error("iproto: accept failed: %s", exc)
                try:
                    self.sched.sleep(0.1)
                except FiberIsCancelled:
                    return
                continue
            self.accepted += 1
            NET[NET_CONNECTIONS] += 1
            conn = IprotoConnection(self, sock, address)
            self.connections.append(conn)
            conn.start()

    # ---------------------------------------------------------------- fibers

    def _spawn(self, fn: Callable, *args, name: str, conn: IprotoConnection | None = None):
        """A fiber tracked by the server (and by `conn`): stop() waits for it, and the
        last fiber of a connection closes its socket."""
        started = self.sched.current is not None
        fiber = self.sched.spawn(self._tracked, fn, args, conn, name=name, start=started)
        if not started:     # runs at the next loop iteration: count it from now on
            self.fibers.add(fiber)
            if conn is not None:
                conn.fibers.add(fiber)
        return fiber

    def _tracked(self, fn: Callable, args: tuple, conn: IprotoConnection | None) -> None:
        me = self.sched.current
        self.fibers.add(me)
        if conn is not None:
            conn.fibers.add(me)
        try:
            fn(*args)
        finally:
            self.fibers.discard(me)
            if conn is not None:
                conn.fibers.discard(me)
                conn._fiber_left()
            self._fibers_changed.broadcast()

    def _connection_closed(self, conn: IprotoConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)
        on_disconnect = getattr(self.executor, "on_disconnect", None)
        if on_disconnect is not None:
            self._spawn(self._run_on_disconnect, on_disconnect, conn.session,
                        name="iproto.disconnect")

    @staticmethod
    def _run_on_disconnect(hook: Callable, session: Session) -> None:
        try:
            hook(session)
        except Exception as exc:   # noqa: BLE001 - triggers must not break the server
            log.error("iproto: on_disconnect failed: %s", exc)

    # ----------------------------------------------------------------- stats

    def sessions(self) -> list[Session]:
        return [conn.session for conn in self.connections]

    def stats(self) -> dict:
        return {"connections": len(self.connections), "fibers": len(self.fibers),
                "in_flight": sum(conn.in_flight for conn in self.connections),
                "accepted": self.accepted, "time": time.time()}
