"""The `xlog` and `snap` formats for Spark (pyspark 4 Python Data Source API).

    spark.dataSource.register(XlogDataSource)          # or sources.register(spark)
    spark.read.format("xlog").load("/path/to/data_dir")

Options:
  path        a file, a directory or a glob (required; `load(path)` sets it)
  split_size  bytes per partition for large files (default 64 MiB); files are
              split at block boundaries
  batch_rows  most rows per Arrow batch (default 8192)
  json        "false" leaves the *_json columns null (faster)
  exclude     JSON list of file paths not to read (the Parquet mirror's files)
  pushdown    "false": take no filters (Spark applies them all after the scan)
  columns     "lsn,type,...": the relation has only these columns, in this
              order (pyspark does not tell a Python source which columns a
              query reads; pruning.py finds them for box.spark.sql). A schema
              given with `.schema(...)` does the same if it names our columns
              with our types.

Streaming (`spark.readStream.format("xlog").load(wal_dir)`) tails a live WAL
directory; options `startingOffsets` ("latest", the default, or "earliest"),
`batch_rows`, `json`. Offsets and their guarantees: stream.py.

Everything below the Spark surface is in plan.py / scan.py / stream.py (no
pyspark there).
The reader object is pickled from the planner to every task, so it holds only
plain data: options and pushed conditions as (column, op, value) tuples.

Filter pushdown needs `spark.sql.python.filterPushdown.enabled=true`; pyspark
refuses to run a reader that implements pushFilters without it, so
`register()` sets it.

A caveat of pyspark 4.3 (measured): Spark keeps the planned reader of a
Python source — its files and pushed filters — on the relation and reuses it
for every later scan of that DataFrame (or view): a second query over the same
view, or the other side of a self-join, reads with the first plan's filters and
silently loses rows. With pushdown, use a relation (a `load()`) for one query
only, or pass `pushdown=false`; box.spark does (context.py).
"""
from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator

from pyspark.sql.datasource import (
    DataSource, DataSourceReader, DataSourceStreamReader, EqualTo, GreaterThan,
    GreaterThanOrEqual, In, InputPartition, IsNotNull, LessThan, LessThanOrEqual,
)

from .plan import DEFAULT_SPLIT_BYTES, plan_tasks
from .rows import RowFilter, parse_columns, schema_columns, spark_ddl
from .scan import DEFAULT_BATCH_ROWS, SNAP_KIND, XLOG_KIND, ScanTask, scan
from .stream import START_LATEST, WalTail

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_OPS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
        LessThanOrEqual: "<=", In: "in", IsNotNull: "notnull"}


def _condition(spark_filter) -> tuple | None:
    """(column, op, value) for a Spark filter this reader applies exactly."""
    op = _OPS.get(type(spark_filter))
    attribute = getattr(spark_filter, "attribute", ())
    if op is None or len(attribute) != 1:
        return None
    value = getattr(spark_filter, "value", None)
    if op == "in":
        value = tuple(value)
    condition = (attribute[0], op, value)
    return condition if RowFilter().add(*condition) else None


# What `python -m` ran in a Spark Python worker: the daemon that forks the
# workers, or a worker started alone (spark.python.use.daemon=false).
_WORKER_MAINS = frozenset({"pyspark.daemon", "pyspark.worker"})
_worker_heap_frozen = False


def in_spark_worker() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) in _WORKER_MAINS


def freeze_worker_heap() -> None:
    """pyspark's daemon runs a full gc.collect() after every task of a reused
    Python worker. With pyarrow, numpy and the compiled walker loaded that is a
    pass over ~130,000 long-lived objects (~30 ms, measured), for every task,
    and the next task waits for it. After the first task of a worker everything
    those modules keep exists; moving it to the permanent generation
    (gc.freeze) leaves the later collections only what the tasks make.
    Only in Spark's Python workers: other processes keep their collector as is."""
    global _worker_heap_frozen
    if _worker_heap_frozen or not in_spark_worker():
        return
    _worker_heap_frozen = True
    gc.collect()                      # what is garbage now is not kept forever
    gc.freeze()


def _worker_batches(batches: Iterator) -> Iterator:
    """A task's batches; the first task of a worker freezes its heap at its end."""
    yield from batches
    freeze_worker_heap()


class TaskPartition(InputPartition):
    """One ScanTask: a file, or a block range of one."""

    def __init__(self, task: ScanTask):
        super().__init__(task)


def _schema_columns(schema) -> list[str]:
    return schema_columns([(f.name, f.dataType.simpleString()) for f in schema.fields])


class _Reader(DataSourceReader):
    def __init__(self, kind: str, options: dict[str, str], columns: list[str]):
        self.kind = kind
        self.columns = columns
        self.path = options.get("path") or options.get("paths", "")
        self.split_bytes = int(options.get("split_size", DEFAULT_SPLIT_BYTES))
        self.batch_rows = int(options.get("batch_rows", DEFAULT_BATCH_ROWS))
        self.with_json = options.get("json", "true").lower() != "false"
        self.exclude = frozenset(json.loads(options.get("exclude", "[]")))
        self.pushdown = options.get("pushdown", "true").lower() != "false"
        self.conditions: list[tuple] = []

    def pushFilters(self, filters):   # noqa: N802 (pyspark's name)
        if not self.pushdown:
            yield from filters
            return
        for spark_filter in filters:
            condition = _condition(spark_filter)
            if condition is None:
                yield spark_filter    # Spark evaluates it after the scan
            else:
                self.conditions.append(condition)

    def _filters(self) -> RowFilter:
        return RowFilter.from_conditions(self.conditions)

    def partitions(self) -> list[InputPartition]:
        tasks = plan_tasks(self.path, self.kind, self._filters(),
                           split_bytes=self.split_bytes, exclude=self.exclude)
        return [TaskPartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator:
        task = partition.value
        if not isinstance(task, ScanTask):
            return iter(())           # pyspark's placeholder partition of an empty plan
        return _worker_batches(scan(task, self._filters(), batch_rows=self.batch_rows,
                                    with_json=self.with_json, columns=self.columns))


class _StreamReader(DataSourceStreamReader):
    """Micro-batches of a live WAL directory (offsets: stream.py). Planning
    runs on the driver and keeps the space-name cursor between batches; the
    rows are read by the executors."""

    def __init__(self, options: dict[str, str], columns: list[str]):
        self.columns = columns
        path = options.get("path") or options.get("paths", "")
        self.tail = WalTail(path, options.get("startingoffsets", START_LATEST))
        self.batch_rows = int(options.get("batch_rows", DEFAULT_BATCH_ROWS))
        self.with_json = options.get("json", "true").lower() != "false"

    def initialOffset(self) -> dict:   # noqa: N802 (pyspark's names)
        return self.tail.initial()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:  # noqa: N802
        return self.tail.latest()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [TaskPartition(task) for task in self.tail.tasks(start, end)]

    def read(self, partition: InputPartition) -> Iterator:
        task = partition.value
        if not isinstance(task, ScanTask):
            return iter(())
        return _worker_batches(scan(task, batch_rows=self.batch_rows,
                                    with_json=self.with_json, columns=self.columns))

    def commit(self, end: dict) -> None:
        """Nothing to release: the WAL belongs to the instance (its GC)."""


class XlogDataSource(DataSource):
    """Rows of .xlog files (WAL)."""

    @classmethod
    def name(cls) -> str:
        return XLOG_KIND

    def schema(self) -> str:
        return spark_ddl(parse_columns(self.options.get("columns")))

    def reader(self, schema) -> DataSourceReader:
        return _Reader(XLOG_KIND, {k.lower(): v for k, v in self.options.items()},
                       _schema_columns(schema))

    def streamReader(self, schema) -> DataSourceStreamReader:   # noqa: N802
        return _StreamReader({k.lower(): v for k, v in self.options.items()},
                             _schema_columns(schema))


class SnapDataSource(DataSource):
    """Rows of .snap files (checkpoints)."""

    @classmethod
    def name(cls) -> str:
        return SNAP_KIND

    def schema(self) -> str:
        return spark_ddl(parse_columns(self.options.get("columns")))

    def reader(self, schema) -> DataSourceReader:
        return _Reader(SNAP_KIND, {k.lower(): v for k, v in self.options.items()},
                       _schema_columns(schema))


def register(spark) -> None:
    """Make `xlog` and `snap` known to this session."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(XlogDataSource)
    spark.dataSource.register(SnapDataSource)


def register_views(spark, data_dir: str, **options: str) -> None:
    """Temp views `xlog` and `snap` over a data directory (or any path option)."""
    for kind in (XLOG_KIND, SNAP_KIND):
        reader = spark.read.format(kind)
        for key, value in options.items():
            reader = reader.option(key, value)
        reader.load(data_dir).createOrReplaceTempView(kind)
