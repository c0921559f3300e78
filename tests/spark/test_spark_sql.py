"""The `xlog` / `snap` sources on a real local Spark (one shared session).

Every test here costs Spark jobs (~0.3-1 s each once warm): they are kept few.
"""
from __future__ import annotations

import shutil

import pytest

from spindle.spark_ext.mirror import compact, mirror_dataframe
from spindle.spark_ext.rows import ARROW_SCHEMA, COLUMN_NAMES
from spindle.spark_ext.sources import register_views

from . import transcripts as tr

MASTER = tr.FIXTURES / "master"
REPLICA = tr.FIXTURES / "replica"
QUERY = "SELECT space_name, type, count(*) FROM xlog GROUP BY 1, 2"


def collect_counts(spark) -> dict:
    return {(r[0], r[1]): r[2] for r in spark.sql(QUERY).collect()}


def test_schema_is_what_pyspark_expects_of_arrow_batches(spark):
    from pyspark.sql.pandas.types import to_arrow_schema
    schema = spark.read.format("xlog").load(str(MASTER)).schema
    assert schema.fieldNames() == COLUMN_NAMES
    assert to_arrow_schema(schema, timezone="UTC").equals(ARROW_SCHEMA)


@pytest.mark.parametrize("which", ["master", "replica", "tarantool", "spindle"])
def test_counts_per_space_and_type_equal_tarantoolctl(spark, which, tarantool_data,
                                                      spindle_data):
    if which in ("master", "replica"):
        data_dir = MASTER if which == "master" else REPLICA
        expected = tr.data_dir_counts(data_dir, cat=tr.fixture_cat)
    else:
        data_dir = tarantool_data if which == "tarantool" else spindle_data
        expected = tr.data_dir_counts(data_dir)      # runs tarantoolctl cat
    register_views(spark, str(data_dir))
    assert collect_counts(spark) == dict(expected)


def test_snap_view(spark):
    register_views(spark, str(MASTER / "00000000000000000025.snap"))
    got = {(r[0], r[1]): r[2] for r in spark.sql(
        "SELECT space_id, type, count(*) FROM snap GROUP BY 1, 2").collect()}
    assert got == dict(tr.counts_by_id(tr.fixture_cat(MASTER / "00000000000000000025.snap")))


def test_filters_are_pushed_to_the_reader(spark):
    register_views(spark, str(MASTER))
    where = ("space_id = 512 AND lsn > 15 AND replica_id = 1 "
             "AND timestamp >= timestamp'2026-01-01 00:00:00'")
    plan = spark.sql(f"EXPLAIN SELECT lsn FROM xlog WHERE {where}").collect()[0][0]
    scan_line = plan.split("BatchScan")[0]
    assert "Filter" not in scan_line, plan         # nothing left for Spark to filter
    other = spark.sql("EXPLAIN SELECT lsn FROM xlog WHERE type = 'INSERT'").collect()[0][0]
    assert "Filter" in other.split("BatchScan")[0]  # a column the reader cannot filter
    got = [r[0] for r in spark.sql(f"SELECT lsn FROM xlog WHERE {where} ORDER BY 1").collect()]
    assert got == [16, 17, 18, 19, 20, 21, 26]


def test_block_ranges_become_partitions(spark, tarantool_data):
    df = spark.read.format("xlog").option("split_size", "1500").load(str(tarantool_data))
    assert df.rdd.getNumPartitions() > 2
    assert df.count() == 71 + 42     # the two xlogs, without re-reading any block


def test_parquet_mirror_answers_like_the_raw_reader(spark, tmp_path, tarantool_data):
    data = tmp_path / "data"
    shutil.copytree(tarantool_data, data)
    compact(str(data), str(tmp_path / "mirror"))
    mirror = mirror_dataframe(spark, str(data), str(tmp_path / "mirror"))
    raw = spark.read.format("xlog").load(str(data))
    mirror.createOrReplaceTempView("mirror_xlog")
    raw.createOrReplaceTempView("raw_xlog")
    # Whole rows, all columns: the union of Parquet (sealed) and the live tail
    # holds exactly the reader's rows.
    diff = ("SELECT count(*) FROM ((SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) "
            "UNION ALL (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a}))")
    assert spark.sql(diff.format(a="mirror_xlog", b="raw_xlog")).collect()[0][0] == 0
    query = ("SELECT space_name, type, count(*), min(lsn), max(lsn), "
             "max(length(tuple_json)) FROM {v} WHERE space_id >= 512 "
             "AND timestamp >= timestamp'2000-01-01 00:00:00' GROUP BY 1, 2 ORDER BY 1, 2")
    from_mirror = spark.sql(query.format(v="mirror_xlog")).collect()
    assert from_mirror == spark.sql(query.format(v="raw_xlog")).collect()
    assert ("renamed", "INSERT", 2) in [tuple(r)[:3] for r in from_mirror]


PRUNED_QUERIES = [
    QUERY,
    "SELECT count(*) FROM xlog",
    "SELECT lsn, tuple_json FROM xlog WHERE space_id >= 512 ORDER BY lsn",
    "SELECT lsn FROM xlog WHERE space_id IN (SELECT space_id FROM snap WHERE type = 'INSERT') "
    "ORDER BY lsn",
    "WITH t AS (SELECT tsn, timestamp FROM xlog WHERE is_commit) "
    "SELECT count(*), max(timestamp) FROM t",
    "SELECT a.lsn, b.key_json FROM xlog a JOIN xlog b ON a.tsn = b.lsn ORDER BY 1, 2",
]


@pytest.mark.parametrize("query", PRUNED_QUERIES)
def test_pruned_views_answer_like_full_ones(spark, tarantool_data, query):
    from spindle.spark_ext.pruning import needed_columns, pruned_sql
    data = str(tarantool_data)
    snap = sorted(tarantool_data.glob("*.snap"))[-1]

    def register(**options):
        for kind, path in (("xlog", data), ("snap", str(snap))):
            reader = spark.read.format(kind).option("pushdown", "false")
            for key, value in options.items():
                reader = reader.option(key, value)
            reader.load(path).createOrReplaceTempView(kind)
    register()
    full = spark.sql(query)
    columns = needed_columns(full)
    assert columns is not None and len(columns) <= 4
    expected = full.collect()
    pruned = pruned_sql(spark, query, register)
    # the views now have only the columns the query reads
    assert spark.table("xlog").columns == columns
    assert pruned.collect() == expected


def test_columns_option_and_schema(spark):
    df = spark.read.format("xlog").option("columns", "type, lsn").load(str(MASTER))
    assert df.columns == ["type", "lsn"]
    full = spark.read.format("xlog").load(str(MASTER)).select("type", "lsn")
    assert sorted(df.collect()) == sorted(full.collect())
    given = spark.read.format("xlog").schema("space_id int, file string").load(str(MASTER))
    assert given.count() == full.count()
    with pytest.raises(Exception, match="no such xlog column: nope"):
        spark.read.format("xlog").option("columns", "lsn,nope").load(str(MASTER)).collect()
    with pytest.raises(Exception, match="have no column `lsn` string"):
        spark.read.format("xlog").schema("lsn string").load(str(MASTER)).collect()
