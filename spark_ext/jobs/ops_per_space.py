"""Operations per space over time.

args: interval ('1 minute'), space (one space name), system (include system
spaces). Rows: since (bucket start, UTC), space_name, type, ops.
"""
from spindle.spark_ext.jobs._common import interval, user_rows


def run(spark, ctx):
    from pyspark.sql import functions as F
    bucket = interval(ctx.args.get("interval", "1 minute"))
    df = user_rows(spark, ctx, system=bool(ctx.args.get("system"))) \
        .where(F.col("timestamp").isNotNull())
    return (df.groupBy(F.window("timestamp", bucket).start.alias("since"), "space_name", "type")
              .agg(F.count("*").alias("ops"))
              .orderBy("since", "space_name", "type"))
