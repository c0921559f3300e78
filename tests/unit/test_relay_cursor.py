"""The relay's row source: the in-memory WAL tail and the cursor that reads the xlog
files while it is behind and the tail once it has caught up — every row exactly once,
in WAL order, across rotations, a file still being written, a tail that drops rows,
and start vclocks that are not a prefix of this WAL."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spindle.core.fiber import Scheduler
from spindle.core.fiber.coio import run_in_thread
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.row_block import encode_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import EOF_MARKER_BYTES
from spindle.core.replication.wal_cursor import WalCursor, XlogGapError
from spindle.core.replication.wal_tail import WalTail
from spindle.core.replication.wire_tx import WireTx, plain_tx
from spindle.core.vclock import VClock
from spindle.core.wal.writer import WalWriter

pytestmark = pytest.mark.usefixtures("collector_paused")   # see tests/conftest.py

UUID1 = "11111111-1111-4111-8111-111111111111"


def insert(key, replica_id=0, lsn=0) -> XRow:
    return XRow(type=IprotoType.INSERT, replica_id=replica_id, lsn=lsn,
                body=encode_dml_body(IprotoType.INSERT, 512, tuple=[key, "v"]))


def drain(cursor: WalCursor) -> list[list[XRow]]:
    """Everything the cursor has now (until it says: wait for the WAL)."""
    out = []
    while True:
        txs = cursor.read()
        if txs is None:
            return out
        out.extend(txs)


def lsns(txs) -> list[tuple[int, int]]:
    return [(row.replica_id, row.lsn) for tx in txs for row in tx]


def own(first: int, last: int) -> list[tuple[int, int]]:
    return [(1, lsn) for lsn in range(first, last + 1)]


@pytest.fixture
def wal(sched, tmp_path):
    writer = WalWriter(sched, str(tmp_path), UUID1, VClock(), instance_id=1)
    yield writer
    writer.stop()


# ------------------------------------------------------------------- the tail

def test_tail_keeps_batches_in_order_and_seeks_by_vclock(run, sched, wal):
    def main():
        tail = WalTail(sched, wal)
        for rows in ([insert(1)], [insert(2), insert(3)], [insert(4)]):
            wal.write(rows)
            assert tail.get(tail.next_seq - 1).xrows() == rows   # a reader takes it
        assert [b.vclock_after for b in tail.batches] == [
            VClock({1: 1}), VClock({1: 3}), VClock({1: 4})]
        assert tail.seek(VClock()) == 0
        assert tail.seek(VClock({1: 1})) == 1
        assert tail.seek(VClock({1: 2})) == 1      # inside a batch: from its start
        assert tail.seek(VClock({1: 4})) == 3 == tail.next_seq
        assert tail.get(3) is None
        assert tail.reaches(VClock()) and tail.base_vclock == VClock()
        tail.detach()
    run(main)


def test_tail_drops_the_oldest_batches_and_moves_its_base(run, sched, wal):
    def main():
        tail = WalTail(sched, wal, max_rows=4)
        for key in range(6):
            wal.write([insert(key)])
        assert tail.rows <= 4 and tail.first_seq > 0
        first_kept = tail.batches[0].xrows()[0].lsn
        assert tail.base_vclock == VClock({1: first_kept - 1})
        assert not tail.reaches(VClock()) and tail.reaches(tail.base_vclock)
        with pytest.raises(LookupError):
            tail.get(0)
        tail.detach()
    run(main)


def test_spans_nobody_took_grow_into_one_and_a_taken_one_never_changes(run, sched, wal):
    def main():
        tail = WalTail(sched, wal)
        written = [[insert(1)], [insert(2), insert(3)], [insert(4)]]
        for rows in written:
            wal.write(rows)
        span, = tail.batches
        assert (span.count, span.first_lsn, span.lsn) == (4, 1, 4) and tail.rows == 4
        assert span.vclock_after == VClock({1: 4}) and tail.next_seq == 1
        assert span.timestamp == written[-1][-1].timestamp
        assert span.xrows() == [row for rows in written for row in rows]
        assert [row.is_commit for row in span.xrows()] == [True, False, True, True]
        assert tail.seek(VClock({1: 2})) == 0      # inside the span: from its start
        taken = tail.get(0)
        frames = bytes(taken.frames)
        wal.write([insert(5)])
        assert bytes(taken.frames) == frames and taken.count == 4
        assert [(b.first_lsn, b.lsn) for b in tail.batches] == [(1, 4), (5, 5)]
        tail.detach()
    run(main)


def test_a_reader_positioned_after_the_open_span_closes_it(run, sched, wal):
    """A cursor that had a span's rows from the files seeks past it: rows written
    later must go to a batch after its position."""
    def main():
        tail = WalTail(sched, wal)
        wal.write([insert(1)])
        seq = tail.seek(wal.vclock)
        assert seq == tail.next_seq == 1
        wal.write([insert(2)])
        assert [row.lsn for row in tail.get(seq).xrows()] == [2]
        tail.detach()
    run(main)


def test_a_span_stops_growing_at_its_limits_or_at_a_batch_it_cannot_take(run, sched,
                                                                          wal):
    def main():
        tail = WalTail(sched, wal, max_rows=12)         # spans of up to 3 rows
        for key in range(4):
            wal.write([insert(key)])
        assert [b.count for b in tail.batches] == [3, 1]
        local = XRow(type=IprotoType.INSERT, group_id=GroupId.LOCAL,
                     body=encode_dml_body(IprotoType.INSERT, 513, tuple=[1]))
        wal.write([local])                  # kept as rows: the span is closed
        wal.write([insert(9)])
        assert [(b.rows is None, b.count) for b in tail.batches] == [
            (True, 3), (True, 1), (False, 1), (True, 1)]
        tail.detach()
    run(main)


@pytest.mark.parametrize("header", [{"group_id": GroupId.LOCAL}, {"type": 0x80}],
                         ids=["GROUP_LOCAL", "type past fixint"])
def test_a_one_row_batch_joins_the_open_span_only_if_plain_tx_takes_it(run, sched, wal,
                                                                       header):
    """One-row batches are checked in line, not by plain_tx: a row of the span's id
    and a later LSN that plain_tx refuses is kept as rows, and closes the span."""
    def main():
        tail = WalTail(sched, wal)
        wal.write([insert(1)])
        fields = {"type": IprotoType.INSERT, "replica_id": 1, "lsn": 2, "tsn": 2,
                  "is_commit": True, "timestamp": 1.0,
                  "body": encode_dml_body(IprotoType.INSERT, 512, tuple=[2])}
        odd = XRow(**{**fields, **header})
        assert not plain_tx([odd])
        tail.append([odd], VClock({1: 2}), [encode_row(odd)])
        wal.write([insert(3)])
        assert [(b.rows is None, b.count) for b in tail.batches] == [
            (True, 1), (False, 1), (True, 1)]
        assert tail.batches[1].rows == [odd]
        tail.detach()
    run(main)


def test_one_row_batches_noted_for_the_open_span_are_in_it_for_every_reader(run, sched,
                                                                             wal):
    """One-row batches that continue the open span are framed into it only when
    something looks at the tail: whatever looks sees every row written, the span's
    vclock and LSN after the last one, and the limits and positions as if each
    batch had been added at once."""
    def main():
        tail = WalTail(sched, wal, max_rows=40)          # spans of up to 10 rows
        written = []
        for key in range(7):
            written.append(insert(key))
            wal.write([written[-1]])
        # a seek inside the span settles it, closes it and finds its start
        assert tail.seek(VClock({1: 3})) == 0
        span = tail.get(0)
        assert span.xrows() == written and span.count == 7 and span.lsn == 7
        assert span.vclock_after == VClock({1: 7}) == wal.vclock
        assert span.timestamp == written[-1].timestamp
        for key in range(7, 30):                         # into new spans of 10
            wal.write([insert(key)])
        assert [(b.first_lsn, b.lsn, b.count) for b in tail.batches] == [
            (1, 7, 7), (8, 17, 10), (18, 27, 10), (28, 30, 3)]
        assert tail.rows == 30 and tail.next_seq == 4
        assert tail.batches[-1].vclock_after == wal.vclock
        cursor = WalCursor(wal, tail, VClock({1: 20}))
        assert lsns(drain(cursor)) == own(21, 30)
        for first in range(31, 40, 3):   # taken by the cursor three at a time
            for key in range(3):
                wal.write([insert(key)])
            assert lsns(drain(cursor)) == own(first, first + 2)
        for key in range(39, 80):                        # past max_rows: trimmed
            wal.write([insert(key)])
            assert tail.rows <= 40
        assert lsns(drain(cursor)) == own(40, 80)
        assert tail.reaches(wal.vclock)
        assert not tail.reaches(VClock({1: 30}))     # the oldest spans dropped
        tail.detach()
    run(main)


def test_a_one_row_batch_not_after_the_open_spans_last_lsn_is_not_added_to_it(
        run, sched, wal):
    """The open span takes a batch only past the LSN of the last one it took,
    counting those not framed into it yet."""
    def main():
        tail = WalTail(sched, wal)
        for key in range(3):
            wal.write([insert(key)])
        stale = XRow(type=IprotoType.INSERT, replica_id=1, lsn=2, tsn=2, is_commit=True,
                     timestamp=1.0, body=encode_dml_body(IprotoType.INSERT, 512, tuple=[2]))
        for watcher in wal.watchers:                 # as the WAL notifies its watchers
            watcher([stale], [encode_row(stale)])
        assert [(b.rows is None, b.first_lsn, b.lsn) for b in tail.batches] == [
            (True, 1, 3), (True, 2, 2)]
        tail.detach()
    run(main)


# ----------------------------------------------------------------- the cursor

def test_a_cursor_at_the_wal_vclock_follows_the_tail(run, sched, wal):
    def main():
        wal.write([insert(1)])
        tail = WalTail(sched, wal)
        cursor = WalCursor(wal, tail, wal.vclock)
        assert cursor.mode == "tail" and cursor.read() is None
        wal.write([insert(2)])
        wal.write([insert(3), insert(4)])
        txs = drain(cursor)
        assert [[row.lsn for row in tx] for tx in txs] == [[2], [3, 4]]
        assert cursor.vclock == VClock({1: 4}) and drain(cursor) == []
    run(main)


def test_a_plain_batch_is_kept_as_a_span_of_its_bytes(run, sched, wal):
    """The usual local transaction keeps no XRows in the tail; decoded, its bytes
    give back the rows as the WAL signed them. A batch with a GROUP_LOCAL row (not
    forwarded as written) keeps its rows."""
    def main():
        tail = WalTail(sched, wal)
        rows = [insert(1), insert(2), insert(3)]
        wal.write(rows)
        local = XRow(type=IprotoType.INSERT, group_id=GroupId.LOCAL,
                     body=encode_dml_body(IprotoType.INSERT, 513, tuple=[1]))
        wal.write([insert(4), local])
        span, kept = tail.batches
        assert span.rows is None and span.frames is not None and span.count == 3
        assert (span.replica_id, span.first_lsn, span.lsn) == (1, 1, 3)
        assert span.timestamp == rows[-1].timestamp
        assert span.xrows() == rows
        assert [(row.lsn, row.tsn, row.is_commit) for row in span.xrows()] == [
            (1, 1, False), (2, 1, False), (3, 1, True)]
        assert kept.rows is not None and kept.count == 2 and kept.xrows() is kept.rows
        tail.detach()
    run(main)


def wire_frames(txs, sync: int) -> bytes:
    """What a relay sends of the cursor's transactions, none filtered out."""
    return b"".join(tx.frames if isinstance(tx, WireTx)
                    else b"".join(row.encode_frame(sync) for row in tx) for tx in txs)


@pytest.mark.parametrize("have", [0, 1, 2, 3, 4])
def test_a_relay_cursor_takes_a_span_whole_or_what_it_lacks_of_it(run, sched, wal, have):
    """A cursor with none of a span gets it whole; one inside it (a master-master
    peer's start vclock) the rows after its vclock; one past it nothing."""
    def main():
        tail = WalTail(sched, wal)
        rows = [insert(1), insert(2), insert(3)]
        wal.write(rows)
        cursor = WalCursor(wal, tail, VClock({1: have}), wire_sync=7)
        assert cursor.mode == "tail"
        sent = wire_frames(drain(cursor), 7)
        assert sent == b"".join(row.encode_frame(7) for row in rows[have:])
        assert cursor.vclock == VClock({1: max(have, 3)})
        tail.detach()
    run(main)


@pytest.mark.parametrize("sync", [0, 7])
def test_rows_of_any_size_added_to_a_span_go_out_as_encoded_with_the_relays_sync(
        run, sched, wal, sync):
    """A span's rows are kept framed with sync 0: one-row and multi-row batches
    added to it, small and big (a 4-byte length over the usual heads), reach a
    relay of either sync as the rows encoded with its sync."""
    def main():
        tail = WalTail(sched, wal)
        rows = [insert(1), insert("x" * 5000), insert(3), insert("y" * 4100), insert(5)]
        wal.write(rows[:1])
        wal.write(rows[1:2])
        wal.write(rows[2:4])
        wal.write(rows[4:])
        assert len(tail.batches) == 1 and tail.batches[0].xrows() == rows
        cursor = WalCursor(wal, tail, VClock(), wire_sync=sync)
        assert wire_frames(drain(cursor), sync) == \
            b"".join(row.encode_frame(sync) for row in rows)
        tail.detach()
    run(main)


def test_files_then_tail_across_rotations_without_gaps_or_duplicates(run, sched, wal):
    def main():
        for key in range(10):
            wal.write([insert(key)])
        wal.rotate()
        for key in range(10, 20):
            wal.write([insert(key), insert(key + 100)])       # two-row transactions
        wal.rotate()
        wal.write([insert(50)])
        tail = WalTail(sched, wal)                   # rows so far: only in the files
        for key in range(20, 25):
            wal.write([insert(key)])
        cursor = WalCursor(wal, tail, VClock())
        assert cursor.mode == "files"
        txs = drain(cursor)
        assert lsns(txs) == own(1, 36)
        assert cursor.mode == "tail" and cursor.files_read == 3
        assert [len(tx) for tx in txs[10:20]] == [2] * 10     # transactions stay whole
        wal.write([insert(99)])
        assert lsns(drain(cursor)) == [(1, 37)]
    run(main)


def test_a_cursor_in_the_middle_of_a_file_starts_after_its_vclock(run, sched, wal):
    def main():
        for key in range(8):
            wal.write([insert(key)])
        tail = WalTail(sched, wal, max_rows=2)
        for key in range(8, 12):
            wal.write([insert(key)])
        cursor = WalCursor(wal, tail, VClock({1: 5}))
        assert lsns(drain(cursor)) == own(6, 12)
    run(main)


def test_rows_written_but_not_yet_reported_to_tx_come_from_the_tail(run, sched, wal):
    class LaggingWal:
        """tx has not heard of the last batches yet (their completions are queued)."""

        def __init__(self, real, vclock):
            self.vclock, self.wal_dir = vclock, real.wal_dir
            self.xlog_vclocks = real.xlog_vclocks

    def main():
        for key in range(6):
            wal.write([insert(key)])
        tail = WalTail(sched, wal)
        for key in range(6, 10):
            wal.write([insert(key)])
        lagging = LaggingWal(wal, VClock({1: 8}))
        cursor = WalCursor(lagging, tail, VClock())
        txs = drain(cursor)
        assert cursor.mode == "tail"
        assert lsns(txs) == own(1, 10)
    run(main)


def test_a_cursor_that_falls_behind_the_tail_goes_back_to_the_files(run, sched, wal):
    def main():
        wal.write([insert(0)])
        tail = WalTail(sched, wal, max_rows=4)
        cursor = WalCursor(wal, tail, wal.vclock)
        assert cursor.mode == "tail"
        for key in range(1, 11):
            wal.write([insert(key)])
        assert tail.first_seq > 0
        txs = drain(cursor)
        assert lsns(txs) == own(2, 11)
        assert cursor.mode == "tail" and cursor.files_read == 1
    run(main)


@pytest.mark.parametrize("tail_first", [True, False], ids=["from-tail", "from-files"])
def test_a_start_that_is_not_a_prefix_of_this_wal(run, sched, wal, tail_first):
    """A master-master peer: it has all of instance 2's rows and our first one; this
    WAL interleaves them differently, so no prefix of it equals the peer's vclock."""
    def main():
        tail = WalTail(sched, wal) if tail_first else None
        for lsn in range(1, 4):
            wal.write([insert(lsn)])
            wal.write([insert(lsn + 10, replica_id=2, lsn=lsn)])
        tail = tail or WalTail(sched, wal)
        cursor = WalCursor(wal, tail, VClock({1: 1, 2: 3}))
        assert cursor.mode == ("tail" if tail_first else "files")
        assert lsns(drain(cursor)) == [(1, 2), (1, 3)]
        assert cursor.vclock == VClock({1: 3, 2: 3})
    run(main)


def test_missing_files_are_a_gap(run, sched, wal):
    def main():
        for key in range(5):
            wal.write([insert(key)])
        wal.rotate()
        wal.write([insert(5)])
        tail = WalTail(sched, wal)
        wal.collect_garbage(VClock({1: 5}))
        cursor = WalCursor(wal, tail, VClock({1: 2}))
        with pytest.raises(XlogGapError) as info:
            drain(cursor)
        assert info.value.message == \
            "Missing .xlog file between LSN 2 {1: 2} and 5 {1: 5}"
        assert info.value.type == "XlogGapError"
    run(main)


def test_a_file_left_without_eof_marker_is_followed_by_the_next(run, sched, tmp_path):
    def first():
        writer = WalWriter(sched, str(tmp_path), UUID1, VClock(), instance_id=1)
        for key in range(5):
            writer.write([insert(key)])
        writer.stop()
    run(first)
    # A crash: the first file has no EOF marker (the empty next file is where the
    # WAL goes on).
    path = Path(tmp_path) / "00000000000000000000.xlog"
    data = path.read_bytes()
    assert data.endswith(EOF_MARKER_BYTES)
    path.write_bytes(data[:-len(EOF_MARKER_BYTES)])

    def second():
        writer = WalWriter(sched, str(tmp_path), UUID1, VClock({1: 5}), instance_id=1)
        try:
            for key in range(5, 8):
                writer.write([insert(key)])
            tail = WalTail(sched, writer)
            cursor = WalCursor(writer, tail, VClock())
            assert lsns(drain(cursor)) == own(1, 8)
            assert cursor.files_read == 2
        finally:
            writer.stop()
    run(second)


def test_the_file_being_written_is_read_as_it_grows(run, sched, wal):
    def main():
        for key in range(3):
            wal.write([insert(key)])
        tail = WalTail(sched, wal, max_rows=1)   # drops nearly everything
        cursor = WalCursor(wal, tail, VClock())
        assert lsns(drain(cursor)) == own(1, 3)
        for key in range(3, 9):
            wal.write([insert(key)])            # tail drops them: from the file
        assert lsns(drain(cursor)) == own(4, 9)
    run(main)


def test_reading_many_files_leaves_the_decoding_to_a_helper_thread(tmp_path):
    """A far-behind replica: blocks are read and decoded in a helper thread (as the
    relay's cursor does) while the reading fiber waits, so even with blocks of 3500
    rows no read() holds tx for the watchdog's 50 ms. Counted in tx's CPU time
    (time.thread_time), which a loaded machine does not stretch as it stretches the
    wall clock."""
    sched = Scheduler()
    rows_per_tx, txs_total = 3500, 24         # ~128 KiB blocks, the largest there are
    offloaded = {"calls": 0, "cpu": 0.0, "threads": set()}

    def offload(fn, *args):
        def timed():
            offloaded["threads"].add(threading.current_thread().name)
            started = time.thread_time()
            try:
                return fn(*args)
            finally:
                offloaded["cpu"] += time.thread_time() - started
        offloaded["calls"] += 1
        return run_in_thread(sched, timed)

    def main():
        wal = WalWriter(sched, str(tmp_path), UUID1, VClock(), instance_id=1)
        try:
            for n in range(txs_total):
                wal.write([insert(n * rows_per_tx + i) for i in range(rows_per_tx)])
                if n % 8 == 7:
                    wal.rotate()
            tail = WalTail(sched, wal)
            cursor = WalCursor(wal, tail, VClock(), offload=offload)
            got = 0
            slices = []      # tx CPU of each read() (the hub's while it waits included)
            while True:
                started = time.thread_time()
                txs = cursor.read()
                slices.append(time.thread_time() - started)
                if txs is None:
                    break
                got += sum(len(tx) for tx in txs)
            assert got == rows_per_tx * txs_total
            assert cursor.files_read == 3
            assert offloaded["threads"] == {"coio"}
            assert offloaded["calls"] >= cursor.files_read    # a wait per file at least
            # the watchdog's threshold, in CPU time of tx
            assert max(slices) < 0.05, (max(slices), offloaded)
        finally:
            wal.stop()
    try:
        sched.run(main)
    finally:
        sched.shutdown(timeout=1.0)
        sched.close()
