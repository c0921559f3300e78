"""decode_request_fast (the iproto server's quick path, whose header is read by
xrow.usual_header, the one quick header reader) against the general path
decode_request(decode_packet(...)): for every header it takes, the same request;
for every mutation of a header, the same request or None (never another answer)."""
from __future__ import annotations

import itertools
import struct

import msgpack
import pytest

from spindle.core.iproto.errors import ClientError
from spindle.core.net.protocol import PacketError, decode_packet
from spindle.core.net.requests import Request, decode_request, decode_request_fast

BODIES = {
    1: msgpack.packb({0x10: 512, 0x11: 0, 0x12: 10, 0x13: 0, 0x14: 0, 0x20: [1]}),  # SELECT
    2: msgpack.packb({0x10: 512, 0x21: [1, "a"]}),                               # INSERT
    4: msgpack.packb({0x10: 512, 0x20: [1], 0x21: [["=", 2, 3]]}),               # UPDATE
    5: msgpack.packb({0x10: 512, 0x20: [1]}),                                    # DELETE
    64: b"",                                                                     # PING
    10: msgpack.packb({0x22: "echo", 0x21: [1, "a"]}),                           # CALL
    6: msgpack.packb({0x22: "echo", 0x21: [1]}),                                 # CALL_16
    8: msgpack.packb({0x27: "return ...", 0x21: []}),                            # EVAL
}
# CALL/EVAL bodies the general path refuses or takes in its own ways
CALL_BODIES = [
    {0x22: "f"}, {0x21: [1]}, {0x22: 1, 0x21: [1]}, {0x22: "f", 0x21: 5},
    {0x22: "f", 0x21: (1, 2)}, {"x": 1, 0x22: "f"}, {0x22: "f", 0x27: "e", 0x21: [None]},
    {0x27: "e"}, {0x27: b"e"}, {0x22: b"f"}, {0x22: "f", 0x50: {"k": [1]}}, {}, [1, 2], "s",
]
UINTS = (0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000,
         (1 << 63) + 5)


def _uint(value: int, width: int | None = None) -> bytes:
    """A MsgPack uint, shortest or in the given width (1, 2, 3, 5, 9 bytes)."""
    if width is None:
        return msgpack.packb(value)
    marker = {2: b"\xcc", 3: b"\xcd", 5: b"\xce", 9: b"\xcf"}[width]
    return marker + value.to_bytes(width - 1, "big")


def _same(raw: bytes) -> None:
    fast = decode_request_fast(raw)
    if fast is None:
        return
    slow = decode_request(decode_packet(raw))
    assert type(fast) is type(slow)
    assert fast.row == slow.row
    assert fast.row.type == slow.row.type and fast.row.sync == slow.row.sync
    assert fast.row.schema_version == slow.row.schema_version
    names = [name for cls in type(fast).__mro__ if cls is not Request
             for name in getattr(cls, "__slots__", ())]
    for name in names:
        assert getattr(fast, name) == getattr(slow, name), name


def _header(pairs: list[tuple[int, bytes]]) -> bytes:
    return bytes((0x80 | len(pairs),)) + b"".join(bytes((key,)) + value for key, value in pairs)


@pytest.mark.parametrize("rtype", sorted(BODIES))
def test_usual_headers_read_as_the_general_path(rtype):
    body = BODIES[rtype]
    for sync, schema in itertools.product(UINTS, (None, 0, 1, 0xFFFF, 0x1FFFFFFFF)):
        pairs = [(0, _uint(rtype)), (1, _uint(sync))]
        if schema is not None:
            pairs.append((5, _uint(schema)))
        raw = _header(pairs) + body
        if schema is None or schema <= 0xFFFF:
            assert decode_request_fast(raw) is not None
        _same(raw)
        _same(_header(list(reversed(pairs))) + body)


@pytest.mark.parametrize("rtype", sorted(BODIES))
def test_other_header_keys_read_as_the_general_path(rtype):
    """Keys a client does not usually send (LSN, REPLICA_ID, TIMESTAMP, GROUP_ID, TSN,
    FLAGS), values in wider encodings than needed, type values beyond uint32."""
    body = BODIES[rtype]
    extras = [(2, _uint(3)), (2, _uint(1 << 40)), (3, _uint(7)), (3, _uint(7, 9)),
              (4, b"\xcb" + struct.pack(">d", 1.5)),
              (4, b"\xca\x3f\xc0\x00\x00"), (7, _uint(1)), (7, _uint(1 << 33)),
              (8, _uint(0)), (8, _uint(2)), (8, _uint((1 << 64) - 1)), (9, _uint(1)),
              (6, _uint(1)), (0x50, _uint(1)), (1, b"\xa1x"), (5, b"\xc0")]
    for extra in extras:
        for width in (None, 2, 3, 5, 9):
            if width is not None and rtype > 0xFF and width == 2:
                continue
            type_value = _uint(rtype, width) if width != 2 or rtype <= 0xFF else _uint(rtype)
            _same(_header([(0, type_value), (1, _uint(9)), extra]) + body)
    _same(_header([(0, _uint(rtype + (1 << 32))), (1, _uint(9))]) + body)
    _same(_header([(0, _uint(rtype)), (1, _uint(9)), (5, _uint(1 << 32))]) + body)


def test_mutated_headers_read_as_the_general_path_or_not_at_all():
    raw = _header([(0, _uint(2)), (1, _uint(300)), (5, _uint(70000))]) + BODIES[2]
    for at in range(len(raw)):
        for byte in (0x00, 0x05, 0x7F, 0x80, 0x8F, 0x90, 0xC0, 0xC1, 0xCB, 0xCC, 0xCD, 0xCE,
                     0xCF, 0xD0, 0xDE, 0xFF):
            mutated = raw[:at] + bytes((byte,)) + raw[at + 1:]
            try:
                _same(mutated)
            except (PacketError, ClientError):
                # the general path refuses it: the quick path must have said None
                assert decode_request_fast(mutated) is None
    for cut in range(len(raw)):
        assert decode_request_fast(raw[:cut]) is None or cut == len(raw)


@pytest.mark.parametrize("rtype", [10, 6, 8])
def test_call_and_eval_bodies_read_as_the_general_path(rtype):
    head = _header([(0, _uint(rtype)), (1, _uint(77))])
    assert decode_request_fast(head + BODIES[rtype]) is not None
    for body in CALL_BODIES:
        raw = head + msgpack.packb(body)
        try:
            _same(raw)
        except (PacketError, ClientError):
            assert decode_request_fast(raw) is None
    assert decode_request_fast(head) is None                       # no body
    assert decode_request_fast(head + BODIES[rtype] + b"\x01") is None   # a value after it
