"""Synchronous transactions: time from the transaction to its CONFIRM.

Synchronous spaces are those whose `_space` row has is_sync (snapshot or
xlogs). A transaction touching one is settled by the first CONFIRM of its
origin whose LSN covers it, or undone by a ROLLBACK (rollbacks.py lists
those). Latency is the CONFIRM row's timestamp minus the transaction's last
row's, as written in this WAL.
args: per_txn (true: one row per transaction instead of the summary).
Rows (summary): space_name, outcome (confirmed / rolled back / pending),
transactions, avg_ms, p50_ms, p99_ms, max_ms.
"""
from spindle.spark_ext.jobs._common import synchro_rows

SPACE_SPACE_ID = 280


def sync_space_ids(ctx) -> list[int]:
    from pyspark.sql import functions as F
    frames = [ctx.xlog()]
    try:
        frames.append(ctx.snap())
    except FileNotFoundError:
        pass
    ids = set()
    for df in frames:
        rows = (df.where((F.col("space_id") == SPACE_SPACE_ID)
                         & F.col("type").isin("INSERT", "REPLACE"))
                .where(F.get_json_object("tuple_json", "$[5].is_sync") == "true")
                .select(F.get_json_object("tuple_json", "$[0]").cast("int")).collect())
        ids.update(r[0] for r in rows)
    return sorted(ids)


def run(spark, ctx):
    from pyspark.sql import functions as F
    sync_ids = sync_space_ids(ctx)
    in_sync_space = F.col("space_id").isin(*sync_ids) if sync_ids else F.lit(False)
    txns = (ctx.xlog().where(in_sync_space)
            .groupBy("replica_id", "tsn")
            .agg(F.max("lsn").alias("lsn"), F.max("timestamp").alias("written"),
                 F.min("space_name").alias("space_name")))
    confirms = synchro_rows(ctx.xlog(), "CONFIRM")
    rollbacks = synchro_rows(ctx.xlog(), "ROLLBACK")
    confirmed = (txns.join(confirms, (confirms.origin == txns.replica_id)
                           & (confirms.target >= txns.lsn) & (confirms.row_lsn > txns.lsn))
                 .groupBy("replica_id", "tsn")
                 .agg(F.min_by("at", "row_lsn").alias("confirmed_at"),
                      F.min("row_lsn").alias("confirm_lsn")))
    undone = (txns.join(rollbacks, (rollbacks.origin == txns.replica_id)
                        & (rollbacks.target <= txns.lsn) & (rollbacks.row_lsn > txns.lsn))
              .groupBy("replica_id", "tsn").agg(F.min("row_lsn").alias("rollback_lsn")))
    per_txn = (txns.join(confirmed, ["replica_id", "tsn"], "left")
               .join(undone, ["replica_id", "tsn"], "left")
               .withColumn("outcome", F.when(
                   F.col("confirm_lsn").isNotNull() & (F.col("rollback_lsn").isNull()
                                                       | (F.col("confirm_lsn")
                                                          < F.col("rollback_lsn"))),
                   "confirmed").when(F.col("rollback_lsn").isNotNull(), "rolled back")
                   .otherwise("pending"))
               .withColumn("latency_ms", F.when(
                   F.col("outcome") == "confirmed",
                   (F.unix_micros("confirmed_at") - F.unix_micros("written")) / 1000.0)))
    if ctx.args.get("per_txn"):
        return per_txn.select("space_name", "replica_id", "tsn", "lsn", "outcome",
                              "latency_ms").orderBy("replica_id", "lsn")
    return (per_txn.groupBy("space_name", "outcome")
            .agg(F.count("*").alias("transactions"),
                 F.round(F.avg("latency_ms"), 3).alias("avg_ms"),
                 F.round(F.percentile_approx("latency_ms", 0.5), 3).alias("p50_ms"),
                 F.round(F.percentile_approx("latency_ms", 0.99), 3).alias("p99_ms"),
                 F.round(F.max("latency_ms"), 3).alias("max_ms"))
            .orderBy("space_name", "outcome"))
