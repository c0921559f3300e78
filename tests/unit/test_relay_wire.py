"""The relay's fast path (wire_tx.py): xlog rows forwarded as stored. Whatever the
rows, the bytes a relay sends must be the ones the general path sends — every row
decoded, filtered (relay_filter_tx, the final join's stop vclock) and re-encoded with
the relay's sync — and damaged files must end the same way."""
from __future__ import annotations

import collections
import math
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import ClientError
from spindle.core.iproto.request import encode_dml_body, synchro_row
from spindle.core.iproto.row_block import decode_rows
from spindle.core.iproto.xrow import XRow, encode_header
from spindle.core.xlog.format import (
    EOF_MARKER_BYTES, XLOG, CorruptBlock, XlogMeta, decode_file, encode_block, encode_rows,
    split_transactions,
)
from spindle.core.replication.relay import Relay, relay_filter_tx, relay_send_ready
from spindle.core.replication.replica import Replica
from spindle.core.replication.replicaset import ReplicaSet
from spindle.core.replication import wal_cursor
from spindle.core.replication.wal_cursor import WalCursor
from spindle.core.replication.wal_tail import WalTail
from spindle.core.replication.wire_tx import NotForwardable, WireTx, scan_block
from spindle.core.vclock import VClock
from spindle.core.xlog.files import format_filename

UUID1 = "11111111-1111-4111-8111-111111111111"
FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
XLOGS = sorted(FIXTURES.glob("*/*.xlog"))
TS = 1795308839.4564972


def insert(replica_id, lsn, key=None, *, tsn=0, is_commit=True, group_id=0,
           timestamp=TS) -> XRow:
    return XRow(type=IprotoType.INSERT, replica_id=replica_id, lsn=lsn, tsn=tsn,
                is_commit=is_commit, group_id=group_id, timestamp=timestamp,
                body=encode_dml_body(IprotoType.INSERT, 512, tuple=[key or lsn, "v"]))


def tx(replica_id, first, count, **kwargs) -> list[XRow]:
    """`count` rows of `replica_id` with consecutive LSNs, as the WAL signs them."""
    if count == 1:
        return [insert(replica_id, first, **kwargs)]
    return [insert(replica_id, lsn, tsn=first, is_commit=lsn == first + count - 1, **kwargs)
            for lsn in range(first, first + count)]


def general_frames(rows: list[XRow], sync: int) -> list[bytes]:
    """What 2.6.0 (and the general path) sends for these rows: each one re-encoded."""
    return [b"".join(row.encode_frame(sync) for row in tx)
            for tx in split_transactions(rows)[0]]


# ------------------------------------------------------------------- scanning

@pytest.mark.parametrize("sync", [0, 5, 300, 70000, 1 << 40])
def test_scanned_frames_are_the_re_encoded_rows(sync):
    rows = (tx(1, 1, 1) + tx(1, 2, 3) + tx(1, 200, 2) + tx(1, 70000, 130) + tx(1, 1 << 33, 2)
            + [XRow(type=IprotoType.NOP, replica_id=1, lsn=(1 << 33) + 2, timestamp=TS)]
            + [synchro_row(IprotoType.CONFIRM, 1, 5, replica_id=1, lsn=(1 << 33) + 3,
                           timestamp=TS)]
            + tx(3, 7, 2))
    payload = encode_rows(rows)
    txs, rest = scan_block(payload, sync)
    assert rest == len(payload)
    assert [t.frames for t in txs] == general_frames(rows, sync)
    assert [t.rows() for t in txs] == split_transactions(decode_rows(payload))[0]
    assert [(t.replica_id, t.first_lsn, t.lsn, t.count) for t in txs][:4] == [
        (1, 1, 1, 1), (1, 2, 4, 3), (1, 200, 201, 2), (1, 70000, 70129, 130)]
    assert txs[-1].timestamp == TS


def test_runs_join_adjacent_transactions_of_one_id_and_frame_the_same_bytes():
    rows = (tx(1, 1, 1) + tx(1, 2, 1) + tx(1, 3, 2) + tx(2, 1, 1) + tx(2, 2, 1)
            + [insert(1, 9, tsn=9, is_commit=False), insert(2, 3, tsn=9)]   # mixed ids
            + tx(1, 10, 1) + tx(1, 8, 1) + tx(1, 11, 1))                    # LSN goes back
    payload = encode_rows(rows)
    for sync in (0, 7, 70000):
        single, rest = scan_block(payload, sync)
        joined, joined_rest = scan_block(payload, sync, runs=True)
        assert joined_rest == rest == len(payload)
        assert b"".join(t.frames for t in joined) == b"".join(t.frames for t in single)
        assert [r for t in joined for r in t.rows()] == rows
        assert [(t.replica_id, t.first_lsn, t.lsn, t.count) for t in joined] == [
            (1, 1, 4, 4), (2, 1, 2, 2), (0, 9, 3, 2), (1, 10, 10, 1), (1, 8, 11, 2)]
    # a covered transaction left out ends a run: the rows around it are not adjacent
    joined, _ = scan_block(encode_rows(tx(1, 1, 1) + tx(2, 1, 1) + tx(1, 2, 1)),
                           covered={2: 1}, runs=True)
    assert [(t.replica_id, t.first_lsn, t.lsn) for t in joined] == [(1, 1, 1), (1, 2, 2)]


def small_blocks_wal(tmp_path, odd_block: bool = True) -> FileWal:
    """Files of one small block per transaction, as a master whose every commit waits
    for the WAL writes them: runs of one id, other ids between, a transaction split
    over two blocks, local rows, a block the fast path does not take."""
    odd = XRow(type=IprotoType.REPLACE, replica_id=1, lsn=40, timestamp=TS, sync=77,
               body=encode_dml_body(IprotoType.REPLACE, 512, tuple=[40]))
    blocks = [block(tx(1, lsn, 1), compress=False) for lsn in range(1, 21)]
    blocks += [block(tx(2, 1, 1)), block(tx(2, 2, 2)), block(tx(1, 21, 3))]
    split = tx(1, 24, 4)
    blocks += [block(split[:2], compress=False), block(split[2:], compress=False)]
    blocks += [block([local(0, 1)]), block(tx(1, 28, 1)), block([local(1, 29)])]
    blocks += [block(tx(1, lsn, 1), compress=False) for lsn in range(30, 40)]
    blocks += [encode_block(encode_header(odd, odd.sync) + odd.body) if odd_block
               else block(tx(1, 40, 1))]
    blocks += [block(tx(1, lsn, 1), compress=False) for lsn in range(41, 61)]
    wal = FileWal(tmp_path, VClock({0: 1, 1: 70, 2: 3}))
    wal.add_file(VClock(), blocks)
    wal.add_file(VClock({0: 1, 1: 60, 2: 3}),
                 [block(tx(1, lsn, 1), compress=False) for lsn in range(61, 71)])
    return wal


@pytest.mark.parametrize("odd_block", [True, False], ids=["odd-block", "all-forwardable"])
@pytest.mark.parametrize("sync", [0, 9])
@pytest.mark.parametrize("start", [{}, {1: 5}, {1: 25, 2: 1}, {1: 45, 2: 3}, {2: 2}])
def test_small_blocks_scanned_together_give_the_bytes_of_the_general_path(
        run, sched, tmp_path, monkeypatch, sync, start, odd_block):
    """(With every block forwardable a file is scanned as one payload, its
    transactions joined into runs: checked, so that the test covers that path.)"""
    wal = small_blocks_wal(tmp_path, odd_block)
    scanned = []

    def spy(*args, **kwargs):
        txs, rest = scan_block(*args, **kwargs)
        scanned.extend(txs)
        return txs, rest
    monkeypatch.setattr(wal_cursor, "scan_block", spy)

    def main():
        start_vclock = VClock(start)
        assert both_paths(sched, wal, start_vclock, sync=sync)
        both_paths(sched, wal, start_vclock, sync=sync, subscriber_id=2,
                   at_subscribe=VClock({1: 70, 2: 1}))
        both_paths(sched, wal, start_vclock, sync=sync, subscriber_id=3,
                   at_subscribe=VClock({1: 70, 2: 3}), id_filter={2})
        assert max(one.count for one in scanned) >= 10
    run(main)


def test_a_damaged_block_after_small_ones_ends_the_stream_where_it_is(run, sched, tmp_path):
    wal = FileWal(tmp_path, VClock({1: 30}))
    good = [block(tx(1, lsn, 1), compress=False) for lsn in range(1, 11)]
    bad = bytearray(block(tx(1, 11, 1), compress=False))
    bad[-3] ^= 0xFF                 # the checksum no longer matches
    wal.add_file(VClock(), good + [bytes(bad)] + good[:1])

    def main():
        sent = both_paths(sched, wal, VClock(), sync=5)
        assert [row.lsn for row in decode_stream(sent)] == list(range(1, 11))
    run(main)


def test_a_transaction_left_open_by_the_block_is_not_framed():
    rows = tx(1, 1, 2) + tx(1, 3, 3)[:2]
    payload = encode_rows(rows)
    txs, rest = scan_block(payload)
    assert len(txs) == 1 and rest == len(encode_rows(rows[:2]))


def test_rows_of_several_ids_or_lsns_going_back_are_taken_one_by_one():
    mixed = [insert(1, 5, tsn=5, is_commit=False), insert(2, 9, tsn=5)]
    backwards = [insert(1, 9, tsn=9, is_commit=False), insert(1, 8, tsn=9)]
    for rows in (mixed, backwards):
        [one] = scan_block(encode_rows(rows))[0]
        assert one.replica_id == 0 and one.rows() == rows


def test_covered_transactions_are_left_out_but_never_a_first_that_may_continue():
    rows = tx(1, 1, 2) + tx(1, 3, 2) + tx(2, 1, 1) + tx(1, 5, 1)
    payload = encode_rows(rows)
    txs, _ = scan_block(payload, covered={1: 4})
    assert [(t.replica_id, t.lsn) for t in txs] == [(2, 1), (1, 5)]
    txs, _ = scan_block(payload, covered={1: 4}, keep_first=True)
    assert [(t.replica_id, t.lsn) for t in txs] == [(1, 2), (2, 1), (1, 5)]


def _header(*pairs) -> bytes:
    """A header map of raw key/value byte pairs, in the order given."""
    return bytes((0x80 | len(pairs),)) + b"".join(pairs)


BODY = encode_dml_body(IprotoType.INSERT, 512, tuple=[1])
DOUBLE = b"\xcb" + struct.pack(">d", TS)
NOT_FORWARDABLE = {
    "group id": _header(b"\x00\x02", b"\x02\x01", b"\x07\x01", b"\x03\x05", b"\x04" + DOUBLE),
    "replica id 0": _header(b"\x00\x02", b"\x02\x00", b"\x03\x05", b"\x04" + DOUBLE),
    "no replica id": _header(b"\x00\x02", b"\x03\x05", b"\x04" + DOUBLE, b"\x05\x01"),
    "replica id 200": _header(b"\x00\x02", b"\x02\xcc\xc8", b"\x03\x05", b"\x04" + DOUBLE),
    "stored sync": _header(b"\x00\x02", b"\x01\x07", b"\x02\x01", b"\x03\x05",
                           b"\x04" + DOUBLE),
    "schema version": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x04" + DOUBLE,
                              b"\x05\x01"),
    "lsn 0": _header(b"\x00\x02", b"\x02\x01", b"\x03\x00", b"\x04" + DOUBLE),
    "wide lsn": _header(b"\x00\x02", b"\x02\x01", b"\x03\xcd\x00\x05", b"\x04" + DOUBLE),
    "wide type": _header(b"\x00\xcc\x02", b"\x02\x01", b"\x03\x05", b"\x04" + DOUBLE),
    "keys out of order": _header(b"\x00\x02", b"\x03\x05", b"\x02\x01", b"\x04" + DOUBLE),
    "timestamp 0": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x04\xcb" + bytes(8)),
    "timestamp -0": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05",
                            b"\x04\xcb" + struct.pack(">d", -0.0)),
    "timestamp nan": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05",
                             b"\x04\xcb" + struct.pack(">d", math.nan)),
    "float timestamp": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05",
                               b"\x04\xca" + struct.pack(">f", 1.5)),
    "no timestamp": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x08\x01"),
    "tsn equal to lsn": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x04" + DOUBLE,
                                b"\x08\x05"),
    "tsn 0 with commit": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x04" + DOUBLE,
                                 b"\x08\x00", b"\x09\x01"),
    "flags 3": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x04" + DOUBLE,
                       b"\x08\x01", b"\x09\x03"),
    "flags without tsn": _header(b"\x00\x02", b"\x02\x01", b"\x03\x05", b"\x04" + DOUBLE,
                                 b"\x09\x01", b"\x0a\x01"),
    "map16 header": b"\xde\x00\x04\x00\x02\x02\x01\x03\x05\x04" + DOUBLE,
}


@pytest.mark.parametrize("name", sorted(NOT_FORWARDABLE))
def test_headers_a_re_encoding_would_change_are_not_forwarded(name):
    payload = encode_rows(tx(1, 1, 2)) + NOT_FORWARDABLE[name] + BODY
    with pytest.raises(NotForwardable):
        scan_block(payload)


@pytest.mark.parametrize("cut", [1, 3, 12, 30])
@pytest.mark.parametrize("body", [b"\xc1", b"\x82\x10\xc1\x21\x90", b"\x82\x10"])
def test_bad_or_cut_rows_are_not_forwarded(body, cut):
    good = encode_rows(tx(1, 1, 2))
    for payload in (good + encode_header(insert(1, 3)) + body, good[:-cut]):
        with pytest.raises(NotForwardable):
            scan_block(payload)
        with pytest.raises(ClientError):        # and the general path's error it is
            decode_rows(payload)


@pytest.mark.skipif(not XLOGS, reason="no Tarantool 2.6.0 fixtures")
@pytest.mark.parametrize("path", XLOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tarantool_xlog_blocks_forward_as_re_encoded(path):
    """Every block 2.6.0 wrote takes the fast path, with the bytes 2.6.0 sends."""
    for block in decode_file(path.read_bytes()).blocks:
        txs, rest = scan_block(block.data, 9)
        assert rest == len(block.data)
        assert [t.frames for t in txs] == general_frames(block.rows, 9)


@pytest.mark.skipif(not XLOGS, reason="no Tarantool 2.6.0 fixtures")
def test_the_bytes_are_those_tarantool_sent_to_its_subscriber():
    """join-subscribe capture: after SUBSCRIBE (sync 0) 2.6.0 sent LSNs 15..23 of its
    xlog (single rows, a 3-row transaction, a CONFIRM) back to back."""
    capture = (FIXTURES / "wire" / "join-subscribe" / "conn1-s2c.bin").read_bytes()
    xlog = decode_file((FIXTURES / "master" / "00000000000000000000.xlog").read_bytes())
    sent = b"".join(one.frames for block in xlog.blocks for one in scan_block(block.data)[0]
                    if 15 <= one.first_lsn <= 23)
    assert sent == capture[36136:36463]


# ---------------------------------------------------------- a relay end to end

class NullSocket:
    """Takes every byte at once (and keeps them)."""

    def __init__(self):
        self.data = bytearray()

    def send(self, data) -> int:
        self.data += data
        return len(data)

    def fileno(self) -> int:
        raise OSError("not a socket")


class Stream:
    def __init__(self):
        self.sock = type("Sock", (), {})()
        self.sock.sock = NullSocket()
        self.sock.fileno = self.sock.sock.fileno
        self.peer = "test"


class FileWal:
    """What a WalCursor needs of the WAL, over hand-made files."""

    def __init__(self, wal_dir: Path, vclock: VClock):
        self.wal_dir = str(wal_dir)
        self.vclock = vclock
        self.watchers: list = []
        self.starts: list[VClock] = []

    def xlog_vclocks(self) -> list[VClock]:
        return list(self.starts)

    def add_file(self, start: VClock, blocks: list[bytes], *, eof: bool = True) -> Path:
        path = Path(self.wal_dir) / format_filename(start.signature, ".xlog")
        meta = XlogMeta(XLOG, UUID1, start.copy())
        path.write_bytes(meta.encode() + b"".join(blocks) + (EOF_MARKER_BYTES if eof else b""))
        self.starts.append(start.copy())
        return path


class EmptyLimbo:
    """A limbo with nothing pending: nothing to hurry, nothing for a JOIN to wait for."""

    def __init__(self):
        self.queue: collections.deque = collections.deque()

    def txn_limbo_wait_confirm(self) -> None:
        pass


class Box:
    """What a relay uses of the instance (ReplicationInstanceApi), over one WAL."""

    def __init__(self, sched, wal):
        self.sched = sched
        self.wal = wal
        self.gc = None
        self.cfg = {"replication_timeout": 1}
        self.instance_id = 1
        self.vclock = wal.vclock
        self.limbo = EmptyLimbo()
        self.replicaset = ReplicaSet(sched, self)
        self.raft = SimpleNamespace(is_enabled=False)     # election off


def block(rows: list[XRow], compress: bool = True) -> bytes:
    return encode_block(encode_rows(rows), compress=compress)


def relay_bytes(sched, wal, start: VClock, *, wire: bool, sync: int = 0,
                subscriber_id: int = 0, id_filter=frozenset(), at_subscribe=None,
                stop: VClock | None = None, tail_batches=()
                ) -> tuple[bytes, BaseException | None]:
    """Everything a relay sends from `start` (and the error that stopped it). With
    `wire` the relay's own code does it; without, the general path as it was: XRows
    filtered by relay_filter_tx and each row encoded with encode_frame. The WAL's
    in-memory tail gets `tail_batches` ((rows, vclock after them) each)."""
    tail = WalTail(sched, wal)
    for rows, vclock_after in tail_batches:
        tail.append(rows, vclock_after)
    cursor = WalCursor(wal, tail, start, wire_sync=sync if wire else None)
    replica = Replica("22222222-2222-4222-8222-222222222222", subscriber_id) \
        if subscriber_id else None
    relay = Relay(sched, Box(sched, wal), replica, Stream(), sync)
    relay.cursor = cursor
    relay.id_filter = frozenset(id_filter)
    relay.local_vclock_at_subscribe = at_subscribe or VClock()
    error = None
    try:
        if wire:
            while relay_send_ready(relay):
                pass
        else:
            while (txs := cursor.read()) is not None:
                for one in txs:
                    if stop is not None:
                        one = [row for row in one if row.lsn <= stop.get(row.replica_id)]
                    if subscriber_id:
                        one = relay_filter_tx(one, subscriber_id=subscriber_id,
                                              local_vclock_at_subscribe=at_subscribe,
                                              id_filter=frozenset(id_filter))
                    else:
                        one = relay_filter_tx(one)
                    relay.send(b"".join(row.encode_frame(sync) for row in one))
    except Exception as exc:   # noqa: BLE001 - compared between the two paths
        error = exc
    finally:
        cursor.close()
        tail.detach()
    return bytes(relay.stream.sock.sock.data), error


def both_paths(sched, wal, start, **kwargs) -> bytes:
    new, new_error = relay_bytes(sched, wal, start, wire=True, **kwargs)
    old, old_error = relay_bytes(sched, wal, start, wire=False, **kwargs)
    assert new == old
    assert repr(new_error) == repr(old_error)
    return new


def local(replica_id, lsn, **kwargs) -> XRow:
    return insert(replica_id, lsn, group_id=GroupId.LOCAL, **kwargs)


def mixed_wal(tmp_path) -> FileWal:
    """Two files of the master (id 1) with the rows of replicas 2 and 3, local rows,
    transactions of several ids, a transaction split over two blocks, and a block
    the fast path does not take (a stored SYNC)."""
    odd = XRow(type=IprotoType.REPLACE, replica_id=1, lsn=9, timestamp=TS, sync=77,
               body=encode_dml_body(IprotoType.REPLACE, 512, tuple=[9]))
    first = tx(1, 1, 3) + tx(2, 1, 2) + [local(0, 1)] + tx(1, 4, 1)
    split = tx(1, 5, 4)
    wal = FileWal(tmp_path, VClock({1: 30, 2: 5, 3: 3}))
    wal.add_file(VClock(), [
        block(first),
        block(split[:2], compress=False), block(split[2:]),
        encode_block(encode_header(odd, odd.sync) + odd.body),
        block([insert(1, 10, tsn=10, is_commit=False), local(0, 2, tsn=10, is_commit=False),
               insert(3, 1, tsn=10)]),
        block([insert(1, 11, tsn=11, is_commit=False), local(1, 12, tsn=11)]),
    ])
    wal.add_file(VClock({1: 12, 2: 2, 3: 1}), [
        block(tx(2, 3, 3) + tx(1, 13, 10) + tx(3, 2, 2)),
        block(tx(1, 23, 8)),
    ])
    return wal


@pytest.mark.parametrize("sync", [0, 9, 100000])
@pytest.mark.parametrize("start", [{}, {1: 2}, {1: 6, 2: 1}, {1: 14, 2: 4, 3: 3}])
def test_subscribers_get_the_bytes_of_the_general_path(run, sched, tmp_path, sync, start):
    wal = mixed_wal(tmp_path)

    def main():
        start_vclock = VClock(start)
        everything = both_paths(sched, wal, start_vclock, sync=sync)
        assert everything
        # the subscriber's own rows beyond what the master had at SUBSCRIBE, id_filter
        both_paths(sched, wal, start_vclock, sync=sync, subscriber_id=2,
                   at_subscribe=VClock({1: 30, 2: 4, 3: 3}))
        both_paths(sched, wal, start_vclock, sync=sync, subscriber_id=2,
                   at_subscribe=VClock({1: 30, 2: 0}), id_filter={3})
        both_paths(sched, wal, start_vclock, sync=sync, subscriber_id=3,
                   at_subscribe=VClock({1: 30, 2: 5, 3: 3}), id_filter={1})
    run(main)


def test_local_rows_go_out_as_nop_and_the_commit_flag_moves(run, sched, tmp_path):
    wal = mixed_wal(tmp_path)

    def main():
        sent = both_paths(sched, wal, VClock({1: 9, 2: 2}), sync=0)
        by_lsn = {(row.replica_id, row.lsn): row for row in decode_stream(sent)}
        assert by_lsn[(1, 12)].type == IprotoType.NOP and by_lsn[(1, 12)].body is None
        assert (0, 2) not in by_lsn and by_lsn[(3, 1)].is_commit
    run(main)


@pytest.mark.parametrize("stop", [{1: 6, 2: 2, 3: 0}, {1: 15, 2: 4, 3: 1}, {1: 30, 2: 5, 3: 3}])
def test_a_final_join_stops_where_the_general_path_stops(run, sched, tmp_path, stop):
    from spindle.core.replication.relay import relay_tx_frames

    wal = mixed_wal(tmp_path)

    def main():
        stop_vclock = VClock(stop)
        for sync in (0, 12):
            tail = WalTail(sched, wal)
            cursor = WalCursor(wal, tail, VClock(), wire_sync=sync)
            relay = Relay(sched, Box(sched, wal), None, Stream(), sync)
            new = b"".join(relay_tx_frames(relay, one, False, stop_vclock)
                           for txs in iter(cursor.read, None) for one in txs)
            tail.detach()
            expected = b""
            old_cursor = WalCursor(wal, WalTail(sched, wal), VClock())
            for txs in iter(old_cursor.read, None):
                for one in txs:
                    one = [row for row in one if row.lsn <= stop_vclock.get(row.replica_id)]
                    expected += b"".join(row.encode_frame(sync) for row in relay_filter_tx(one))
            old_cursor.tail.detach()
            assert new == expected and new
    run(main)


@pytest.mark.parametrize("sync", [0, 9])
def test_rows_of_the_in_memory_tail_are_the_bytes_of_the_general_path(run, sched,
                                                                       tmp_path, sync):
    odd = XRow(type=IprotoType.DELETE, replica_id=31, lsn=1, timestamp=0.0,
               body=encode_dml_body(IprotoType.DELETE, 512, key=[1]))
    batches = [(tx(1, 1, 3), VClock({1: 3})),
               ([local(0, 1), insert(2, 1)], VClock({0: 1, 1: 3, 2: 1})),
               ([insert(1, 4, tsn=4, is_commit=False), local(1, 5, tsn=4)],
                VClock({0: 1, 1: 5, 2: 1})),
               ([odd, XRow(type=IprotoType.NOP, replica_id=1, lsn=6, timestamp=TS)],
                VClock({0: 1, 1: 6, 2: 1, 31: 1})),
               ([synchro_row(IprotoType.CONFIRM, 1, 3, replica_id=1, lsn=7, timestamp=TS)],
                VClock({0: 1, 1: 7, 2: 1, 31: 1}))]
    wal = FileWal(tmp_path, VClock())

    def main():
        for kwargs in ({}, {"subscriber_id": 2, "at_subscribe": VClock({1: 7}),
                            "id_filter": {31}}):
            sent = both_paths(sched, wal, VClock(), sync=sync, tail_batches=batches,
                              **kwargs)
            assert len(decode_stream(sent)) >= 7
    run(main)


def test_a_corrupt_block_stops_both_paths_after_the_same_rows(run, sched, tmp_path):
    wal = FileWal(tmp_path, VClock({1: 20}))
    bad = bytearray(block(tx(1, 7, 3)))
    bad[-1] ^= 0xFF
    wal.add_file(VClock(), [block(tx(1, 1, 3)), block(tx(1, 4, 3)), bytes(bad),
                            block(tx(1, 10, 3))])

    def main():
        sent = both_paths(sched, wal, VClock(), sync=3)
        assert len(decode_stream(sent)) == 6
        _, error = relay_bytes(sched, wal, VClock(), wire=True)
        assert isinstance(error, CorruptBlock) and "checksum" in str(error)
    run(main)


def test_an_undecodable_row_is_the_same_error_on_both_paths(run, sched, tmp_path):
    wal = FileWal(tmp_path, VClock({1: 20}))
    wal.add_file(VClock(), [block(tx(1, 1, 3)),
                            encode_block(encode_rows(tx(1, 4, 2)) + b"\x84\x00\x02\xc1")])

    def main():
        both_paths(sched, wal, VClock())
        _, error = relay_bytes(sched, wal, VClock(), wire=True)
        assert isinstance(error, CorruptBlock) and "can't parse row" in str(error)
    run(main)


def test_a_torn_tail_ends_the_file_on_both_paths(run, sched, tmp_path):
    wal = FileWal(tmp_path, VClock({1: 6}))
    torn = block(tx(1, 4, 3))
    wal.add_file(VClock(), [block(tx(1, 1, 3)), torn[:len(torn) // 2]], eof=False)

    def main():
        sent = both_paths(sched, wal, VClock())
        assert [row.lsn for row in decode_stream(sent)] == [1, 2, 3]
    run(main)


def decode_stream(data: bytes) -> list[XRow]:
    rows, pos = [], 0
    while pos < len(data):
        size = struct.unpack_from(">I", data, pos + 1)[0]
        rows.extend(decode_rows(data[pos + 5:pos + 5 + size]))
        pos += 5 + size
    return rows


def test_wire_tx_repr_names_its_range():
    [one] = scan_block(encode_rows(tx(1, 4, 2)))[0]
    assert isinstance(one, WireTx) and repr(one) == "WireTx(replica_id=1, lsn=4..5, rows=2)"
