"""ROLLBACK rows of synchronous replication and the rows they undid.

A ROLLBACK whose body is {replica_id = R, lsn = L} undoes every row of R with
LSN >= L written before it (and after the previous ROLLBACK of R).
Rows: rollback_lsn, at, origin, first_lsn, rows, transactions, spaces.
"""
from spindle.spark_ext.jobs._common import synchro_rows


def run(spark, ctx):
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    rollbacks = synchro_rows(ctx.xlog(), "ROLLBACK")
    # Rows written before the previous rollback of the same origin were
    # settled by then (undone by it, or confirmed).
    previous = Window.partitionBy("origin").orderBy("row_lsn")
    rollbacks = rollbacks.withColumn("prev_lsn", F.lag("row_lsn").over(previous))
    rows = ctx.xlog().where(F.col("space_id").isNotNull()).select(
        "replica_id", "lsn", "tsn", "space_name")
    undone = rollbacks.join(
        rows, (rows.replica_id == rollbacks.origin) & (rows.lsn >= rollbacks.target)
        & (rows.lsn < rollbacks.row_lsn)
        & (rollbacks.prev_lsn.isNull() | (rows.lsn > rollbacks.prev_lsn)), "left")
    return (undone.groupBy("row_lsn", "at", "origin", "target")
            .agg(F.count("lsn").alias("rows"), F.countDistinct("tsn").alias("transactions"),
                 F.array_sort(F.collect_set("space_name")).alias("spaces"))
            .select(F.col("row_lsn").alias("rollback_lsn"), "at", "origin",
                    F.col("target").alias("first_lsn"), "rows", "transactions", "spaces")
            .orderBy("rollback_lsn"))
