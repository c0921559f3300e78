"""Cooperative sockets (Tarantool's coio): blocking calls that park only the fiber.

Every call takes an optional timeout; when it runs out the call raises TimedOut and the
socket stays usable. Name resolution and other blocking work go to a worker thread (a
small persistent pool) through `run_in_thread`, whose completion comes back through
the scheduler's wakeup.
"""
from __future__ import annotations

import atexit
import errno
import ipaddress
import os
import queue
import selectors
import socket
import stat
import threading
from typing import Any, Callable

from spindle.core import log
from spindle.core.iproto.errors import BoxError, TimedOut

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class SocketError(BoxError):
    type = "SocketError"


class CoSocket:
    def __init__(self, sched, sock: socket.socket):
        sock.setblocking(False)
        self.sched = sched
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def _deadline(self, timeout: float | None) -> float | None:
        return None if timeout is None else self.sched.clock() + timeout

    def _wait(self, event: int, deadline: float | None) -> None:
        remaining = None if deadline is None else deadline - self.sched.clock()
        if remaining is not None and remaining <= 0:
            raise TimedOut()
        if not self.sched.wait_io(self.sock, event, remaining):
            self.sched.current.testcancel()
            raise TimedOut()
        self.sched.current.testcancel()

    def recv(self, size: int = 65536, timeout: float | None = None,
             wait_first: bool = False) -> bytes:
        """Read what is available (at least one byte); b'' means the peer closed.
        `wait_first`: the caller drained the socket a moment ago, so wait for it to
        become readable before trying (saves a recv() that would only say EAGAIN)."""
        deadline = None if timeout is None else self.sched.clock() + timeout
        if wait_first and (deadline is None or deadline > self.sched.clock()):
            self._wait(_READ, deadline)
        sock = self.sock
        while True:
            try:
                return sock.recv(size)
            except (BlockingIOError, InterruptedError):
                self._wait(_READ, deadline)

    def readn(self, size: int, timeout: float | None = None) -> bytes:
        """Read exactly `size` bytes; raises SocketError if the peer closes first."""
        deadline = self._deadline(timeout)
        chunks, need = [], size
        while need:
            try:
                chunk = self.sock.recv(need)
            except (BlockingIOError, InterruptedError):
                self._wait(_READ, deadline)
                continue
            if not chunk:
                raise SocketError("unexpected EOF when reading from socket")
            chunks.append(chunk)
            need -= len(chunk)
        return b"".join(chunks)

    def send_nowait(self, data) -> int:
        """One non-blocking send: how many bytes the socket took (0 if it is full)."""
        try:
            return self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    def write(self, data: bytes, timeout: float | None = None) -> None:
        deadline = self._deadline(timeout)
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                self._wait(_WRITE, deadline)
                continue
            view = view[sent:]

    def accept(self, timeout: float | None = None) -> tuple[CoSocket, Any]:
        deadline = self._deadline(timeout)
        while True:
            try:
                conn, peer = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                self._wait(_READ, deadline)
                continue
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return CoSocket(self.sched, conn), peer

    def peer(self) -> Any:
        return self.sock.getpeername()

    def name(self) -> Any:
        return self.sock.getsockname()

    def close(self) -> None:
        self.sched.forget_io(self.sock)
        self.sock.close()


def connect(sched, host: str, port: int | str, timeout: float | None = None) -> CoSocket:
    """coio_connect: the one way a client connection is opened (the applier's to its
    master, and any other). `host` "unix/" (a URI's `unix/:path`) means `port` is
    the path of a unix socket; a literal IP address is used as it is; a name is
    resolved in a thread (getaddrinfo blocks) and its addresses tried in turn.
    `timeout` covers resolution and connect together (TimedOut when it runs out).

    A refusal is a SocketError worded as 2.6.0's ("connect, called on fd N, aka
    ADDR") with the errno set, which box.info's upstream system_message shows;
    an unknown name is one saying "getaddrinfo: <reason>"."""
    deadline = None if timeout is None else sched.clock() + timeout
    targets: list[tuple[int, Any]]
    if host == "unix/":
        targets = [(socket.AF_UNIX, port)]
    else:
        try:
            ip = ipaddress.ip_address(host)
            targets = [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (host, port))]
        except ValueError:
            try:
                infos = run_in_thread(sched, socket.getaddrinfo, host, port, 0,
                                      socket.SOCK_STREAM, timeout=timeout)
            except socket.gaierror as exc:
                raise SocketError(f"getaddrinfo: {exc.strerror}") from None
            targets = [(info[0], info[4]) for info in infos]
    error: SocketError | None = None
    for family, address in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        co = CoSocket(sched, sock)
        try:
            err = sock.connect_ex(address)
            if err in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
                remaining = None if deadline is None else max(deadline - sched.clock(), 0)
                if not sched.wait_io(sock, _WRITE, remaining):
                    sched.current.testcancel()
                    raise TimedOut()
                sched.current.testcancel()
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                try:
                    local = address_text(sock.getsockname())
                except OSError:
                    local = "unknown"
                error = SocketError(f"connect, called on fd {sock.fileno()}, aka {local}")
                error.errno = err
                log.verbose("connect to %s: %s", address, os.strerror(err))
                co.close()
                continue
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return co
        except BaseException:
            co.close()
            raise
    raise error or SocketError(f"cannot resolve {host}")


def address_text(address: Any) -> str:
    """A socket address as 2.6.0 prints it: `host:port` or `unix/:path`."""
    if isinstance(address, tuple):
        return f"{address[0]}:{address[1]}"
    return f"unix/:{address}" if address else "unix/:"


def listen(sched, host: str, port: int, backlog: int = 1024) -> CoSocket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return CoSocket(sched, sock)


def listen_unix(sched, path: str, backlog: int = 1024) -> CoSocket:
    """Listen on a unix socket; a stale socket file left by a dead process is
    replaced (a live listener makes bind fail, as it should)."""
    try:
        if stat.S_ISSOCK(os.stat(path).st_mode):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                if probe.connect_ex(path) != 0:
                    os.unlink(path)
            finally:
                probe.close()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return CoSocket(sched, sock)


class WorkerPool:
    """The helper threads of run_in_thread, as 2.6.0's coio keeps a pool of workers:
    starting a thread per call cost more than a small disk call itself.

    Threads are started on demand, when every thread is busy, so a call never waits
    behind another (one blocked on a FIFO, a slow DNS lookup): no deadlock, no queue.
    A thread that finishes goes idle, up to `keep` idle ones; past that it ends, so
    a burst leaves `keep` threads behind, not the burst's. A thread counts itself
    idle before it hands the result over, so the caller's next call finds it free.
    The threads are daemons (a call still blocked does not hold the process at
    exit); at exit the idle ones are told to end, and a child made by fork starts
    with none."""

    def __init__(self, keep: int = 4):
        self.keep = keep
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = 0          # threads waiting for a task, none of them promised one
        self._threads = 0

    def submit(self, fn: Callable, args: tuple, done: Callable[[Any, Any], None]) -> None:
        """Run fn(*args) in a worker, then done(result, None) or done(None, exc)
        from that worker (`done` must not raise)."""
        with self._lock:
            start = self._idle == 0
            if start:
                self._threads += 1
            else:
                self._idle -= 1     # this task is that thread's
        self._tasks.put((fn, args, done))
        if start:
            threading.Thread(target=self._work, name="coio", daemon=True).start()

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            fn, args, done = task
            try:
                result, error = fn(*args), None
            except BaseException as exc:   # noqa: BLE001 - carried back to the caller
                result, error = None, exc
            with self._lock:
                retire = self._idle >= self.keep
                if retire:
                    self._threads -= 1
                else:
                    self._idle += 1
            done(result, error)
            if retire:
                return

    def shutdown(self) -> None:
        """End the idle threads (the busy ones end with the process)."""
        with self._lock:
            idle, self._idle = self._idle, 0
            self._threads -= idle
        for _ in range(idle):
            self._tasks.put(None)

    def _forget(self) -> None:
        # (in a forked child: the parent's threads do not exist there)
        self._lock = threading.Lock()
        self._tasks = queue.SimpleQueue()
        self._idle = self._threads = 0


_POOL = WorkerPool()
atexit.register(_POOL.shutdown)
os.register_at_fork(after_in_child=_POOL._forget)


def run_in_thread(sched, fn: Callable, *args, timeout: float | None = None) -> Any:
    """Run blocking `fn(*args)` in a helper thread (of the pool) while the calling
    fiber waits; the other fibers run meanwhile.

    On timeout the call is left to finish on its own and its result is dropped."""
    me = sched.current
    outcome: dict[str, Any] = {}

    def finished(result, error):
        outcome["result"], outcome["error"] = result, error
        sched.wakeup(me)

    def deliver(result, error):     # (in the worker)
        try:
            sched.call_soon_threadsafe(finished, result, error)
        except Exception:   # noqa: BLE001 - the hub is gone (exit): nobody waits
            pass

    _POOL.submit(fn, args, deliver)
    deadline = None if timeout is None else sched.clock() + timeout
    while "error" not in outcome:
        remaining = None if deadline is None else deadline - sched.clock()
        if remaining is not None and remaining <= 0:
            raise TimedOut()
        sched.wait(remaining)
        me.testcancel()
    if outcome["error"] is not None:
        raise outcome["error"]
    return outcome["result"]
