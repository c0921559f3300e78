"""Column layout, row filters and space-name tracking shared by the scan, the
planner and the Parquet mirror. No pyspark here (tests and the server import it
cheaply); pyarrow only for the schema object.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import msgpack
import pyarrow as pa

from spindle.core.box.schema import SPACE_ID as SPACE_SPACE_ID

# ---------------------------------------------------------------------------
# The columns. The Spark DDL below and ARROW_SCHEMA must describe the same
# thing: pyspark compares a yielded batch's schema with the one it derives from
# the DDL and refuses any difference (tests/spark checks they agree).

COLUMNS: list[tuple[str, pa.DataType, str]] = [
    ("file", pa.string(), "string"),
    ("lsn", pa.int64(), "bigint"),
    ("replica_id", pa.int32(), "int"),
    ("group_id", pa.int32(), "int"),
    ("tsn", pa.int64(), "bigint"),
    ("is_commit", pa.bool_(), "boolean"),
    ("timestamp", pa.timestamp("us", tz="UTC"), "timestamp"),
    ("type", pa.string(), "string"),
    ("space_id", pa.int32(), "int"),
    ("space_name", pa.string(), "string"),
    ("index_id", pa.int32(), "int"),
    ("key", pa.binary(), "binary"),
    ("key_json", pa.string(), "string"),
    ("tuple", pa.binary(), "binary"),
    ("tuple_json", pa.string(), "string"),
    ("ops", pa.binary(), "binary"),
    ("ops_json", pa.string(), "string"),
]
ARROW_SCHEMA = pa.schema([(name, arrow_type) for name, arrow_type, _ in COLUMNS])
COLUMN_NAMES = [name for name, _, _ in COLUMNS]
_DDL_TYPES = {name: ddl for name, _, ddl in COLUMNS}


def spark_ddl(columns: list[str] | None = None) -> str:
    """The Spark DDL of some columns (all by default), in the order given."""
    return ", ".join(f"`{name}` {_DDL_TYPES[name]}" for name in (columns or COLUMN_NAMES))


SPARK_DDL = spark_ddl()


def parse_columns(text: str | None) -> list[str] | None:
    """The `columns` option ("lsn,type"): a list of known columns, or None
    (all) when the option is absent or empty."""
    if not text or not text.strip():
        return None
    columns = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in columns if c not in _DDL_TYPES]
    if unknown:
        raise ValueError(f"no such xlog column: {', '.join(unknown)} "
                         f"(columns are {', '.join(COLUMN_NAMES)})")
    return columns


def schema_columns(fields: list[tuple[str, str]]) -> list[str]:
    """Column names of a schema Spark hands a reader ((name, DDL type) pairs):
    each must be one of ours with our type."""
    for name, ddl in fields:
        if _DDL_TYPES.get(name) != ddl:
            raise ValueError(f"the xlog/snap sources have no column `{name}` {ddl} "
                             f"(columns: {spark_ddl()})")
    return [name for name, _ in fields]

INSERT, REPLACE, UPDATE, DELETE, UPSERT, NOP = 2, 3, 4, 5, 9, 12
RAFT, PROMOTE, CONFIRM, ROLLBACK = 30, 31, 40, 41
DML_TYPES = frozenset((INSERT, REPLACE, UPDATE, DELETE, UPSERT))
TYPE_NAMES = {INSERT: "INSERT", REPLACE: "REPLACE", UPDATE: "UPDATE", DELETE: "DELETE",
              UPSERT: "UPSERT", NOP: "NOP", RAFT: "RAFT", PROMOTE: "PROMOTE",
              CONFIRM: "CONFIRM", ROLLBACK: "ROLLBACK"}
# Keys of non-DML bodies, named in their JSON (iproto keys REPLICA_ID/LSN for
# synchro rows; RAFT's own key space).
BODY_KEY_NAMES = {CONFIRM: {2: "replica_id", 3: "lsn"}, ROLLBACK: {2: "replica_id", 3: "lsn"},
                  PROMOTE: {2: "replica_id", 3: "lsn", 0x53: "term"},
                  RAFT: {0: "term", 1: "vote", 2: "state", 3: "vclock"}}


def type_name(request_type: int) -> str:
    return TYPE_NAMES.get(request_type) or str(request_type)


def timestamp_us(ts: float) -> int:
    """The microseconds the timestamp column holds (pyarrow rounds the same way)."""
    return round(ts * 1_000_000)


# ---------------------------------------------------------------------------
# Filters: what the reader may skip. Conjunctions of per-column conditions on
# the four integer-valued columns; each is kept as an inclusive integer range
# plus an optional set of allowed values (timestamps in microseconds).

FILTER_COLUMNS = ("space_id", "lsn", "timestamp", "replica_id")
_NO_LOW, _NO_HIGH = -(1 << 80), 1 << 80


@dataclass
class ColumnFilter:
    low: int = _NO_LOW
    high: int = _NO_HIGH
    values: frozenset[int] | None = None

    @property
    def empty(self) -> bool:
        return self.low > self.high or (self.values is not None and not any(
            self.low <= v <= self.high for v in self.values))

    @property
    def top(self) -> int:
        """The highest value that can pass."""
        return self.high if self.values is None else min(self.high, max(self.values, default=-1))

    def accepts(self, value: int | None) -> bool:
        if value is None:
            return False
        return self.low <= value <= self.high and (self.values is None or value in self.values)

    def overlaps(self, low: int, high: int) -> bool:
        """May a value in [low, high] pass?"""
        if max(low, self.low) > min(high, self.high):
            return False
        return self.values is None or any(low <= v <= high and self.accepts(v)
                                          for v in self.values)


def _as_number(column: str, value: Any) -> int | float | None:
    """The filter literal on the column's integer scale, or None if it is not a
    number we can compare exactly (then the filter is not pushed)."""
    if column == "timestamp":
        if not isinstance(value, datetime):
            return None
        if value.tzinfo is None:        # Spark sends UTC-aware values; be safe
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RowFilter:
    """AND of conditions `column OP literal`, OP in = > >= < <= in, notnull."""

    def __init__(self):
        self.columns: dict[str, ColumnFilter] = {}

    @classmethod
    def from_conditions(cls, conditions: Iterable[tuple[str, str, Any]]) -> RowFilter:
        result = cls()
        for column, op, value in conditions:
            if not result.add(column, op, value):
                raise ValueError(f"cannot filter on {column} {op} {value!r}")
        return result

    def add(self, column: str, op: str, value: Any = None) -> bool:
        """Add one condition; False if it cannot be applied exactly (the caller
        then leaves it to Spark)."""
        if column not in FILTER_COLUMNS or op not in ("=", ">", ">=", "<", "<=", "in", "notnull"):
            return False
        if op == "in":
            numbers = [_as_number(column, v) for v in value]
            if any(n is None for n in numbers):
                return False
        elif op != "notnull":
            number = _as_number(column, value)
            if number is None:
                return False
        cf = self.columns.setdefault(column, ColumnFilter())
        # Every condition rejects nulls (SQL's comparisons with NULL are not
        # true), so `notnull` only needs the column to be filtered at all.
        if op == "in":
            ints = frozenset(int(n) for n in numbers if n == int(n))
            cf.values = ints if cf.values is None else cf.values & ints
        elif op == "=":
            # Integer columns: every bound becomes an inclusive integer bound.
            if number != int(number):
                cf.values = frozenset()
            else:
                cf.low, cf.high = max(cf.low, int(number)), min(cf.high, int(number))
        elif op == ">":
            cf.low = max(cf.low, math.floor(number) + 1)
        elif op == ">=":
            cf.low = max(cf.low, math.ceil(number))
        elif op == "<":
            cf.high = min(cf.high, math.ceil(number) - 1)
        elif op == "<=":
            cf.high = min(cf.high, math.floor(number))
        return True

    def __bool__(self) -> bool:
        return bool(self.columns)

    @property
    def impossible(self) -> bool:
        return any(cf.empty for cf in self.columns.values())

    def get(self, column: str) -> ColumnFilter | None:
        return self.columns.get(column)

    def predicate(self):
        """f(lsn, replica_id, timestamp, space_id) -> bool, or None when nothing
        is filtered. `timestamp` is the raw float (0.0 = absent, a null)."""
        if not self.columns:
            return None
        position = {"lsn": 0, "replica_id": 1, "timestamp": 2, "space_id": 3}
        checks = tuple((position[column], cf.accepts) for column, cf in self.columns.items())
        want_ts = "timestamp" in self.columns

        def accepts(lsn: int, replica_id: int, ts: float, space_id: int | None) -> bool:
            ts_us = timestamp_us(ts) if want_ts and ts else None
            values = (lsn, replica_id, ts_us, space_id)
            for i, check in checks:
                if not check(values[i]):
                    return False
            return True
        return accepts

    def __repr__(self) -> str:
        return f"RowFilter({self.columns!r})"


# ---------------------------------------------------------------------------
# Space names: the `_space` rows replayed in order.

def _field_no(field_spec: Any, index_base: int) -> int | None:
    """0-based field number of an update operation's field, or None if unknown."""
    if isinstance(field_spec, str):
        return 2 if field_spec == "name" else None
    if isinstance(field_spec, int):
        return field_spec - index_base if field_spec >= 0 else None
    return None


@dataclass
class SpaceNames:
    """space id -> name as of some point of a WAL."""

    names: dict[int, str] = field(default_factory=dict)

    def copy(self) -> SpaceNames:
        return SpaceNames(dict(self.names))

    def get(self, space_id: int | None) -> str | None:
        return None if space_id is None else self.names.get(space_id)

    def load_tuple(self, tup: Any) -> None:
        if isinstance(tup, (list, tuple)) and len(tup) > 2 and isinstance(tup[0], int):
            self.names[tup[0]] = tup[2] if isinstance(tup[2], str) else str(tup[2])

    def apply(self, request_type: int, key: bytes | None, tup: bytes | None,
              ops: bytes | None, index_base: int = 0) -> None:
        """Apply one DML row on `_space` (raw MsgPack key / tuple / ops)."""
        unpack = _unpack_or_none
        if request_type in (INSERT, REPLACE):
            self.load_tuple(unpack(tup))
        elif request_type == DELETE:
            k = unpack(key)
            if isinstance(k, list) and k and isinstance(k[0], int):
                self.names.pop(k[0], None)
        elif request_type in (UPDATE, UPSERT):
            # UPDATE: space:rename() is `{'=', 3, name}` on the name field.
            # UPSERT: the tuple when the space is new, the operations otherwise.
            if request_type == UPDATE:
                k = unpack(key)
                space_id = k[0] if isinstance(k, list) and k else None
            else:
                t = unpack(tup)
                space_id = t[0] if isinstance(t, list) and t else None
                if space_id not in self.names:
                    self.load_tuple(t)
                    return
            if not isinstance(space_id, int) or space_id not in self.names:
                return
            for op in unpack(ops) or ():
                if (isinstance(op, list) and len(op) >= 3 and op[0] == "="
                        and _field_no(op[1], index_base) == 2 and isinstance(op[2], str)):
                    self.names[space_id] = op[2]


def _unpack_or_none(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False, unicode_errors="replace")
    except (ValueError, TypeError):
        return None


def space_row_markers() -> tuple[bytes, ...]:
    """Byte strings one of which every DML body on `_space` contains (the
    SPACE_ID key with the id in the 3- or 5-byte MsgPack uint form): blocks
    without them need no row decoding when only the schema is wanted."""
    sid = SPACE_SPACE_ID
    return (b"\x10\xcd" + sid.to_bytes(2, "big"), b"\x10\xce" + sid.to_bytes(4, "big"))
