"""A space's current tuples -> an Arrow table for the `space_<name>` views. No pyspark.

The tuples come from a read view captured on the tx thread (a list of
references to immutable tuples); turning them into columns is done here, in a
job thread, so the event loop only pays for the capture.

Columns: one per field, named by the space format (`f<N>`, 1-based, for fields
beyond it or without a format). A column's type follows the format where the
format is precise, and the values otherwise:

  unsigned/integer -> bigint     number/double -> double     string -> string
  boolean -> boolean             varbinary -> binary
  any other (any, scalar, array, map, uuid, decimal) or no format: inferred
  from the values — all integers fitting int64 -> bigint, all numbers ->
  double, all strings -> string, all booleans -> boolean, all binary -> binary,
  anything else (mixed, arrays, maps, extensions) -> the JSON text of the
  value (as the `*_json` columns of the `xlog` source spell it).

A value that does not fit its column's type (an unsigned beyond int64 in a
bigint column) turns the whole column into JSON text, so no value is lost.
Missing trailing fields are nulls.
"""
from __future__ import annotations

import pyarrow as pa

from spindle.core.iproto.msgpack import pack

from .values import msgpack_to_json

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_BY_FORMAT = {"unsigned": "int", "integer": "int", "number": "double", "double": "double",
              "string": "string", "boolean": "bool", "varbinary": "binary"}
_ARROW = {"int": pa.int64(), "double": pa.float64(), "string": pa.string(),
          "bool": pa.bool_(), "binary": pa.binary(), "json": pa.string()}


def column_names(space_format: list[dict], width: int) -> list[str]:
    names = []
    seen = set()
    for i in range(width):
        name = space_format[i].get("name") if i < len(space_format) else None
        if not isinstance(name, str) or not name or name in seen:
            name = f"f{i + 1}"
        seen.add(name)
        names.append(name)
    return names


def _kind_of(value) -> str:
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind is int:
        return "int" if _INT64_MIN <= value <= _INT64_MAX else "json"
    if kind is float:
        return "double"
    if kind is str:
        return "string"
    if kind is bytes:
        return "binary"
    return "json"


def infer_kind(values: list, declared: str | None) -> str:
    """The column kind for `values` (None included) under a format type."""
    kinds = {_kind_of(v) for v in values if v is not None}
    wanted = _BY_FORMAT.get(declared or "")
    if wanted is not None and kinds <= ({wanted} | ({"int"} if wanted == "double" else set())):
        return wanted
    if not kinds:
        return wanted or "string"
    if len(kinds) == 1:
        return kinds.pop()
    if kinds == {"int", "double"}:
        return "double"
    return "json"


def _json(value) -> str:
    return msgpack_to_json(pack(value))


def _column(values: list, kind: str) -> pa.Array:
    if kind == "json":
        return pa.array([None if v is None else _json(v) for v in values], pa.string())
    if kind == "double":
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    return pa.array(values, _ARROW[kind])


def space_table(space_format: list[dict], tuples: list) -> pa.Table:
    """The tuples of one space as a table (see the module doc for columns)."""
    width = max((len(t) for t in tuples), default=len(space_format))
    width = max(width, len(space_format))
    names = column_names(space_format, width)
    columns = []
    for i in range(width):
        values = [t[i] if i < len(t) else None for t in tuples]
        declared = space_format[i].get("type") if i < len(space_format) else None
        kind = infer_kind(values, declared)
        columns.append(_column(values, kind))
    if not names:            # a space with neither format nor tuples
        return pa.table({"f1": pa.array([], pa.string())})
    return pa.Table.from_arrays(columns, names=names)
