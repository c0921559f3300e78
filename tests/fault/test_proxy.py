"""The fault proxy against a plain echo server in the test process: it forwards both
ways, a cut resets the connections and refuses new ones until healed, a stall holds
the bytes (and lets them through, in order, on heal), a delay keeps the order."""
from __future__ import annotations

import socket
import threading

import pytest

from ..integration.cluster import wait_for
from .proxy import Proxy


@pytest.fixture
def echo():
    """A threaded echo server on an ephemeral port; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)          # a close does not wake a blocked accept()
    stop = threading.Event()

    def serve(conn):
        with conn:
            while not stop.is_set():
                try:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(data)
                except OSError:          # reset by a cut
                    return

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()
    thread.join(5)


@pytest.fixture
def proxy(echo):
    with Proxy(echo, "test") as proxy:
        yield proxy


def connect(proxy: Proxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.settimeout(10)
    return sock


def closed_at_once(proxy: Proxy) -> bool:
    """A new connection is accepted by the kernel and then reset by the proxy: the
    reset lands on the connect or on the first read."""
    try:
        with connect(proxy) as sock:
            return sock.recv(1) == b""
    except ConnectionError:         # reset, aborted or a broken pipe: closed by the proxy
        return True


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_forwards_both_ways(proxy):
    with connect(proxy) as sock:
        payload = bytes(range(256)) * 1000
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload
    assert proxy.stats["accepted"] == 1 and proxy.stats["bytes"] == 2 * len(payload)


def test_cut_resets_connections_and_refuses_new_ones_until_healed(proxy):
    sock = connect(proxy)
    sock.sendall(b"ping")
    assert recv_exactly(sock, 4) == b"ping"
    proxy.cut()
    with pytest.raises(OSError):
        # the reset shows as an error on a send or an empty read
        for _ in range(100):
            sock.sendall(b"x")
            if sock.recv(1) == b"":
                raise ConnectionResetError("closed")
    sock.close()
    assert closed_at_once(proxy)
    wait_for(lambda: proxy.stats["refused"] >= 1, 10, "the refusal")
    proxy.heal()
    with connect(proxy) as sock:
        sock.sendall(b"again")
        assert recv_exactly(sock, 5) == b"again"


def test_stall_holds_bytes_and_heal_delivers_them_in_order(proxy):
    with connect(proxy) as sock:
        proxy.stall()
        wait_for(lambda: proxy.mode == "stall", 5, "the stall")
        before = proxy.stats["bytes"]
        sock.sendall(b"held")
        sock.settimeout(0.3)
        with pytest.raises(socket.timeout):
            sock.recv(4)                 # nothing comes back while stalled
        assert proxy.stats["bytes"] == before      # and nothing was even read
        sock.settimeout(10)
        proxy.heal()
        assert recv_exactly(sock, 4) == b"held"


def test_delay_keeps_order(proxy):
    with connect(proxy) as sock:
        proxy.delay(0.02)
        expected = b""
        for i in range(20):
            piece = f"<{i}>".encode()
            sock.sendall(piece)
            expected += piece
        assert recv_exactly(sock, len(expected)) == expected
    assert proxy.stats["delayed_chunks"] >= 1


def test_target_down_looks_like_a_refusal():
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]
    with Proxy(port, "down") as proxy:
        assert closed_at_once(proxy)
        wait_for(lambda: proxy.stats["target_down"] == 1, 10, "the failed connect")
