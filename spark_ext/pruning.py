"""Column pruning for SQL over the `xlog` and `snap` sources.

pyspark 4.3 does not tell a Python data source which columns a query reads,
so a scan would build all 17 columns (the JSON ones in Python) for a query
that counts rows by type. Spark's analysed plan knows: every column a query
uses anywhere — select list, filters, joins, grouping, subqueries, CTEs — is
among the attributes some plan node references. The query is analysed over
full views, those names collected, and the views registered again with only
them (the sources' `columns` option); then the query is analysed again.
"""
from __future__ import annotations

from collections.abc import Callable

from .rows import COLUMN_NAMES

# A query that reads no column (count(*)) still needs rows: the cheapest column.
ROW_COUNT_COLUMN = "lsn"


def referenced_names(df) -> set[str]:
    """Names of the attributes any node of the DataFrame's analysed plan (its
    subqueries included) refers to."""
    names: set[str] = set()
    stack = [df._jdf.queryExecution().analyzed()]
    while stack:
        node = stack.pop()
        refs = node.references().toSeq()
        names.update(refs.apply(i).name() for i in range(refs.size()))
        for nested in (node.children(), node.subqueries()):
            stack.extend(nested.apply(i) for i in range(nested.size()))
    return names


def needed_columns(df) -> list[str] | None:
    """The source columns the query needs, in schema order, or None if it
    needs them all (then pruning gains nothing)."""
    names = referenced_names(df)
    columns = [c for c in COLUMN_NAMES if c in names] or [ROW_COUNT_COLUMN]
    return None if len(columns) == len(COLUMN_NAMES) else columns


def columns_option(columns: list[str] | None) -> dict[str, str]:
    """Reader options for those columns (none: all)."""
    return {"columns": ",".join(columns)} if columns else {}


def pruned_sql(spark, query: str, register: Callable[..., None]):
    """The DataFrame of `query` over views that `register(**options)` makes:
    first with every column, then, if the query reads fewer, with those."""
    register()
    df = spark.sql(query)
    columns = needed_columns(df)
    if columns is None:
        return df
    register(**columns_option(columns))
    return spark.sql(query)
