"""Helpers of the built-in jobs (not a job: the name starts with `_`).

Every branch of a job's plan reads through its own ctx.xlog() / ctx.snap():
one relation scanned twice would lose rows to filter pushdown (sources.py).
"""
from __future__ import annotations

import re

DML = ("INSERT", "REPLACE", "UPDATE", "DELETE", "UPSERT")
_INTERVAL = re.compile(r"\d+ (second|minute|hour|day|week)s?")


def interval(text) -> str:
    """A window duration for window(): '1 minute', '10 seconds', ..."""
    text = str(text).strip().lower()
    if not _INTERVAL.fullmatch(text):
        raise ValueError(f"interval must look like '1 minute' or '10 seconds', not {text!r}")
    return text


def positive_int(args: dict, name: str, default: int) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer")
    return value


def user_rows(spark, ctx, system: bool = False):
    """DML rows of `xlog`, user spaces only unless `system`, optionally of
    one space (args.space)."""
    from pyspark.sql import functions as F
    df = ctx.xlog().where(F.col("type").isin(*DML))
    if not system:
        df = df.where(F.col("space_id") >= 512)
    space = ctx.args.get("space")
    if space is not None:
        df = df.where(F.col("space_name") == str(space))
    return df


def synchro_rows(df, kind: str):
    """CONFIRM or ROLLBACK rows with their body: origin (whose transactions
    they settle) and target LSN."""
    from pyspark.sql import functions as F
    return (df.where(F.col("type") == kind)
            .select(F.get_json_object("tuple_json", "$.replica_id").cast("int").alias("origin"),
                    F.get_json_object("tuple_json", "$.lsn").cast("bigint").alias("target"),
                    F.col("lsn").alias("row_lsn"), F.col("timestamp").alias("at")))
