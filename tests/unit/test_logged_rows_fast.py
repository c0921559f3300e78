"""The quick ways taken by logged rows (the replica's stream, recovery) give what the
strict/general ways give, errors included: decode_dml_packet against decode_row,
dml_request_from_map's INSERT/REPLACE shortcut against its general loop,
execute_logged against TxnManager.execute, recovery's row counting, the
applier's transactions without a Txn against one in a Txn."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spindle.core import log
from spindle.core.iproto.msgpack import MsgpackError, ext_hook, pack, unpack
from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.instance.box import Box, recover_wal_tx
from spindle.core.box.row_apply import execute_logged
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto import request as iproto_request, xrow
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import (
    NO_BODY, DmlRequest, PutRequest, decode_dml_body, decode_dml_packet, dml_request_from_map,
    encode_dml_body,
)
from spindle.core.iproto.xrow import XRow, decode_row
from spindle.core.replication.apply import ReplicatedTx
from spindle.core.wal import recovery

DML = [IprotoType.INSERT, IprotoType.REPLACE, IprotoType.UPDATE, IprotoType.DELETE,
       IprotoType.UPSERT]


# ------------------------------------------------------------ decode_dml_packet

def strict(packet: bytes):
    """What the stream reader did before: decode_row, then the body decoded into
    its request (as a comparable view)."""
    row, _ = decode_row(packet, 0, len(packet), exact=True)
    return row, request_view(decode_dml_body(row.body, row.type, ext_hook))


def request_view(request):
    """Every field of a DML request, with its class (PutRequest has no ==)."""
    return (type(request).__name__,) + tuple(
        getattr(request, name) for name in ("type", "space_id", "index_id", "index_base",
                                            "key", "tuple", "ops", "tuple_meta"))


def quick_view(packet: bytes):
    """decode_dml_packet's answer with the request as request_view's."""
    quick = decode_dml_packet(packet, ext_hook)
    return None if quick is None else (quick[0], request_view(quick[1]))


def header(*pairs: tuple[bytes, bytes]) -> bytes:
    return bytes((0x80 | len(pairs),)) + b"".join(k + v for k, v in pairs)


BODY = encode_dml_body(IprotoType.INSERT, 512, tuple=[1, "a"])
TS = b"\xcb" + struct.pack(">d", 1700000000.5)

USUAL = {
    "single row": header((b"\x00", b"\x02"), (b"\x02", b"\x01"), (b"\x03", b"\x0f"),
                         (b"\x04", TS)) + BODY,
    "wide ints": header((b"\x00", b"\x03"), (b"\x02", b"\xcc\x1f"),
                        (b"\x03", b"\xcf" + struct.pack(">Q", 2**40)), (b"\x04", TS))
    + encode_dml_body(IprotoType.REPLACE, 512, tuple=[1]),
    "transaction member": header((b"\x00", b"\x04"), (b"\x02", b"\x01"),
                                 (b"\x03", b"\xcd\x01\x00"), (b"\x04", TS),
                                 (b"\x08", b"\x05")) + encode_dml_body(
        IprotoType.UPDATE, 512, key=[1], ops=[["=", 2, "x"]]),
    "transaction end": header((b"\x00", b"\x05"), (b"\x02", b"\x01"), (b"\x03", b"\x20"),
                              (b"\x04", TS), (b"\x08", b"\x02"), (b"\x09", b"\x01"))
    + encode_dml_body(IprotoType.DELETE, 512, key=[1]),
    "group, sync, schema": header((b"\x00", b"\x09"), (b"\x01", b"\xce\x00\x01\x00\x00"),
                                  (b"\x02", b"\x01"), (b"\x07", b"\x01"), (b"\x03", b"\x07"),
                                  (b"\x05", b"\x11"))
    + encode_dml_body(IprotoType.UPSERT, 512, tuple=[1], ops=[["+", 2, 1]]),
    "wrapped tsn": header((b"\x00", b"\x02"), (b"\x03", b"\x01"),
                          (b"\x08", b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff")) + BODY,
    "uuid in the tuple": header((b"\x00", b"\x02"), (b"\x03", b"\x01"))
    + b"\x82\x10\xcd\x02\x00\x21\x91\xd8\x02" + bytes(range(16)),
    # INSERT/REPLACE bodies laid out otherwise than {SPACE_ID: uint16, TUPLE: ...}
    "fixint space id": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + b"\x82\x10\x01\x21\x91\x01",
    "uint32 space id": header((b"\x00", b"\x03"), (b"\x03", b"\x01"))
    + b"\x82\x10\xce\x00\x01\x00\x00\x21\x91\x01",
    "tuple first": header((b"\x00", b"\x02"), (b"\x03", b"\x01"))
    + b"\x82\x21\x91\x01\x10\xcd\x02\x00",
    "uint16 space id below 256": header((b"\x00", b"\x02"), (b"\x03", b"\x01"))
    + b"\x82\x10\xcd\x00\x07\x21\x91\x01",
}

UNUSUAL = {
    "not a DML row": header((b"\x00", b"\x28"), (b"\x03", b"\x01")) + b"\x82\x02\x01\x03\x01",
    "no body": header((b"\x00", b"\x02"), (b"\x03", b"\x01")),
    "server version key": header((b"\x00", b"\x02"), (b"\x06", b"\x01")) + BODY,
    "int-typed value": header((b"\x00", b"\x02"), (b"\x03", b"\xd0\x05")) + BODY,
    "float32 timestamp": header((b"\x00", b"\x02"), (b"\x04", b"\xca\x00\x00\x00\x00")) + BODY,
    "fixint timestamp": header((b"\x00", b"\x02"), (b"\x04", b"\x01")) + BODY,
    "wide key": header((b"\xcc\x00", b"\x02"), (b"\x03", b"\x01")) + BODY,
    "map16 header": b"\xde\x00\x01\x00\x02" + BODY,
    "truncated header": header((b"\x00", b"\x02"), (b"\x03", b"\xcd\x01")),
    "two bodies": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + BODY + BODY,
    "tuple not an array": header((b"\x00", b"\x02"), (b"\x03", b"\x01"))
    + b"\x82\x10\xcd\x02\x00\x21\x01",
    "tuple cut short": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + b"\x82\x10\xcd\x02\x00\x21",
    "space id cut short": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + b"\x82\x10\xcd\x02",
    "a request refused: UPDATE without operations":
    header((b"\x00", b"\x04"), (b"\x03", b"\x01")) + b"\x82\x10\xcd\x02\x00\x20\x91\x01",
    "a request refused: negative space id":
    header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + b"\x82\x10\xff\x21\x91\x01",
    "truncated body": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + BODY[:-1],
    "bad byte": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + b"\xc1",
    "map keyed by an array": header((b"\x00", b"\x02"), (b"\x03", b"\x01"))
    + b"\x82\x10\xcd\x02\x00\x21\x91\x81\x91\x01\x02",
    "map keyed by a map": header((b"\x00", b"\x02"), (b"\x03", b"\x01")) + b"\x81\x81\x01\x02\x03",
}


@pytest.mark.parametrize("name", sorted(USUAL))
def test_usual_packets_decode_as_the_strict_way(name):
    packet = USUAL[name]
    row, request = quick_view(packet)
    expected_row, expected_request = strict(packet)
    assert row == expected_row and row.body == expected_row.body
    assert (row.tsn, row.is_commit) == (expected_row.tsn, expected_row.is_commit)
    assert request == expected_request


@pytest.mark.parametrize("name", sorted(UNUSUAL))
def test_unusual_packets_are_left_to_the_strict_way(name):
    assert decode_dml_packet(UNUSUAL[name], ext_hook) is None


packets = st.sampled_from(sorted(USUAL.values()))


@settings(max_examples=400)
@given(packets, st.integers(0, 200), st.integers(0, 255), st.booleans())
def test_mutated_packets_decode_as_the_strict_way_or_not_at_all(packet, where, byte, cut):
    """Whatever the quick decoder accepts, the strict one accepts with the same row
    and request; everything else it leaves alone."""
    where %= len(packet)
    mutated = packet[:where] if cut else packet[:where] + bytes((byte,)) + packet[where + 1:]
    quick = quick_view(mutated)
    if quick is None:
        return
    assert quick == strict(mutated)


RELAY_LAYOUT = ["single row", "transaction member", "transaction end",
                "flags without commit", "wrapped tsn", "member past 65535",
                "end past 65535", "first row past 65535", "member of a 128th row",
                "flags without commit past 65535"]
LSN_70000 = b"\xce" + struct.pack(">I", 70000)
# (rows of multi-row transactions past LSN 65535: a uint32 LSN, a fixint TSN field)
USUAL["member past 65535"] = header(
    (b"\x00", b"\x02"), (b"\x02", b"\x05"), (b"\x03", LSN_70000), (b"\x04", TS),
    (b"\x08", b"\x11")) + BODY
USUAL["end past 65535"] = header(
    (b"\x00", b"\x04"), (b"\x02", b"\x05"), (b"\x03", LSN_70000), (b"\x04", TS),
    (b"\x08", b"\x7f"), (b"\x09", b"\x01")) + encode_dml_body(IprotoType.DELETE, 512, key=[1])
USUAL["first row past 65535"] = header(
    (b"\x00", b"\x02"), (b"\x02", b"\x05"), (b"\x03", LSN_70000), (b"\x04", TS),
    (b"\x08", b"\x00")) + BODY
USUAL["flags without commit past 65535"] = header(
    (b"\x00", b"\x02"), (b"\x02", b"\x05"), (b"\x03", LSN_70000), (b"\x04", TS),
    (b"\x08", b"\x03"), (b"\x09", b"\x00")) + BODY
USUAL["member of a 128th row"] = header(
    (b"\x00", b"\x02"), (b"\x02", b"\x05"), (b"\x03", LSN_70000), (b"\x04", TS),
    (b"\x08", b"\xcc\x80")) + BODY
USUAL["flags without commit"] = header(
    (b"\x00", b"\x02"), (b"\x02", b"\x07"), (b"\x03", b"\xce" + struct.pack(">I", 70000)),
    (b"\x04", TS), (b"\x08", b"\xcc\x90"), (b"\x09", b"\x00")) + BODY
USUAL["wrapped tsn"] = header(
    (b"\x00", b"\x02"), (b"\x02", b"\x01"), (b"\x03", b"\x10"), (b"\x04", TS),
    (b"\x08", b"\xcf" + struct.pack(">Q", 2**64 - 3))) + BODY


@pytest.mark.parametrize("name", RELAY_LAYOUT)
def test_relay_layout_is_read_by_its_own_way_as_the_general_one(name):
    packet = USUAL[name]
    quick = xrow.relay_header(packet)          # (decode_dml_packet: see above)
    assert quick is not None and quick == xrow.usual_header(packet)


@pytest.mark.parametrize("name", ["member past 65535", "end past 65535"])
@pytest.mark.parametrize("field", [2, 4, 22], ids=["type", "replica id", "tsn"])
@pytest.mark.parametrize("byte", [0x7F, 0x80, 0x90, 0xCC, 0xFF])
def test_relay_layout_fixints_that_are_not_fixints_are_read_as_the_general_way(
        name, field, byte):
    """_relay_header takes the type, the replica id and the TSN field of a
    uint32-LSN row as fixints only: any other byte there is read the general way
    or not at all (None, or an error decode_dml_packet leaves to the strict way)."""
    packet = USUAL[name]
    mutated = packet[:field] + bytes((byte,)) + packet[field + 1:]
    try:
        quick = xrow.relay_header(mutated)
    except (IndexError, struct.error, MsgpackError):
        return
    if quick is not None:
        assert quick == xrow.usual_header(mutated)


@settings(max_examples=400)
@given(st.sampled_from(RELAY_LAYOUT), st.integers(0, 200), st.integers(0, 255),
       st.booleans())
def test_mutated_relay_headers_read_as_the_general_way_or_not_at_all(name, where, byte, cut):
    packet = USUAL[name]
    where %= len(packet)
    mutated = packet[:where] if cut else packet[:where] + bytes((byte,)) + packet[where + 1:]
    try:
        quick = xrow.relay_header(mutated)
    except (IndexError, struct.error, MsgpackError):
        return              # decode_dml_packet leaves it to the strict way
    if quick is not None:       # (XRow equality covers tsn and is_commit)
        assert quick == xrow.usual_header(mutated)


# ------------------------------------------------------------ decode_relay_put_frame

def frame_of(packet: bytes) -> bytes:
    return b"\xce" + struct.pack(">I", len(packet)) + packet


def frame_view(buf, pos: int):
    """decode_relay_put_frame's answer at `pos` as decode_dml_packet's, the row's
    wire bytes and the position after the frame; None when it leaves the frame."""
    quick = iproto_request.decode_relay_put_frame(buf, pos, ext_hook)
    if quick is None:
        return None
    row, request, stop = quick
    return row, row.body, row.wire, (row.tsn, row.is_commit), request_view(request), stop


def packet_view(buf, pos: int):
    """What decode_dml_packet makes of the frame at `pos`, as frame_view shows it."""
    stop = pos + 5 + struct.unpack_from(">I", buf, pos + 1)[0]
    quick = decode_dml_packet(bytes(buf[pos + 5:stop]), ext_hook)
    if quick is None:
        return None
    row, request = quick
    return row, row.body, row.wire, (row.tsn, row.is_commit), request_view(request), stop


def relayed_put(rtype: int, lsn: int, tsn_offset: int | None, commit: bool,
                replica_id: int = 1, space_id: int = 512, tup=(1, "a")) -> bytes:
    """A frame as a relay sends it: encode_header's layout (tsn_offset None: a
    single-row transaction)."""
    tsn = 0 if tsn_offset is None else lsn - tsn_offset
    row = XRow(rtype, encode_dml_body(rtype, space_id, tuple=list(tup)), replica_id, lsn,
               1700000000.25, 0, tsn, commit or tsn_offset is None)
    return frame_of(row.encode())


TAKEN = [(rtype, lsn, tsn_offset, commit)
         for rtype in (IprotoType.INSERT, IprotoType.REPLACE)
         for lsn in (256, 65535, 65536, 70000, 2**32 - 1)
         for tsn_offset, commit in ((None, True), (0, False), (1, False), (127, False),
                                    (1, True), (127, True))]


@pytest.mark.parametrize("rtype, lsn, tsn_offset, commit", TAKEN)
def test_relay_put_frames_are_read_whole_as_decode_dml_packet_reads_them(
        rtype, lsn, tsn_offset, commit):
    """The layouts a relay writes for INSERT/REPLACE past LSN 255 are all taken,
    anywhere in a buffer, with the same row, wire bytes and request."""
    frame = relayed_put(rtype, lsn, tsn_offset, commit, replica_id=31)
    buf = bytearray(b"\x00" * 3 + frame + relayed_put(rtype, lsn + 1, None, True))
    quick = frame_view(buf, 3)
    assert quick is not None and quick[2] is not None
    assert quick == packet_view(buf, 3)
    assert quick[-1] == 3 + len(frame)


@pytest.mark.parametrize("frame", [
    relayed_put(IprotoType.INSERT, 255, None, True),        # LSN not past 255
    relayed_put(IprotoType.INSERT, 2**32, None, True),      # uint64 LSN
    relayed_put(IprotoType.INSERT, 70000, 128, False),      # TSN offset not a fixint
    relayed_put(IprotoType.INSERT, 70000, None, True, replica_id=32),   # VCLOCK_MAX
    relayed_put(IprotoType.INSERT, 70000, None, True, space_id=255),    # fixint/uint8 id
    relayed_put(IprotoType.INSERT, 70000, None, True, space_id=65536),  # uint32 id
    relayed_put(IprotoType.INSERT, 70000, None, True, tup=()) [:-1] + b"\x01",  # not an array
    relayed_put(IprotoType.INSERT, 70000, None, True)[:-1],             # cut short
    frame_of(relayed_put(IprotoType.INSERT, 70000, None, True)[5:] + b"\x01"),  # 2 values
    frame_of(USUAL["flags without commit past 65535"]),
    frame_of(USUAL["end past 65535"]),                                  # a DELETE
    # a single-row transaction written with TSN and FLAGS: not encode_header's
    frame_of(header((b"\x00", b"\x02"), (b"\x02", b"\x05"), (b"\x03", LSN_70000),
                    (b"\x04", TS), (b"\x08", b"\x00"), (b"\x09", b"\x01")) + BODY),
], ids=["lsn 255", "uint64 lsn", "tsn offset 128", "replica 32", "space 255",
        "space 65536", "tuple not an array", "cut short", "a byte after the tuple",
        "flags 0", "delete", "tsn 0 with commit"])
def test_other_frames_are_left_to_decode_dml_packet(frame):
    assert frame_view(bytearray(frame), 0) is None


def test_a_length_prefix_ending_inside_the_layout_is_left_to_decode_dml_packet():
    frame = relayed_put(IprotoType.INSERT, 70000, 3, False)
    short = frame[:1] + struct.pack(">I", 20) + frame[5:]    # ends inside the header
    assert frame_view(bytearray(short), 0) is None
    assert frame_view(bytearray(short[:25]), 0) is None


@settings(max_examples=500)
@given(st.sampled_from(TAKEN), st.integers(0, 60), st.integers(0, 255), st.booleans())
def test_mutated_relay_put_frames_read_as_decode_dml_packet_or_not_at_all(
        layout, where, byte, cut):
    frame = relayed_put(*layout)
    where %= len(frame)
    mutated = frame[:where] if cut else frame[:where] + bytes((byte,)) + frame[where + 1:]
    quick = frame_view(bytearray(mutated), 0)
    if quick is not None:
        assert quick == packet_view(mutated, 0)


# ------------------------------------------------------------ dml_request_from_map

class PlainDict(dict):
    """Not exactly a dict: dml_request_from_map takes its general loop for it."""


def general(decoded, request_type):
    if type(decoded) is dict:
        decoded = PlainDict(decoded)
    return dml_request_from_map(decoded, request_type)


REQUEST_FIELDS = ("type", "space_id", "index_id", "index_base", "key", "tuple", "ops",
                  "tuple_meta", "limit", "offset", "iterator")


def outcome(fn, *args):
    """A request as the values of its fields (a PutRequest holds what its
    DmlRequest would, with no `extra`), or the error."""
    try:
        request = fn(*args)
    except ClientError as exc:
        return ("error", exc.code, str(exc))
    if not isinstance(request, (DmlRequest, PutRequest)):
        return request
    return (tuple(getattr(request, name) for name in REQUEST_FIELDS),
            getattr(request, "extra", {}))


BODIES = [
    {0x10: 512, 0x21: [1, "a"]},
    {0x21: [1], 0x10: 0},
    {0x10: 16.0, 0x21: [1]},              # a float key is no SPACE_ID
    {16.0: 512, 0x21: [1]},
    {0x10: True, 0x21: [1]},
    {0x10: -1, 0x21: [1]},
    {0x10: 512, 0x21: (1, 2)},
    {0x10: 512, 0x21: "x"},
    {0x10: 512, 0x20: [1]},
    {0x10: 512, "k": [1]},
    {0x10: 512},
    {0x10: 512, 0x21: [1], 0x50: 1},
    [1, 2],
    None,
    NO_BODY,
]


@pytest.mark.parametrize("request_type", DML)
@pytest.mark.parametrize("body", BODIES, ids=repr)
def test_request_shortcut_matches_the_general_loop(body, request_type):
    assert outcome(dml_request_from_map, body, request_type) == \
        outcome(general, body, request_type)


# ------------------------------------------------------------ execute_logged

def make_engine():
    engine = Engine()
    space = engine.create_space(512, "t", indexes=[
        IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]),
        IndexDef(1, "sk", parts=[KeyPart(1, "string")]),
    ])
    return engine, space


def requests():
    body = [
        (IprotoType.INSERT, {0x10: 512, 0x21: [1, "a"]}),
        (IprotoType.REPLACE, {0x10: 512, 0x21: [2, "b"]}),
        (IprotoType.INSERT, {0x10: 512, 0x21: [1, "z"]}),          # duplicate
        (IprotoType.INSERT, {0x10: 512, 0x21: [3, "a"]}),          # secondary duplicate
        (IprotoType.INSERT, {0x10: 512, 0x21: ["x", "c"]}),        # field type
        (IprotoType.UPDATE, {0x10: 512, 0x20: [2], 0x21: [["=", 2, "bb"]]}),
        (IprotoType.UPDATE, {0x10: 512, 0x20: [2], 0x21: [["=", 1, 9]]}),   # primary key
        (IprotoType.UPDATE, {0x10: 512, 0x20: [7], 0x21: [["=", 2, "q"]]}),
        (IprotoType.DELETE, {0x10: 512, 0x11: 1, 0x20: ["a"]}),    # by the secondary key
        (IprotoType.UPSERT, {0x10: 512, 0x21: [4, "d"], 0x28: [["=", 2, "e"]]}),
        (IprotoType.UPSERT, {0x10: 512, 0x21: [4, "d"], 0x28: [["=", 2, "e"]]}),
        (IprotoType.DELETE, {0x10: 512, 0x20: [8]}),
    ]
    return [dml_request_from_map(b, t) for t, b in body]


def run_statements(executor, with_trigger):
    """Each request in a replicated transaction, alone; what each left behind."""
    engine, space = make_engine()
    fired = []
    if with_trigger:
        space.on_replace.add(lambda old, new, name, op: fired.append((old, new, op)))
    txns = engine.txns
    results = []
    txn = txns.begin()
    txn.replicated = True
    for request in requests():
        before = len(txn.statements)
        results.append(outcome(executor, txns, txn, space, request))
        results.append((len(txn.statements) - before, space.select(), space.bsize(),
                        [stmt.row for stmt in txn.statements]))
    txns.rollback()
    results.append((space.select(), space.bsize()))
    return results, fired


def through_execute(txns, txn, space, request):
    return txns.execute(space, request)


def through_execute_logged(txns, txn, space, request):
    return execute_logged(txn, space, request)


@pytest.mark.parametrize("with_trigger", [False, True])
def test_execute_logged_matches_a_replicated_statement(with_trigger):
    assert run_statements(through_execute_logged, with_trigger) == \
        run_statements(through_execute, with_trigger)


def test_execute_logged_takes_the_full_statement_when_a_trigger_may_look():
    engine, space = make_engine()
    seen = []
    space.before_replace.add(lambda old, new, name, op: seen.append(engine.txns.current))
    txn = engine.txns.begin()
    txn.replicated = True
    execute_logged(txn, space, requests()[0])
    assert seen == [txn] and len(txn.statements) == 1
    engine.txns.rollback()
    assert space.select() == []


# ------------------------------------------------------------ recovery counting

def test_progress_lines_every_hundred_thousand_rows(monkeypatch):
    lines = []
    monkeypatch.setattr(log, "info", lambda fmt, *args: lines.append(fmt % args))
    total = 0
    for more in (99_999, 1, 150_000, 50_000, 0, 7):
        total = recovery._count_rows(total, more)
    assert total == 300_007
    assert lines == ["0.1M rows processed", "0.2M rows processed", "0.3M rows processed"]


def test_row_helpers_used_here_round_trip():
    row = XRow(type=IprotoType.INSERT, replica_id=1, lsn=5, body=pack({0x10: 1, 0x21: [1]}))
    packet = row.encode()
    assert request_view(decode_dml_packet(packet, None)[1]) == request_view(
        PutRequest(IprotoType.INSERT, 1, [1]))


# ------------------------------------------------------------ recover_wal_tx

def wal_row(rtype, lsn, **body):
    return XRow(type=rtype, replica_id=1, lsn=lsn, tsn=lsn, body=encode_dml_body(
        rtype, body.pop("space", 512), **body))


def recover_in_txn(box, rows):
    """Recovery's transaction as it was: every row a full statement in a txn."""
    txns = box.engine.txns
    txns.begin()
    try:
        for row in rows:
            request = dml_request_from_map(unpack(row.body), row.type)
            box.engine.space(request.space_id).execute_request(request)
    except BaseException:
        txns.rollback()
        raise
    txns.commit()


TRANSACTIONS = {
    "insert": [wal_row(IprotoType.INSERT, 1, tuple=[1, "a"])],
    "two spaces": [wal_row(IprotoType.INSERT, 1, tuple=[1, "a"]),
                   wal_row(IprotoType.REPLACE, 2, space=513, tuple=[5, "x"])],
    "refused second row": [wal_row(IprotoType.INSERT, 1, tuple=[2, "b"]),
                           wal_row(IprotoType.INSERT, 2, tuple=[1, "dup"])],
    "refused after a trigger": [wal_row(IprotoType.INSERT, 1, tuple=[2, "b"]),
                                wal_row(IprotoType.REPLACE, 2, space=513, tuple=[6, "y"]),
                                wal_row(IprotoType.INSERT, 3, tuple=[1, "dup"])],
    "unknown space": [wal_row(IprotoType.INSERT, 1, tuple=[3, "c"]),
                      wal_row(IprotoType.INSERT, 2, space=999, tuple=[1])],
    "update and delete": [wal_row(IprotoType.UPDATE, 1, key=[1], ops=[["=", 2, "u"]]),
                          wal_row(IprotoType.DELETE, 2, space=513, key=[5])],
}


@pytest.fixture
def boxes(sched):
    def make(trigger_on_513):
        box = Box(sched)
        fired = []
        for space_id, name in ((512, "a"), (513, "b")):
            space = box.engine.create_space(space_id, name, indexes=[
                IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")])])
            space.replace([1 if space_id == 512 else 5, "seed"])
        if trigger_on_513:
            box.engine.space(513).on_replace.add(
                lambda old, new, name, op: fired.append((name, old, new, op)))
        return box, fired
    return make


def state(box, fired, outcome_):
    return (outcome_, [box.engine.space(i).select() for i in (512, 513)],
            [box.engine.space(i).bsize() for i in (512, 513)], fired,
            box.engine.txns.current)


@pytest.mark.parametrize("trigger", [False, True])
@pytest.mark.parametrize("name", sorted(TRANSACTIONS))
def test_recover_wal_tx_matches_a_transaction(boxes, sched, name, trigger):
    results = []
    for apply in (recover_wal_tx, recover_in_txn):
        box, fired = boxes(trigger)
        rows = TRANSACTIONS[name]
        results.append(sched.run(lambda: state(box, fired, outcome(apply, box, rows))))
    assert results[0] == results[1]


# ------------------------------------------------------------ ReplicatedTx.apply

def apply_in_txn(box, rows):
    """The applier's transaction as it was: every row a statement of a real
    transaction, committed through commit_async (reference for ReplicatedTx)."""
    txns = box.engine.txns
    txn = txns.begin()
    txn.replicated = True
    try:
        for row in rows:
            request = dml_request_from_map(unpack(row.body), row.type)
            execute_logged(txn, box.engine.space(request.space_id), request)
    except BaseException:
        txns.rollback()
        raise
    txn.on_commit.add(lambda t: box.replicaset.applier.on_commit.run(t))
    txns.commit_async(box.submit_replicated, rows)
    return True


def replicated(box, rows):
    return ReplicatedTx(box).apply(rows)


def replica_state(box, fired, outcome_, commits):
    return (state(box, fired, outcome_), box.replicaset.vclock.get(1), len(commits))


@pytest.mark.parametrize("trigger", [False, True])
@pytest.mark.parametrize("name", sorted(TRANSACTIONS))
def test_replicated_tx_matches_a_transaction(boxes, sched, name, trigger):
    """Without a trigger no transaction is made (or one is, from the first row of
    a space with a trigger on): the same data, errors, vclock and commits."""
    results = []
    for apply in (replicated, apply_in_txn):
        box, fired = boxes(trigger)
        commits = []
        box.replicaset.applier.on_commit.add(commits.append)
        rows = TRANSACTIONS[name]
        results.append(sched.run(lambda: replica_state(
            box, fired, outcome(apply, box, rows), commits)))
    assert results[0] == results[1]


def failing_journal(box, at_once: bool) -> list:
    """Make the replica's journal fail its writes: by refusing the submission, or
    later, when the returned list's completions are called (the WAL completes
    after the applier has gone on)."""
    pending = []

    def submit(rows, done):
        if at_once:
            raise ClientError(ErrorCode.ER_WAL_IO)
        pending.append(lambda: done(ClientError(ErrorCode.ER_WAL_IO)))
    box.submit_replicated = submit
    return pending


def apply_then_fail(box, rows, pending):
    result = outcome(replicated, box, rows)
    for complete in pending:
        complete()
    return result


@pytest.mark.parametrize("at_once", [False, True])
def test_replicated_tx_failed_write_undoes_it_with_or_without_a_transaction(
        boxes, sched, at_once):
    """Both ways of a replicated transaction (none made: no trigger; adopted half
    way: a trigger on 513) end a failed write alike: undone, the shared diag set,
    the appliers told, the applier vclock back to what is written."""
    results = []
    for trigger in (False, True):
        box, fired = boxes(trigger)
        pending = failing_journal(box, at_once)
        rollbacks, commits = [], []
        box.replicaset.applier.on_rollback.add(rollbacks.append)
        box.replicaset.applier.on_commit.add(commits.append)
        rows = [wal_row(IprotoType.INSERT, 1, tuple=[2, "a"]),
                wal_row(IprotoType.REPLACE, 2, space=513, tuple=[6, "x"])]
        bsizes = [box.engine.space(i).bsize() for i in (512, 513)]
        result = sched.run(lambda: apply_then_fail(box, rows, pending))
        applier = box.replicaset.applier
        results.append((result, [box.engine.space(i).select() for i in (512, 513)],
                        [box.engine.space(i).bsize() for i in (512, 513)] == bsizes,
                        applier.diag.code, len(rollbacks), commits,
                        applier.vclock.get(1), box.engine.txns.current))
    assert results[0] == results[1]
    assert results[0][1:] == ([[(1, "seed")], [(5, "seed")]], True,
                              ErrorCode.ER_WAL_IO, 1, [], 0, None)
