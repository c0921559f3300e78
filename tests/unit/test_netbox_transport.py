"""net.box's wire helpers (lua/modules/netbox/transport.py): the request frame, the
error of an error reply, and bodies that are not what they should be; the Lua side's
requests (net_box_wire.lua): its frames, its reading of replies and where it stops."""
from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, strategies as st

from spindle.core.iproto.errors import ErrorCode
from spindle.core.iproto.xrow import decode_row, frame
from spindle.core.net.protocol import encode_reply
from spindle.lua.instance import Instance
from spindle.lua.modules.netbox.transport import _error_24, encode_request, reply_error
from spindle.lua.runtime import read_source

from .test_error_replies import ACCESS_DENIED, CHAINED, CUSTOM


@given(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 9, 10, 64]), st.integers(1, 0x7FFFFFFF),
       st.binary(max_size=64).map(msgpack.packb))
def test_a_request_frame_is_a_row_with_its_type_and_sync(request_type, sync, body):
    frame = encode_request(request_type, sync, body)
    row, end = decode_row(frame, 5, len(frame), exact=True)
    assert (row.type, row.sync, row.body, end) == (request_type, sync, body, len(frame))
    assert int.from_bytes(frame[1:5], "big") == len(frame) - 5


def test_the_error_of_a_reply_is_its_mp_error_stack():
    denied = reply_error(0x8000 | ErrorCode.ER_ACCESS_DENIED, ACCESS_DENIED)
    assert (denied.type, denied.code) == ("AccessDeniedError", ErrorCode.ER_ACCESS_DENIED)
    assert denied.fields == {"object_type": "space", "object_name": "ro",
                             "access_type": "Write"}
    custom = reply_error(0x8000 | 55, CUSTOM)
    assert (custom.type, custom.code, custom.message) == ("MyError", 55, "boom")
    outer = reply_error(0x8000, CHAINED)
    assert outer.type == "Outer" and outer.prev.code == 1 and outer.prev.prev.type == "Inner"


def test_without_a_stack_the_error_is_its_code_and_message():
    plain = reply_error(0x8000 | 3, msgpack.packb({0x31: "Duplicate key"}))
    assert (plain.type, plain.code, plain.message) == ("ClientError", 3, "Duplicate key")
    bare = reply_error(0x8000 | ErrorCode.ER_NO_SUCH_SPACE, None)
    assert bare.code == ErrorCode.ER_NO_SUCH_SPACE and "Space" in bare.message


@given(st.binary(max_size=40))
def test_any_body_gives_an_error_or_none(body):
    assert reply_error(0x8000 | 1, body).code >= 0
    assert _error_24(body) is None or isinstance(_error_24(body), str)


def test_a_broken_stack_falls_back_to_error_24():
    body = msgpack.packb({0x31: "msg", 0x52: {0: [{0: 5}]}})
    error = reply_error(0x8000 | 7, body)
    assert (error.type, error.code, error.message) == ("ClientError", 7, "msg")


# --------------------------------------------- the Lua side's requests (net_box_wire.lua)

_INSTANCES: list[Instance] = []


def _instance() -> Instance:
    """One Lua instance for every Wire of this module (each a wire table of its own)."""
    if not _INSTANCES:
        _INSTANCES.append(Instance())
    return _INSTANCES[0]


class Wire:
    """net_box_wire.lua with a wire table of its own, with natives that note what it
    asks of the transport."""

    def __init__(self):
        self.instance = _instance()
        runtime = self.runtime = self.instance.runtime
        self.sent_now: list[bytes] = []
        self.flushes = 0

        def want_flush(_tr):
            self.flushes += 1

        def flush(_tr):
            self.written.append(self.take_out())

        self.written: list[bytes] = []
        natives = {"send_now": lambda _tr, frame: self.sent_now.append(frame),
                   "want_flush": want_flush, "flush": flush,
                   "state_error": lambda _tr: "no connection"}
        native = runtime.table({k: runtime.bridge(v, convert_args=False)
                                for k, v in natives.items()})
        self.fns = runtime.load(read_source("modules/netbox/net_box_wire.lua"),
                                "@net_box_wire.lua")(native, runtime.table(), runtime.wait)
        self.w = self.fns[b"new"]()
        self.w[b"state"] = b"active"
        self.w[b"max_packet"] = 1 << 31
        self.new_table = runtime.lua.eval("function() return {} end")

    def send(self, request_type: int, body: bytes, now: bool = False):
        future = self.new_table()
        self.fns[b"send"](self.w, None, future, request_type, body, now)
        return future

    def take_out(self) -> bytes | None:
        return self.fns[b"take_out"](self.w)

    def replies(self, data: bytes) -> tuple[int, list[int]]:
        taken, woken = self.fns[b"replies"](self.w, data)
        return taken, [int(s) for s in woken.split()] if woken else []


@pytest.fixture
def wire():
    return Wire()


@given(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 9, 10, 64]), st.binary(max_size=300))
def test_the_lua_side_writes_the_frame_encode_request_writes(request_type, body):
    wire = Wire()
    wire.w[b"next_sync"] = 0x7FFFFFFE         # and the counter wraps as next_sync does
    for _ in range(3):
        wire.send(request_type, body)
    assert wire.take_out() == b"".join(encode_request(request_type, sync, body)
                              for sync in (0x7FFFFFFE, 0x7FFFFFFF, 0))
    assert wire.flushes == 1                 # one flush asked for the batch
    assert wire.take_out() is None


def test_a_long_batch_is_written_without_waiting_for_the_loop_turn(wire):
    for _ in range(40):
        wire.send(64, b"")
    frames = [encode_request(64, sync, b"") for sync in range(1, 41)]
    assert wire.written == [b"".join(frames[:16]), b"".join(frames[16:32])]
    assert wire.take_out() == b"".join(frames[32:]) and wire.flushes == 3


def test_a_waited_request_alone_goes_at_once(wire):
    wire.send(64, b"", now=True)
    assert wire.sent_now == [encode_request(64, 1, b"")] and wire.take_out() is None
    wire.send(64, b"", now=True)             # one in flight: it waits for the batch
    assert len(wire.sent_now) == 1 and wire.take_out() == encode_request(64, 2, b"")


def test_the_usual_replies_of_its_requests_are_read_in_one_go(wire):
    futures = [wire.send(10, b"\x82") for _ in range(4)]
    futures[0][b"_waiting"] = 0         # its fibers stopped waiting: not named
    futures[1][b"_waiting"] = 1
    futures[3][b"_waiting"] = 1
    data = (encode_reply(0, 2, 0, b"\x81\x30\x91\x02")
            + encode_reply(0x80, 4, 0, b"\x81\x30\x91\xa4push")
            + encode_reply(0, 1, 0, b"")
            + encode_reply(0x8000 | 32, 4, 0, b"\x81\x31\xa3bad"))
    assert wire.replies(data) == (len(data), [2, 4, 4])
    done = [(f[b"_done"], f[b"_status"], f[b"_raw"]) for f in futures]
    assert done == [(True, 0, b"\x80"), (True, 0, b"\x81\x30\x91\x02"),
                    (False, None, None), (True, 0x8000 | 32, b"\x81\x31\xa3bad")]
    assert list(futures[3][b"_pushes"].values()) == [b"\x81\x30\x91\xa4push"]
    assert wire.w[b"count"] == 1 and wire.fns[b"dispatch"](wire.w, 0, 99, None) is None


@pytest.mark.parametrize("case", ["incomplete", "not ce", "compact header", "nobody's sync",
                                  "new schema", "too big"])
def test_the_read_stops_where_the_transport_must_look(wire, case):
    first, second = wire.send(10, b"\x80"), wire.send(10, b"\x80")
    usual = encode_reply(0, 1, 0, b"\x80")
    rest = {"incomplete": encode_reply(0, 2, 0, b"\x80")[:-1],
            "not ce": b"\x20" + encode_reply(0, 2, 0, b"")[5:],
            "compact header": frame(msgpack.packb({0: 0, 1: 2, 5: 0})),
            "nobody's sync": encode_reply(0, 3, 0, b""),
            "new schema": encode_reply(0, 2, 7, b""),
            "too big": encode_reply(0, 2, 0, b"")}[case]
    if case == "too big":
        wire.w[b"max_packet"] = len(usual) - 5   # (the first one is as big as may be)
        rest = b"\xce" + (len(usual) - 4).to_bytes(4, "big") + b"\x00" * 30
    assert wire.replies(usual + rest) == (len(usual), [])
    assert first[b"_done"] is True and second[b"_done"] is False


def test_a_failed_connection_ends_every_request(wire):
    futures = [wire.send(10, b"\x80") for _ in range(3)]
    wire.fns[b"discard"](wire.w, futures[0], "discarded")
    wire.fns[b"fail_all"](wire.w, "gone")
    assert [(f[b"_done"], f[b"_err"]) for f in futures] == [
        (True, "discarded"), (True, "gone"), (True, "gone")]
    assert wire.w[b"count"] == 0 and wire.take_out() is None


def test_what_spindle_leaves_out_says_so():
    """net.box's console connections and wrap(), deprecated in 2.6.0 since 1.10:
    ER_UNSUPPORTED, not a binary connection in their place."""
    instance = _instance()
    code = """
        local net = require('net.box')
        local ok1, e1 = pcall(net.connect, '127.0.0.1:1', {console = true})
        local ok2, e2 = pcall(net.wrap)
        return ok1, e1.code, e1.message, ok2, e2.message
    """

    def main():
        try:
            return [instance.runtime.to_py(v) for v in instance.run_chunk(code, "=test")]
        finally:
            instance.sched.stop()
    assert instance.sched.run(main) == [
        False, ErrorCode.ER_UNSUPPORTED,
        "Spindle does not support net.box console connections "
        "(use require('console').connect())",
        False, "Spindle does not support net.box.wrap"]
