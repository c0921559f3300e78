"""The WAL writer: LSN assignment, group commit, rotation, failures, mode none, reopen."""
from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path

import msgpack
import pytest

from spindle.core import log
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import EOF_MARKER_BYTES, decode_file
from spindle.core.vclock import VClock
from spindle.core.wal.recovery import recover
from spindle.core.wal.journal import assign_lsn
from spindle.core.wal.wal_dir import WalIO
from spindle.core.wal.writer import WalWriter, wal_set_watcher
from spindle.core.xlog.files import XlogReader, list_files, read_meta

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
UUID1 = "11111111-1111-4111-8111-111111111111"


def insert(key, space_id=512, group_id=0, replica_id=0, lsn=0, **header) -> XRow:
    return XRow(type=IprotoType.INSERT, replica_id=replica_id, lsn=lsn, group_id=group_id,
                body=encode_dml_body(IprotoType.INSERT, space_id, tuple=[key, "v"]), **header)


@pytest.fixture
def logs():
    lines = []
    previous = log.set_sink(lines.append)
    yield lines
    log.set_sink(previous)


@pytest.fixture
def make_writer(sched, tmp_path):
    writers = []

    def make(vclock=None, **kwargs):
        kwargs.setdefault("instance_id", 1)
        writer = WalWriter(sched, kwargs.pop("wal_dir", str(tmp_path)), UUID1,
                           VClock(vclock or {}), **kwargs)
        writers.append(writer)
        return writer

    yield make
    for writer in writers:
        writer.stop()


def copy_fixture(name: str, dest: Path) -> Path:
    """A writable copy of a fixture data directory, without the .txt dumps."""
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns("*.txt"))
    dest.chmod(0o755)
    for path in dest.iterdir():
        path.chmod(0o644)
    return dest


def xlog_rows(path) -> list[XRow]:
    return decode_file(Path(path).read_bytes()).rows


class CountingIO(WalIO):
    def __init__(self):
        self.fsyncs = 0
        self.writes = 0
        self.fail_writes = False
        self.fail_fsync = False
        self.gate: threading.Event | None = None

    def write(self, fd, data):
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail_writes and data != EOF_MARKER_BYTES:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.writes += 1
        super().write(fd, data)

    def fsync(self, fd):
        if self.fail_fsync:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.fsyncs += 1
        super().fsync(fd)


# ----------------------------------------------------------------- LSN assignment

def test_single_and_multi_row_transactions_get_lsn_tsn_and_commit_flag(run, make_writer,
                                                                      tmp_path):
    writer = make_writer({1: 25})
    results = []

    def main():
        results.append(writer.write([insert(1)]))
        results.append(writer.write([insert(2), insert(3), insert(4)]))
        writer.stop()

    run(main)
    assert results == [VClock({1: 26}), VClock({1: 29})]
    rows = xlog_rows(tmp_path / "00000000000000000025.xlog")
    assert [(r.replica_id, r.lsn, r.tsn, r.is_commit) for r in rows] == [
        (1, 26, 26, True), (1, 27, 27, False), (1, 28, 27, False), (1, 29, 27, True)]
    assert all(r.timestamp > 0 for r in rows)
    # The header fields exactly as 2.6.0 writes them (fixture LSN 19-21).
    headers = [msgpack.unpackb(r.encode_header(), strict_map_key=False) for r in rows]
    tsn_key, flags_key = 0x08, 0x09
    assert tsn_key not in headers[0] and flags_key not in headers[0]   # a lone row
    assert headers[1][tsn_key] == 0 and flags_key not in headers[1]    # first of three
    assert headers[3][tsn_key] == 2 and headers[3][flags_key] == 1     # the commit row


def test_replicated_rows_keep_their_origin_and_only_advance_the_vclock():
    vclock = VClock({1: 25, 2: 3})
    master_tx = [insert(10, replica_id=1, lsn=30, tsn=30, is_commit=False),
                 insert(11, replica_id=1, lsn=31, tsn=30, is_commit=True)]
    assign_lsn(master_tx, vclock, 2, 123.0)
    assert vclock == VClock({1: 31, 2: 3})
    assert [(r.replica_id, r.lsn, r.tsn, r.is_commit) for r in master_tx] == [
        (1, 30, 30, False), (1, 31, 30, True)]
    assert all(r.timestamp == 123.0 for r in master_tx)   # this instance's write time
    own = [insert(1)]
    assign_lsn(own, vclock, 2, 124.0)
    assert (own[0].replica_id, own[0].lsn) == (2, 4)


def test_a_local_transaction_of_global_rows_takes_consecutive_lsns():
    # assign_lsn's shortcut for the usual transaction, against the general rule
    vclock = VClock({1: 4, 2: 9})
    rows = [insert(i) for i in range(3)]
    assign_lsn(rows, vclock, 2, 7.0)
    assert [(r.replica_id, r.lsn, r.tsn, r.is_commit, r.timestamp) for r in rows] == [
        (2, 10, 10, False, 7.0), (2, 11, 10, False, 7.0), (2, 12, 10, True, 7.0)]
    assert vclock == VClock({1: 4, 2: 12})
    unsigned = [insert(1), insert(2)]            # no instance id yet: component 0
    assign_lsn(unsigned, VClock(), 0, 1.0)
    assert [(r.replica_id, r.lsn, r.tsn, r.is_commit) for r in unsigned] == [
        (0, 1, 1, False), (0, 2, 1, True)]
    foreign = [insert(1), insert(2, replica_id=5)]   # no LSN, another replica's id
    with pytest.raises(ValueError):             # (the writer signs a copy of its vclock)
        assign_lsn(foreign, vclock, 2, 1.0)


def test_local_space_rows_use_component_zero_and_the_first_global_lsn_as_tsn():
    # As measured on 2.6.0: box.begin() loc:insert{1} glob:insert{1} loc:insert{2}
    # glob:insert{2} box.commit() -> local rows lsn 1, 2 (group 1, no replica id),
    # global rows 7, 8, every row with tsn 7.
    vclock = VClock({1: 6})
    rows = [insert(1, group_id=GroupId.LOCAL), insert(1), insert(2, group_id=GroupId.LOCAL),
            insert(2)]
    assign_lsn(rows, vclock, 1, 1.0)
    assert [(r.replica_id, r.group_id, r.lsn, r.tsn, r.is_commit) for r in rows] == [
        (0, 1, 1, 7, False), (1, 0, 7, 7, False), (0, 1, 2, 7, False), (1, 0, 8, 7, True)]
    assert vclock == VClock({0: 2, 1: 8})
    only_local = [insert(4, group_id=GroupId.LOCAL), insert(5, group_id=GroupId.LOCAL)]
    assign_lsn(only_local, vclock, 1, 1.0)
    assert [(r.lsn, r.tsn, r.is_commit) for r in only_local] == [(3, 3, False), (4, 3, True)]


def test_a_replicated_row_that_goes_back_fails_only_its_entry(run, make_writer):
    writer = make_writer({1: 25, 2: 7}, instance_id=2)
    outcome = {}

    def main():
        with pytest.raises(ClientError) as err:
            writer.write([insert(1, replica_id=1, lsn=25)])
        outcome["error"] = err.value
        outcome["next"] = writer.write([insert(2)])

    run(main)
    assert outcome["error"].code == ErrorCode.ER_INVALID_ORDER
    assert outcome["next"] == VClock({1: 25, 2: 8})


def test_vclocks_handed_out_never_change_and_watchers_get_the_bytes_written(run, make_writer,
                                                                            tmp_path):
    writer = make_writer({1: 1})
    seen = []
    wal_set_watcher(writer, lambda rows, encoded: seen.append((list(rows), encoded)))
    handed = []

    def main():
        for key in range(3):
            returned = writer.write([insert(key)])
            handed.append((returned, returned.copy(), writer.vclock, writer.vclock.copy()))
        writer.write([insert(10), insert(11)])

    run(main)
    for returned, then, wal_vclock, wal_then in handed:
        assert returned == then and wal_vclock == wal_then
    assert [then for _, then, _, _ in handed] == [VClock({1: 2}), VClock({1: 3}),
                                                  VClock({1: 4})]
    assert writer.vclock == VClock({1: 6})
    writer.stop()
    data = b"".join(b"".join(encoded) for _, encoded in seen)
    rows = xlog_rows(list_files(str(tmp_path), ".xlog")[0].path)
    assert [r.lsn for r in rows] == [r.lsn for batch, _ in seen for r in batch] == [2, 3, 4, 5, 6]
    from spindle.core.xlog.format import encode_rows
    assert encode_rows(rows) == data


@pytest.mark.parametrize("together", [False, True])
def test_an_entry_that_cannot_be_signed_fails_alone_in_any_batch(run, make_writer, sched,
                                                                 together, logs):
    writer = make_writer({1: 25, 2: 7}, instance_id=2, mode="write")
    results = {}

    def client(name, rows):
        try:
            results[name] = writer.write(rows)
        except ClientError as exc:
            results[name] = exc.code

    def main():
        clients = [("old", [insert(1, replica_id=1, lsn=25)]),
                   ("foreign", [insert(2, replica_id=3)]), ("good", [insert(3)])]
        if together:
            fibers = [sched.spawn(client, *args, start=False) for args in clients]
            sched_yield_until(sched, lambda: all(f.status == "dead" for f in fibers))
        else:
            for args in clients:
                client(*args)

    run(main)
    assert writer.batches == (1 if together else 3)
    assert results == {"old": ErrorCode.ER_INVALID_ORDER, "foreign": ErrorCode.ER_WAL_IO,
                       "good": VClock({1: 25, 2: 8})}
    assert writer.vclock == VClock({1: 25, 2: 8})


# ------------------------------------------------------------------- group commit

def test_many_fibers_share_one_fsync_per_batch(run, make_writer, sched, tmp_path):
    io = CountingIO()
    io.gate = threading.Event()
    writer = make_writer({1: 100}, mode="fsync", io=io)
    results = {}

    def client(i):
        results[i] = writer.write([insert(i) for _ in range(1 + i % 3)])

    def main():
        fibers = [sched.spawn(client, i) for i in range(50)]
        # The thread is stuck in its first write; everything else queues up meanwhile.
        io.gate.set()
        sched_yield_until(sched, lambda: all(f.status == "dead" for f in fibers))
        writer.stop()

    run(main)
    assert len(results) == 50
    assert writer.batches <= 2                  # the first entry alone, then all the rest
    assert io.fsyncs == writer.batches + 2      # + closing it and the empty last file
    blocks = decode_file((tmp_path / "00000000000000000100.xlog").read_bytes()).blocks
    assert len(blocks) == writer.batches
    lsns = sorted(r.lsn for b in blocks for r in b.rows)
    assert lsns == list(range(101, 101 + sum(1 + i % 3 for i in range(50))))
    assert writer.vclock == VClock({1: lsns[-1]})


def test_write_mode_never_fsyncs_a_batch(run, make_writer):
    io = CountingIO()
    writer = make_writer({}, mode="write", io=io)

    def main():
        for i in range(5):
            writer.write([insert(i)])
        assert io.fsyncs == 0
        writer.stop()

    run(main)
    assert io.fsyncs == 2      # at close: the written file and the empty last one


def test_wal_watcher_gets_the_rows_of_each_batch(run, make_writer):
    writer = make_writer({1: 1})
    seen = []
    wal_set_watcher(writer, lambda rows, encoded: seen.append(
        [(r.replica_id, r.lsn) for r in rows]))

    def main():
        writer.write([insert(1), insert(2)])
        writer.write([insert(3)])

    run(main)
    assert seen == [[(1, 2), (1, 3)], [(1, 4)]]


def test_submit_completes_through_the_callback(run, make_writer):
    writer = make_writer({1: 1})
    done = []

    def main():
        entry = writer.submit([insert(1)], on_done=lambda e: done.append(e.signature))
        assert not entry.done
        assert writer.sync() == VClock({1: 2})
        sched_yield_until(writer.sched, lambda: entry.done)

    run(main)
    assert done == [2]


def sched_yield_until(sched, predicate, timeout=10.0):
    """Yield until predicate() holds; real time, as the WAL thread runs in real time
    while the scheduler's clock may be the fake one."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition never became true")
        sched.sleep(0.001)
        time.sleep(0.0005)


# ----------------------------------------------------------------------- rotation

def test_rotation_by_size_chains_files_by_vclock(run, make_writer, tmp_path):
    writer = make_writer({1: 10}, max_size=200)

    def main():
        for i in range(12):
            writer.write([insert(i)])
        writer.stop()

    run(main)
    files = list_files(str(tmp_path))
    assert len(files) >= 4
    metas = [read_meta(f.path) for f in files]
    assert metas[0].vclock == VClock({1: 10}) and metas[0].prev_vclock is None
    for prev, meta in zip(metas, metas[1:]):
        assert meta.prev_vclock == prev.vclock
    for f in files:
        data = Path(f.path).read_bytes()
        assert data.endswith(EOF_MARKER_BYTES)
        contents = decode_file(data)
        if contents.rows:
            assert contents.rows[0].lsn == read_meta(f.path).vclock[1] + 1
    # the last file is the empty one left at stop, named by the final vclock
    assert files[-1].signature == 22 and decode_file(Path(files[-1].path).read_bytes()).rows == []
    result = recover(str(tmp_path), str(tmp_path), lambda r: None, lambda t: None)
    assert result.bootstrap_needed   # no snapshot here; the files alone are consistent


def test_rotate_closes_a_file_with_rows_and_the_next_write_opens_the_next(run, make_writer,
                                                                         tmp_path):
    writer = make_writer({1: 5})
    clocks = []

    def main():
        clocks.append(writer.rotate())           # nothing open yet
        writer.write([insert(1)])
        clocks.append(writer.rotate())
        clocks.append(writer.rotate())           # the current file has no rows: no-op
        writer.write([insert(2)])
        writer.stop()

    run(main)
    assert clocks == [VClock({1: 5}), VClock({1: 6}), VClock({1: 6})]
    assert [f.signature for f in list_files(str(tmp_path))] == [5, 6, 7]
    assert [r.lsn for r in xlog_rows(tmp_path / "00000000000000000006.xlog")] == [7]
    assert read_meta(str(tmp_path / "00000000000000000006.xlog")).prev_vclock == VClock({1: 5})


def test_stop_leaves_the_empty_xlog_2_6_0_leaves(tmp_path, sched):
    """Fixture master/…26.xlog is the empty file 2.6.0 made at shutdown after LSN 26."""
    wal_dir = copy_fixture("master", tmp_path / "master")
    (wal_dir / "00000000000000000026.xlog").unlink()
    writer = WalWriter(sched, str(wal_dir), UUID1, VClock({1: 26}), instance_id=1)
    writer.stop()
    ours = (wal_dir / "00000000000000000026.xlog").read_bytes()
    assert ours == (FIXTURES / "master" / "00000000000000000026.xlog").read_bytes()


# ----------------------------------------------------------------------- failures

def committer(writer: WalWriter, errors: list):
    """A fiber body writing one insert of key `i`; the ClientError it raises goes
    to `errors`."""
    def client(i):
        try:
            writer.write([insert(i)])
        except ClientError as exc:
            errors.append(exc)
    return client


def test_write_error_fails_the_batch_and_keeps_the_vclock(run, make_writer, sched, tmp_path,
                                                         logs):
    io = CountingIO()
    writer = make_writer({1: 3}, io=io)
    outcome = {"errors": []}
    client = committer(writer, outcome["errors"])

    def main():
        writer.write([insert(0)])
        size = (tmp_path / "00000000000000000003.xlog").stat().st_size
        io.fail_writes = True
        fibers = [sched.spawn(client, i) for i in range(1, 6)]
        sched_yield_until(sched, lambda: all(f.status == "dead" for f in fibers))
        outcome["vclock_after_failure"] = writer.vclock.copy()
        outcome["size_after_failure"] = (tmp_path / "00000000000000000003.xlog").stat().st_size
        assert outcome["size_after_failure"] == size
        io.fail_writes = False          # the disk has room again
        outcome["next"] = writer.write([insert(100)])
        writer.stop()

    run(main)
    errors = outcome["errors"]
    assert len(errors) == 5
    assert {(e.code, str(e)) for e in errors} == {(ErrorCode.ER_WAL_IO, "Failed to write to disk")}
    assert outcome["vclock_after_failure"] == VClock({1: 4})
    assert outcome["next"] == VClock({1: 5})
    assert [r.lsn for r in xlog_rows(tmp_path / "00000000000000000003.xlog")] == [4, 5]
    assert any("failed to write to disk: No space left on device" in line for line in logs)


def test_fsync_failure_fails_the_batch(run, make_writer, sched):
    io = CountingIO()
    writer = make_writer({1: 1}, mode="fsync", io=io)
    outcome = {}

    def first():
        try:
            writer.write([insert(1)])
        except ClientError as exc:
            outcome["first"] = exc

    def main():
        io.fail_fsync = True
        fiber = sched.spawn(first)
        sched_yield_until(sched, lambda: fiber.status == "dead")
        io.fail_fsync = False
        outcome["after"] = writer.write([insert(2)])

    run(main)
    assert outcome["first"].code == ErrorCode.ER_WAL_IO
    assert outcome["after"] == VClock({1: 2})


def test_cascading_rollback_completes_newest_first(run, make_writer, sched):
    io = CountingIO()
    io.gate = threading.Event()
    writer = make_writer({1: 1}, io=io)
    order = []
    refused = []

    def on_done(entry, i):
        order.append(i)
        try:   # nothing new is accepted until the rollback is over
            writer.submit([insert(100 + i)])
        except ClientError as exc:
            refused.append(exc.code)

    def main():
        io.fail_writes = True
        entries = [writer.submit([insert(i)], on_done=lambda e, i=i: on_done(e, i))
                   for i in range(4)]
        io.gate.set()         # the thread was stuck in its first write until now
        sched_yield_until(sched, lambda: all(e.done for e in entries))
        assert all(e.error.code == ErrorCode.ER_WAL_IO for e in entries)
        io.fail_writes = False
        assert writer.write([insert(11)]) == VClock({1: 2})

    run(main)
    assert order == [3, 2, 1, 0]
    assert refused == [ErrorCode.ER_WAL_IO] * 4


def test_rotate_is_refused_while_writes_roll_back(run, make_writer, sched):
    io = CountingIO()
    writer = make_writer({1: 1}, io=io)
    outcome = {}

    def main():
        io.fail_writes = True
        entry = writer.submit([insert(1)])
        with pytest.raises(ClientError) as err:
            writer.rotate()
        outcome["rotate"] = err.value
        sched_yield_until(sched, lambda: entry.done)
        io.fail_writes = False
        outcome["ok"] = writer.rotate()

    run(main)
    assert outcome["rotate"].code == ErrorCode.ER_CHECKPOINT_ROLLBACK
    assert outcome["ok"] == VClock({1: 1})


# --------------------------------------------------------------------- mode none

def test_mode_none_writes_no_files_but_advances_lsns(run, make_writer, tmp_path, sched):
    writer = make_writer({1: 7}, mode="none")
    results = []
    switches = []

    def main():
        me = sched.current
        before = me.csw
        results.append(writer.write([insert(1)]))
        results.append(writer.write([insert(2), insert(3, group_id=GroupId.LOCAL)]))
        switches.append(me.csw - before)
        assert writer.rotate() == VClock({0: 1, 1: 9})
        writer.stop()

    run(main)
    assert results == [VClock({1: 8}), VClock({0: 1, 1: 9})]
    assert switches == [0]          # wal_mode none never yields
    assert os.listdir(tmp_path) == []


# -------------------------------------------------------------- reopening a file

def test_reopen_cuts_the_eof_marker_and_appends(run, make_writer, tmp_path):
    first = make_writer({1: 1})

    def write_some(writer, keys):
        def main():
            for key in keys:
                writer.write([insert(key)])
            writer.stop()
        return main

    run(write_some(first, [1, 2]))
    files = [f.signature for f in list_files(str(tmp_path))]
    assert files == [1, 3]        # rows 2-3, then the empty file named {1: 3}
    second = make_writer({1: 3})
    assert second.current_path == str(tmp_path / "00000000000000000003.xlog")
    run(write_some(second, [3]))
    assert [f.signature for f in list_files(str(tmp_path))] == [1, 3, 4]
    assert [r.lsn for r in xlog_rows(tmp_path / "00000000000000000003.xlog")] == [4]


def test_reopen_cuts_a_torn_tail_before_appending(run, make_writer, tmp_path):
    first = make_writer({1: 1})

    def main():
        first.write([insert(1)])
        first.rotate()
        first.write([insert(2)])
        first.stop()

    run(main)
    assert [f.signature for f in list_files(str(tmp_path))] == [1, 2, 3]
    (tmp_path / "00000000000000000003.xlog").unlink()
    path = tmp_path / "00000000000000000002.xlog"
    path.write_bytes(path.read_bytes()[:-10])  # crash: EOF marker gone, the block cut
    assert decode_file(path.read_bytes()).torn_tail is not None
    second = make_writer({1: 2})               # what recovery finds: LSN 3 was lost
    assert second.current_path == str(path)

    def again():
        second.write([insert(3)])
        second.stop()

    run(again)
    contents = decode_file(path.read_bytes())
    assert contents.torn_tail is None and contents.eof_offset is not None
    assert [r.lsn for r in contents.rows] == [3]


def test_a_file_with_a_broken_header_is_renamed_corrupted(tmp_path, make_writer, logs):
    (tmp_path / "00000000000000000005.xlog").write_bytes(b"XLOG\n0.13\nVClock: {junk\n\n")
    writer = make_writer({1: 5})
    assert writer.current_path is None
    assert (tmp_path / "00000000000000000005.xlog.corrupted").exists()
    assert any("renaming corrupted" in line for line in logs)


def test_collect_garbage_keeps_the_file_covering_the_vclock(run, make_writer, tmp_path):
    writer = make_writer({1: 0})
    removed = []

    def main():
        for key in range(1, 7):
            writer.write([insert(key)])
            if key % 2 == 0:
                writer.rotate()
        assert [c.signature for c in writer.xlog_vclocks()] == [0, 2, 4]
        removed.extend(writer.collect_garbage(VClock({1: 3})))

    run(main)
    assert [Path(p).name for p in removed] == ["00000000000000000000.xlog"]
    assert [f.signature for f in list_files(str(tmp_path))] == [2, 4]


def test_write_outside_a_fiber_is_refused(make_writer):
    writer = make_writer({})
    with pytest.raises(RuntimeError):
        writer.write([insert(1)])


def test_stopped_writer_refuses_writes(run, make_writer):
    writer = make_writer({})

    def main():
        writer.stop()
        with pytest.raises(ClientError):
            writer.write([insert(1)])

    run(main)


def test_reader_sees_what_the_writer_wrote_through_the_real_reader(run, make_writer, tmp_path):
    writer = make_writer({1: 0})

    def main():
        writer.write([insert(i) for i in range(2000)])    # one big zstd block
        writer.stop()

    run(main)
    with XlogReader(str(tmp_path / "00000000000000000000.xlog")) as reader:
        blocks = list(reader.blocks())
    assert all(b.compressed for b in blocks) and sum(len(b.rows) for b in blocks) == 2000


def test_mixed_local_and_global_transaction_is_written_as_2_6_0_writes_it(run, make_writer,
                                                                         tmp_path):
    writer = make_writer({1: 6})

    def main():
        writer.write([insert(1, group_id=GroupId.LOCAL), insert(1)])
        writer.stop()

    run(main)
    rows = xlog_rows(tmp_path / "00000000000000000006.xlog")
    # 2.6.0 writes the local row's TSN field as 2**64 - 6 (lsn 1 - tsn 7, wrapped)
    assert [(r.replica_id, r.lsn, r.tsn, r.is_commit) for r in rows] == [
        (0, 1, 7, False), (1, 7, 7, True)]


def test_a_lone_writer_writes_at_once_and_still_yields(run, make_writer, sched):
    """No other fiber ready: the entry is written without a hub callback, and the
    commit still yields (a hub callback queued before it runs before it returns)."""
    writer = make_writer({1: 7}, mode="write")
    seen = {}

    def main():
        sched.call_soon(lambda: seen.setdefault("hub ran", writer.batches))
        seen["vclock"] = writer.write([insert(1)])
        seen["batches"] = writer.batches
        writer.stop()

    run(main)
    assert seen["vclock"] == VClock({1: 8}) and seen["batches"] == 1
    # the hub callback ran after the write (batch written) and before write() returned
    assert seen["hub ran"] == 1


def test_fibers_committing_in_one_iteration_still_share_a_batch(run, make_writer, sched):
    writer = make_writer({}, mode="write")
    results = {}

    def client(i):
        results[i] = writer.write([insert(i)])

    def main():
        fibers = [sched.spawn(client, i, start=False) for i in range(10)]
        sched_yield_until(sched, lambda: all(f.status == "dead" for f in fibers))
        writer.stop()

    run(main)
    assert writer.batches == 1
    assert sorted(v[1] for v in results.values()) == list(range(1, 11))


def test_a_lone_writer_failure_fails_its_entry_and_writing_resumes(run, make_writer, sched,
                                                                  tmp_path, logs):
    io = CountingIO()
    writer = make_writer({1: 3}, io=io)
    outcome = {}

    def main():
        writer.write([insert(0)])
        io.fail_writes = True
        with pytest.raises(ClientError) as failed:
            writer.write([insert(1)])
        outcome["error"] = failed.value.code
        outcome["vclock"] = writer.vclock.copy()
        io.fail_writes = False
        outcome["next"] = writer.write([insert(2)])
        writer.stop()

    run(main)
    assert outcome["error"] == ErrorCode.ER_WAL_IO
    assert outcome["vclock"] == VClock({1: 4}) and outcome["next"] == VClock({1: 5})
    assert [r.lsn for r in xlog_rows(tmp_path / "00000000000000000003.xlog")] == [4, 5]


class TornIO(WalIO):
    """Writes the first `torn` bytes of the next block, then fails (a disk that
    fills mid-write); with `cannot_cut`, the truncation that should follow fails."""

    def __init__(self):
        self.torn: int | None = None
        self.cannot_cut = False

    def write(self, fd, data):
        if self.torn is not None and data != EOF_MARKER_BYTES:
            os.write(fd, data[:self.torn])
            self.torn = None
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().write(fd, data)

    def truncate(self, fd, size):
        if self.cannot_cut:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().truncate(fd, size)


@pytest.mark.parametrize("lone", [True, False], ids=["lone writer", "batch"])
def test_a_torn_write_is_cut_back_and_the_next_entry_follows_the_last_good_one(
        run, make_writer, sched, tmp_path, logs, lone):
    io = TornIO()
    writer = make_writer({1: 3}, io=io)
    outcome = {"errors": []}
    client = committer(writer, outcome["errors"])

    def main():
        writer.write([insert(0)])
        size = (tmp_path / "00000000000000000003.xlog").stat().st_size
        io.torn = 7
        if lone:
            client(1)
        else:
            fibers = [sched.spawn(client, i, start=False) for i in (1, 2)]
            sched_yield_until(sched, lambda: all(f.status == "dead" for f in fibers))
        outcome["size"] = (tmp_path / "00000000000000000003.xlog").stat().st_size - size
        outcome["next"] = writer.write([insert(100)])
        writer.stop()

    run(main)
    assert [exc.code for exc in outcome["errors"]] == [ErrorCode.ER_WAL_IO] * (1 if lone else 2)
    assert outcome["size"] == 0                   # the torn bytes are gone
    assert outcome["next"] == VClock({1: 5})
    assert [r.lsn for r in xlog_rows(tmp_path / "00000000000000000003.xlog")] == [4, 5]
    assert any("failed to write to disk: No space left on device" in line for line in logs)


def test_a_torn_write_that_cannot_be_cut_leaves_the_file_for_a_new_one(
        run, make_writer, tmp_path, logs):
    io = TornIO()
    writer = make_writer({1: 3}, io=io)
    outcome = {}

    def main():
        writer.write([insert(0)])
        io.torn, io.cannot_cut = 7, True
        with pytest.raises(ClientError) as failed:
            writer.write([insert(1)])
        outcome["error"] = failed.value.code
        outcome["next"] = writer.write([insert(2)])
        writer.stop()

    run(main)
    assert outcome["error"] == ErrorCode.ER_WAL_IO
    assert outcome["next"] == VClock({1: 5})
    assert any("failed to truncate" in line for line in logs)
    # the torn file keeps its good row; the next entry opened a file of its own
    names = sorted(path.name for path in tmp_path.glob("*.xlog"))
    assert names[:2] == ["00000000000000000003.xlog", "00000000000000000004.xlog"]
    assert [r.lsn for r in xlog_rows(tmp_path / "00000000000000000004.xlog")] == [5]


def test_batches_reach_tx_in_the_order_of_the_file(run, make_writer, sched):
    """A batch the thread wrote is completed in tx through a hub callback; tx must not
    write a batch of its own before that callback ran. Otherwise the later batch
    reached the WAL watchers (the relays' WAL tail) first, the WAL vclock went
    back when the earlier one completed, and relays skipped the earlier batch as
    sent already (issue 21: rows missing on replicas, vclocks equal)."""
    writer = make_writer({1: 10}, mode="write")
    hooked = []
    wal_set_watcher(writer, lambda rows, encoded: hooked.append(
        ([row.lsn for row in rows], writer.vclock.copy())))
    held = []
    deliver = sched.call_soon_threadsafe

    def holding(callback, *args):
        if getattr(callback, "__name__", "").startswith("_complete"):
            held.append((callback, args))       # the thread's completion, not run yet
        else:
            deliver(callback, *args)
    sched.call_soon_threadsafe = holding
    vclocks = []

    def main():
        sched.spawn(lambda: None, start=False)  # ready: A waits for a batch to join
        first = writer.submit([insert(1)])
        assert not first.done
        writer.sync()                           # hands A to the thread
        sched_yield_until(sched, lambda: held and not writer._busy)
        second = writer.submit([insert(2)], write_now=True)
        vclocks.append(writer.vclock.copy())
        sched_yield_until(sched, lambda: len(held) == 2 or second.done)
        for callback, args in held:
            deliver(callback, *args)
        sched_yield_until(sched, lambda: first.done and second.done)
        vclocks.append(writer.vclock.copy())
        sched.call_soon_threadsafe = deliver
        writer.stop()

    run(main)
    assert [lsns for lsns, _ in hooked] == [[11], [12]]
    assert [clock for _, clock in hooked] == [VClock({1: 11}), VClock({1: 12})]
    assert vclocks == [VClock({1: 10}), VClock({1: 12})]


def test_a_write_at_once_goes_before_the_fibers_ready_now(run, make_writer, sched):
    """write() puts an entry in a batch at the end of the loop's iteration while
    other fibers are ready (they run first: the writer hands them the CPU as it
    parks); write(at_once=True) is written before it returns, so the fibers ready
    then find it written (a new leader's PROMOTE). What the ready fiber saw is
    compared, nothing is timed."""
    writer = make_writer({1: 10}, mode="write")
    written = []
    wal_set_watcher(writer, lambda rows, encoded: written.extend(row.lsn for row in rows))
    seen = []

    def write(key, at_once):
        sched.wait()
        writer.write([insert(key)], at_once=at_once)

    def look():
        sched.wait()
        seen.append(list(written))

    def main():
        for key, at_once in ((1, True), (2, False)):
            fibers = [sched.spawn(write, key, at_once), sched.spawn(look)]
            sched_yield_until(sched, lambda: all(f.status != "ready" for f in fibers))
            for fiber in fibers:        # ready together: one batch, the writer first
                sched.wakeup(fiber)
            sched_yield_until(sched, lambda: len(written) == key)
        writer.stop()

    run(main)
    assert seen == [[11], [11]]         # the second write waited for the ready fiber
    assert written == [11, 12]
