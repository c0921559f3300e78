"""Benchmark of the xlog reader: `.venv/bin/python scripts/bench/spark.py [--rows N]`.

Prints rows/s of
  * a single-process MsgPack loop over the same blocks (decompressed; every
    header and body unpacked, nothing else: the floor any Python reader pays),
  * the pure decoder (spark_ext.scan) in one process, with and without the JSON
    columns, and in one process per core (multiprocessing, no Spark),
  * Spark `SELECT space_name, type, count(*) FROM xlog GROUP BY 1, 2` through
    the `xlog` source (with and without the JSON columns) and through the
    Parquet mirror (warm: the second run of each is timed), and the time
    compact() takes;
  * time to first result: a SparkSession started from nothing plus its first
    query, and (`--server`, on by default) box.spark.sql in a fresh Spindle
    instance: the first call (JVM start included), then warm calls.
The data directory is generated (Spindle's XlogWriter, 2.6.0's block layout):
a DDL row, then a mix of INSERT/REPLACE/UPDATE/DELETE/UPSERT over three spaces.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time

import msgpack

from spindle.core.iproto.constants import IprotoType as T
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import XlogMeta
from spindle.core.vclock import VClock
from spindle.core.xlog.files import SyncPolicy, XlogWriter

from spindle.spark_ext.mirror import compact, mirror_dataframe
from spindle.spark_ext.plan import plan_tasks
from spindle.spark_ext.pruning import pruned_sql
from spindle.spark_ext.scan import open_file, payloads, scan

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
        with open_file(os.path.join(data_dir, name)) as reader:
            for _, _, data in payloads(reader):
                unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
                unpacker.feed(data)
                rows += sum(1 for _ in unpacker) // 2
    return rows


QUERY_COLUMNS = ["space_name", "type"]


def _task_rows(task) -> int:
    return sum(b.num_rows for b in scan(task, columns=QUERY_COLUMNS))


def decoder_pool(tasks: list, processes: int) -> int:
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        return sum(pool.map(_task_rows, tasks, chunksize=1))


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
    parser.add_argument("--warm-runs", type=int, default=3,
                        help="timed runs of each Spark query after its first")
    parser.add_argument("--no-server", action="store_true",
                        help="skip box.spark.sql in a Spindle instance")
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
        timed("decoder, 1 process, all columns", total,
              lambda: sum(b.num_rows for t in tasks for b in scan(t)))
        timed("decoder, 1 process, all but JSON", total,
              lambda: sum(b.num_rows for t in tasks for b in scan(t, with_json=False)))
        timed("decoder, 1 process, space_name + type", total,
              lambda: sum(b.num_rows for t in tasks for b in scan(t, columns=QUERY_COLUMNS)))
        cores = os.cpu_count() or 1
        split = plan_tasks(data_dir, "xlog", split_bytes=1 << 20)
        timed(f"decoder, {cores} processes, space_name + type", total,
              lambda: decoder_pool(split, cores))
        timed("compact() to Parquet, 1 process", total,
              lambda: compact(data_dir, mirror_dir).rows)
        if not options.no_spark:
            _spark(options.master, data_dir, mirror_dir, total, options.warm_runs)
        if not options.no_server:
            _server(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _spark(master: str, data_dir: str, mirror_dir: str, total: int,
           warm_runs: int) -> None:
    from spindle.spark_ext.session import start_session, stop_session
    start = time.perf_counter()
    spark = start_session(master)
    print(f"SparkSession ({master}) started in {time.perf_counter() - start:.1f} s")
    query = "SELECT space_name, type, count(*) FROM {} GROUP BY 1, 2"
    try:
        first = time.perf_counter()
        spark.read.format("xlog").load(data_dir).createOrReplaceTempView("probe")
        spark.sql("SELECT count(*) FROM probe WHERE lsn < 10").collect()
        print(f"time to first result: session {first - start:.1f} s + first query "
              f"{time.perf_counter() - first:.1f} s = {time.perf_counter() - start:.1f} s")

        # Fresh relations per query (Spark reuses a Python source's plan, files
        # and pushed filters, for every scan of one relation), registered as
        # box.spark.sql does: pruned to the columns the query reads.
        def register_xlog(**options):
            spark.read.format("xlog").options(**options).load(data_dir) \
                .createOrReplaceTempView("xlog")

        def register_full(**options):
            spark.read.format("xlog").load(data_dir).createOrReplaceTempView("xlog_full")

        def register_mirror(**options):
            mirror_dataframe(spark, data_dir, mirror_dir, **options) \
                .createOrReplaceTempView("mirror")

        def run(view, register):
            def once():
                df = pruned_sql(spark, query.format(view), register)
                return sum(r[2] for r in df.collect())
            return once
        for view, register, label in (
                ("xlog", register_xlog, "Spark over the xlog source (pruned)"),
                ("xlog_full", register_full, "Spark over the xlog source, all columns"),
                ("mirror", register_mirror, "Spark over the Parquet mirror (pruned)")):
            first = time.perf_counter()
            run(view, register)()
            print(f"{label}: first run {time.perf_counter() - first:.2f} s")
            for _ in range(warm_runs):
                timed(f"{label} (warm)", total, run(view, register))
    finally:
        stop_session(spark)


SERVER_SCRIPT = """
local clock = require('clock')
box.cfg{log = 'instance.log'}
box.schema.space.create('s'):create_index('pk')
for i = 1, 1000 do box.space.s:insert{i} end
local query = [[SELECT space_name, type, count(*) FROM xlog GROUP BY 1, 2]]
local t = clock.time()
box.spark.sql(query)
print(string.format('first %.2f', clock.time() - t))
for i = 1, 3 do
    t = clock.time()
    box.spark.sql(query)
    print(string.format('warm %.2f', clock.time() - t))
end
t = clock.time()
box.spark.sql([[SELECT count(*) FROM space_s]])
print(string.format('space %.2f', clock.time() - t))
os.exit(0)
"""


def _server(work: str) -> None:
    """box.spark.sql in a fresh instance: first call and warm calls."""
    directory = os.path.join(work, "instance")
    os.makedirs(directory)
    with open(os.path.join(directory, "bench.lua"), "w") as f:
        f.write(SERVER_SCRIPT)
    spindle = os.path.join(os.path.dirname(sys.executable), "spindle")
    start = time.perf_counter()
    result = subprocess.run([spindle, "bench.lua"], cwd=directory, capture_output=True,
                            text=True, timeout=600)
    total = time.perf_counter() - start
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines()
                 if line.split(" ", 1)[0] in ("first", "warm", "space"))
    warm = [float(line.split()[1]) for line in result.stdout.splitlines()
            if line.startswith("warm ")]
    print(f"box.spark.sql in a fresh instance: first call {lines.get('first', '?')} s "
          f"(JVM start included), warm {min(warm, default=0):.2f}-{max(warm, default=0):.2f} s, "
          f"space_<name> view {lines.get('space', '?')} s; process {total:.1f} s, "
          f"exit {result.returncode}")


if __name__ == "__main__":
    main()
