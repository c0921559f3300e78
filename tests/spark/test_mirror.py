"""compact(): sealed xlogs -> Parquet, incrementally (pyarrow only, no Spark)."""
from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from spindle.core.iproto.constants import IprotoType as T
from spindle.spark_ext.mirror import MANIFEST, compact, load_manifest
from spindle.spark_ext.plan import plan_tasks
from spindle.spark_ext.rows import ARROW_SCHEMA
from spindle.spark_ext.scan import scan

from .datadirs import dml, space_row, write_xlog


def raw_rows(data_dir, name):
    tasks = [t for t in plan_tasks(str(data_dir), "xlog") if t.path.endswith(name)]
    return pa.Table.from_batches([b for t in tasks for b in scan(t)],
                                 schema=ARROW_SCHEMA).to_pylist()


def test_compact_is_incremental_and_matches_the_reader(tmp_path):
    data, out = tmp_path / "data", tmp_path / "mirror"
    data.mkdir()
    write_xlog(data, {1: 0}, [[space_row(1, 512, "s")], [dml(T.INSERT, 512, 2, tuple=[1])]])
    write_xlog(data, {1: 2}, [[dml(T.REPLACE, 512, 3, tuple=[1, "x" * 5000])]])
    write_xlog(data, {1: 3}, [[dml(T.DELETE, 512, 4, key=[1])]], close=False)

    first = compact(str(data), str(out))
    assert first.converted == ["00000000000000000000.xlog", "00000000000000000002.xlog"]
    assert first.live == "00000000000000000003.xlog" and first.rows == 3
    manifest = load_manifest(str(out))
    assert {name: e["rows"] for name, e in manifest["files"].items()} == {
        "00000000000000000000.xlog": 2, "00000000000000000002.xlog": 1}
    for name in first.converted:
        table = pq.read_table(out / f"{name}.parquet")
        assert table.schema.equals(ARROW_SCHEMA)
        assert table.to_pylist() == raw_rows(data, name)
    assert pq.read_table(out / "00000000000000000002.xlog.parquet") \
        .column("space_name").to_pylist() == ["s"]

    again = compact(str(data), str(out))
    assert again.converted == [] and len(again.skipped) == 2

    # The WAL rotates: the former live file is sealed now and only it is converted.
    (data / "00000000000000000003.xlog").write_bytes(
        (data / "00000000000000000003.xlog").read_bytes() + b"\xd5\x10\xad\xed")
    write_xlog(data, {1: 4}, [])
    third = compact(str(data), str(out))
    assert third.converted == ["00000000000000000003.xlog"]
    assert raw_rows(data, "00000000000000000003.xlog") == \
        pq.read_table(out / "00000000000000000003.xlog.parquet").to_pylist()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST] + [f"{n}.parquet" for n in load_manifest(str(out))["files"]])


def test_compact_of_real_tarantool_files(tmp_path, tarantool_data):
    data = tmp_path / "data"
    shutil.copytree(tarantool_data, data)
    result = compact(str(data), str(tmp_path / "mirror"))
    assert result.converted == ["00000000000000000000.xlog"]
    assert result.live == "00000000000000000071.xlog"
    table = pq.read_table(tmp_path / "mirror" / "00000000000000000000.xlog.parquet")
    assert table.to_pylist() == raw_rows(data, "00000000000000000000.xlog")
    manifest = json.loads((tmp_path / "mirror" / MANIFEST).read_text())
    # LSN 1-70 and the row of the local space
    assert manifest["files"]["00000000000000000000.xlog"]["rows"] == table.num_rows == 71
