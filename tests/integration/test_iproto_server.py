"""The iproto server end to end with the fake executor, over real sockets.

Servers run in their own thread (ServerThread: scheduler + IprotoServer on
127.0.0.1:0) and clients are blocking sockets with deadlines; waiting is always
for a condition (a reply, EOF, or server state polled with a deadline).
"""
from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.greeting import decode_greeting
from spindle.core.iproto.msgpack import pack
from spindle.core.iproto.xrow import XRow
from spindle.core.net import iproto_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from iproto_fake_executor import (  # noqa: E402
    INSTANCE_UUID, TEST_SPACE_ID, FakeExecutor, RawClient, ServerThread,
)

SV = 80   # the fake's schema version


def packet(header: dict, body=None, raw_body: bytes | None = None) -> bytes:
    payload = msgpack.packb(header) + (raw_body if raw_body is not None else
                                       b"" if body is None else
                                       msgpack.packb(body, use_bin_type=True))
    return b"\xce" + struct.pack(">I", len(payload)) + payload


def call(name: str, args: list, sync: int) -> bytes:
    return packet({0: 10, 1: sync}, {0x22: name, 0x21: args})


def error_of(reply) -> tuple[int, str]:
    header, body, _ = reply
    assert header[0] & 0x8000, reply
    return header[0] & 0x7FFF, body[0x31]


@pytest.fixture
def srv():
    with ServerThread() as st_:
        yield st_
    assert st_.stopped_clean
    assert st_.server.internal_errors == 0


def logged_in(port: int) -> RawClient:
    client = RawClient(port)
    header, _, _ = client.auth("tester", "secret")
    assert header[0] == 0
    return client


# ---------------------------------------------------------------------------
# Basics: greeting, ping, auth, sessions.

def test_greeting_salt_per_connection_and_session_ids(srv):
    with RawClient(srv.port) as a, RawClient(srv.port) as b:
        ga, gb = decode_greeting(a.greeting), decode_greeting(b.greeting)
        assert ga.uuid == gb.uuid == INSTANCE_UUID and ga.version == (2, 6, 0)
        assert ga.salt != gb.salt and len(ga.salt) == 32
        a.auth("tester", "secret")
        b.auth("tester", "secret")
        ida = a.call(10, {0x22: "session_info", 0x21: []}, sync=3)[1][0x30]
        idb = b.call(10, {0x22: "session_info", 0x21: []}, sync=4)[1][0x30]
        assert idb[0] == ida[0] + 1
        assert ida[1:3] == ["tester", "tester"] and ida[4] == 3 and idb[4] == 4
        assert ida[3] == "127.0.0.1:%d" % a.sock.getsockname()[1]


def test_ping_reply_bytes(srv):
    with RawClient(srv.port) as client:
        _, _, raw = client.call(64, sync=0x0102030405060708)
        assert raw == bytes.fromhex("ce00000018 8300ce00000000 01cf0102030405060708 05ce00000050 80"
                                    .replace(" ", ""))


def test_auth_switches_user_and_back_to_guest(srv):
    with RawClient(srv.port) as client:
        assert error_of(client.call(10, {0x22: "echo", 0x21: []}, sync=1))[0] == 42
        assert client.auth("tester", "secret")[0][0] == 0
        assert client.call(10, {0x22: "session_info", 0x21: []})[1][0x30][1] == "tester"
        # a failed AUTH leaves the session as it was (2.6.0)
        assert error_of(client.auth("tester", "wrong")) == (
            47, "Incorrect password supplied for user 'tester'")
        assert client.call(10, {0x22: "session_info", 0x21: []})[1][0x30][1] == "tester"
        # guest with no scramble at all: back to guest
        assert client.call(7, {0x23: "guest", 0x21: []})[0][0] == 0
        assert error_of(client.call(10, {0x22: "echo", 0x21: []}))[0] == 42
    assert srv.call(lambda: list(srv.executor.auth_events)) == [
        ("tester", True), ("tester", False), ("guest", True)]


def test_auth_refusals(srv):
    with RawClient(srv.port) as client:
        assert error_of(client.auth("nosuch", "x")) == (45, "User 'nosuch' is not found")
        assert error_of(client.auth("admin", "")) == (
            47, "Incorrect password supplied for user 'admin'")
        header, body, _ = client.auth("nosession", "x")
        assert header[0] == 0x8000 | 42
        entry = body[0x52][0][0]
        assert entry[0] == "AccessDeniedError" and entry[6] == {
            "object_type": "universe", "object_name": "", "access_type": "Session"}


def test_su_changes_effective_user_for_one_fiber(srv):
    with logged_in(srv.port) as client:
        assert client.call(10, {0x22: "su_whoami", 0x21: []})[1][0x30] == ["admin", "tester"]


def test_push_sends_chunks_with_the_request_sync(srv):
    with logged_in(srv.port) as client:
        client.request(10, {0x22: "push", 0x21: ["a", [1]]}, sync=77)
        replies = [client.read() for _ in range(3)]
        assert [(h[0], h[1], b[0x30]) for h, b, _ in replies] == [
            (128, 77, ["a"]), (128, 77, [[1]]), (0, 77, [2])]


def test_vote_ballot_and_schema_check(srv):
    with RawClient(srv.port) as client:
        _, _, raw = client.call(68, sync=0)
        assert raw.endswith(bytes.fromhex("8129840 1c204c2028101 1403 80".replace(" ", "")))
        assert error_of(client.call(1, {0x10: 512, 0x12: 1, 0x20: []}, sync=2, k5=7)) == (
            109, "Wrong schema version, current: 7, in request: 80")
        assert client.call(64, sync=3, k5=SV)[0][0] == 0


def test_error_stack_chain_and_python_errors(srv):
    with logged_in(srv.port) as client:
        header, body, raw = client.call(10, {0x22: "chained", 0x21: []}, sync=5)
        stack = body[0x52][0]
        assert [(e[0], e[3], e[5]) for e in stack] == [
            ("ClientError", "Illegal parameters, outer", 1), ("ClientError", "inner", 1001)]
        assert b"\x52\x81\x00\x92\x86\x00\xabClientError\x02" in raw     # key order 0,2,1,...
        code, message = error_of(client.call(10, {0x22: "python_bug", 0x21: []}, sync=6))
        assert (code, message) == (32, "KeyError: 'oops'")
        code, message = error_of(client.call(10, {0x22: "bad_result", 0x21: []}, sync=7))
        assert code == 32 and "TypeError" in message
        assert client.call(64, sync=8)[0][0] == 0      # the connection goes on


# ---------------------------------------------------------------------------
# Pipelining and flow control.

def test_pipeline_of_100_requests_matched_by_sync(srv):
    with logged_in(srv.port) as client:
        expected = {}
        burst = []
        for sync in range(1, 101):
            kind = sync % 4
            if kind == 0:
                burst.append(packet({0: 64, 1: sync}))
                expected[sync] = None
            elif kind == 1:
                burst.append(call("echo", [sync, "x"], sync))
                expected[sync] = [sync, "x"]
            elif kind == 2:
                burst.append(packet({0: 3, 1: sync}, {0x10: 512, 0x21: [sync, str(sync)]}))
                expected[sync] = [[sync, str(sync)]]
            else:
                burst.append(packet({0: 8, 1: sync}, {0x27: "return ...", 0x21: [sync]}))
                expected[sync] = [sync]
        client.send(b"".join(burst))
        got = {}
        for _ in range(100):
            header, body, _ = client.read()
            assert header[0] == 0 and header[1] not in got
            got[header[1]] = body.get(0x30)
        assert got == expected


def test_slow_request_does_not_block_later_ones(srv):
    with logged_in(srv.port) as slow, logged_in(srv.port) as other:
        slow.send(call("wait_gate", [], 1) + b"".join(call("echo", [i], i) for i in range(2, 52)))
        syncs = [slow.read()[0][1] for _ in range(50)]
        assert sorted(syncs) == list(range(2, 52))
        assert srv.call(lambda: srv.server.connections[0].in_flight) == 1
        assert other.call(10, {0x22: "open_gate", 0x21: []})[1][0x30] == [True]
        header, body, _ = slow.read()
        assert header[1] == 1 and body[0x30] == ["opened"]


class SelectInPlace(FakeExecutor):
    nonblocking_select = True     # the reader serves SELECTs itself, as box's does


def test_a_full_socket_is_served_in_batches_with_the_loop_between():
    """Pipelined requests the reader serves itself never hold the loop for more
    than a batch of _BATCH_MAX: a fiber that yields in a loop meanwhile sees the
    count of served requests move by at most that much between two of its turns
    (and move several times). Counted in requests, not in milliseconds."""
    batch = iproto_server._BATCH_MAX
    total = 4 * batch + 10
    with ServerThread(executor_factory=SelectInPlace) as srv:
        with logged_in(srv.port) as client:
            conn = srv.call(lambda: next(c for c in srv.server.connections
                                         if c.session.user.name == "tester"))
            start = srv.call(lambda: conn.requests_served)
            seen = []

            def watch():
                while conn.requests_served < start + total:
                    seen.append(conn.requests_served - start)
                    srv.sched.sleep(0)
                seen.append(conn.requests_served - start)

            watcher = srv.call(lambda: srv.sched.spawn(watch, name="watcher"))
            client.send(b"".join(
                packet({0: 1, 1: sync}, {0x10: TEST_SPACE_ID, 0x11: 0, 0x12: 1, 0x13: 0,
                                         0x14: 0, 0x20: [sync]})
                for sync in range(1, total + 1)))
            syncs = {client.read()[0][1] for _ in range(total)}
            assert syncs == set(range(1, total + 1))
            srv.wait_for(lambda: watcher.status == "dead", what="the watcher to end")
            steps = [later - earlier for earlier, later in zip(seen, seen[1:])]
            assert seen[-1] == total
            assert max(steps) <= batch, steps
            assert len({n for n in seen if 0 < n < total}) >= 4, seen
        assert srv.server.internal_errors == 0


def test_net_msg_max_pauses_input():
    with ServerThread(net_msg_max=2) as srv:
        with logged_in(srv.port) as client, logged_in(srv.port) as other:
            echo = call("echo", ["late"], 3)
            client.send(call("wait_gate", [], 1) + call("wait_gate", [], 2) + echo)
            conn = srv.call(lambda: next(c for c in srv.server.connections
                                         if c.session.user.name == "tester"))
            srv.wait_for(lambda: conn.in_flight == 2 and conn.reader.buffered() == len(echo),
                         what="two requests running, the third one left unread")
            assert srv.call(lambda: srv.executor.executed) == 2
            other.call(10, {0x22: "open_gate", 0x21: []})
            replies = {client.read()[0][1] for _ in range(3)}
            assert replies == {1, 2, 3}
        assert srv.server.internal_errors == 0


def test_big_packets_with_small_readahead():
    with ServerThread(readahead=128) as srv:
        with logged_in(srv.port) as client:
            big = "v" * 300_000
            assert client.call(2, {0x10: 512, 0x21: [1, big]}, sync=1)[1][0x30] == [[1, big]]
            client.send(b"".join(packet({0: 64, 1: s}) for s in range(2, 302)))
            assert sorted(client.read()[0][1] for _ in range(300)) == list(range(2, 302))
            assert client.call(1, {0x10: 512, 0x12: 5, 0x20: [1]})[1][0x30] == [[1, big]]


def test_readahead_change_applies_to_open_connections(srv):
    with logged_in(srv.port) as client:
        srv.call(lambda: setattr(srv.server, "readahead", 200))
        assert client.call(10, {0x22: "echo", 0x21: ["y" * 5000]})[1][0x30] == ["y" * 5000]
        assert srv.call(lambda: srv.server.connections[0].reader.readahead) == 200


# ---------------------------------------------------------------------------
# Garbage, limits, closing.

def test_length_above_2gib_is_refused_and_closes(srv):
    with RawClient(srv.port) as bad, logged_in(srv.port) as good:
        bad.send(b"\xce\x80\x00\x00\x01")
        header, body, _ = bad.read()
        assert header[1] == 0 and error_of((header, body, None)) == (
            20, "Invalid MsgPack - too big packet size in the header: 2147483649")
        assert bad.is_closed()
        assert good.call(64, sync=9)[0] == {0: 0, 1: 9, 5: SV}


def test_announced_length_allocates_nothing_until_data_arrives(srv):
    """A 2 GiB prefix (allowed, as in 2.6.0) waits for data; memory follows the
    bytes received, not the announced length."""
    with RawClient(srv.port) as client:
        client.send(b"\xce\x80\x00\x00\x00" + b"\x00" * 1000)
        conn = srv.call(lambda: srv.server.connections[-1])
        srv.wait_for(lambda: conn.reader.bytes_read == 1005, what="1005 bytes read")
        assert srv.call(lambda: len(conn.reader._buf)) <= 1005
    srv.wait_for(lambda: not srv.server.connections, what="connection cleaned up")


def test_configured_packet_limit_refuses_before_the_data():
    with ServerThread(max_packet=1024) as srv:
        with RawClient(srv.port) as client:
            client.send(b"\xcd\x07\xd0")                 # 2000 > 1024, no data follows
            assert error_of(client.read()) == (
                20, "Invalid MsgPack - too big packet size in the header: 2000")
            assert client.is_closed()
        with logged_in(srv.port) as client:
            assert client.call(1, {0x10: 512, 0x12: 1, 0x20: []}, sync=2)[0][0] == 0


def test_eof_inside_a_packet_cleans_up(srv):
    client = RawClient(srv.port)
    client.send(packet({0: 64, 1: 1})[:-1])
    conn = srv.call(lambda: srv.server.connections[0])
    srv.wait_for(lambda: conn.reader.bytes_read > 0, what="partial packet read")
    client.close()
    srv.wait_for(lambda: not srv.server.connections, what="connection closed")
    srv.wait_for(lambda: conn.session.id in srv.executor.disconnected, what="on_disconnect")
    assert srv.call(lambda: conn.fibers) == set()


def test_on_connect_refusal_follows_the_greeting():
    """2.6.0 greets first; a refusing on_connect's error follows with sync 0
    (tests/interop/test_session_triggers_oracle.py checks it against 2.6.0)."""
    class Refusing(FakeExecutor):
        def on_connect(self, session):
            raise ClientError(ErrorCode.ER_LOADING)

    with ServerThread(Refusing) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
        sock.close()
        assert data.startswith(b"Tarantool 2.6.0 (Binary)") and len(data) > 128
        header, body = list(msgpack.Unpacker(__import__("io").BytesIO(data[128 + 5:]),
                                             strict_map_key=False, raw=False))
        assert header[0] == 0x8000 | 116 and header[1] == 0
        assert body[0x31] == "Instance bootstrap hasn't finished yet"


def test_stop_closes_connections_and_joins_fibers():
    srv = ServerThread().__enter__()
    try:
        blocked = logged_in(srv.port)
        idle = RawClient(srv.port)
        blocked.request(10, {0x22: "wait_gate", 0x21: []}, sync=1)
        srv.wait_for(lambda: sum(c.in_flight for c in srv.server.connections) == 1,
                     what="request in flight")
    finally:
        srv.stop()
    assert srv.stopped_clean
    assert not srv.server.fibers and not srv.server.connections
    for client in (blocked, idle):
        assert client.is_closed()
        client.close()


# ---------------------------------------------------------------------------
# Replication hand-over.

class Replicating(FakeExecutor):
    def __init__(self, sched):
        super().__init__(sched)
        self.handled = []

    def replication(self, session, request, stream):
        self.handled.append(request.type)
        if request.type == 66:      # SUBSCRIBE
            raise ClientError(ErrorCode.ER_UNKNOWN_REPLICA, request.body[0x24], "cccc")
        stream.write_row(XRow(type=0, body=b"\x81\x26\x81\x01\x05"), sync=request.sync)
        ack = stream.read_row(timeout=5)         # bytes the peer sent with the JOIN
        stream.write_row(XRow(type=0, body=pack({0x26: ack.body_map()[0x26]})),
                         sync=request.sync)


def test_replication_handler_takes_over_and_gives_back():
    with ServerThread(Replicating) as srv:
        with logged_in(srv.port) as client:
            join = packet({0: 65, 1: 11}, {0x24: "22222222-2222-4222-8222-222222222222"})
            ack = packet({0: 0}, {0x26: {1: 9}})
            client.send(call("wait_gate", [], 10) + join + ack + packet({0: 64, 1: 12}))
            srv.wait_for(lambda: srv.server.connections[0].in_flight == 1, what="in flight")
            assert srv.call(lambda: srv.executor.handled) == []   # waits for the request
            with logged_in(srv.port) as other:
                other.call(10, {0x22: "open_gate", 0x21: []})
            got = [client.read() for _ in range(4)]
            assert [h[1] for h, _, _ in got] == [10, 11, 11, 12]
            assert got[1][1] == {0x26: {1: 5}} and got[2][1] == {0x26: {1: 9}}
            assert got[1][2][:10] == b"\xce\x00\x00\x00\x0a\x82\x00\x00\x01\x0b"  # xrow header
            sub = packet({0: 66, 1: 13}, {0x24: "5555"})
            client.send(sub)
            assert error_of(client.read()) == (
                62, "Replica 5555 is not registered with replica set cccc")
            assert client.is_closed()
        assert srv.call(lambda: srv.executor.handled) == [65, 66]


def test_replication_request_without_handler_is_unknown(srv):
    with logged_in(srv.port) as client:
        assert error_of(client.call(65, {0x24: "x"}, sync=3)) == (48, "Unknown request type 65")
        assert client.call(64, sync=4)[0][0] == 0


# ---------------------------------------------------------------------------
# Fuzz: random, truncated, mutated, structured and oversized input.

def _seed_packets() -> list[bytes]:
    return [
        packet({0: 64, 1: 1}),
        packet({0: 1, 1: 2}, {0x10: 512, 0x11: 0, 0x12: 10, 0x13: 0, 0x14: 2, 0x20: []}),
        packet({0: 2, 1: 3}, {0x10: 512, 0x21: [1, "a"]}),
        packet({0: 4, 1: 4}, {0x10: 512, 0x20: [1], 0x21: [["=", 1, "b"]]}),
        packet({0: 9, 1: 5}, {0x10: 512, 0x21: [1], 0x28: [["+", 0, 1]]}),
        packet({0: 5, 1: 6}, {0x10: 512, 0x20: [1]}),
        packet({0: 10, 1: 7}, {0x22: "echo", 0x21: [1, 2]}),
        packet({0: 8, 1: 8}, {0x27: "return ...", 0x21: []}),
        packet({0: 7, 1: 9}, {0x23: "tester", 0x21: ["chap-sha1", b"s" * 20]}),
        packet({0: 68, 1: 10}),
        packet({0: 65, 1: 11}, {0x24: "22222222-2222-4222-8222-222222222222"}),
        packet({0: 11, 1: 12}, {0x40: "select 1"}),
    ]


SEEDS = _seed_packets()
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.floats()
    | st.text(max_size=8) | st.binary(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.integers(0, 0x60) | st.text(max_size=2), children, max_size=4),
    max_leaves=12)


def _mutate(seed: bytes, edits: list) -> bytes:
    data = bytearray(seed)
    for pos, value, kind in edits:
        pos %= len(data) + 1
        if kind == 0 and pos < len(data):
            data[pos] = value
        elif kind == 1:
            data[pos:pos] = bytes([value])
        elif pos < len(data):
            del data[pos]
    return bytes(data)


def _structured(header: dict, body) -> bytes:
    return packet(header, raw_body=b"" if body is None else pack(body))


_frames = st.one_of(
    st.binary(max_size=120),
    st.builds(lambda seed, cut: seed[:cut % (len(seed) + 1)], st.sampled_from(SEEDS),
              st.integers(0, 1000)),
    st.builds(_mutate, st.sampled_from(SEEDS), st.lists(st.tuples(
        st.integers(0, 200), st.integers(0, 255), st.integers(0, 2)), min_size=1, max_size=4)),
    st.builds(_structured,
              st.fixed_dictionaries({0: st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                         12, 13, 64, 65, 66, 67, 68, 69, 70,
                                                         73, 99, 257])},
                                    optional={1: st.integers(0, 2 ** 64 - 1), 5: st.integers(
                                        0, 2 ** 32 - 1), 0x2c: st.none(), 7: _values}),
              st.none() | _values | st.dictionaries(st.integers(0, 0x60), _values, max_size=6)),
    st.builds(lambda prefix, tail: prefix + tail,
              st.sampled_from([b"\xce\x80\x00\x00\x01", b"\xcf" + (2 ** 40).to_bytes(8, "big"),
                               b"\xa1", b"\xc1", b"\x91", b"\xcb"]), st.binary(max_size=16)),
)


def _expected(data: bytes, limit: int = 2 ** 31) -> tuple[int, bool]:
    """(complete packets, whether the stream breaks) as the server will see them."""
    pos, count = 0, 0
    while pos < len(data):
        first = data[pos]
        if first < 0x80:
            size, length = 1, first
        elif first in (0xCC, 0xCD, 0xCE, 0xCF):
            size = {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}[first]
            if pos + size > len(data):
                return count, False
            length = int.from_bytes(data[pos + 1:pos + size], "big")
        else:
            return count, True
        if length > limit:
            return count, True
        if pos + size + length > len(data):
            return count, False
        count += 1
        pos += size + length
    return count, False


@pytest.fixture(scope="module")
def fuzz_server():
    with ServerThread() as srv:
        good = logged_in(srv.port)
        yield srv, good
        good.close()
    assert srv.stopped_clean


@settings(max_examples=int(__import__("os").environ.get("IPROTO_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frames=st.lists(_frames, min_size=1, max_size=4))
def test_garbage_gets_replies_or_a_close_and_changes_nothing(fuzz_server, frames):
    srv, good = fuzz_server
    data = b"".join(frames)
    complete, breaks = _expected(data)
    with RawClient(srv.port) as client:
        client.send(data)
        replies = []
        if breaks:
            while True:
                try:
                    replies.append(client.read())
                except (EOFError, ConnectionResetError):
                    break
            assert 1 <= len(replies) <= complete + 1
            header, body, _ = replies[-1]
            assert header[0] == 0x8000 | 20 and header[1] == 0
            assert body[0x31] in ("Invalid MsgPack - packet length",) or body[0x31].startswith(
                "Invalid MsgPack - too big packet size in the header: ")
        else:
            replies = [client.read() for _ in range(complete)]
        for header, body, raw in replies:
            assert set(header) == {0, 1, 5} and raw[5:8] == b"\x83\x00\xce"
            assert isinstance(body, dict)
            if header[0] & 0x8000:
                assert body[0x31] == body[0x52][0][0][3]
    # the server is fine and nothing changed
    sync = len(data) + 1000
    assert good.call(64, sync=sync)[0] == {0: 0, 1: sync, 5: SV}
    assert good.call(1, {0x10: TEST_SPACE_ID, 0x12: 100, 0x20: []}, sync=1)[1][0x30] == []
    assert srv.call(lambda: srv.server.internal_errors) == 0


def test_after_fuzz_all_connections_are_gone(fuzz_server):
    srv, good = fuzz_server
    srv.wait_for(lambda: len(srv.server.connections) == 1, what="only the good client left")
    assert srv.call(lambda: (srv.executor.space.rows, srv.executor.gate_open)) == ({}, False)
