"""Transaction sizes: how many transactions had N rows.

A transaction is the rows of one instance (replica_id) with one TSN (the LSN
of its first row). args: space (count only transactions touching it).
Rows: rows (the size), transactions, first_lsn (the earliest such
transaction), replica_id.
"""
from spindle.spark_ext.jobs._common import user_rows


def run(spark, ctx):
    from pyspark.sql import functions as F
    rows = ctx.xlog().where(F.col("type").isin(
        "INSERT", "REPLACE", "UPDATE", "DELETE", "UPSERT", "NOP"))
    txns = rows.groupBy("replica_id", "tsn").agg(F.count("*").alias("rows"),
                                                  F.min("lsn").alias("first_lsn"))
    space = ctx.args.get("space")
    if space is not None:
        touching = user_rows(spark, ctx, system=True).select("replica_id", "tsn").distinct()
        txns = txns.join(touching, ["replica_id", "tsn"])
    return (txns.groupBy("rows", "replica_id")
                .agg(F.count("*").alias("transactions"), F.min("first_lsn").alias("first_lsn"))
                .select("rows", "transactions", "first_lsn", "replica_id")
                .orderBy("rows", "replica_id"))
