"""A TCP proxy in the test process, between two nodes of a replica set.

A replica configured with `replication = {proxy.uri}` reaches its master only through
the proxy, and the test breaks that link at will:

* `cut()`   closes both sides of every connection and refuses new ones (accepted and
            closed at once: the peer sees a reset) until `heal()`;
* `stall()` stops forwarding but keeps every socket open: bytes pile up in the kernel
            buffers, the sender blocks, and the receiver sees silence — what a hung
            peer or a black-holed route looks like (heartbeats stop, timeouts fire);
* `delay(seconds)` forwards each chunk that much later than it arrived, in order;
* `heal()`  forwards everything again at once (what a stall held goes on).

One thread per proxy runs a `selectors` loop; the controls only set the mode under a
lock and wake the loop through a socket pair, so a control returns at once and the
loop applies it before it forwards anything more. The proxy counts what it did
(`stats`) so a scenario can tell that a fault really met traffic.
"""
from __future__ import annotations

import collections
import selectors
import socket
import struct
import threading
import time

CHUNK = 64 * 1024
# A delayed direction stops reading past this many queued bytes: the sender feels
# back-pressure instead of the test process holding the whole stream.
QUEUE_LIMIT = 4 * 1024 * 1024
CONNECT_TIMEOUT = 2.0

NORMAL, CUT, STALL = "normal", "cut", "stall"


class _Direction:
    """One way of one connection: bytes read from `src`, due to be written to `dst`."""

    __slots__ = ("src", "dst", "queue", "queued", "eof")

    def __init__(self, src: socket.socket, dst: socket.socket):
        self.src = src
        self.dst = dst
        self.queue: collections.deque[tuple[float, memoryview]] = collections.deque()
        self.queued = 0
        self.eof = False           # src closed its side: shut dst's once the queue drains


class _Link:
    """One proxied connection: the client's socket and ours to the target."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client = client
        self.upstream = upstream
        self.ways = (_Direction(client, upstream), _Direction(upstream, client))
        self.closed = False

    def sockets(self) -> tuple[socket.socket, socket.socket]:
        return self.client, self.upstream


class Proxy:
    """Listens on an ephemeral 127.0.0.1 port and forwards to `target_port`."""

    def __init__(self, target_port: int, name: str = "proxy", target_host: str = "127.0.0.1"):
        self.name = name
        self.target = (target_host, target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._mode = NORMAL
        self._delay = 0.0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._links: list[_Link] = []
        self._stopping = False
        self.stats = collections.Counter()
        self._thread = threading.Thread(target=self._run, name=f"proxy-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------- controls

    @property
    def uri(self) -> str:
        return f"127.0.0.1:{self.port}"

    def rep_uri(self, user: str, password: str) -> str:
        return f"{user}:{password}@127.0.0.1:{self.port}"

    @property
    def mode(self) -> str:
        with self._lock:
            return self._mode

    def cut(self) -> None:
        self._set(CUT)

    def stall(self) -> None:
        self._set(STALL)

    def delay(self, seconds: float) -> None:
        with self._lock:
            self._delay = max(0.0, seconds)
        self._wake()

    def heal(self) -> None:
        """Back to plain forwarding: no cut, no stall, no delay."""
        with self._lock:
            self._mode = NORMAL
            self._delay = 0.0
        self._wake()

    def close(self) -> None:
        self._stopping = True
        self._wake()
        self._thread.join(10)
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _set(self, mode: str) -> None:
        with self._lock:
            self._mode = mode
        self.stats[mode] += 1
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:           # closed, or the pair's buffer is full: awake anyway
            pass

    # ----------------------------------------------------------------- loop

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            while not self._stopping:
                with self._lock:
                    mode, delay = self._mode, self._delay
                if mode == CUT:
                    self._close_all()
                now = time.monotonic()
                timeout = self._register(sel, mode, now)
                for key, events in sel.select(timeout):
                    self._ready(key, events, mode, delay)
                self._flush(mode, time.monotonic())
                self._links = [link for link in self._links if not link.closed]
        finally:
            self._close_all()
            sel.close()

    def _register(self, sel: selectors.BaseSelector, mode: str, now: float) -> float:
        """(Re)build the selector for this turn; the time until the next chunk is due."""
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
        sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        sel.register(self._listener, selectors.EVENT_READ, ("accept", None))
        timeout = 0.2
        if mode == STALL:
            return timeout
        wanted: dict[socket.socket, int] = {}
        for link in self._links:
            for way in link.ways:
                if not way.eof and way.queued < QUEUE_LIMIT:
                    wanted[way.src] = wanted.get(way.src, 0) | selectors.EVENT_READ
                if way.queue:
                    due = way.queue[0][0]
                    if due <= now:
                        wanted[way.dst] = wanted.get(way.dst, 0) | selectors.EVENT_WRITE
                    else:
                        timeout = min(timeout, due - now)
        for sock, events in wanted.items():
            sel.register(sock, events, ("sock", sock))
        return max(0.0, timeout)

    def _ready(self, key, events: int, mode: str, delay: float) -> None:
        kind, sock = key.data
        if kind == "wake":
            try:
                while self._wake_r.recv(4096):
                    pass
            except BlockingIOError:
                pass
        elif kind == "accept":
            self._accept()
        elif mode != STALL and self.mode != STALL:
            # (the mode as it is now, too: a stall() that came while select()
            # waited must hold what arrives with its wakeup, in the same turn)
            if events & selectors.EVENT_READ:
                self._read(sock, delay)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            # The mode now, for each one: not the turn's, nor the one before the
            # last accept (a heal, then a connect, may come between two accepts:
            # the healed connection was refused under load)
            if self.mode == CUT:
                self._abort(client)
                self.stats["refused"] += 1
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT)
            except OSError:
                # the node is down (killed): the client sees the same as a refusal
                self._abort(client)
                self.stats["target_down"] += 1
                continue
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._links.append(_Link(client, upstream))
            self.stats["accepted"] += 1

    def _read(self, sock: socket.socket, delay: float) -> None:
        for link in self._links:
            if link.closed:
                continue
            for way in link.ways:
                if way.src is not sock:
                    continue
                try:
                    data = sock.recv(CHUNK)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    self._close_link(link)
                    return
                if not data:
                    way.eof = True
                    if not way.queue:
                        self._shutdown_write(way.dst)
                    return
                way.queue.append((time.monotonic() + delay, memoryview(data)))
                way.queued += len(data)
                self.stats["bytes"] += len(data)
                if delay:
                    self.stats["delayed_chunks"] += 1
                return

    def _flush(self, mode: str, now: float) -> None:
        """Write every chunk that is due, as far as the receivers take them."""
        if mode != NORMAL:
            return
        for link in self._links:
            for way in link.ways:
                while not link.closed and way.queue and way.queue[0][0] <= now:
                    due, data = way.queue[0]
                    try:
                        sent = way.dst.send(data)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        self._close_link(link)
                        break
                    way.queued -= sent
                    if sent < len(data):
                        way.queue[0] = (due, data[sent:])
                        break
                    way.queue.popleft()
                if not link.closed and way.eof and not way.queue:
                    self._shutdown_write(way.dst)
                if all(w.eof and not w.queue for w in link.ways):
                    self._close_link(link)

    @staticmethod
    def _shutdown_write(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    @staticmethod
    def _abort(sock: socket.socket) -> None:
        """Close with a reset (SO_LINGER 0), as a cut cable looks to both ends."""
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        sock.close()

    def _close_link(self, link: _Link) -> None:
        if link.closed:
            return
        link.closed = True
        for sock in link.sockets():
            self._abort(sock)

    def _close_all(self) -> None:
        for link in self._links:
            if not link.closed:
                self.stats["cut_links"] += 1
            self._close_link(link)
        self._links = []
