"""net.box's wire helpers (lua/modules/netbox/transport.py): the request frame, the
error of an error reply, and bodies that are not what they should be."""
from __future__ import annotations

import msgpack
from hypothesis import given, strategies as st

from spindle.core.iproto.errors import ErrorCode
from spindle.core.iproto.xrow import decode_row
from spindle.lua.modules.netbox.transport import _error_24, encode_request, reply_error

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
