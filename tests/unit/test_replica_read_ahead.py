"""A replica's stream taken many rows at a time, and its rows written without being
encoded again: TxAssembler.take_frames against push() row by row, XRow.wire against
the general encoder (byte for byte, multi-row TSN and FLAGS included), the WAL's
LSN assignment of a replicated transaction against the general loop, the applier
vclock update of a usual transaction."""
from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spindle.core.iproto.msgpack import ext_hook
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.request import decode_dml_packet, encode_dml_body
from spindle.core.iproto.row_block import encode_row
from spindle.core.iproto.xrow import XRow, decode_row
from spindle.core.replication import streams
from spindle.core.replication.apply import StreamError, _one_replica_rising
from spindle.core.replication.streams import TxAssembler
from spindle.core.vclock import VClock
from spindle.core.wal.journal import BrokenLsn, assign_lsn

from .applier_fake_master import CLUSTER_UUID, frame_row, row_frame
from .test_logged_rows_fast import request_view

DML = [IprotoType.INSERT, IprotoType.REPLACE, IprotoType.UPDATE, IprotoType.DELETE,
       IprotoType.UPSERT]
BODY = encode_dml_body(IprotoType.INSERT, 512, tuple=[1, "a"])
# a valid body of each DML type (a row whose request is refused is not a quick one)
BODIES = {IprotoType.INSERT: BODY, IprotoType.REPLACE: BODY,
          IprotoType.UPDATE: encode_dml_body(IprotoType.UPDATE, 512, key=[1],
                                             ops=[["=", 2, "b"]]),
          IprotoType.DELETE: encode_dml_body(IprotoType.DELETE, 512, key=[1]),
          IprotoType.UPSERT: encode_dml_body(IprotoType.UPSERT, 512, tuple=[1, "a"],
                                             ops=[["=", 2, "b"]])}


def relayed(rtype=IprotoType.INSERT, lsn=15, tsn=0, commit=True, replica_id=1,
            timestamp=1700000000.25, body=None) -> bytes:
    """A packet as a relay writes it (the general encoder, no length prefix)."""
    return XRow(type=rtype, body=BODIES[rtype] if body is None else body,
                replica_id=replica_id, lsn=lsn, timestamp=timestamp, tsn=tsn or lsn,
                is_commit=commit).encode()


def general_encoding(row: XRow) -> bytes:
    """encode_row of the row without its wire bytes (replace() does not copy them)."""
    plain = dataclasses.replace(row)
    assert plain.wire is None
    return encode_row(plain)


# ------------------------------------------------------------ XRow.wire

@settings(max_examples=300)
@given(st.sampled_from(DML), st.integers(1, 127), st.integers(1, 2**64 - 1),
       st.integers(0, 300), st.booleans(), st.floats(1.0, 2e9))
def test_a_relayed_row_is_written_as_the_general_encoder_writes_it(
        rtype, replica_id, lsn, back, commit, timestamp):
    tsn = max(lsn - back, 1)
    packet = relayed(rtype, lsn, tsn, commit, replica_id)
    row, _ = decode_dml_packet(packet, ext_hook)
    assert row.wire is packet                 # the layout encode_header writes
    row.timestamp = timestamp                 # what the WAL does
    assert encode_row(row) == general_encoding(row)


USUAL_NOT_CANONICAL = {
    # LSN, then the fields after TIMESTAMP (TSN, FLAGS), each unlike encode_header's
    "lsn not in the fewest bytes": (b"\x03\xcd\x00\x0f", ()),
    "lsn below 65536 as a uint32": (b"\x03\xce\x00\x00\xff\xff", ()),
    "lsn below 65536 as a uint32, in a transaction": (b"\x03\xce\x00\x00\x10\x00",
                                                      (b"\x08\x01",)),
    "tsn field not in the fewest bytes": (b"\x03\x0f", (b"\x08\xcc\x01",)),
    "flags beside COMMIT": (b"\x03\x0f", (b"\x08\x01", b"\x09\x03")),
    "FLAGS without COMMIT": (b"\x03\x0f", (b"\x08\x01", b"\x09\x00")),
    "COMMIT on a single-row transaction": (b"\x03\x0f", (b"\x08\x00", b"\x09\x01")),
    # a TSN field equal to the LSN is TSN 0, "not set": written as a single-row header
    "TSN 0 with COMMIT": (b"\x03\x0f", (b"\x08\x0f", b"\x09\x01")),
    "TSN 0 without FLAGS": (b"\x03\x0f", (b"\x08\x0f",)),
    "replica id 0": (b"\x03\x0f", ()),
}


@pytest.mark.parametrize("name", sorted(USUAL_NOT_CANONICAL))
def test_a_row_the_general_encoder_writes_otherwise_keeps_no_wire(name):
    lsn_part, tail = USUAL_NOT_CANONICAL[name]
    replica_id = b"\x00" if name == "replica id 0" else b"\x01"
    packet = (bytes((0x84 + len(tail),)) + b"\x00\x02\x02" + replica_id + lsn_part
              + b"\x04\xcb" + struct.pack(">d", 1.5) + b"".join(tail) + BODY)
    row, _ = decode_dml_packet(packet, ext_hook)
    assert row == decode_row(packet, exact=True)[0]
    assert row.wire is None
    row.timestamp = 2.5
    assert encode_row(row) == general_encoding(row)


@pytest.mark.parametrize("lsn", [b"\x0f", b"\xce\x00\x01\x00\x00"])
@pytest.mark.parametrize("tsn_marker", [0x80, 0x8F, 0x90, 0xA0, 0xC0, 0xC2, 0xCB, 0xD0, 0xFF])
def test_a_tsn_that_is_not_a_uint_is_left_to_the_strict_decoder(lsn, tsn_marker):
    packet = (b"\x85\x00\x02\x02\x01\x03" + lsn + b"\x04\xcb" + struct.pack(">d", 1.5)
              + b"\x08" + bytes((tsn_marker,)) + BODY)
    assert decode_dml_packet(packet, ext_hook) is None


@settings(max_examples=500)
@given(st.sampled_from([relayed(), relayed(lsn=300, tsn=298, commit=False),
                        relayed(IprotoType.DELETE, 2**33, 2**33 - 5),
                        relayed(lsn=16, tsn=15, commit=True),
                        relayed(lsn=70000, tsn=69990, commit=False),
                        relayed(IprotoType.REPLACE, 70000, 69990, commit=True),
                        relayed(lsn=2**32 - 1, tsn=2**32 - 2, commit=False)]),
       st.integers(0, 200), st.integers(0, 255))
def test_mutated_relayed_rows_are_written_as_the_general_encoder_writes_them(
        packet, where, byte):
    where %= len(packet)
    mutated = packet[:where] + bytes((byte,)) + packet[where + 1:]
    quick = decode_dml_packet(mutated, ext_hook)
    if quick is None:
        return
    row, _ = quick
    if row.lsn == 0 or row.replica_id == 0:
        return          # not a row the WAL takes as replicated
    row.timestamp = 1234.5
    assert encode_row(row) == general_encoding(row)


def test_a_skipped_conflict_nop_does_not_take_the_wire_bytes():
    row, _ = decode_dml_packet(relayed(), ext_hook)
    nop = dataclasses.replace(row, type=IprotoType.NOP, body=None)
    assert row.wire is not None and nop.wire is None


# ------------------------------------------------------------ assign_lsn

def _rows(*pairs):
    return [XRow(type=IprotoType.INSERT, replica_id=rid, lsn=lsn, tsn=pairs[0][1],
                 is_commit=i == len(pairs) - 1) for i, (rid, lsn) in enumerate(pairs)]


@pytest.mark.parametrize("pairs, vclock, expected", [
    (((2, 10), (2, 11), (2, 12)), {2: 9}, {2: 12}),
    (((2, 10), (3, 4), (2, 12)), {2: 9, 3: 1}, {2: 12, 3: 4}),
    (((2, 10), (2, 11)), {2: 10}, BrokenLsn),
    (((2, 10), (2, 10)), {2: 1}, BrokenLsn),
    (((2, 10), (2, 9)), {2: 1}, BrokenLsn),
])
def test_replicated_transactions_are_signed_as_the_general_loop_signs_them(
        pairs, vclock, expected):
    rows = _rows(*pairs)
    clock = VClock(vclock)
    headers = [(r.replica_id, r.lsn, r.tsn, r.is_commit) for r in rows]
    if expected is BrokenLsn:
        with pytest.raises(BrokenLsn):
            assign_lsn(rows, clock, 1, 77.0)
        return
    assign_lsn(rows, clock, 1, 77.0)
    assert clock == VClock(expected)
    assert [(r.replica_id, r.lsn, r.tsn, r.is_commit) for r in rows] == headers
    assert all(r.timestamp == 77.0 for r in rows)


def test_a_replicated_transaction_with_local_trigger_rows_signs_them():
    rows = _rows((2, 10), (2, 11)) + [XRow(type=IprotoType.INSERT, group_id=1)]
    clock = VClock({2: 9, 1: 5})
    assign_lsn(rows, clock, 1, 77.0)
    assert clock == VClock({2: 11, 1: 5, 0: 1}) and rows[2].lsn == 1


@pytest.mark.parametrize("pairs, rising", [
    (((1, 5), (1, 6), (1, 9)), True), (((1, 5),), True), (((1, 5), (2, 6)), False),
    (((1, 5), (1, 5)), False), (((1, 6), (1, 5)), False),
])
def test_one_replica_rising(pairs, rising):
    assert _one_replica_rising(_rows(*pairs)) is rising


# ------------------------------------------------------------ take_frames

class _Box:
    class schema:
        replicaset_uuid = CLUSTER_UUID


def stream(*frames: bytes) -> bytearray:
    return bytearray(b"".join(frames))


def requests_view(requests: list) -> list:
    """The decoded requests of a transaction, comparable (PutRequest has no ==)."""
    return [None if r is None else request_view(r) for r in requests]


def push_frame(assembler: TxAssembler, data, pos: int, txs: list) -> int:
    """push() the frame at `pos` (its transaction, if it ends one, into `txs`);
    the position after it."""
    length = struct.unpack_from(">I", data, pos + 1)[0]
    packet = bytes(data[pos + 5:pos + 5 + length])
    quick = decode_dml_packet(packet, ext_hook)
    row, request = quick if quick is not None else (decode_row(packet)[0], None)
    tx = assembler.push(row, request)
    if tx is not None:
        txs.append((tx, requests_view(assembler.tx_requests)))
    return pos + 5 + length


def pushed(data: bytes, lsns: dict | None = None):
    """The transactions push() makes of the frames, and the error it raises."""
    assembler = TxAssembler(_Box, lsns)
    txs, pos = [], 0
    try:
        while pos < len(data):
            pos = push_frame(assembler, data, pos, txs)
    except StreamError as exc:
        return txs, exc.message
    return txs, None


def taken(data: bytearray, lsns: dict | None = None):
    """The same through take_frames, push() taking each frame it leaves."""
    assembler = TxAssembler(_Box, lsns)
    txs, pos = [], 0
    try:
        while pos < len(data):
            pos, _ = assembler.take_frames(data, pos)
            while (tx := assembler.pop()) is not None:
                txs.append((tx, requests_view(assembler.tx_requests)))
            if pos < len(data):
                pos = push_frame(assembler, data, pos, txs)
    except StreamError as exc:
        return txs, exc.message
    return txs, None


def _ins(lsn, **kw):
    return row_frame(IprotoType.INSERT, lsn, tuple=[lsn, "x"], **kw)


STREAMS = {
    "single rows": [_ins(15), _ins(16), _ins(17)],
    "transactions": [_ins(15, tsn=15, commit=False), _ins(16, tsn=15, commit=False),
                     _ins(17, tsn=15), _ins(18), _ins(19, tsn=19, commit=False),
                     _ins(20, tsn=19)],
    "a NOP between": [_ins(15), row_frame(IprotoType.NOP, 16), _ins(17)],
    "a synchro row": [_ins(15, tsn=15, commit=False),
                      row_frame(IprotoType.CONFIRM, 16, tsn=15), _ins(17)],
    "bad first tsn": [_ins(15), _ins(17, tsn=16, commit=False)],
    "interleaving": [_ins(15, tsn=15, commit=False), _ins(16)],
    "unknown replica": [_ins(15), _ins(16, replica_id=32)],
}


# past LSN 65535 (uint32 LSNs): the INSERT/REPLACE frames a relay writes are read
# whole (decode_relay_put_frame), the others as above
BIG = 70000
STREAMS.update({
    "single rows past 65535": [_ins(BIG), _ins(BIG + 1),
                               row_frame(IprotoType.REPLACE, BIG + 2, tuple=[1])],
    "transactions past 65535": [_ins(BIG, tsn=BIG, commit=False), _ins(BIG + 1, tsn=BIG,
                                                                      commit=False),
                                _ins(BIG + 2, tsn=BIG), _ins(BIG + 3),
                                _ins(BIG + 4, tsn=BIG + 4, commit=False),
                                row_frame(IprotoType.DELETE, BIG + 5, key=[1], tsn=BIG + 4,
                                          commit=False),
                                _ins(BIG + 6, tsn=BIG + 4)],
    "bad first tsn past 65535": [_ins(BIG), _ins(BIG + 2, tsn=BIG + 1, commit=False)],
    "interleaving past 65535": [_ins(BIG, tsn=BIG, commit=False), _ins(BIG + 1)],
    "bad tsn past 65535": [_ins(BIG, tsn=BIG, commit=False),
                           _ins(BIG + 1, tsn=BIG - 1, commit=False)],
})


# rows of an origin missing (the stream checked from the LSN before its first row)
GAPS = {
    "a gap between single rows": [_ins(15), _ins(16), _ins(18)],
    "a gap at the start": [_ins(16), _ins(17)],
    "a gap inside a transaction": [_ins(15, tsn=15, commit=False), _ins(17, tsn=15)],
    "a gap before a NOP": [_ins(15), row_frame(IprotoType.NOP, 17)],
    "a gap past 65535": [_ins(BIG), _ins(BIG + 1), _ins(BIG + 5)],
    "a gap inside a transaction past 65535": [_ins(BIG, tsn=BIG, commit=False),
                                              _ins(BIG + 2, tsn=BIG)],
}
STREAMS.update(GAPS)


def checked_from(name: str) -> dict[int, int]:
    """The SUBSCRIBE vclock a stream continues: the LSN before its first row (two
    before it for the stream that starts with a gap)."""
    first = frame_row(STREAMS[name][0]).lsn
    return {1: first - (2 if name == "a gap at the start" else 1)}


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_take_frames_makes_the_transactions_push_makes(name, checked):
    data = stream(*STREAMS[name])
    lsns = checked_from(name) if checked else None
    assert taken(data, lsns and dict(lsns)) == pushed(bytes(data), lsns and dict(lsns))


@pytest.mark.parametrize("name", sorted(GAPS))
def test_a_gap_in_an_origin_s_lsns_breaks_the_stream_before_the_row_after_it(name):
    """Checked from the SUBSCRIBE vclock, a row that is not its origin's next LSN
    is a StreamError naming both LSNs, through either reader; nothing of its
    transaction is handed out, and every transaction before it is."""
    for read in (taken, pushed):
        data = stream(*STREAMS[name])
        txs, error = read(data if read is taken else bytes(data), checked_from(name))
        assert error is not None and error.startswith("Missing rows of instance 1 in the "
                                                      "stream: LSN ")
        handed = [row.lsn for tx, _ in txs for row in tx]
        last, after = (int(x) for x in error.replace("is followed by LSN", "").split()[-2:])
        assert after > last + 1 and all(lsn <= last for lsn in handed)
        assert txs == read(data if read is taken else bytes(data), None)[0][:len(txs)]


def test_take_frames_stops_before_an_incomplete_frame():
    whole = _ins(15) + _ins(16)
    data = stream(whole, _ins(17)[:-1])
    assembler = TxAssembler(_Box)
    pos, last = assembler.take_frames(data, 0)
    assert pos == len(whole) and last.lsn == 16


def test_take_frames_reads_ahead_a_bounded_number_of_rows():
    data = stream(*[_ins(15 + i) for i in range(3 * streams.READ_AHEAD_ROWS)])
    assembler = TxAssembler(_Box)
    assembler.take_frames(data, 0)
    assert len(assembler.ready) == streams.READ_AHEAD_ROWS
    big = stream(*[_ins(15 + i, tsn=15, commit=i == 99) for i in range(100)], _ins(115))
    assembler = TxAssembler(_Box)
    assembler.take_frames(big, 0)
    assert [len(rows) for rows, _ in assembler.ready] == [100]


def test_wal_rows_of_wire_bytes_read_back_as_the_rows(tmp_path, run, sched):
    from spindle.core.wal.writer import WalWriter
    frames = [_ins(15, tsn=15, commit=False), _ins(16, tsn=15, commit=False),
              _ins(17, tsn=15), _ins(18)]
    rows = [decode_dml_packet(f[5:], ext_hook)[0] for f in frames]
    assert all(row.wire is not None for row in rows)
    writer = WalWriter(sched, str(tmp_path), "11111111-1111-4111-8111-111111111111",
                       VClock({1: 14}), instance_id=2)

    def main():
        writer.write(rows[:3])
        writer.write(rows[3:])
    run(main)
    writer.stop()
    from spindle.core.xlog.files import XlogReader
    (path,) = [p for p in tmp_path.iterdir() if p.name == "00000000000000000014.xlog"]
    with XlogReader(str(path)) as reader:
        written = list(reader.rows())
    assert [general_encoding(r) for r in written] == [general_encoding(r) for r in rows]
