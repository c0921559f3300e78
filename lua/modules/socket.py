"""Tarantool's `socket` module (lua/modules/socket.lua): the Lua side is the API
(objects, read buffers, tcp_connect, tcp_server); this side holds the sockets.

Sockets are non-blocking Python sockets kept by descriptor. Each call answers at once
with its result or the errno of the failure (the Lua side keeps it as s:errno() and
errno(), as 2.6.0's calls leave it in C's errno). Waiting goes through the scheduler
(`iowait` parks only the calling fiber) and name resolution through a helper thread.
"""
from __future__ import annotations

import errno
import os
import re
import select
import socket

from spindle.core.fiber.coio import run_in_thread
from spindle.core.iproto.errors import BoxError, TimedOut

from ..runtime import Multi, read_source

FAMILIES = {"AF_UNIX": socket.AF_UNIX, "AF_INET": socket.AF_INET,
            "AF_INET6": socket.AF_INET6, "AF_PACKET": getattr(socket, "AF_PACKET", 17)}
TYPES = {"SOCK_STREAM": socket.SOCK_STREAM, "SOCK_DGRAM": socket.SOCK_DGRAM,
         "SOCK_SEQPACKET": socket.SOCK_SEQPACKET, "SOCK_RAW": socket.SOCK_RAW,
         "SOCK_RDM": socket.SOCK_RDM}
PROTOCOLS = {"ip": 0, "icmp": 1, "tcp": 6, "udp": 17, "ipv6-icmp": 58}
_PROTOCOL_NAMES = {6: "tcp", 17: "udp", 1: "icmp"}
SEND_FLAGS = {name: getattr(socket, name) for name in (
    "MSG_OOB", "MSG_PEEK", "MSG_DONTROUTE", "MSG_TRYHARD", "MSG_CTRUNC", "MSG_PROXY",
    "MSG_TRUNC", "MSG_DONTWAIT", "MSG_EOR", "MSG_WAITALL", "MSG_FIN", "MSG_SYN",
    "MSG_CONFIRM", "MSG_RST", "MSG_ERRQUEUE", "MSG_NOSIGNAL", "MSG_MORE",
    "MSG_WAITFORONE", "MSG_FASTOPEN", "MSG_CMSG_CLOEXEC") if hasattr(socket, name)}
AI_FLAGS = {name: getattr(socket, name) for name in (
    "AI_PASSIVE", "AI_CANONNAME", "AI_NUMERICHOST", "AI_V4MAPPED", "AI_ALL",
    "AI_ADDRCONFIG", "AI_NUMERICSERV") if hasattr(socket, name)}

# Socket options by level: name -> {iname, rw}. Integer options only (and SO_LINGER,
# which the Lua side handles as s:linger()).
_SOCKET_OPTIONS = {
    "SO_ACCEPTCONN": False, "SO_BROADCAST": True, "SO_DEBUG": True, "SO_DOMAIN": False,
    "SO_ERROR": False, "SO_DONTROUTE": True, "SO_KEEPALIVE": True, "SO_MARK": True,
    "SO_OOBINLINE": True, "SO_PASSCRED": True, "SO_PRIORITY": True, "SO_PROTOCOL": False,
    "SO_RCVBUF": True, "SO_RCVBUFFORCE": True, "SO_RCVLOWAT": True, "SO_SNDLOWAT": True,
    "SO_REUSEADDR": True, "SO_REUSEPORT": True, "SO_SNDBUF": True, "SO_SNDBUFFORCE": True,
    "SO_TIMESTAMP": True, "SO_TYPE": False, "SO_LINGER": False,
}
_TCP_OPTIONS = {
    "TCP_NODELAY": True, "TCP_MAXSEG": True, "TCP_CORK": True, "TCP_KEEPIDLE": True,
    "TCP_KEEPINTVL": True, "TCP_KEEPCNT": True, "TCP_SYNCNT": True, "TCP_LINGER2": True,
    "TCP_DEFER_ACCEPT": True, "TCP_WINDOW_CLAMP": True, "TCP_QUICKACK": True,
}


def _options(names: dict[str, bool]) -> dict:
    return {name: {"iname": getattr(socket, name), "rw": rw}
            for name, rw in names.items() if hasattr(socket, name)}


def _name_of(table: dict[str, int], value: int):
    for name, number in table.items():
        if number == value:
            return name
    return value


def address_table(family: int, kind: int | None, protocol: int, address) -> dict:
    """A socket address as 2.6.0's Lua shows it: host, port, family, and for a
    socket's own name or peer (not a sender's address) type and protocol."""
    if family == socket.AF_UNIX:
        host, port = "unix/", address if isinstance(address, str) else address.decode(
            "utf-8", "surrogateescape")
    else:
        host, port = address[0], address[1]
    table = {"host": host, "port": port, "family": _name_of(FAMILIES, family)}
    if kind is not None:
        table["type"] = _name_of(TYPES, kind)
        table["protocol"] = _PROTOCOL_NAMES.get(protocol, protocol)
    return table


def _errno_of(exc: OSError) -> int:
    return exc.errno or errno.EINVAL


class SocketModule:
    def __init__(self, runtime):
        self.runtime = runtime
        self.sched = runtime.sched
        self.socks: dict[int, socket.socket] = {}
        self.waiting: dict[int, set] = {}      # fd -> fibers in iowait on it
        self.closing: dict[int, socket.socket] = {}   # closed, waited on still
        natives = {name: getattr(self, name) for name in (
            "new", "close", "reap", "bind", "connect", "listen", "accept", "name", "peer",
            "sysread", "syswrite", "send", "recv", "sendto", "recvfrom", "shutdown",
            "setsockopt", "getsockopt", "nonblock", "linger", "peek_size")}
        blocking = {"iowait": self.iowait, "iowait_fd": self.iowait_fd,
                    "getaddrinfo": self.getaddrinfo}
        constants = {"DOMAIN": FAMILIES, "SO_TYPE": TYPES, "SEND_FLAGS": SEND_FLAGS,
                     "AI_FLAGS": AI_FLAGS, "protocols": PROTOCOLS,
                     "SOL_SOCKET": socket.SOL_SOCKET,
                     "SO_OPT": {socket.SOL_SOCKET: _options(_SOCKET_OPTIONS),
                                socket.IPPROTO_TCP: _options(_TCP_OPTIONS)}}
        bridge = runtime.bridge
        args = (runtime.table({k: bridge(v) for k, v in natives.items()}),
                runtime.table(blocking), runtime.wait, runtime.to_lua(constants))
        core = runtime.load(read_source("modules/socket.lua"), "@builtin/socket.lua")(*args)
        tcp = runtime.load(read_source("modules/socket_tcp.lua"), "@builtin/socket.lua")
        luasocket = runtime.load(read_source("modules/socket_luasocket.lua"),
                                 "@builtin/socket.lua")
        self.lua_module = luasocket(core, tcp(*args, core))

    def _sock(self, fd: int) -> socket.socket:
        sock = self.socks.get(int(fd))
        if sock is None:
            raise OSError(errno.EBADF, "")
        return sock

    # Each call answers (result) or (nil, errno).
    def _answer(self, fn, *args):
        try:
            return fn(*args)
        except OSError as exc:
            return Multi((None, _errno_of(exc)))
        except (ValueError, TypeError, OverflowError):
            return Multi((None, errno.EINVAL))

    def new(self, family: int, kind: int, protocol: int):
        def make():
            sock = socket.socket(int(family), int(kind), int(protocol))
            sock.setblocking(False)
            self.socks[sock.fileno()] = sock
            return sock.fileno()
        return self._answer(make)

    def close(self, fd: int):
        fd = int(fd)
        sock = self.socks.pop(fd, None)
        if sock is None:
            return Multi((None, errno.EBADF))
        waiters = self.waiting.get(fd)
        if waiters:
            # 2.6.0's coio_close wakes the fibers waiting on the socket. The socket
            # goes at once (a listener stops listening), but its descriptor number
            # is held by /dev/null until the last waiter has left its wait: it
            # must not be reused while the scheduler still watches it for them
            placeholder = os.open(os.devnull, os.O_RDONLY)
            os.dup2(placeholder, fd)
            os.close(placeholder)
            self.closing[fd] = sock
            for fiber in waiters:
                self.sched.wakeup(fiber)
            return True
        self.sched.forget_io(sock)
        sock.close()
        return True

    def reap(self, fds: list) -> None:
        """Close the sockets whose Lua objects were collected."""
        for fd in fds or ():
            if int(fd) in self.socks:
                self.close(fd)

    @staticmethod
    def _resolve(sock: socket.socket, host: str, port: str):
        """lbox_socket_local_resolve: a unix path, or a numeric address and port."""
        if host == "unix/":
            return port
        flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        try:
            infos = socket.getaddrinfo(host, _port_number(port), sock.family, sock.type,
                                       0, flags)
        except socket.gaierror:
            raise OSError(errno.EINVAL, "") from None
        return infos[0][4]

    def bind(self, fd: int, host: str, port: str):
        def do():
            sock = self._sock(fd)
            sock.bind(self._resolve(sock, host, port))
            return True
        return self._answer(do)

    def connect(self, fd: int, host: str, port: str):
        def do():
            sock = self._sock(fd)
            code = sock.connect_ex(self._resolve(sock, host, port))
            if code:
                raise OSError(code, "")
            return True
        return self._answer(do)

    def listen(self, fd: int, backlog: int):
        def do():
            self._sock(fd).listen(int(backlog))
            return True
        return self._answer(do)

    def accept(self, fd: int):
        def do():
            server = self._sock(fd)
            conn, address = server.accept()
            conn.setblocking(False)
            self.socks[conn.fileno()] = conn
            return Multi((conn.fileno(), address_table(conn.family, None, 0, address)))
        return self._answer(do)

    def name(self, fd: int):
        def do():
            sock = self._sock(fd)
            return address_table(sock.family, sock.type, sock.proto, sock.getsockname())
        return self._answer(do)

    def peer(self, fd: int):
        def do():
            sock = self._sock(fd)
            return address_table(sock.family, sock.type, sock.proto, sock.getpeername())
        return self._answer(do)

    def sysread(self, fd: int, size: int):
        return self._answer(lambda: self._sock(fd).recv(int(size)))

    def syswrite(self, fd: int, data: str):
        return self._answer(lambda: self._sock(fd).send(_bytes(data)))

    def send(self, fd: int, data: str, flags: int):
        return self._answer(lambda: self._sock(fd).send(_bytes(data), int(flags)))

    def recv(self, fd: int, size: int, flags: int):
        return self._answer(lambda: self._sock(fd).recv(int(size), int(flags)))

    def peek_size(self, fd: int):
        """The length of the next datagram (recv with MSG_TRUNC | MSG_PEEK)."""
        flags = socket.MSG_TRUNC | socket.MSG_PEEK
        return self._answer(lambda: len(self._sock(fd).recv(0x10000, flags)))

    def sendto(self, fd: int, host: str, port: str, data: str, flags: int):
        def do():
            sock = self._sock(fd)
            return sock.sendto(_bytes(data), int(flags), self._resolve(sock, host, port))
        return self._answer(do)

    def recvfrom(self, fd: int, size: int, flags: int):
        def do():
            sock = self._sock(fd)
            data, address = sock.recvfrom(int(size), int(flags))
            return Multi((data, address_table(sock.family, None, 0, address)))
        return self._answer(do)

    def shutdown(self, fd: int, how: int):
        def do():
            self._sock(fd).shutdown(int(how))
            return True
        return self._answer(do)

    def setsockopt(self, fd: int, level: int, name: int, value: int):
        def do():
            self._sock(fd).setsockopt(int(level), int(name), int(value))
            return True
        return self._answer(do)

    def getsockopt(self, fd: int, level: int, name: int):
        return self._answer(lambda: self._sock(fd).getsockopt(int(level), int(name)))

    def linger(self, fd: int, active, timeout):
        """SO_LINGER: read it (active nil) or set it; answers (active, timeout)."""
        import struct

        def do():
            sock = self._sock(fd)
            if active is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                struct.pack("ii", 1 if active else 0, int(timeout or 0)))
            on, seconds = struct.unpack(
                "ii", sock.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
            return Multi((on != 0, seconds))
        return self._answer(do)

    def nonblock(self, fd: int, mode):
        def do():
            sock = self._sock(fd)
            if mode is not None:
                sock.setblocking(not mode)
            return not sock.getblocking()
        return self._answer(do)

    # ------------------------------------------------------------ waiting

    def iowait(self, fd, events, timeout):
        """Park the fiber until the socket is readable (1), writable (2) or either
        (3), or the timeout passes; answers the events that are ready (0: none)."""
        fd, events = int(fd), int(events)
        sock = self.socks.get(fd)
        if sock is None:
            return 0
        sched, me = self.sched, self.sched.current
        mask = (1 if events & 1 else 0) | (2 if events & 2 else 0)
        waiters = self.waiting.setdefault(fd, set())
        waiters.add(me)
        try:
            woken = wait_ready(sched, sock, mask, _timeout(timeout))
        finally:
            waiters.discard(me)
            if not waiters and self.waiting.get(fd) is waiters:
                del self.waiting[fd]
                closed = self.closing.pop(fd, None)
                if closed is not None:
                    sched.forget_io(closed)
                    closed.close()
        me.testcancel()
        if not woken:
            return 0
        if fd not in self.socks:
            return events        # closed while waiting: wake as 2.6.0 does
        ready = select.select([fd] if mask & 1 else [], [fd] if mask & 2 else [], [], 0)
        return (1 if ready[0] else 0) | (2 if ready[1] else 0)

    def iowait_fd(self, fd, events, timeout):
        """socket.iowait on a bare descriptor."""
        fd, mask = int(fd), int(events) & 3
        if mask == 0 or fd < 0:
            return 0
        woken = wait_ready(self.sched, fd, mask, _timeout(timeout))
        self.sched.current.testcancel()
        if not woken:
            return 0
        ready = select.select([fd] if mask & 1 else [], [fd] if mask & 2 else [], [], 0)
        return (1 if ready[0] else 0) | (2 if ready[1] else 0)

    def getaddrinfo(self, host, port, timeout, family, kind, protocol, flags):
        # (like lua_tostring: anything but a string or a number is no value)
        host = _text(host) if isinstance(host, (bytes, int, float)) else None
        port = _text(port) if isinstance(port, (bytes, int, float)) else None
        args = (host, port, int(family or 0), int(kind or 0), int(protocol or 0))
        try:
            # a numeric address resolves at once, without the thread (and so
            # even with a timeout of 0, as in 2.6.0)
            infos = socket.getaddrinfo(*args, int(flags or 0) | socket.AI_NUMERICHOST)
        except (socket.gaierror, UnicodeError):
            infos = None
        if infos is not None:
            return self.runtime.to_lua(
                [address_table(info[0], info[1], info[2], info[4]) for info in infos])
        try:
            infos = run_in_thread(self.sched, socket.getaddrinfo, *args, int(flags or 0),
                                  timeout=_timeout(timeout))
        except socket.gaierror:
            return Multi((None, errno.EIO))
        except TimedOut:
            return Multi((None, errno.ETIMEDOUT))
        except OSError as exc:
            return Multi((None, _errno_of(exc)))
        result = [address_table(info[0], info[1], info[2], info[4]) for info in infos]
        return self.runtime.to_lua(result)


def wait_ready(sched, fileobj, mask: int, timeout: float | None) -> bool:
    """Park the fiber until `fileobj` is ready for `mask` (1 read, 2 write) or the
    timeout passes. The scheduler lets one fiber wait per event of a descriptor;
    a second one (two readers of one socket, as 2.6.0 allows) looks every 10 ms."""
    try:
        return sched.wait_io(fileobj, mask, timeout)
    except BoxError as exc:
        if "already waited on" not in str(exc):
            raise
    fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
    deadline = None if timeout is None else sched.clock() + timeout
    while True:
        ready = select.select([fd] if mask & 1 else [], [fd] if mask & 2 else [], [], 0)
        if ready[0] or ready[1]:
            return True
        remaining = None if deadline is None else deadline - sched.clock()
        if remaining is not None and remaining <= 0:
            return False
        sched.sleep(0.01 if remaining is None else min(0.01, remaining))


def _port_number(text: str) -> int:
    """A port as 2.6.0's resolver reads it: atoi() (leading digits, else 0) taken
    as a 16-bit number ('http' is 0, '12abc' 12, '-1' 65535)."""
    match = re.match(r"\s*([+-]?\d+)", text)
    return int(match.group(1)) % 65536 if match else 0


def _timeout(value) -> float | None:
    """A Lua timeout in seconds; 2.6.0's "infinity" (500 years) is no timeout."""
    seconds = max(float(value), 0.0)
    return None if seconds > 1e8 else seconds


def _bytes(data) -> bytes:
    return data if isinstance(data, bytes) else str(data).encode("utf-8", "surrogateescape")


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def build(instance):
    return SocketModule(instance.runtime).lua_module
