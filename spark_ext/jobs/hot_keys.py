"""The most written keys of each space.

A row's key is its primary key: the key of UPDATE/DELETE rows, the primary
index's fields of the tuple for INSERT/REPLACE/UPSERT (index parts from the
`_index` rows of the snapshot and the xlogs; field 1 when unknown). Keys are
shown as their fields' text joined by ", ".
args: top (10, per space), space (one space), system (include system spaces).
Rows: space_name, key, writes, rank.
"""
import json

from spindle.spark_ext.jobs._common import positive_int, user_rows

INDEX_SPACE_ID = 288


def _parts(index_tuple) -> list[int] | None:
    """0-based field numbers of an `_index` tuple's parts (both 2.6.0 forms:
    [[field, type], ...] and [{field = n, type = ...}, ...])."""
    parts = index_tuple[5] if len(index_tuple) > 5 else None
    fields = []
    for part in parts or ():
        if isinstance(part, list) and part and isinstance(part[0], int):
            fields.append(part[0])
        elif isinstance(part, dict) and isinstance(part.get("field"), int):
            fields.append(part["field"])
        else:
            return None
    return fields or None


def primary_parts(ctx) -> dict[int, list[int]]:
    """space id -> primary key field numbers, replayed from snap then xlog."""
    from pyspark.sql import functions as F
    sources = []
    try:
        sources.append(ctx.snap().where(F.col("space_id") == INDEX_SPACE_ID)
                       .select(F.lit(0).alias("pass"), "lsn", "type", "key_json", "tuple_json"))
    except FileNotFoundError:
        pass
    sources.append(ctx.xlog().where(F.col("space_id") == INDEX_SPACE_ID)
                   .select(F.lit(1).alias("pass"), "lsn", "type", "key_json", "tuple_json"))
    df = sources[0]
    for other in sources[1:]:
        df = df.unionByName(other)
    result: dict[int, list[int]] = {}
    for row in df.orderBy("pass", "lsn").collect():
        if row.type in ("INSERT", "REPLACE") and row.tuple_json:
            tup = json.loads(row.tuple_json)
            if len(tup) > 1 and tup[1] == 0:
                parts = _parts(tup)
                if parts:
                    result[tup[0]] = parts
        elif row.type == "DELETE" and row.key_json:
            key = json.loads(row.key_json)
            if len(key) > 1 and key[1] == 0:
                result.pop(key[0], None)
    return result


def key_column(parts_by_space: dict[int, list[int]]):
    from pyspark.sql import functions as F

    def joined(source: str, positions: list[int]):
        return F.concat_ws(", ", *[F.get_json_object(source, f"$[{p}]") for p in positions])
    from_key = F.col("type").isin("UPDATE", "DELETE")
    default = F.when(from_key, joined("key_json", [0])).otherwise(joined("tuple_json", [0]))
    expr = None
    for space_id, parts in parts_by_space.items():
        value = F.when(from_key, joined("key_json", list(range(len(parts))))) \
            .otherwise(joined("tuple_json", parts))
        expr = (F.when(F.col("space_id") == space_id, value) if expr is None
                else expr.when(F.col("space_id") == space_id, value))
    return default if expr is None else expr.otherwise(default)


def run(spark, ctx):
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    top = positive_int(ctx.args, "top", 10)
    rows = user_rows(spark, ctx, system=bool(ctx.args.get("system")))
    space_ids = [r[0] for r in rows.select("space_id").distinct().collect()]
    parts = {sid: p for sid, p in primary_parts(ctx).items() if sid in space_ids}
    counted = (rows.withColumn("key", key_column(parts))
               .groupBy("space_name", "key").agg(F.count("*").alias("writes")))
    ranked = counted.withColumn("rank", F.row_number().over(
        Window.partitionBy("space_name").orderBy(F.desc("writes"), "key")))
    return ranked.where(F.col("rank") <= top).orderBy("space_name", "rank")
