"""A replicated INSERT/REPLACE is not packed again for its bsize: the stream's quick
decoders (decode_relay_put_frame, decode_dml_packet) hand the tuple's bytes on as
PutRequest.data and the space counts their length (issue 22's "decodes a tuple only
to re-encode it for its length"). Bytes the packer would not write for the values
they decode to are packed again, so that a tuple's removal, which packs it, takes
away what its insertion added."""
from __future__ import annotations

import struct

import msgpack
import pytest

from spindle.core.box import space as space_module
from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.box.row_apply import execute_logged
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.msgpack import ext_hook
from spindle.core.iproto.request import (
    PutRequest, decode_dml_packet, decode_relay_put_frame, dml_request_from_map,
    encode_dml_body,
)
from spindle.core.iproto.xrow import XRow, frame


@pytest.fixture
def packs(monkeypatch):
    """Every pack of a tuple the space makes, counted."""
    calls = []
    pack_tuple = space_module.pack_tuple

    def counted(tup):
        calls.append(tup)
        return pack_tuple(tup)
    monkeypatch.setattr(space_module, "pack_tuple", counted)
    return calls


def make_space():
    engine = Engine()
    space = engine.create_space(512, "t", indexes=[
        IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")])])
    return engine, space


def packet_of(tuple_bytes: bytes, lsn: int = 70000) -> bytes:
    """A relay's INSERT row (header as encode_header writes it) whose tuple is
    `tuple_bytes` as they are."""
    body = b"\x82\x10\xcd\x02\x00\x21" + tuple_bytes
    return XRow(IprotoType.INSERT, body, 1, lsn, 1700000000.5, 0, lsn, True).encode()


def quick_requests(packet: bytes) -> list:
    relayed = decode_relay_put_frame(frame(packet), 0, ext_hook)
    streamed = decode_dml_packet(packet, ext_hook)
    assert relayed is not None and streamed is not None
    return [relayed[1], streamed[1]]


@pytest.mark.parametrize("tup", [[1, "payload"], [70000, "x" * 40, 2.5, [1, -2, None, True]],
                                 [2, b"\x00\x01"]])
def test_a_replicated_insert_is_not_packed_for_its_bsize(packs, tup):
    data = msgpack.packb(tup)
    for request in quick_requests(packet_of(data)):
        assert type(request) is PutRequest and request.data == data
        engine, space = make_space()
        txn = engine.txns.begin()
        txn.replicated = True
        execute_logged(txn, space, request)
        assert packs == []
        assert space.bsize() == len(data)
        assert space.select() == [tuple(tup)]
        assert txn.statements[-1].tuple_data == data
        engine.txns.rollback()
        assert space.bsize() == 0 and space.select() == []


@pytest.mark.parametrize("tuple_bytes", [
    b"\x92\x01\xca" + struct.pack(">f", 1.5),                 # a float32: packed as a double
    b"\x92\x01\xda\x00\x03abc",                               # str16 of a 3-byte string
    b"\x92\x01\xdb\x00\x00\x00\x03abc",                       # str32 of one
    b"\x92\xcd\x01\xca\xa1x",                                  # 0xca in a value: packed too
])
def test_bytes_the_packer_would_not_write_are_packed_again(packs, tuple_bytes):
    tup = list(msgpack.unpackb(tuple_bytes))
    for request in quick_requests(packet_of(tuple_bytes)):
        assert request.data is None
        engine, space = make_space()
        txn = engine.txns.begin()
        txn.replicated = True
        execute_logged(txn, space, request)
        assert space.bsize() == len(msgpack.packb(tup))
        engine.txns.rollback()
        assert space.bsize() == 0
    assert len(packs) == 2


def test_other_requests_pack_their_tuple(packs):
    """A Lua insert, a request of the strict decoder: no bytes to take, one pack."""
    engine, space = make_space()
    body = encode_dml_body(IprotoType.INSERT, 512, tuple=[5, "five"])
    request = dml_request_from_map(msgpack.unpackb(body, strict_map_key=False),
                                   IprotoType.INSERT)
    assert request.data is None
    txn = engine.txns.begin()
    txn.replicated = True
    execute_logged(txn, space, request)
    assert len(packs) == 1 and space.bsize() == len(msgpack.packb([5, "five"]))
    engine.txns.rollback()
