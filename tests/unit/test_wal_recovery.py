"""Recovery of real 2.6.0 data directories and of damaged copies of them.

The expected messages were measured by starting tarantool 2.6.0 on the same damaged
copies (`box.cfg{work_dir=...}`):
  torn/unclosed last xlog  W> file `./00000000000000000000.xlog` wasn't correctly closed
  corrupt block            E> can't open tx: tx checksum mismatch
                           E> XlogError: tx checksum mismatch
                           F> can't initialize storage: tx checksum mismatch
  gap                      E> XlogGapError: Missing .xlog file between LSN 25 {1: 25} and 26 {1: 26}
                           W> ignoring a gap in LSN            (force_recovery)
  leftovers                I> removed ./00000000000000000030.snap.inprogress
  refused row (force)      E> skipping row {1: 11}
"""
from __future__ import annotations

import copy

import shutil
from pathlib import Path

import msgpack
import pytest

from spindle.core import log
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.row_block import encode_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import XlogError, XlogMeta
from spindle.core.vclock import VClock
from spindle.core.wal.checkpoint import write_snapshot_file
from spindle.core.wal.recovery import XlogGapError, recover
from spindle.core.xlog.files import XlogWriter

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
UUID1 = "11111111-1111-4111-8111-111111111111"
UUID2 = "22222222-2222-4222-8222-222222222222"
XLOG0 = "00000000000000000000.xlog"
BLOCK_10_OFFSET = 705     # master/…0000.xlog, see its .blocks.txt
BLOCK_19_OFFSET = 1228    # the 3-row transaction LSN 19-21


def copy_fixture(name: str, dest: Path, *, drop: tuple[str, ...] = ()) -> Path:
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns("*.txt", *drop))
    dest.chmod(0o755)
    for path in dest.iterdir():
        path.chmod(0o644)
    return dest


class Collector:
    def __init__(self):
        self.snapshot_rows: list[XRow] = []
        self.txs: list[list[XRow]] = []

    def snap(self, row: XRow) -> None:
        self.snapshot_rows.append(copy.copy(row))     # (recovery reads over its row)

    def tx(self, rows: list[XRow]) -> None:
        self.txs.append(rows)

    @property
    def lsns(self) -> list[list[int]]:
        return [[r.lsn for r in tx] for tx in self.txs]


def run_recovery(path: Path, **kwargs):
    seen = Collector()
    result = recover(str(path), str(path), seen.snap, seen.tx, **kwargs)
    return result, seen


@pytest.fixture
def logs():
    lines: list[str] = []
    previous = log.set_sink(lines.append)
    yield lines
    log.set_sink(previous)


def has(lines: list[str], text: str) -> bool:
    return any(text in line for line in lines)


# ------------------------------------------------------------------ fixtures as is

def test_recover_master_fixture(tmp_path, logs):
    result, seen = run_recovery(copy_fixture("master", tmp_path / "m"))
    assert result.vclock == VClock({1: 26})
    assert result.last_checkpoint_vclock == VClock({1: 25})
    assert result.instance_uuid == UUID1
    assert [c.signature for c in result.checkpoints] == [0, 25]
    assert len(seen.snapshot_rows) == result.snapshot_rows == 528
    assert seen.lsns == [[26]]
    row = seen.txs[0][0]
    assert row.type == IprotoType.INSERT and row.body_map() == {0x10: 512,
                                                                 0x21: [20, "after-snapshot"]}
    assert [Path(p).name for p in result.xlogs] == ["00000000000000000025.xlog",
                                                   "00000000000000000026.xlog"]
    assert result.not_closed == [] and result.gaps == [] and result.corrupt_blocks == []
    assert has(logs, "recovering from `") and has(logs, "25.snap'")
    assert has(logs, "recover from `") and has(logs, "done `")


def test_recover_replica_fixture(tmp_path):
    result, seen = run_recovery(copy_fixture("replica", tmp_path / "r"))
    assert result.vclock == VClock({1: 23})
    assert result.last_checkpoint_vclock == VClock({1: 14})
    assert result.instance_uuid == UUID2
    assert seen.lsns == [[15], [16], [17], [18], [19, 20, 21], [22], [23]]
    assert [r.type for r in seen.txs[-1]] == [IprotoType.CONFIRM]
    multi = seen.txs[4]
    assert [(r.tsn, r.is_commit) for r in multi] == [(19, False), (19, False), (19, True)]
    assert all(r.replica_id == 1 for tx in seen.txs for r in tx)   # master's rows


def test_recover_from_the_bootstrap_snapshot_replays_every_xlog(tmp_path):
    path = copy_fixture("master", tmp_path / "m", drop=("00000000000000000025.snap",))
    result, seen = run_recovery(path)
    assert result.vclock == VClock({1: 26})
    assert result.last_checkpoint_vclock == VClock()
    assert len(seen.snapshot_rows) == 513
    assert [lsn for tx in seen.lsns for lsn in tx] == list(range(1, 27))
    assert [19, 20, 21] in seen.lsns
    assert result.rows_applied == 26 and result.transactions == 24


def test_rows_covered_by_the_snapshot_are_skipped(tmp_path):
    # With 25.xlog gone, recovery from 25.snap starts at 0000.xlog (the newest xlog
    # starting at or before {1: 25}): all its rows are covered and skipped, then the
    # gap before 26.xlog shows (ignored here).
    path = copy_fixture("master", tmp_path / "m", drop=("00000000000000000025.xlog",))
    result, seen = run_recovery(path, force_recovery=True)
    assert [Path(p).name for p in result.xlogs] == [XLOG0, "00000000000000000026.xlog"]
    assert result.rows_skipped == 25 and seen.txs == []


def test_progress_reaches_the_total(tmp_path):
    reports = []
    result, _ = run_recovery(copy_fixture("master", tmp_path / "m"), progress=reports.append)
    assert reports[0].phase == "snapshot" and reports[-1].phase == "xlog"
    done = [r.bytes_done for r in reports]
    assert done == sorted(done)
    assert reports[-1].bytes_done == reports[-1].bytes_total > 0
    assert reports[-1].fraction == 1.0 and reports[-1].rows == 528 + 1


def test_no_snapshot_means_bootstrap(tmp_path):
    result, seen = run_recovery(tmp_path)
    assert result.bootstrap_needed and result.vclock == VClock()
    assert seen.snapshot_rows == [] and seen.txs == []


def test_instance_uuid_mismatch(tmp_path):
    with pytest.raises(ClientError) as err:
        run_recovery(copy_fixture("master", tmp_path / "m"), instance_uuid=UUID2)
    assert err.value.code == ErrorCode.ER_INSTANCE_UUID_MISMATCH
    assert str(err.value) == f"Instance UUID mismatch: expected {UUID2}, got {UUID1}"


def test_inprogress_leftovers_are_removed(tmp_path, logs):
    path = copy_fixture("master", tmp_path / "m")
    (path / "00000000000000000030.snap.inprogress").write_text("junk")
    (path / "00000000000000000031.xlog.inprogress").write_text("junk")
    result, _ = run_recovery(path)
    assert sorted(Path(p).name for p in result.removed) == [
        "00000000000000000030.snap.inprogress", "00000000000000000031.xlog.inprogress"]
    assert not list(path.glob("*.inprogress"))
    assert has(logs, "I> removed ") and has(logs, "00000000000000000030.snap.inprogress")


# ---------------------------------------------------------------------- torn tails

def only_first_xlog(tmp_path: Path) -> Path:
    return copy_fixture("master", tmp_path / "m", drop=(
        "00000000000000000025.snap", "00000000000000000025.xlog", "00000000000000000026.xlog"))


def test_torn_tail_of_the_last_xlog_stops_at_the_last_whole_transaction(tmp_path, logs):
    path = only_first_xlog(tmp_path)
    xlog = path / XLOG0
    xlog.write_bytes(xlog.read_bytes()[:BLOCK_19_OFFSET + 50])   # inside txn 19-21
    result, seen = run_recovery(path)
    # 2.6.0 on the same file: instance vclock {1: 18}, then a new xlog …18.xlog.
    assert result.vclock == VClock({1: 18})
    assert [lsn for tx in seen.lsns for lsn in tx] == list(range(1, 19))
    assert result.not_closed == [str(xlog)]
    assert result.torn_tails == {str(xlog): BLOCK_19_OFFSET}
    assert has(logs, f"W> file `{xlog}` wasn't correctly closed")
    assert xlog.stat().st_size == BLOCK_19_OFFSET + 50     # recovery changes no file


def test_xlog_without_eof_marker_keeps_all_its_rows(tmp_path, logs):
    path = only_first_xlog(tmp_path)
    xlog = path / XLOG0
    xlog.write_bytes(xlog.read_bytes()[:-4])
    result, _ = run_recovery(path)
    assert result.vclock == VClock({1: 25})
    assert result.torn_tails == {} and result.not_closed == [str(xlog)]
    assert has(logs, "wasn't correctly closed")


def test_writer_after_a_torn_tail_continues_in_a_new_file(tmp_path, sched):
    from spindle.core.wal.writer import WalWriter
    path = only_first_xlog(tmp_path)
    xlog = path / XLOG0
    xlog.write_bytes(xlog.read_bytes()[:BLOCK_19_OFFSET + 50])
    result, _ = run_recovery(path)
    writer = WalWriter(sched, str(path), UUID1, result.vclock, instance_id=1)
    row = XRow(type=IprotoType.INSERT,
               body=encode_dml_body(IprotoType.INSERT, 512, tuple=[99, "z"]))

    def main():
        assert writer.write([row]) == VClock({1: 19})
        writer.stop()

    sched.run(main)
    assert (path / "00000000000000000018.xlog").exists()     # as 2.6.0 does
    result, seen = run_recovery(path)
    assert result.vclock == VClock({1: 19})
    assert seen.lsns[-1] == [19] and seen.txs[-1][0].body_map()[0x21] == [99, "z"]


# ------------------------------------------------------------------- corrupt blocks

def corrupt_block_10(tmp_path: Path) -> Path:
    path = only_first_xlog(tmp_path)
    xlog = path / XLOG0
    data = bytearray(xlog.read_bytes())
    data[BLOCK_10_OFFSET + 19 + 10] ^= 0xFF
    xlog.write_bytes(bytes(data))
    return path


def test_corrupt_block_in_the_middle_is_fatal(tmp_path, logs):
    with pytest.raises(XlogError) as err:
        run_recovery(corrupt_block_10(tmp_path))
    assert str(err.value) == "tx checksum mismatch"
    assert err.value.offset == BLOCK_10_OFFSET
    assert has(logs, "E> can't open tx: tx checksum mismatch")
    assert has(logs, "E> XlogError: tx checksum mismatch")


def test_corrupt_block_is_skipped_with_force_recovery(tmp_path, logs):
    result, seen = run_recovery(corrupt_block_10(tmp_path), force_recovery=True)
    lsns = [lsn for tx in seen.lsns for lsn in tx]
    assert 10 not in lsns and lsns == [n for n in range(1, 26) if n != 10]
    assert result.vclock == VClock({1: 25})
    assert len(result.corrupt_blocks) == 1
    assert has(logs, "can't open tx: tx checksum mismatch")


def test_refused_row_is_fatal_or_skipped_with_force_recovery(tmp_path, logs):
    path = only_first_xlog(tmp_path)

    def apply_row(rows):
        if rows[0].lsn == 11:
            raise ClientError(ErrorCode.ER_NO_SUCH_SPACE, "513")

    with pytest.raises(ClientError):
        recover(str(path), str(path), lambda r: None, apply_row)
    result = recover(str(path), str(path), lambda r: None, apply_row, force_recovery=True)
    assert result.failed_rows == [(1, 11)] and result.vclock == VClock({1: 25})
    assert has(logs, "E> skipping row {1: 11}")
    assert has(logs, "ER_NO_SUCH_SPACE: Space '513' does not exist")


# ----------------------------------------------------------------------------- gaps

def test_gap_between_xlogs(tmp_path, logs):
    path = copy_fixture("master", tmp_path / "m", drop=("00000000000000000025.xlog",))
    with pytest.raises(XlogGapError) as err:
        run_recovery(path)
    assert str(err.value) == "Missing .xlog file between LSN 25 {1: 25} and 26 {1: 26}"
    assert err.value.type == "XlogGapError"
    assert has(logs, "E> XlogGapError: Missing .xlog file between LSN 25 {1: 25} and 26 {1: 26}")


def test_gap_is_ignored_with_force_recovery(tmp_path, logs):
    path = copy_fixture("master", tmp_path / "m", drop=("00000000000000000025.xlog",))
    result, _ = run_recovery(path, force_recovery=True)
    assert result.vclock == VClock({1: 26})
    assert len(result.gaps) == 1
    assert has(logs, "W> ignoring a gap in LSN")


def test_first_xlog_after_the_snapshot_is_a_gap(tmp_path):
    path = copy_fixture("master", tmp_path / "m",
                        drop=("00000000000000000025.snap", XLOG0))
    with pytest.raises(XlogGapError) as err:
        run_recovery(path)
    assert str(err.value) == "Missing .xlog file between LSN 0 {} and 25 {1: 25}"


# ------------------------------------------------------------------- bad files

def test_foreign_and_misnamed_xlogs(tmp_path, logs):
    path = copy_fixture("master", tmp_path / "m")
    xlog = path / "00000000000000000025.xlog"
    xlog.write_bytes(xlog.read_bytes().replace(UUID1.encode(), b"3" * 8 + UUID1[8:].encode()))
    with pytest.raises(XlogError) as err:
        run_recovery(path)
    assert str(err.value) == f"{xlog}: invalid instance UUID"
    result, _ = run_recovery(path, force_recovery=True)   # skipped: then a gap, ignored
    assert result.vclock == VClock({1: 26}) and len(result.gaps) == 1

    path2 = copy_fixture("master", tmp_path / "m2")
    (path2 / "00000000000000000026.xlog").rename(path2 / "00000000000000000027.xlog")
    with pytest.raises(XlogError) as err:
        run_recovery(path2)
    assert str(err.value) == f"{path2 / '00000000000000000027.xlog'}: signature check failed"
    result, _ = run_recovery(path2, force_recovery=True)
    assert result.vclock == VClock({1: 26})


def snapshot_with_a_bad_row(directory: Path) -> None:
    """A snapshot of three blocks: keys 1-2; key 3, a row whose header no decoder
    takes, key 4; keys 5-6 (each block's checksum good)."""
    def rows(*keys):
        return b"".join(encode_row(XRow(IprotoType.INSERT, encode_dml_body(
            IprotoType.INSERT, 512, tuple=[key]), lsn=key)) for key in keys)
    with XlogWriter.create_snapshot(str(directory), UUID1, VClock({1: 6}),
                                    sync="never") as writer:
        writer.write_block(rows(1, 2))
        writer.write_block(rows(3) + b"\x81\x53\xc0" + rows(4))
        writer.write_block(rows(5, 6))


def test_a_snapshot_row_that_cannot_be_read(tmp_path, logs):
    """Snapshot rows are read one at a time into one row (visit_rows): a row of a
    block that cannot be read is the block's "can't parse row", fatal; with
    force_recovery the rows before it are applied, as 2.6.0 applies them, the rest
    of its block is skipped and the next blocks are read."""
    snapshot_with_a_bad_row(tmp_path)
    with pytest.raises(XlogError) as err:
        run_recovery(tmp_path)
    assert str(err.value) == "can't parse row"
    assert has(logs, "E> can't open tx: can't parse row")
    result, seen = run_recovery(tmp_path, force_recovery=True)
    keys = [msgpack.unpackb(row.body, strict_map_key=False)[0x21][0]
            for row in seen.snapshot_rows]
    assert keys == [1, 2, 3, 5, 6] and result.snapshot_rows == 5
    assert len(result.corrupt_blocks) == 1


def test_a_refused_snapshot_row_is_fatal_or_left_out_with_force_recovery(tmp_path, logs):
    snapshot_with_a_bad_row(tmp_path)
    applied = []

    def snap(row):
        key = msgpack.unpackb(row.body, strict_map_key=False)[0x21][0]
        if key == 2:
            raise ClientError(ErrorCode.ER_NO_SUCH_SPACE, "512")
        applied.append(key)

    with pytest.raises(ClientError):
        recover(str(tmp_path), str(tmp_path), snap, lambda rows: None)
    applied.clear()
    recover(str(tmp_path), str(tmp_path), snap, lambda rows: None, force_recovery=True)
    assert applied == [1, 3, 5, 6]
    assert has(logs, "E> can't apply row: ")
    assert has(logs, "ER_NO_SUCH_SPACE: Space '512' does not exist")


def test_snapshot_without_eof_marker_is_never_trusted(tmp_path):
    path = copy_fixture("master", tmp_path / "m")
    snap = path / "00000000000000000025.snap"
    snap.write_bytes(snap.read_bytes()[:-4])
    with pytest.raises(XlogError) as err:
        run_recovery(path)
    assert "has no EOF marker" in str(err.value)


def test_rows_processed_log_line_every_100000_rows(tmp_path, logs):
    tuples = (msgpack.packb([i]) for i in range(250_000))
    write_snapshot_file(str(tmp_path), UUID1, VClock({1: 3}), ((512, t) for t in tuples),
                        fsync=False)
    meta = XlogMeta("XLOG", UUID1, VClock({1: 3}))
    with XlogWriter.create(str(tmp_path), meta, sync="never") as writer:
        for lsn in range(4, 4 + 100_000):
            writer.add_tx([XRow(type=IprotoType.INSERT, replica_id=1, lsn=lsn, body=b"\x80")])
    result, seen = run_recovery(tmp_path)
    assert result.vclock == VClock({1: 100_003})
    lines = [line.split("I> ")[1] for line in logs if "rows processed" in line]
    assert lines == ["0.1M rows processed", "0.2M rows processed", "0.1M rows processed"]
