"""memtx's BITSET and RTREE indexes.

Both keep their tuples in a dict by identity and answer a search by looking at every
entry (correct, not fast: no bitmaps, no R-tree); the order of a result follows 2.6.0
where it is defined by the data:

* BITSET (memtx_bitset.c): one part, unsigned or string, non-unique. A value is a set
  of bits: an unsigned's bits, a string's bytes (bit i of byte j is bit 8j + i).
  Iterators ALL, EQ (the same bits), BITS_ALL_SET, BITS_ANY_SET, BITS_ALL_NOT_SET;
  tuples come in the order of their ids, which 2.6.0 hands out growing and reuses
  once freed (the last freed first).
* RTREE (memtx_rtree.c): one array part, non-unique, `dimension` (2) numbers for a
  point or twice that for a box, `distance` euclid or manhattan. Iterators ALL, EQ
  (the same box), GE/GT (contains, strictly), LE/LT (lies inside, strictly), OVERLAPS,
  NEIGHBOR (every entry, nearest first to the key's first corner); other iterations
  go in insertion order, as a small R-tree's leaf holds its entries.

(Multikey TREE indexes: index_multikey.py. Functional indexes, `func = ...`, are kept
in the catalogue and refused at every read: FuncIndex.)
"""
from __future__ import annotations

import heapq
import math
from typing import Any, Iterator

from spindle.core.box.field_types import FieldType
from spindle.core.box.index import Index, IndexType
from spindle.core.iproto.constants import IteratorType as It
from spindle.core.iproto.errors import ClientError, ErrorCode


class ScanIndex(Index):
    """Entries by tuple identity, in the order `_order` gives (a subclass's ids)."""

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        super().__init__(space, index_def, pk_def)
        self._data: dict = {}               # id(tuple) -> tuple
        self._entry_key = id
        self._point_lookup = False

    def replace(self, old: Any, new: Any, mode: Any) -> Any:
        if old is not None:
            self._delete_raw(old)
        if new is not None:
            self._store(id(new), new)
        return old

    def build(self, tuples: Any) -> None:
        for tup in tuples:
            self._store(id(tup), tup)

    def _store(self, key: Any, tup: Any) -> None:    # (keyed by the tuple's id)
        self._data[key] = tup

    def _delete_raw(self, tup: Any) -> None:
        self._data.pop(id(tup), None)


class BitsetIndex(ScanIndex):
    type = IndexType.BITSET
    _ITERATORS = (It.ALL, It.EQ, It.BITS_ALL_SET, It.BITS_ANY_SET, It.BITS_ALL_NOT_SET)

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        super().__init__(space, index_def, pk_def)
        self._ids: dict = {}          # id(tuple) -> 2.6.0's tuple id
        self._free: list = []         # freed ids, the last freed at the end
        self._bits: dict = {}         # id(tuple) -> its value's bits
        self._next = 0
        self._extract = self.key_def.extract_key

    def _store(self, key: Any, tup: Any) -> None:
        if key in self._data:
            return
        if self._free:
            self._ids[key] = self._free.pop()
        else:
            self._ids[key] = self._next
            self._next += 1
        self._bits[key] = self.bits(self._extract(tup)[0])
        self._data[key] = tup

    def _delete_raw(self, tup: Any) -> None:
        if self._data.pop(id(tup), None) is not None:
            self._free.append(self._ids.pop(id(tup)))
            del self._bits[id(tup)]

    def clear(self) -> None:
        self._data.clear()
        self._bits.clear()
        self._ids.clear()
        self._free.clear()
        self._next = 0

    @staticmethod
    def bits(value: Any) -> int:
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            value = value.encode("utf-8", "surrogateescape")
        return int.from_bytes(bytes(value), "little")

    def _validate_iterator(self, it: It) -> None:
        if it not in self._ITERATORS:
            raise self.unsupported("requested iterator type")

    def _order(self) -> list:
        return sorted(self._data, key=self._ids.__getitem__)

    def _values(self):
        data = self._data
        return [data[k] for k in self._order()]

    def _iterate(self, it: It, key: list) -> Iterator[Any]:
        if it is It.ALL or not key:
            match = None
        else:
            want = self.bits(key[0])
            if it is It.BITS_ALL_SET and want == 0:
                return      # (2.6.0: no bit asked, no tuple)
            match = {
                It.EQ: lambda v: v == want,
                It.BITS_ALL_SET: lambda v: v & want == want,
                It.BITS_ANY_SET: lambda v: v & want != 0,
                It.BITS_ALL_NOT_SET: lambda v: v & want == 0,
            }[it]
        data, bits = self._data, self._bits
        for k in self._order():
            if match is None or match(bits[k]):
                yield data[k]


class RtreeIndex(ScanIndex):
    type = IndexType.RTREE
    # (entry box r, query box q: (lo, hi) per coordinate)
    _OPS = {
        It.EQ: lambda r, q: r == q,
        It.GE: lambda r, q: all(a <= c and d <= b for (a, b), (c, d) in zip(r, q)),
        It.GT: lambda r, q: all(a < c and d < b for (a, b), (c, d) in zip(r, q)),
        It.LE: lambda r, q: all(c <= a and b <= d for (a, b), (c, d) in zip(r, q)),
        It.LT: lambda r, q: all(c < a and b < d for (a, b), (c, d) in zip(r, q)),
        It.OVERLAPS: lambda r, q: all(a <= d and c <= b for (a, b), (c, d) in zip(r, q)),
    }

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        super().__init__(space, index_def, pk_def)
        opts = index_def.opts
        self.dimension = int(opts.get("dimension", 2))
        self.manhattan = opts.get("distance", "euclid") == "manhattan"
        self._rects: dict = {}        # id(tuple) -> its box
        self._extract = self.key_def.extract_key

    def _store(self, key: Any, tup: Any) -> None:
        value = self._extract(tup)[0]
        if isinstance(value, (list, tuple)) and not all(map(_is_number, value)):
            # (2.6.0 decodes the coordinates as numbers of the field)
            raise ClientError(ErrorCode.ER_FIELD_TYPE, str(self.key_def.parts[0].fieldno + 1),
                              FieldType.NUMBER.value)
        self._rects[key] = self.rect(value, "Field")
        self._data[key] = tup

    def _delete_raw(self, tup: Any) -> None:
        if self._data.pop(id(tup), None) is not None:
            del self._rects[id(tup)]

    def clear(self) -> None:
        self._data.clear()
        self._rects.clear()

    def rect(self, value: Any, what: str) -> tuple:
        """A point or box as ((lo, hi) per coordinate), or 2.6.0's ER_RTREE_RECT."""
        dim = self.dimension
        ok = (isinstance(value, (list, tuple)) and len(value) in (dim, 2 * dim) and
              all(map(_is_number, value)))
        if not ok:
            raise ClientError(ErrorCode.ER_RTREE_RECT, what, dim, 2 * dim)
        if len(value) == dim:
            return tuple((float(v), float(v)) for v in value)
        return tuple((float(min(value[i], value[i + dim])), float(max(value[i], value[i + dim])))
                     for i in range(dim))

    def validate_search_key(self, it: It, key: list) -> None:
        """key_validate() of an RTREE: one array, or the coordinates themselves."""
        dim, n = self.dimension, len(key)
        if n == 0:
            if it is not It.ALL:
                raise ClientError(ErrorCode.ER_KEY_PART_COUNT, 2 * dim, 0)
            return
        if n == 1:
            if not isinstance(key[0], (list, tuple)):
                raise ClientError(ErrorCode.ER_KEY_PART_TYPE, 0, FieldType.ARRAY.value)
            if len(key[0]) in (dim, 2 * dim) and not all(map(_is_number, key[0])):
                raise ClientError(ErrorCode.ER_KEY_PART_TYPE, 0, FieldType.NUMBER.value)
            self.rect(key[0], "Key")
        elif n in (dim, 2 * dim):
            self.rect(key, "Key")
        else:
            raise ClientError(ErrorCode.ER_KEY_PART_COUNT, 2 * dim, n)

    def _validate_iterator(self, it: It) -> None:
        if it not in self._OPS and it not in (It.ALL, It.NEIGHBOR):
            raise self.unsupported("requested iterator type")

    def _distance(self, r: tuple, point: tuple) -> float:
        gaps = [max(lo - p, 0.0, p - hi) for (lo, hi), p in zip(r, point)]
        return sum(gaps) if self.manhattan else math.sqrt(sum(g * g for g in gaps))

    def _iterate(self, it: It, key: list) -> Iterator[Any]:
        data, rects = self._data, self._rects
        keys = list(data)
        if it is It.ALL or not key:
            yield from (data[k] for k in keys)
            return
        query = self.rect(key if len(key) != 1 else key[0], "Key")
        if it is It.NEIGHBOR:
            # nearest first, ties in insertion order; a heap, as a select takes few
            point = tuple(lo for lo, _ in query)
            heap = [(self._distance(rects[k], point), n) for n, k in enumerate(keys)]
            heapq.heapify(heap)
            while heap:
                yield data[keys[heapq.heappop(heap)[1]]]
            return
        op = self._OPS[it]
        for k in keys:
            if op(rects[k], query):
                yield data[k]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class FuncIndex(ScanIndex):
    """A functional index (opts.func: keys computed by a persistent function). Kept in
    the catalogue, so a replica of a 2.6.0 master with one goes on; it holds nothing
    and refuses every read by name. (Its parts are the function's results, not
    fields: the space format leaves them out.)"""

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        self.type = index_def.type
        super().__init__(space, index_def, pk_def)

    def refused(self) -> ClientError:
        return ClientError(ErrorCode.ER_UNSUPPORTED, "Spindle", "functional indexes")

    def replace(self, old: Any, new: Any, mode: Any) -> Any:
        return old

    def build(self, tuples: Any) -> None:
        pass                    # (it holds nothing: see the class docstring)

    def _store(self, key: Any, tup: Any) -> None:
        pass

    def _prepare(self, key: Any, iterator: Any):
        raise self.refused()

    def get(self, key: Any) -> Any:
        raise self.refused()

    def count(self, key: Any = None, iterator: Any = None) -> int:
        raise self.refused()

    def min(self, key: Any = None) -> Any:
        raise self.refused()

    def max(self, key: Any = None) -> Any:
        raise self.refused()

    def _values(self):
        raise self.refused()

    def _validate_iterator(self, it: It) -> None:
        raise self.refused()

    def _iterate(self, it: It, key: list) -> Iterator[Any]:
        raise self.refused()


def check_index_def(index_def: Any, space_name: str) -> None:
    """index_def_is_valid()'s repeated part, and memtx_index_def_check() for BITSET
    and RTREE, as 2.6.0 words them."""
    def refuse(reason: str) -> ClientError:
        return ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name, reason)
    kind, parts = index_def.type, index_def.key_def.parts
    seen = set()
    for part in parts:      # (index_def_is_valid: by field and path, whatever the type)
        if (part.fieldno, part.tokens) in seen:
            raise refuse("same key part is indexed twice")
        seen.add((part.fieldno, part.tokens))
    if kind is IndexType.BITSET:
        if len(parts) != 1:
            raise refuse("BITSET index key can not be multipart")
        if index_def.unique:
            raise refuse("BITSET can not be unique")
        if parts[0].type not in (FieldType.UNSIGNED, FieldType.STRING):
            raise refuse("BITSET index field type must be NUM or STR")
    elif kind is IndexType.RTREE:
        if len(parts) != 1:
            raise refuse("RTREE index key can not be multipart")
        if index_def.unique:
            raise refuse("RTREE index can not be unique")
        if parts[0].type is not FieldType.ARRAY:
            raise refuse("RTREE index field type must be ARRAY")
