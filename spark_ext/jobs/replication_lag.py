"""Replication lag reconstructed from several instances' WALs.

Every instance writes a row it applies with its own write time, under the
origin's replica_id and LSN. So for each row, the lag of an instance is its
timestamp minus the origin's (the copy in the origin's own WAL; when the
origin's directory is not given, the earliest copy). The origin of a
directory is found from its xlog headers (instance UUID) and `_cluster`.
args: dirs (the WAL directories, default this instance's only).
Rows: instance (directory), instance_id, origin (replica_id), rows,
avg_ms, p99_ms, max_ms, last_lsn.
"""
import os

from spindle.spark_ext.plan import discover

CLUSTER_SPACE_ID = 320


def instance_uuid(wal_dir: str) -> str | None:
    files = discover(wal_dir, "xlog")
    if not files:
        return None
    from spindle.core.xlog.files import read_meta
    return read_meta(files[-1].path).instance_uuid


def cluster_ids(frames) -> dict[str, int]:
    """instance uuid -> id from `_cluster` INSERT/REPLACE rows."""
    import json
    from pyspark.sql import functions as F
    ids = {}
    for df in frames:
        for row in (df.where((F.col("space_id") == CLUSTER_SPACE_ID)
                             & F.col("type").isin("INSERT", "REPLACE"))
                    .select("tuple_json").collect()):
            tup = json.loads(row[0])
            if len(tup) > 1 and isinstance(tup[0], int):
                ids[str(tup[1])] = tup[0]
    return ids


def run(spark, ctx):
    from pyspark.sql import functions as F
    dirs = ctx.args.get("dirs") or [ctx.wal_dir]
    if isinstance(dirs, str):
        dirs = [dirs]
    dirs = [os.path.abspath(d) for d in dirs]
    ids = cluster_ids([ctx.xlog(d) for d in dirs])
    snaps = []
    for d in dirs:
        try:
            snaps.append(ctx.snap(path=d))
        except (FileNotFoundError, ValueError):     # a directory without snapshots
            pass
    ids.update({k: v for k, v in cluster_ids(snaps).items() if k not in ids})
    own = {d: ids.get(instance_uuid(d) or "") for d in dirs}

    def copies():
        """Every instance's rows of replicated origins; fresh relations per
        use (a relation scanned twice loses rows to pushdown, sources.py)."""
        union = None
        for d in dirs:
            part = (ctx.xlog(d, json="false")
                    .where((F.col("replica_id") > 0) & F.col("timestamp").isNotNull())
                    .select(F.lit(d).alias("instance"),
                            F.lit(own[d]).cast("int").alias("instance_id"),
                            "replica_id", "lsn", F.unix_micros("timestamp").alias("us")))
            union = part if union is None else union.unionByName(part)
        return union
    origin_copy = (copies().where(F.col("instance_id") == F.col("replica_id"))
                   .select("replica_id", "lsn", F.col("us").alias("origin_us")))
    earliest = copies().groupBy("replica_id", "lsn").agg(F.min("us").alias("first_us"))
    lagged = (copies().where(F.col("instance_id").isNull()
                             | (F.col("instance_id") != F.col("replica_id")))
              .join(earliest, ["replica_id", "lsn"])
              .join(origin_copy, ["replica_id", "lsn"], "left")
              .withColumn("lag_ms", (F.col("us") - F.coalesce("origin_us", "first_us")) / 1000.0))
    return (lagged.groupBy("instance", "instance_id", F.col("replica_id").alias("origin"))
            .agg(F.count("*").alias("rows"), F.round(F.avg("lag_ms"), 3).alias("avg_ms"),
                 F.round(F.percentile_approx("lag_ms", 0.99), 3).alias("p99_ms"),
                 F.round(F.max("lag_ms"), 3).alias("max_ms"), F.max("lsn").alias("last_lsn"))
            .orderBy("instance", "origin"))
