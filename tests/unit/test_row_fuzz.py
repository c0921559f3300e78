"""Replicated and logged rows mutated byte by byte, through every decoder the applier
and recovery use (decode_relay_put_frame, decode_dml_packet, decode_row with the
request decoding after it) and then executed on a space with indexes over odd
values: nothing but Tarantool errors (BoxError) comes out, the quick decoders agree
with the strict one whenever they take a row, and the space's indexes always hold
the same tuples. Seeded: a failure names its row."""
from __future__ import annotations

import decimal
import random

import pytest

from spindle.core.iproto.msgpack import MsgpackRaw, ext_hook, packb, raw_ext
from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import BoxError
from spindle.core.iproto.request import decode_dml_packet, decode_relay_put_frame, encode_dml_body
from spindle.core.iproto.xrow import XRow, decode_row, frame
from spindle.core.replication.apply import decode_request

ODD = ["\udcff\udcfe", "ok", 7, -1, 1.5, None, True, b"\xff", decimal.Decimal("1.5"),
       raw_ext(1, b""), raw_ext(1, b"\x00\x1a"), raw_ext(1, b"\x27\x1c"),
       raw_ext(2, b"\x01" * 15), raw_ext(3, b"\x01"), raw_ext(42, b"abc"),
       raw_ext(-5, b"ab"), raw_ext(-1, b"\x01\x02\x03"), [1, "\udcc3"], {"k": raw_ext(0, b"")}]
N_ROWS = 4000


def seed_rows(rng: random.Random) -> list[bytes]:
    rows = []
    for lsn in range(1, 200):
        value = rng.choice(ODD)
        tup = [lsn % 20, rng.choice(["a", "\udcff"]), value, rng.choice(ODD)]
        rtype = rng.choice((IprotoType.INSERT, IprotoType.REPLACE, IprotoType.UPDATE,
                            IprotoType.DELETE, IprotoType.UPSERT))
        if rtype in (IprotoType.INSERT, IprotoType.REPLACE):
            body = encode_dml_body(rtype, 512, tuple=MsgpackRaw(packb(tup)))
        elif rtype == IprotoType.UPDATE:
            body = encode_dml_body(rtype, 512, key=MsgpackRaw(packb([lsn % 20])),
                                   ops=MsgpackRaw(packb([["=", 3, value], ["+", 4, value]])))
        elif rtype == IprotoType.DELETE:
            body = encode_dml_body(rtype, 512, key=MsgpackRaw(packb([lsn % 20])))
        else:
            body = encode_dml_body(rtype, 512, tuple=MsgpackRaw(packb(tup)),
                                   ops=MsgpackRaw(packb([["=", 2, value]])))
        row = XRow(rtype, body, 1, 300 + lsn, 1700000000.25, 0, 300 + lsn, True)
        rows.append(row.encode())
    return rows


def mutate(rng: random.Random, packet: bytes, seeds: list[bytes]) -> bytes:
    data = bytearray(packet)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(4)
        pos = rng.randrange(len(data)) if data else 0
        if kind == 0 and data:
            data[pos] = rng.randrange(256)
        elif kind == 1:
            del data[pos:]
        elif kind == 2:
            data[pos:pos] = bytes((rng.choice((0xD4, 0xD5, 0xC7, 0xD8, 0x81, 0x91, 0xC1)),
                                   rng.randrange(256)))
        else:
            data[pos:pos] = rng.choice(seeds)[rng.randrange(20):]
    return bytes(data)


def make_space():
    engine = Engine(journal=lambda rows: None)
    space = engine.create_space(512, "t", format=[
        {"name": "id", "type": "unsigned"}, {"name": "s", "type": "string"},
        {"name": "a", "type": "any", "is_nullable": True}])
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    space.create_index(IndexDef(1, "s", parts=[KeyPart(1, "string")], unique=False))
    space.create_index(IndexDef(2, "n", parts=[KeyPart(3, "scalar", is_nullable=True)],
                                unique=False))
    return space


def consistent(space) -> bool:
    tuples = [sorted(map(packb, space.index(i).select())) for i in space.indexes]
    return all(t == tuples[0] for t in tuples)


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_rows_give_tarantool_errors_only(seed):
    rng = random.Random(seed)
    seeds = seed_rows(rng)
    space = make_space()
    applied = refused = 0
    for number in range(N_ROWS):
        packet = mutate(rng, rng.choice(seeds), seeds) if number % 4 else rng.choice(seeds)
        relay = decode_relay_put_frame(frame(packet), 0, ext_hook)
        quick = decode_dml_packet(packet, ext_hook)
        try:
            row, _ = decode_row(packet, 0, len(packet), exact=True)
            if row.type not in (2, 3, 4, 5, 9):
                continue
            request = decode_request(row)
        except BoxError:
            assert quick is None and relay is None, (number, packet.hex())
            refused += 1
            continue
        for taken in (quick, relay):
            if taken is not None:
                assert taken[0].body == row.body and taken[0].lsn == row.lsn
                assert packb(taken[1].tuple) == packb(request.tuple), (number, packet.hex())
        try:
            space.execute_request(request)
            applied += 1
        except BoxError:
            refused += 1
        assert consistent(space), (number, packet.hex())
    assert applied > N_ROWS // 10 and refused > N_ROWS // 10
