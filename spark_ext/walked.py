"""Rows of block payloads as NumPy field arrays: the compiled walker
(walker.py) for what it accepts, scan.iter_rows for the rest, one block at a
time, so the answers and errors are the Python walker's everywhere.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from . import walker

# Columns of WalkedRows.ints (walker.walk fills them in this order).
(ROW_POS, TYPE, REPLICA_ID, GROUP_ID, LSN, TSN, SPACE_ID, INDEX_ID, INDEX_BASE,
 KEY_S, KEY_E, TUP_S, TUP_E, OPS_S, OPS_E) = range(15)
_INT_FIELDS = 15
_MIN_ROWS = 1024
_INT64 = np.iinfo(np.int64)


class WalkedRows:
    """`n` rows of `data`: ints[:n] (the fields above), ts[:n], commit[:n].
    The arrays belong to the RowWalker and change at its next walk."""

    __slots__ = ("data", "n", "ints", "ts", "commit")

    def __init__(self, data: bytes, n: int, ints: np.ndarray, ts: np.ndarray,
                 commit: np.ndarray):
        self.data, self.n = data, n
        self.ints, self.ts, self.commit = ints[:n], ts[:n], commit[:n]

    def field(self, column: int) -> np.ndarray:
        return self.ints[:, column]


class RowWalker:
    """Walks groups of block payloads into reusable arrays.

    `python_rows(payload)` is the general walker (scan.iter_rows); it raises
    its own errors, which `on_error(exc, block_index, row_pos)` turns into the
    caller's (it must raise)."""

    def __init__(self, python_rows: Callable[[bytes], Iterable[tuple]],
                 row_errors: tuple[type[BaseException], ...],
                 on_error: Callable[[BaseException, int, int], None]):
        self._python_rows = python_rows
        self._row_errors = row_errors
        self._on_error = on_error
        self._allocate(_MIN_ROWS)

    def _allocate(self, rows: int) -> None:
        self.ints = np.empty((rows, _INT_FIELDS), np.int64)
        self.ts = np.empty(rows, np.float64)
        self.commit = np.empty(rows, np.bool_)

    def _grow(self, rows: int) -> None:
        old = (self.ints, self.ts, self.commit)
        self._allocate(max(rows, 2 * len(self.ts)))
        for new, kept in zip((self.ints, self.ts, self.commit), old):
            new[:len(kept)] = kept

    def walk(self, payloads: list[bytes]) -> WalkedRows:
        """The rows of consecutive blocks' payloads, in order."""
        data = payloads[0] if len(payloads) == 1 else b"".join(payloads)
        bounds = np.zeros(len(payloads) + 1, np.int64)
        np.cumsum([len(p) for p in payloads], out=bounds[1:])
        buf = np.frombuffer(data, np.uint8)
        rows = block = 0
        while block < len(payloads):
            status, walked, stop = walker.walk(buf, bounds[block:], self.ints[rows:],
                                               self.ts[rows:], self.commit[rows:])
            if status == walker.FULL:
                self._grow(2 * len(self.ts))
                continue              # `rows` and `block` unchanged: walk that part again
            rows += walked
            block += stop
            if status == walker.OK:
                break
            rows = self._walk_python(data, int(bounds[block]), int(bounds[block + 1]),
                                     block, rows)
            block += 1
        return WalkedRows(data, rows, self.ints, self.ts, self.commit)

    def _walk_python(self, data: bytes, start: int, end: int, block: int, rows: int) -> int:
        """Rows of one block by the general walker, appended at `rows`."""
        row_pos = 0
        try:
            for row in self._python_rows(data[start:end]):
                (row_pos, rtype, replica_id, group_id, lsn, tsn, commit, ts, space_id,
                 index_id, index_base, key_s, key_e, tup_s, tup_e, ops_s, ops_e) = row
                if rows >= len(self.ts):
                    self._grow(rows + 1)
                values = (row_pos + start, rtype, replica_id, group_id, lsn, tsn,
                          -1 if space_id is None else space_id,
                          -1 if index_id is None else index_id, index_base,
                          *(s + start if s >= 0 else -1
                            for s in (key_s, key_e, tup_s, tup_e, ops_s, ops_e)))
                _check_row(values, ts)
                self.ints[rows] = values
                self.ts[rows] = ts
                self.commit[rows] = commit
                rows += 1
        except (*self._row_errors, OverflowError) as exc:
            self._on_error(exc, block, row_pos)
            raise
        return rows


def _check_row(values: tuple, ts) -> None:
    """The general walker takes any MsgPack value: refuse what the columns
    cannot hold, as a row error (not silently truncated)."""
    for value in values:
        if type(value) is not int:
            raise ValueError(f"a row field is {value!r}, not an integer")
        if not _INT64.min <= value <= _INT64.max:
            raise ValueError(f"a row field is out of range: {value}")
    if type(ts) not in (int, float) or not math.isfinite(ts):
        raise ValueError(f"the timestamp is {ts!r}, not a number")
