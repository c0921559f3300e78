"""The pure decoder (spark_ext.plan / scan / rows / values): no Spark, fast.

Expected values come from `tarantoolctl cat` transcripts (the fixtures'
*.cat.txt, or tarantoolctl run here on files Tarantool and Spindle wrote).
"""
from __future__ import annotations

import json
import shutil
import uuid
from collections import Counter
from pathlib import Path

import msgpack
import pyarrow as pa
import pytest

from spindle.core.iproto.constants import IprotoType as T
from spindle.core.vclock import VClock
from spindle.core.xlog.format import XlogError, XlogMeta, encode_block
from spindle.spark_ext.plan import plan_tasks
from spindle.spark_ext.rows import ARROW_SCHEMA, RowFilter, timestamp_us
from spindle.spark_ext.scan import Scan, ScanTask, scan
from spindle.spark_ext.values import decimal_text, msgpack_to_json

from . import transcripts as tr
from .datadirs import UUID, ZSTD_MAGIC, confirm, dml, space_row, write_xlog

MASTER = tr.FIXTURES / "master"
REPLICA = tr.FIXTURES / "replica"
FIXTURE_FILES = sorted(p for d in (MASTER, REPLICA) for p in d.iterdir()
                       if p.suffix in (".xlog", ".snap"))


def read(path, kind="xlog", filters=None, **kwargs) -> pa.Table:
    tasks = plan_tasks(str(path), kind, filters, **kwargs)
    batches = [b for task in tasks for b in scan(task, filters)]
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


def rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def name_type_counts(table: pa.Table) -> Counter:
    return Counter(zip(table.column("space_name").to_pylist(), table.column("type").to_pylist()))


# ---------------------------------------------------------------------------
# Agreement with tarantoolctl.

@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_file_counts_match_transcript(path):
    kind = path.suffix[1:]
    table = read(path, kind)
    got = Counter(zip(table.column("space_id").to_pylist(), table.column("type").to_pylist()))
    assert got == tr.counts_by_id(tr.fixture_cat(path))


@pytest.mark.parametrize("data_dir", [MASTER, REPLICA], ids=["master", "replica"])
def test_fixture_dir_names_and_types_match_transcripts(data_dir):
    expected = tr.data_dir_counts(data_dir, cat=tr.fixture_cat)
    assert name_type_counts(read(data_dir)) == expected
    assert ("test", "INSERT") in expected     # names come from the xlog's own DDL


def test_fixture_rows_match_transcript_field_by_field():
    path = MASTER / "00000000000000000000.xlog"
    docs = tr.fixture_cat(path)
    got = rows(read(path))
    assert len(got) == len(docs) == 25
    for row, doc in zip(got, docs):
        head, body = doc["HEADER"], doc.get("BODY", {})
        assert row["lsn"] == head["lsn"] and row["replica_id"] == head["replica_id"]
        assert row["type"] == tr.row_type(doc)
        assert abs(row["timestamp"].timestamp() - head["timestamp"]) < 1e-3
        expected = (head.get("tsn", head["lsn"]), head.get("commit", "tsn" not in head))
        assert (row["tsn"], row["is_commit"]) == expected
        if row["type"] in ("CONFIRM", "ROLLBACK"):
            # tarantoolctl shows {2: owner, 3: lsn} as the array [null, owner, lsn]
            assert json.loads(row["tuple_json"]) == {"replica_id": body[1], "lsn": body[2]}
            continue
        assert row["space_id"] == body["space_id"]
        if row["type"] == "UPDATE":       # tarantoolctl prints UPDATE ops as `tuple`
            assert json.loads(row["ops_json"]) == body["tuple"]
            assert row["tuple"] is None
        else:
            assert _json_or_none(row["tuple_json"]) == body.get("tuple")
            assert _json_or_none(row["ops_json"]) == body.get("operations")
        assert _json_or_none(row["key_json"]) == body.get("key")
        for column in ("key", "tuple", "ops"):
            if row[column] is not None:
                assert msgpack.unpackb(row[column]) == json.loads(row[column + "_json"])


def _json_or_none(text):
    return None if text is None else json.loads(text)


@pytest.mark.parametrize("which", ["tarantool", "spindle"])
def test_written_dirs_match_tarantoolctl(which, tarantool_data, spindle_data):
    data_dir = tarantool_data if which == "tarantool" else spindle_data
    expected = tr.data_dir_counts(data_dir)
    got = name_type_counts(read(data_dir))
    assert got == expected
    # The workload's DDL shows up as names changing along the WAL.
    assert got[("second", "INSERT")] == 30 and got[("renamed", "INSERT")] == 2
    assert got[("renamed", "DELETE")] == 1 and got[("big", "INSERT")] == 61
    xlog0 = (data_dir / "00000000000000000000.xlog").read_bytes()
    assert xlog0.count(ZSTD_MAGIC) >= 30, "rows over 2 KiB must make compressed blocks"


def test_local_space_rows(tarantool_data):
    table = read(tarantool_data, filters=None)
    local = [r for r in rows(table) if r["space_name"] == "loc"]
    assert [(r["replica_id"], r["group_id"], r["lsn"]) for r in local] == [(0, 1, 1)]


# ---------------------------------------------------------------------------
# Live WAL, torn tails, damage.

def test_torn_tail_is_read_up_to_the_last_whole_block(tmp_path):
    src = MASTER / "00000000000000000000.xlog"
    data = src.read_bytes()
    cut = data.index(b"\xa1x")          # inside the block of the 3-row txn LSN 19-21
    live = tmp_path / src.name
    live.write_bytes(data[:cut])
    scanner = Scan(ScanTask(str(live), "xlog"))
    got = pa.Table.from_batches(list(scanner.batches()), schema=ARROW_SCHEMA)
    assert got.column("lsn").to_pylist() == list(range(1, 19))
    assert scanner.torn and not scanner.eof_marker


def test_missing_eof_marker_only_is_not_torn(tmp_path):
    src = MASTER / "00000000000000000000.xlog"
    live = tmp_path / src.name
    live.write_bytes(src.read_bytes()[:-4])
    scanner = Scan(ScanTask(str(live), "xlog"))
    assert sum(b.num_rows for b in scanner.batches()) == 25
    assert not scanner.torn and not scanner.eof_marker


def _open_txn_file(tmp_path, close: bool) -> Path:
    txs = [[dml(T.INSERT, 512, 1, tuple=[1])],
           [dml(T.INSERT, 512, 2, tsn=2, commit=False, tuple=[2]),
            dml(T.INSERT, 512, 3, tsn=2, commit=False, tuple=[3])]]
    return write_xlog(tmp_path, {1: 0}, txs, close=close)


def test_live_wal_drops_an_unfinished_transaction(tmp_path):
    live = _open_txn_file(tmp_path, close=False)
    assert read(live).column("lsn").to_pylist() == [1]


def test_closed_file_keeps_rows_of_an_unfinished_transaction(tmp_path):
    # 2.6.0 recovery applies rows one by one from a file closed this way.
    closed = _open_txn_file(tmp_path, close=True)
    assert read(closed).column("lsn").to_pylist() == [1, 2, 3]


def test_corrupt_block_names_file_and_offset(tmp_path):
    src = MASTER / "00000000000000000000.xlog"
    data = bytearray(src.read_bytes())
    pos = data.index(b"\xa1x")
    data[pos + 1] ^= 0xFF
    bad = tmp_path / src.name
    bad.write_bytes(bytes(data))
    block_start = data.rindex(b"\xd5\xba\x0b\xab", 0, pos)
    with pytest.raises(XlogError, match=rf"{bad}: tx checksum mismatch at offset {block_start}"):
        read(bad)


def test_undecodable_row_names_file_and_offset(tmp_path):
    meta = XlogMeta("XLOG", UUID, VClock({1: 0}))
    good = encode_block(b"\x82\x00\x02\x03\x01\x81\x10\xcd\x02\x00", compress=False)
    bad = encode_block(b"\x05", compress=False)      # a header that is not a map
    path = tmp_path / "00000000000000000000.xlog"
    path.write_bytes(meta.encode() + good + bad + b"\xd5\x10\xad\xed")
    offset = len(meta.encode()) + len(good)
    with pytest.raises(XlogError, match=rf"{path}: can't parse row at offset {offset}"):
        read(path)


def test_snapshot_without_eof_marker_is_an_error(tmp_path):
    src = MASTER / "00000000000000000000.snap"
    cut = tmp_path / src.name
    cut.write_bytes(src.read_bytes()[:-4])
    with pytest.raises(XlogError, match="has no EOF marker"):
        read(cut, "snap")


# ---------------------------------------------------------------------------
# Filters.

def _filter_workload(tmp_path) -> Path:
    """Three xlogs, two replicas, three spaces, timestamps one second apart."""
    lsn = {1: 0, 2: 0}

    def tx(replica, space, ts):
        lsn[replica] += 1
        return [dml(T.REPLACE, space, lsn[replica], replica_id=replica, ts=1000.0 + ts,
                    tuple=[ts, "v"])]
    boundaries = []
    files = [[], [], []]
    for i in range(300):
        files[i // 100].append(tx(1 + i % 2, 512 + i % 3, i))
        if i % 100 == 99:
            boundaries.append(dict(lsn))
    starts = [{1: 0, 2: 0}] + boundaries[:-1]
    for vclock, txs in zip(starts, files):
        write_xlog(tmp_path, vclock, txs, per_block=10, close=vclock is not starts[-1])
    return tmp_path


FILTER_CASES = [
    [("space_id", "=", 513)],
    [("space_id", "in", (512, 514)), ("lsn", ">", 20)],
    [("lsn", ">=", 40), ("lsn", "<", 60), ("replica_id", "=", 2)],
    [("lsn", "<=", 10)],
    [("lsn", "=", 75.5)],
    [("replica_id", "in", (2,)), ("space_id", ">", 512)],
    [("space_id", "notnull", None), ("lsn", ">", 149)],
]


@pytest.mark.parametrize("conditions", FILTER_CASES, ids=str)
def test_filters_give_what_python_filtering_gives(tmp_path, conditions):
    data_dir = _filter_workload(tmp_path)
    everything = rows(read(data_dir))
    filters = RowFilter.from_conditions(conditions)
    expected = [r for r in everything if all(_holds(r, c) for c in conditions)]
    assert rows(read(data_dir, filters=filters)) == expected
    assert expected or conditions == [("lsn", "=", 75.5)]


def _holds(row, condition):
    column, op, value = condition
    v = row[column]
    if v is None:
        return False
    if op == "in":
        return v in value
    if op == "notnull":
        return True
    return {"=": v == value, ">": v > value, ">=": v >= value, "<": v < value,
            "<=": v <= value}[op]


def test_timestamp_filter_is_exact_to_the_microsecond(tmp_path):
    ts = 1795308837.123456
    txs = [[dml(T.INSERT, 512, i, ts=ts + i * 1e-6, tuple=[i])] for i in range(1, 6)]
    write_xlog(tmp_path, {1: 0}, txs)
    import datetime as dt
    cut = dt.datetime.fromtimestamp(timestamp_us(ts + 3e-6) / 1e6, dt.timezone.utc)
    cut = cut.replace(microsecond=timestamp_us(ts + 3e-6) % 1_000_000)
    for op, want in ((">=", [3, 4, 5]), (">", [4, 5]), ("<", [1, 2]), ("=", [3])):
        got = read(tmp_path, filters=RowFilter.from_conditions([("timestamp", op, cut)]))
        assert got.column("lsn").to_pylist() == want, op


def test_lsn_filter_skips_files_and_stops_early(tmp_path):
    data_dir = _filter_workload(tmp_path)
    assert len(plan_tasks(str(data_dir), "xlog")) == 3
    # The newest file has no upper bound: a replica absent from its VClock may
    # still have rows from LSN 1 in it, so the replicas must be named too.
    assert len(plan_tasks(str(data_dir), "xlog", RowFilter.from_conditions(
        [("lsn", "<=", 10)]))) == 2
    low = RowFilter.from_conditions([("lsn", "<=", 10), ("replica_id", "in", (1, 2))])
    tasks = plan_tasks(str(data_dir), "xlog", low)
    assert [Path(t.path).name for t in tasks] == ["00000000000000000000.xlog"]
    scanner = Scan(tasks[0], low)
    assert sum(b.num_rows for b in scanner.batches()) == 20
    assert scanner.blocks_read == 2          # of 10: both replicas passed LSN 10
    high = RowFilter.from_conditions([("lsn", ">", 140), ("replica_id", "=", 1)])
    assert [Path(t.path).name for t in plan_tasks(str(data_dir), "xlog", high)] == \
        ["00000000000000000200.xlog"]


def test_snapshot_space_filter_stops_at_the_first_later_space():
    path = MASTER / "00000000000000000000.snap"
    filters = RowFilter.from_conditions([("space_id", "=", 280)])
    [task] = plan_tasks(str(path), "snap", filters)
    scanner = Scan(task, filters)
    got = pa.Table.from_batches(list(scanner.batches()), schema=ARROW_SCHEMA)
    assert set(got.column("space_name").to_pylist()) == {"_space"}
    assert got.num_rows == 25
    assert scanner.rows_read < 513


# ---------------------------------------------------------------------------
# Partitions and space names.

def test_block_ranges_partition_a_large_file(tmp_path):
    txs = [[space_row(1, 512, "first")]]
    txs += [[dml(T.INSERT, 512, lsn, tuple=[lsn, "p" * 100])] for lsn in range(2, 2001)]
    txs += [[dml(T.UPDATE, 280, 2001, key=[512], ops=[["=", 3, "second"]], index_base=1)]]
    txs += [[dml(T.INSERT, 512, lsn, tuple=[lsn])] for lsn in range(2002, 2101)]
    write_xlog(tmp_path, {1: 0}, txs, per_block=50, compress=False)
    whole = read(tmp_path)
    tasks = plan_tasks(str(tmp_path), "xlog", split_bytes=20_000)
    assert len(tasks) > 5
    assert all(t.start is not None for t in tasks) and tasks[-1].end is None
    parts = pa.Table.from_batches([b for t in tasks for b in scan(t)], schema=ARROW_SCHEMA)
    assert parts.to_pylist() == whole.to_pylist()
    names = dict(zip(whole.column("lsn").to_pylist(), whole.column("space_name").to_pylist()))
    assert names[1] == "_space" and names[2000] == "first" and names[2002] == "second"
    for task in tasks:       # each range starts with the names as of its first row
        first_lsn = next(scan(task)).column("lsn")[0].as_py()
        expected = None if first_lsn == 1 else "first" if first_lsn <= 2001 else "second"
        assert task.names.get(512) == expected


def test_names_survive_files_outside_the_selection(tmp_path):
    write_xlog(tmp_path, {1: 0}, [[space_row(1, 600, "made_earlier")]])
    second = write_xlog(tmp_path, {1: 1}, [[dml(T.INSERT, 600, 2, tuple=[1])]], close=False)
    assert read(second).column("space_name").to_pylist() == ["made_earlier"]


def test_confirm_rows_and_empty_files(tmp_path):
    write_xlog(tmp_path, {1: 0}, [[dml(T.INSERT, 512, 1, tuple=[1])], [confirm(2, 1)]])
    write_xlog(tmp_path, {1: 2}, [])
    got = rows(read(tmp_path))
    assert [(r["type"], r["space_id"], r["index_id"]) for r in got] == \
        [("INSERT", 512, 0), ("CONFIRM", None, None)]
    assert json.loads(got[1]["tuple_json"]) == {"replica_id": 1, "lsn": 1}


def test_empty_directory_and_bad_paths(tmp_path):
    assert plan_tasks(str(tmp_path), "xlog") == []
    with pytest.raises(FileNotFoundError):
        plan_tasks(str(tmp_path / "nope"), "xlog")
    with pytest.raises(XlogError, match="not a XLOG file"):
        plan_tasks(str(MASTER / "00000000000000000000.snap"), "xlog")


def test_glob_over_several_directories():
    both = read(str(tr.FIXTURES / "*" / "*.xlog"))
    assert both.num_rows == 25 + 1 + 9
    assert set(both.column("space_name").to_pylist()) >= {"test", "sync", None}


def test_batches_carry_the_declared_schema():
    for batch in scan(plan_tasks(str(MASTER), "xlog")[0]):
        assert batch.schema.equals(ARROW_SCHEMA)


# ---------------------------------------------------------------------------
# JSON forms of MsgPack values.

def test_json_of_tarantool_values():
    value = [1, -2, "ü", b"\x00\xff", 1.5, None, True, {"k": [1]}, {7: "int key"},
             msgpack.ExtType(1, b"\x02\x12\x34\x5d"), msgpack.ExtType(2, uuid.UUID(int=1).bytes),
             msgpack.ExtType(3, b"\x01")]
    assert json.loads(msgpack_to_json(msgpack.packb(value))) == [
        1, -2, "ü", "AP8=", 1.5, None, True, {"k": [1]}, {"7": "int key"}, "-123.45",
        "00000000-0000-0000-0000-000000000001", {"ext": 3, "hex": "01"}]
    assert json.loads(msgpack_to_json(b"\x81\x91\x01\x02")) == {"[1]": 2}
    assert decimal_text(b"\x00\x01\x0c") == "10" and decimal_text(b"\xfe\x1c") == "100"
    assert decimal_text(b"\x03\x5c") == "0.005"


def test_filter_values_that_cannot_be_pushed():
    f = RowFilter()
    assert not f.add("space_id", "=", "512")
    assert not f.add("type", "=", "INSERT")
    assert not f.add("timestamp", ">", 5)
    assert not f.add("lsn", "in", (1, "2"))
    assert not f                               # refused conditions leave no trace
    assert f.add("lsn", "in", (1, 2.5)) and f.get("lsn").values == frozenset({1})


def test_copy_of_fixture_dir_gives_same_rows(tmp_path):
    copy = tmp_path / "master"
    shutil.copytree(MASTER, copy)
    original, copied = read(MASTER), read(copy)
    assert original.drop(["file"]).to_pylist() == copied.drop(["file"]).to_pylist()


def _zstd_outcome(decompress, data):
    try:
        return decompress(data)
    except ValueError as exc:
        return type(exc), str(exc)


def test_block_decompression_agrees_with_the_general_one():
    """The readers' decompressor (one reused context for a block's one frame)
    gives the general frame-by-frame decompression's bytes, and its errors, for
    every shape of payload."""
    import zstandard

    from spindle.core.xlog.format import _zstd_decompress_frames, zstd_compress
    from spindle.core.xlog.format import zstd_decompress as _decompress
    zstd_decompress = _zstd_decompress_frames
    one = zstd_compress(b"row" * 5000)
    other = zstd_compress(b"other rows")
    with_size = zstandard.ZstdCompressor().compress(b"content size in the frame")
    for data in (one, other, one + other, with_size, zstd_compress(b""), one[:-3], one[:10],
                 b"", b"\x28\xb5\x2f\xfd garbage", one + b"\x00", b"not zstd at all"):
        assert _zstd_outcome(_decompress, data) == _zstd_outcome(zstd_decompress, data)
    assert _decompress(one) == _decompress(one) == b"row" * 5000     # the context is reusable
