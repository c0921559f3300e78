import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError
from spindle.core.iproto.request import encode_dml_body, encode_snapshot_body, synchro_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import (
    AUTOCOMMIT_THRESHOLD, EOF_MARKER_BYTES, FIXHEADER_SIZE, CorruptBlock, DataAfterEof,
    XlogError, XlogHeaderError, XlogMeta, decode_file, encode_rows,
)
from spindle.core.vclock import VClock
from spindle.core.xlog.files import (
    INPROGRESS_SUFFIX, SyncPolicy, XlogIO, XlogReader, XlogWriter, format_filename, list_files,
    list_inprogress, parse_filename, read_meta, remove_inprogress,
)

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
UUID1 = "11111111-1111-4111-8111-111111111111"
UUID2 = "22222222-2222-4222-8222-222222222222"


def tx(first_lsn: int, count: int = 1, size: int = 10) -> list[XRow]:
    rows = []
    for lsn in range(first_lsn, first_lsn + count):
        rows.append(XRow(type=IprotoType.REPLACE, replica_id=1, lsn=lsn, timestamp=1000.0 + lsn,
                         tsn=first_lsn if count > 1 else 0, is_commit=lsn == first_lsn + count - 1,
                         body=encode_dml_body(IprotoType.REPLACE, 512, tuple=[lsn, "v" * size])))
    return rows


def xlog_meta(vclock, prev=None) -> XlogMeta:
    return XlogMeta("XLOG", UUID1, VClock(vclock), None if prev is None else VClock(prev))


def test_filenames():
    assert format_filename(25, ".snap") == "00000000000000000025.snap"
    assert parse_filename("00000000000000000025.xlog") == (25, ".xlog")
    assert parse_filename("00000000000000000025.xlog.inprogress") is None
    assert parse_filename("25.xlog") is None


def test_xlog_is_renamed_right_after_its_header(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync=SyncPolicy.NEVER)
    assert writer.path == str(tmp_path / "00000000000000000005.xlog")
    assert list_inprogress(str(tmp_path)) == []
    assert Path(writer.path).read_bytes() == xlog_meta({1: 5}).encode()
    writer.write_tx(tx(6))
    writer.write_tx(tx(7, 3))
    # a crash now leaves a readable, unclosed file
    with XlogReader(writer.path) as reader:
        assert [[r.lsn for r in t] for t in reader.transactions()] == [[6], [7, 8, 9]]
        assert not reader.eof_marker and reader.torn_tail is None
    writer.close()
    assert writer.rows == 4
    data = Path(writer.path).read_bytes()
    assert data.endswith(EOF_MARKER_BYTES) and writer.offset == len(data)
    with XlogReader(writer.path, expected_type="XLOG") as reader:
        assert [r.lsn for r in reader.rows()] == [6, 7, 8, 9]
        assert reader.eof_marker


def test_snapshot_keeps_inprogress_until_complete(tmp_path):
    writer = XlogWriter.create_snapshot(str(tmp_path), UUID1, VClock({1: 25}), sync="never")
    assert writer.path.endswith(".snap" + INPROGRESS_SUFFIX)
    for i in range(10):
        writer.add_row(XRow(type=IprotoType.INSERT, lsn=i, timestamp=5.0,
                            body=encode_snapshot_body(512, [i])))
    assert list_files(str(tmp_path), ".snap") == []
    writer.close()
    assert not writer.in_progress
    [entry] = list_files(str(tmp_path), ".snap")
    assert entry.signature == 25 and entry.path == writer.path
    with XlogReader(writer.path, expected_type="SNAP") as reader:
        assert [r.lsn for r in reader.rows()] == list(range(10))
        reader.check_snapshot_complete()


def test_failed_snapshot_is_discarded(tmp_path):
    with pytest.raises(RuntimeError):
        with XlogWriter.create_snapshot(str(tmp_path), UUID1, VClock({1: 3})) as writer:
            writer.add_row(XRow(type=IprotoType.INSERT, body=encode_snapshot_body(512, [1])))
            raise RuntimeError("checkpoint failed")
    assert os.listdir(tmp_path) == []


def test_snapshot_without_eof_is_not_trusted(tmp_path):
    writer = XlogWriter.create_snapshot(str(tmp_path), UUID1, VClock({1: 3}), sync="never")
    writer.add_row(XRow(type=IprotoType.INSERT, body=encode_snapshot_body(512, [1])))
    writer.flush()
    with XlogReader(writer.path) as reader:
        assert len(list(reader.rows())) == 1
        with pytest.raises(XlogError, match="has no EOF marker"):
            reader.check_snapshot_complete()
    writer.discard()


def test_create_never_overwrites(tmp_path):
    XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync="never").close()
    with pytest.raises(FileExistsError):
        XlogWriter.create(str(tmp_path), xlog_meta({1: 5}))


def test_buffer_flushes_at_128k_at_transaction_boundaries(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({}), sync="never")
    lsn = 1
    for _ in range(60):
        writer.add_tx(tx(lsn, 5, size=1000))
        lsn += 5
    writer.close()
    contents = decode_file(Path(writer.path).read_bytes())
    sizes = [len(b.data) for b in contents.blocks]
    assert len(sizes) == 3 and all(b.compressed for b in contents.blocks)
    for size in sizes[:-1]:
        assert size + FIXHEADER_SIZE >= AUTOCOMMIT_THRESHOLD
    assert all(len(b.rows) % 5 == 0 for b in contents.blocks)
    assert [r.lsn for r in contents.rows] == list(range(1, lsn))


@pytest.mark.parametrize("name", ["master/00000000000000000000.xlog",
                                  "master/00000000000000000025.xlog",
                                  "master/00000000000000000026.xlog",
                                  "replica/00000000000000000014.xlog",
                                  "replica/00000000000000000023.xlog"])
def test_writer_reproduces_fixture_xlogs_byte_for_byte(tmp_path, name):
    original = (FIXTURES / name).read_bytes()
    contents = decode_file(original)
    writer = XlogWriter.create(str(tmp_path), contents.meta, sync="never")
    for block in contents.blocks:
        # the replica's WAL batched two transactions into some blocks
        for transaction in contents_transactions(block.rows):
            writer.add_tx(transaction)
        writer.flush()
    writer.close()
    assert Path(writer.path).name == Path(name).name
    assert Path(writer.path).read_bytes() == original


def contents_transactions(rows):
    txs, current = [], []
    for row in rows:
        current.append(row)
        if row.is_commit:
            txs.append(current)
            current = []
    return txs


def test_open_for_append_cuts_eof_marker(tmp_path):
    path = tmp_path / "00000000000000000026.xlog"
    shutil.copy(FIXTURES / "master/00000000000000000026.xlog", path)
    writer = XlogWriter.open_for_append(str(path), sync="never")
    assert writer.offset == 122 and writer.meta.vclock == VClock({1: 26})
    writer.write_tx(tx(27))
    writer.close()
    contents = decode_file(path.read_bytes())
    assert [r.lsn for r in contents.rows] == [27] and contents.eof_offset is not None


def test_open_for_append_cuts_torn_tail(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync="never")
    writer.write_tx(tx(6))
    writer.write_tx(tx(7))
    path = writer.path
    os.close(writer._fd)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    with XlogReader(path) as reader:
        assert [r.lsn for r in reader.rows()] == [6]
        assert reader.torn_tail is not None
        good_end = reader.position
    writer = XlogWriter.open_for_append(path, valid_size=good_end, sync="never")
    writer.write_tx(tx(7))
    writer.close()
    with XlogReader(path) as reader:
        assert [r.lsn for r in reader.rows()] == [6, 7] and reader.eof_marker


def test_reader_follows_a_growing_file(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync="never")
    writer.write_tx(tx(6))
    reader = XlogReader(writer.path, chunk_size=7)
    assert [r.lsn for r in reader.rows()] == [6]
    assert reader.torn_tail is None and not reader.eof_marker
    block = _block_bytes(tx(7, 2))
    with open(writer.path, "ab") as f:          # half a block arrives
        f.write(block[:30])
    assert list(reader.transactions()) == []
    assert reader.torn_tail.available == 30
    with open(writer.path, "ab") as f:          # the rest arrives
        f.write(block[30:] + EOF_MARKER_BYTES)
    assert [[r.lsn for r in t] for t in reader.transactions()] == [[7, 8]]
    assert reader.eof_marker and reader.torn_tail is None
    reader.close()
    os.close(writer._fd)


def _block_bytes(rows):
    from spindle.core.xlog.format import encode_tx
    return encode_tx(rows)


def test_corrupt_block_in_the_middle(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync="never")
    offsets = []
    for lsn in (6, 7, 8):
        offsets.append(writer.offset)
        writer.write_tx(tx(lsn))
    writer.close()
    data = bytearray(Path(writer.path).read_bytes())
    data[offsets[1] + 25] ^= 0x40
    Path(writer.path).write_bytes(bytes(data))
    with XlogReader(writer.path) as reader:
        rows = reader.rows()
        assert next(rows).lsn == 6
        with pytest.raises(CorruptBlock) as info:
            next(rows)
        assert info.value.offset == offsets[1] and info.value.reason == "tx checksum mismatch"
    with XlogReader(writer.path, force_recovery=True) as reader:
        assert [r.lsn for r in reader.rows()] == [6, 8]
        assert [e.offset for e in reader.skipped] == [offsets[1]]
        assert reader.eof_marker


def test_force_recovery_with_garbage_to_the_end(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync="never")
    writer.write_tx(tx(6))
    os.close(writer._fd)
    with open(writer.path, "ab") as f:
        f.write(b"\x01" * 40)
    with XlogReader(writer.path, force_recovery=True) as reader:
        assert [r.lsn for r in reader.rows()] == [6]
        assert len(reader.skipped) == 1 and not reader.eof_marker
    with XlogReader(writer.path) as reader:
        with pytest.raises(CorruptBlock, match="invalid magic"):
            list(reader.rows())


def test_data_after_eof(tmp_path):
    path = tmp_path / "00000000000000000025.xlog"
    path.write_bytes((FIXTURES / "master/00000000000000000025.xlog").read_bytes() + b"\x00")
    with XlogReader(str(path)) as reader:
        with pytest.raises(DataAfterEof) as info:
            list(reader.rows())
        assert info.value.offset == 176


def test_wrong_file_type(tmp_path):
    with pytest.raises(ClientError) as info:
        XlogReader(str(FIXTURES / "master/00000000000000000025.snap"), expected_type="XLOG")
    assert info.value.code == 125
    assert str(info.value) == "Invalid xlog type: expected XLOG, got SNAP"


def test_header_cut_short(tmp_path):
    path = tmp_path / "00000000000000000000.xlog"
    path.write_bytes(b"XLOG\n0.13\nVersion: 2.6")
    with pytest.raises(XlogHeaderError, match="Unexpected end of file"):
        XlogReader(str(path))


def test_fixture_directory_scan():
    xlogs = list_files(str(FIXTURES / "master"))
    assert [entry.signature for entry in xlogs] == [0, 25, 26]
    metas = [read_meta(entry.path) for entry in xlogs]
    assert [str(meta.prev_vclock) for meta in metas] == ["None", "{}", "{1: 25}"]
    assert {meta.instance_uuid for meta in metas} == {UUID1}
    snaps = list_files(str(FIXTURES / "master"), ".snap")
    assert [entry.signature for entry in snaps] == [0, 25]
    assert read_meta(str(FIXTURES / "replica/00000000000000000014.snap")).instance_uuid == UUID2


def test_list_files_lists_in_order(tmp_path):
    for sig in (30, 4, 100):
        XlogWriter.create(str(tmp_path), xlog_meta({1: sig}), sync="never").close()
    (tmp_path / "junk.xlog").write_bytes(b"")
    (tmp_path / "00000000000000000007.xlog.inprogress").write_bytes(b"")
    assert [f.signature for f in list_files(str(tmp_path))] == [4, 30, 100]
    assert remove_inprogress(str(tmp_path)) == [str(tmp_path / "00000000000000000007.xlog"
                                                    ".inprogress")]


def test_sync_policy_write(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({}), sync="write")
    writer.write_tx([synchro_row(IprotoType.CONFIRM, 1, 1, replica_id=1, lsn=2)])
    writer.sync()
    writer.close()
    with XlogReader(writer.path) as reader:
        assert [r.type for r in reader.rows()] == [IprotoType.CONFIRM]


# -- damage on disk ------------------------------------------------------------

def _reference_file() -> tuple[bytes, list[list[XRow]]]:
    txs = [tx(1), tx(2, 3), tx(5, 40, size=100), tx(45), tx(46, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        writer = XlogWriter.create(tmp, xlog_meta({}), sync="never")
        for transaction in txs:
            writer.write_tx(transaction)
        writer.close()
        return Path(writer.path).read_bytes(), txs


REF_DATA, REF_TXS = _reference_file()


def read_all(data: bytes, **kwargs):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "00000000000000000000.xlog")
        Path(path).write_bytes(data)
        try:
            with XlogReader(path, chunk_size=64, **kwargs) as reader:
                txs = list(reader.transactions())
                return "ok", txs, reader
        except (XlogHeaderError, CorruptBlock, DataAfterEof) as err:
            return type(err).__name__, None, err


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(REF_DATA)))
def test_truncated_file_is_a_torn_tail(cut):
    outcome, txs, reader = read_all(REF_DATA[:cut])
    header_size = len(xlog_meta({}).encode())
    if cut < header_size:
        assert outcome == "XlogHeaderError"
        return
    assert outcome == "ok"
    assert txs == REF_TXS[:len(txs)]
    assert reader.eof_marker == (cut == len(REF_DATA))
    if reader.torn_tail is not None:
        assert reader.torn_tail.offset == reader.position
        assert reader.torn_tail.offset + reader.torn_tail.available == cut


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(REF_DATA) - 1), st.integers(1, 255), st.booleans())
def test_flipped_byte_never_escapes_as_another_error(where, mask, force):
    data = bytearray(REF_DATA)
    data[where] ^= mask
    outcome, txs, info = read_all(bytes(data), force_recovery=force)
    if outcome == "ok":
        # whatever survives is a subset of what was written, in order
        flat = [r.lsn for t in txs for r in t]
        assert flat == sorted(flat)
        if force and info.skipped:
            assert all(isinstance(e, CorruptBlock) for e in info.skipped)
    else:
        assert outcome in ("XlogHeaderError", "CorruptBlock", "DataAfterEof")


# ----------------------------------------------------- the one writer, the one reader

class CountingIO(XlogIO):
    def __init__(self):
        self.calls: list[str] = []

    def write(self, fd, data):
        self.calls.append("eof" if data == EOF_MARKER_BYTES else "write")
        super().write(fd, data)

    def fsync(self, fd):
        self.calls.append("fsync")
        super().fsync(fd)

    def truncate(self, fd, size):
        self.calls.append(f"truncate {size}")
        super().truncate(fd, size)


def test_writer_system_calls_go_through_its_io(tmp_path):
    io = CountingIO()
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), io=io)
    assert not writer.has_rows
    start = writer.offset
    writer.write_block(encode_rows(tx(6)))
    assert writer.has_rows
    writer.truncate(start)          # a failed batch is cut back
    assert not writer.has_rows and os.path.getsize(writer.path) == start
    writer.add_data(encode_rows(tx(6)))
    writer.close()
    assert io.calls == ["write", "write", f"truncate {start}", "write", "eof", "fsync"]
    assert [r.lsn for r in decode_file(Path(writer.path).read_bytes()).rows] == [6]


def test_a_snapshot_may_write_over_an_inprogress_leftover(tmp_path):
    leftover = tmp_path / ("00000000000000000003.snap" + INPROGRESS_SUFFIX)
    leftover.write_bytes(b"junk of a crashed checkpoint")
    with pytest.raises(FileExistsError):
        XlogWriter.create_snapshot(str(tmp_path), UUID1, VClock({1: 3}))
    writer = XlogWriter.create_snapshot(str(tmp_path), UUID1, VClock({1: 3}), exclusive=False,
                                        sync="never")
    writer.write_tx(tx(1))
    writer.close()
    assert not leftover.exists()
    assert [r.lsn for r in decode_file(Path(writer.path).read_bytes()).rows] == [1]


def test_abandon_closes_without_eof_marker(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 5}), sync=SyncPolicy.NEVER)
    writer.write_tx(tx(6))
    writer.abandon()
    contents = decode_file(Path(writer.path).read_bytes())
    assert contents.eof_offset is None and [r.lsn for r in contents.rows] == [6]


def _three_blocks(tmp_path) -> tuple[str, list[int]]:
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 0}), sync=SyncPolicy.NEVER)
    offsets = []
    for lsn in (1, 2, 3):
        offsets.append(writer.offset)
        writer.write_tx(tx(lsn))
    offsets.append(writer.offset)
    writer.close()
    return writer.path, offsets


def test_reader_reads_a_range_of_blocks(tmp_path):
    path, offsets = _three_blocks(tmp_path)
    with XlogReader(path, start=offsets[1], end=offsets[2]) as reader:
        assert [r.lsn for r in reader.rows()] == [2]
        # the range ends at a block boundary: no torn tail, no EOF marker
        assert reader.torn_tail is None and not reader.eof_marker
    with XlogReader(path, start=offsets[1]) as reader:
        assert [r.lsn for r in reader.rows()] == [2, 3] and reader.eof_marker
    with XlogReader(path, end=offsets[1] + 5) as reader:
        assert [r.lsn for r in reader.rows()] == [1]
        assert reader.torn_tail is not None and reader.torn_tail.offset == offsets[1]


def test_reader_raw_view(tmp_path):
    path, offsets = _three_blocks(tmp_path)
    with XlogReader(path) as reader:
        raw = list(reader.raw_blocks())
        assert [b.offset for b in raw] == offsets[:3] and all(not b.rows for b in raw)
        assert all(b.data for b in raw)
    data = bytearray(Path(path).read_bytes())
    data[offsets[1] + FIXHEADER_SIZE + 2] ^= 0xFF     # a CRC mismatch in the second block
    Path(path).write_bytes(bytes(data))
    with XlogReader(path) as reader:
        # where blocks are, neither checked nor decompressed
        where = [(b.offset, b.size, b.data) for b in reader.raw_blocks(check=False,
                                                                       payload=False)]
        assert where == [(a, b - a, b"") for a, b in zip(offsets, offsets[1:])]
    with XlogReader(path) as reader, pytest.raises(CorruptBlock):
        list(reader.raw_blocks())


def test_reader_without_growth_stops_at_the_size_it_saw(tmp_path):
    writer = XlogWriter.create(str(tmp_path), xlog_meta({1: 0}), sync=SyncPolicy.NEVER)
    writer.write_tx(tx(1))
    fixed = XlogReader(writer.path, grow=False)
    following = XlogReader(writer.path)
    writer.write_tx(tx(2))
    writer.close()
    with fixed, following:
        assert [r.lsn for r in fixed.rows()] == [1] and not fixed.eof_marker
        assert [r.lsn for r in following.rows()] == [1, 2] and following.eof_marker
