"""Benchmark of the xlog reader: `.venv/bin/python scripts/bench/spark.py [--rows N]`.

Prints rows/s of
  * a single-process MsgPack loop over the same blocks (decompressed; every
    header and body unpacked, nothing else: the floor any Python reader pays),
  * the pure decoder (spark_ext.scan) in one process, with and without the JSON
    columns,
  * Spark `SELECT space_name, type, count(*) FROM xlog GROUP BY 1, 2` through
    the `xlog` source and through the Parquet mirror (warm: the second run of
    each is timed), and the time compact() takes.
The data directory is generated (Spindle's XlogWriter, 2.6.0's block layout):
a DDL row, then a mix of INSERT/REPLACE/UPDATE/DELETE/UPSERT over three spaces.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import msgpack

from spindle.core.iproto.constants import IprotoType as T
from spindle.core.iproto.xrow import XRow, encode_dml_body
from spindle.core.vclock import VClock
from spindle.core.xlog.files import SyncPolicy, XlogWriter
from spindle.core.xlog.format import XlogMeta

from spindle.spark_ext.plan import plan_tasks
from spindle.spark_ext.scan import EOF, TORN, XlogFile, read_block, scan

UUID = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"


def generate(data_dir: str, rows: int, files: int) -> None:
    lsn = 0
    per_file = rows // files
    for f in range(files):
        meta = XlogMeta("XLOG", UUID, VClock({1: lsn}))
        with XlogWriter.create(data_dir, meta, sync=SyncPolicy.NEVER) as writer:
            if f == 0:
                for space_id, name in ((512, "users"), (513, "orders"), (514, "events")):
                    lsn += 1
                    writer.add_tx([XRow(type=T.INSERT, replica_id=1, lsn=lsn, timestamp=1.7e9,
                                        body=encode_dml_body(T.INSERT, 280, tuple=[
                                            space_id, 1, name, "memtx", 0, {}, []]))])
            for i in range(per_file):
                lsn += 1
                kind = (T.INSERT, T.REPLACE, T.UPDATE, T.DELETE, T.UPSERT)[i % 5]
                space = 512 + i % 3
                body = {T.INSERT: dict(tuple=[i, f"name{i}", i * 1.5, {"tag": i % 7}]),
                        T.REPLACE: dict(tuple=[i, "x" * 20, True]),
                        T.UPDATE: dict(key=[i], ops=[["=", 2, "v"]], index_base=1),
                        T.DELETE: dict(key=[i]),
                        T.UPSERT: dict(tuple=[i, "u"], ops=[["+", 3, 1]], index_base=1)}[kind]
                writer.add_tx([XRow(type=kind, replica_id=1, lsn=lsn,
                                    timestamp=1.7e9 + lsn * 1e-3,
                                    body=encode_dml_body(kind, space, **body))])
    # The newest file is the live WAL: an empty one, as after a rotation.
    XlogWriter.create(data_dir, XlogMeta("XLOG", UUID, VClock({1: lsn})),
                      sync=SyncPolicy.NEVER).close()


def msgpack_loop(data_dir: str) -> int:
    rows = 0
    for name in sorted(os.listdir(data_dir)):
        with XlogFile(os.path.join(data_dir, name)) as xf:
            pos = xf.header_size
            while True:
                block = read_block(xf, pos)
                if block in (EOF, TORN):
                    break
                data, size, _ = block
                unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
                unpacker.feed(data)
                rows += sum(1 for _ in unpacker) // 2
                pos += size
    return rows


def timed(label: str, rows_expected: int, fn) -> float:
    start = time.perf_counter()
    rows = fn()
    elapsed = time.perf_counter() - start
    assert rows == rows_expected, (label, rows, rows_expected)
    print(f"{label:<44} {elapsed:7.2f} s  {rows / elapsed:>10,.0f} rows/s", flush=True)
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench/spark.py")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--no-spark", action="store_true")
    options = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="spindle-bench-")
    data_dir, mirror_dir = os.path.join(work, "data"), os.path.join(work, "mirror")
    try:
        start = time.perf_counter()
        generate(data_dir, options.rows, options.files)
        total = options.rows // options.files * options.files + 3
        size = sum(os.path.getsize(os.path.join(data_dir, n)) for n in os.listdir(data_dir))
        print(f"{total:,} rows in {options.files} xlogs, {size / 1e6:.1f} MB "
              f"(generated in {time.perf_counter() - start:.1f} s); {os.cpu_count()} cores")
        timed("msgpack loop, 1 process", total, lambda: msgpack_loop(data_dir))
        tasks = plan_tasks(data_dir, "xlog")
        timed("decoder, 1 process, JSON columns", total,
              lambda: sum(b.num_rows for t in tasks for b in scan(t)))
        timed("decoder, 1 process, no JSON", total,
              lambda: sum(b.num_rows for t in tasks for b in scan(t, with_json=False)))
        from .mirror import compact
        timed("compact() to Parquet, 1 process", total,
              lambda: compact(data_dir, mirror_dir).rows)
        if not options.no_spark:
            _spark(options.master, data_dir, mirror_dir, total)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _spark(master: str, data_dir: str, mirror_dir: str, total: int) -> None:
    from .mirror import mirror_dataframe
    from .session import start_session, stop_session
    start = time.perf_counter()
    spark = start_session(master)
    print(f"SparkSession ({master}) started in {time.perf_counter() - start:.1f} s")
    query = "SELECT space_name, type, count(*) FROM {} GROUP BY 1, 2"
    try:
        spark.read.format("xlog").load(data_dir).createOrReplaceTempView("xlog")
        mirror_dataframe(spark, data_dir, mirror_dir).createOrReplaceTempView("mirror")

        def run(view):
            return lambda: sum(r[2] for r in spark.sql(query.format(view)).collect())
        for view, label in (("xlog", "Spark over the xlog source"),
                            ("mirror", "Spark over the Parquet mirror")):
            first = time.perf_counter()
            run(view)()
            print(f"{label}: first run {time.perf_counter() - first:.2f} s")
            timed(f"{label} (warm)", total, run(view))
    finally:
        stop_session(spark)


if __name__ == "__main__":
    main()
