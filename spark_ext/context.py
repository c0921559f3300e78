"""What a job sees: the instance's views, its spaces, results as plain data.

Runs in job threads (spark_ext/runner.py); nothing here touches box state
directly: a space's tuples are captured on the tx thread through
`capture(names)`, which the glue (lua/box/spark.py) provides and the runner
runs there (`call_in_tx`).

Views of an instance (`register_views`):
  xlog           every xlog of wal_dir — Parquet for the files `compact()` put
                 in the mirror, the reader for the rest (live tail included)
  snap           the newest snapshot of memtx_dir
  space_<name>   a user space's tuples now (spaces.py), for the spaces the
                 query names
Filter pushdown and Spark's plan cache (measured, pyspark 4.3): Spark plans a
Python source's reader once per relation (DataFrame) and reuses that plan —
files and pushed filters — for every later scan of the relation. So:
* views are registered again for every box.spark.sql query (the WAL moves on),
  with pushdown, unless the query scans `xlog`/`snap` more than once
  (self-join, two subqueries, a CTE used twice): then without, since every
  scan would read with one scan's filters;
* ctx.xlog() / ctx.snap() in job files give a new relation per call, without
  pushdown by default (a job may reuse a DataFrame for several queries);
  `pushdown="true"` is for a DataFrame used by one query only.
"""
from __future__ import annotations

import datetime
import decimal
import os
import re
import runpy
from dataclasses import dataclass
from typing import Any, Callable

from .pruning import columns_option, needed_columns
from .runner import JobCancelled

DEFAULT_MAX_ROWS = 10_000
_SPACE_REF = re.compile(r"`space_((?:[^`]|``)+)`|\bspace_([A-Za-z0-9_]+)", re.IGNORECASE)
_SOURCE_SCAN = re.compile(r"RelationV2\[[^\]]*\] (xlog|snap)\b")
_JOBS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs")


class ResultTooLarge(Exception):
    plain_message = True


@dataclass
class SqlResult:
    """Rows of a DataFrame as plain Python values, in column order."""
    columns: list[str]
    rows: list[tuple]


@dataclass(frozen=True)
class Sources:
    """Absolute directories of one instance."""
    wal_dir: str
    memtx_dir: str
    work_dir: str

    @property
    def mirror_dir(self) -> str:
        return os.path.join(self.work_dir, "mirror")


def plain(value: Any) -> Any:
    """A value Spark returned as plain data Lua can hold (see the README of
    box.spark: timestamps as UTC text, decimals as numbers, structs as maps)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if hasattr(value, "asDict"):                 # a Row (struct)
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:                 # pyspark gives local wall time
            value = value.astimezone()
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None) \
            .isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return str(value)


def too_large_message(max_rows: int) -> str:
    return (f"result has more than {max_rows} rows; write it to Parquet with "
            f"box.spark.sql(query, {{parquet = 'path'}}), or raise the limit with "
            f"{{max_rows = N}}")


def collect(df, max_rows: int) -> SqlResult:
    """At most `max_rows` rows, or ResultTooLarge: the rows cross into this
    process (and then into Lua), so a huge result is refused before it is
    fetched, not after."""
    rows = df.limit(max_rows + 1).collect()
    if len(rows) > max_rows:
        raise ResultTooLarge(too_large_message(max_rows))
    return SqlResult(list(df.columns), [tuple(plain(v) for v in row) for row in rows])


def write_parquet(df, path: str, mode: str = "errorifexists") -> dict:
    df.write.mode(mode).parquet(path)
    rows = df.sparkSession.read.parquet(path).count()
    return {"parquet": path, "rows": rows}


def shared_source_scans(df) -> bool:
    """Does the query scan a Python source view more than once?"""
    plan = df._jdf.queryExecution().analyzed().toString()
    scans = _SOURCE_SCAN.findall(plan)
    return len(scans) != len(set(scans)) or (bool(scans) and "CTERelationRef" in plan)


def space_refs(query: str) -> list[str]:
    """Space names the query may mean by `space_<name>` (bare or backquoted)."""
    names = []
    for quoted, bare in _SPACE_REF.findall(query):
        name = quoted.replace("``", "`") if quoted else bare
        if name not in names:
            names.append(name)
    return names


def builtin_job(name: str) -> str | None:
    """The file of a built-in job (spark_ext/jobs/<name>.py), if it is one."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        return None
    path = os.path.join(_JOBS_DIR, name + ".py")
    return path if os.path.exists(path) else None


def builtin_jobs() -> list[str]:
    return sorted(n[:-3] for n in os.listdir(_JOBS_DIR)
                  if n.endswith(".py") and not n.startswith("_"))


class JobContext:
    """`ctx` of a job file's run(spark, ctx); also what box.spark.sql uses."""

    def __init__(self, spark, job, sources: Sources, capture: Callable[[list[str]], dict],
                 call_in_tx: Callable, *, args: Any = None, max_rows: int = DEFAULT_MAX_ROWS):
        self.spark = spark
        self.job_id = job.id
        self._cancel = job.cancel_event
        self.sources = sources
        self.wal_dir, self.memtx_dir = sources.wal_dir, sources.memtx_dir
        self.work_dir = sources.work_dir
        self.args = args if args is not None else {}
        self.max_rows = max_rows
        self._capture = capture
        self._call_in_tx = call_in_tx

    # -- cancellation

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check_cancelled(self) -> None:
        """Long Python loops in a job call this: cancel cannot interrupt them."""
        if self._cancel.is_set():
            raise JobCancelled(self.job_id)

    # -- data frames

    def xlog(self, path: str | None = None, **options: str):
        """Rows of xlogs: the instance's (mirror + live tail), or any path/glob;
        a new relation per call (see the module doc for `pushdown`)."""
        options.setdefault("pushdown", "false")
        if path is None:
            from .mirror import MANIFEST, mirror_dataframe
            if os.path.exists(os.path.join(self.sources.mirror_dir, MANIFEST)):
                return mirror_dataframe(self.spark, self.wal_dir, self.sources.mirror_dir,
                                        **options)
            path = self.wal_dir
        return self._load("xlog", path, options)

    def snap(self, path: str | None = None, **options: str):
        """Rows of a snapshot: the instance's newest one, or any path/glob."""
        options.setdefault("pushdown", "false")
        if path is None:
            from .plan import discover
            snaps = discover(self.memtx_dir, "snap")
            if not snaps:
                raise FileNotFoundError(f"{self.memtx_dir}: no snapshot")
            path = snaps[-1].path
        return self._load("snap", path, options)

    def _load(self, kind: str, path: str, options: dict):
        reader = self.spark.read.format(kind)
        for key, value in options.items():
            reader = reader.option(key, str(value))
        return reader.load(path)

    def spaces(self, names: list[str]) -> dict[str, Any]:
        """DataFrames of the current contents of user spaces (one consistent
        capture for all of them); unknown names are left out."""
        captured = self._call_in_tx(lambda: self._capture(list(names)), self._cancel)
        from .spaces import space_table
        frames = {}
        for name, (space_format, tuples) in captured.items():
            self.check_cancelled()
            table = space_table(space_format, tuples)
            frames[name] = self.spark.createDataFrame(table)
        return frames

    def space(self, name: str):
        frames = self.spaces([name])
        if name not in frames:
            raise KeyError(f"Space '{name}' does not exist")
        return frames[name]

    # -- SQL

    def register_views(self, query: str = "", *, pushdown: bool = False,
                       spaces: bool = True, columns: list[str] | None = None) -> None:
        """Views xlog, snap (with only `columns`, if given) and the
        space_<name> views the query names."""
        flag = "true" if pushdown else "false"
        self.xlog(pushdown=flag, **columns_option(columns)).createOrReplaceTempView("xlog")
        try:
            self.snap(pushdown=flag, **columns_option(columns)).createOrReplaceTempView("snap")
        except FileNotFoundError:
            pass
        refs = space_refs(query) if spaces else []
        if refs:
            for name, frame in self.spaces(refs).items():
                frame.createOrReplaceTempView("`space_" + name.replace("`", "``") + "`")

    def sql(self, query: str):
        """The DataFrame of a query over the views (analysed, not run): views
        with the columns it reads only (pruning.py), with pushdown unless it
        scans a source view twice."""
        self.register_views(query, pushdown=True)
        df = self.spark.sql(query)
        pushdown = not shared_source_scans(df)
        columns = needed_columns(df)
        if pushdown and columns is None:
            return df
        self.register_views(query, pushdown=pushdown, spaces=False, columns=columns)
        return self.spark.sql(query)

    def collect(self, df, max_rows: int | None = None) -> SqlResult:
        return collect(df, self.max_rows if max_rows is None else max_rows)


def run_job_file(path: str, spark, ctx: JobContext) -> Any:
    """Load a job file and call its run(spark, ctx); a DataFrame it returns is
    collected (with the row limit), anything else made plain."""
    namespace = runpy.run_path(path, run_name="spindle_spark_job")
    run = namespace.get("run")
    if not callable(run):
        raise ValueError(f"{path}: a job file must define run(spark, ctx)")
    result = run(spark, ctx)
    if hasattr(result, "collect") and hasattr(result, "columns"):
        return ctx.collect(result)
    if isinstance(result, SqlResult):
        return result
    return plain(result)
