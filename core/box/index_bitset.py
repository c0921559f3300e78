"""memtx's BITSET index (memtx_bitset.c of 2.6.0), on roaring bitmaps of tuple ids.

One part, unsigned or string, non-unique. A value is a set of bits: an unsigned's bits,
a string's bytes (bit i of byte j is bit 8j + i). Each tuple gets an id as 2.6.0 hands
them out (growing, a freed one reused first, the last freed first), and every answer
comes in the order of those ids, as 2.6.0's bitset iterator walks its bitmaps.

The index keeps, as 2.6.0's bitset_index does, one bitmap of ids per bit (`_postings`)
and one of every id (`_all`). A search combines bitmaps (pyroaring, C) and visits only
the ids that match:

* BITS_ALL_SET: the intersection of the key's bits' bitmaps (no bit asked: nothing,
  as in 2.6.0); BITS_ANY_SET: their union; BITS_ALL_NOT_SET: every id less that union;
  ALL: every id;
* EQ: the ids with every bit of the key and none of the other bits of its bytes:
  2.6.0 looks at the key's bytes only (an unsigned's 8, a string's length), so a
  string key finds longer strings that begin as it does ('a' finds 'ab', '' finds
  every tuple).
"""
from __future__ import annotations

from typing import Any, Iterator

from pyroaring import BitMap

from spindle.core.box.index import Index, IndexType
from spindle.core.iproto.constants import IteratorType as It
from spindle.core.iproto.errors import ClientError


def stored_tuple(index: Any, after: Any) -> Any:
    """The tuple of `index`'s space with the primary key of `after` (a copy of a tuple
    Lua was handed), or None."""
    space = index.space
    primary = getattr(space, "indexes", {}).get(0)
    pk_def = index.pk_def
    if primary is None or pk_def is None:
        return None
    try:
        return primary.find(pk_def.extract_key(after))
    except (TypeError, IndexError, ClientError):     # (no such key: not there)
        return None


_ITERATORS = frozenset((It.ALL, It.EQ, It.BITS_ALL_SET, It.BITS_ANY_SET, It.BITS_ALL_NOT_SET))


def bits_of(value: Any) -> int:
    """The bits of a BITSET value as an int (bit n of the int is bit n of the value)."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    return int.from_bytes(bytes(value), "little")


def key_mask(value: Any) -> int | None:
    """The bits an EQ key speaks for (None: all of them, an unsigned's)."""
    if isinstance(value, int):
        return None
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    return (1 << 8 * len(value)) - 1


def bit_numbers(bits: int) -> list:
    """The numbers of the set bits of `bits`, lowest first."""
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


class BitsetIndex(Index):
    type = IndexType.BITSET

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        super().__init__(space, index_def, pk_def)
        self._point_lookup = False
        self._extract = self.key_def.extract_key
        self.clear()

    def clear(self) -> None:
        self._data: dict = {}         # id(tuple) -> tuple
        self._ids: dict = {}          # id(tuple) -> its 2.6.0 tuple id
        self._tuples: list = []       # tuple id -> tuple (None: free)
        self._bits: list = []         # tuple id -> its value's bits
        self._free: list = []         # freed tuple ids, the last freed at the end
        self._all = BitMap()
        self._postings: dict = {}     # bit number -> BitMap of tuple ids
        self._version = 0             # moves at every change (see _iterate)
        self._freed_at: dict = {}     # primary key -> the id of a tuple that left

    bits = staticmethod(bits_of)

    # -- modification (memtx_bitset_index_replace: the old tuple out, the new in) --

    def replace(self, old: Any, new: Any, mode: Any) -> Any:
        # (the new value read first: a replace that fails changes nothing)
        value = bits_of(self._extract(new)[0]) if new is not None else 0
        if old is not None:
            self._delete_raw(old)
        if new is not None:
            self._store(None, new, value)
        return old

    def insert_raw(self, tup: Any) -> None:
        self._store(None, tup)

    def build(self, tuples: Any) -> None:
        for tup in tuples:
            self._store(None, tup)

    def _store(self, key: Any, tup: Any, value: int | None = None) -> None:
        key = id(tup)
        if key in self._data:
            return
        if value is None:
            value = bits_of(self._extract(tup)[0])
        if self._free:
            tid = self._free.pop()
            self._tuples[tid] = tup
            self._bits[tid] = value
        else:
            tid = len(self._tuples)
            self._tuples.append(tup)
            self._bits.append(value)
        self._ids[key] = tid
        self._data[key] = tup
        self._all.add(tid)
        postings = self._postings
        for bit in bit_numbers(value):
            posting = postings.get(bit)
            if posting is None:
                postings[bit] = posting = BitMap()
            posting.add(tid)
        self._version += 1

    def _delete_raw(self, tup: Any) -> None:
        if self._data.pop(id(tup), None) is None:
            return
        tid = self._ids.pop(id(tup))
        if self.pk_def is not None:           # (for resume_after)
            if len(self._freed_at) > 4096:
                self._freed_at.clear()
            self._freed_at[self.pk_def.tuple_key(tup)] = tid
        value = self._bits[tid]
        self._tuples[tid] = None
        self._free.append(tid)
        self._all.discard(tid)
        postings = self._postings
        for bit in bit_numbers(value):
            posting = postings[bit]
            posting.discard(tid)
            if not posting:
                del postings[bit]
        self._version += 1

    # -- reading ----------------------------------------------------------------

    def _validate_iterator(self, it: It) -> None:
        if it not in _ITERATORS:
            raise self.unsupported("requested iterator type")

    def _matching(self, it: It, key: list) -> BitMap:
        """A new bitmap of the ids that iterator `it` with key `key` returns."""
        if it is It.ALL or not key:
            return self._all.copy()
        want = bits_of(key[0])
        postings = self._postings
        if it is It.EQ:
            sets = []
            for bit in bit_numbers(want):
                posting = postings.get(bit)
                if posting is None:
                    return BitMap()
                sets.append(posting)
            found = BitMap.intersection(*sets) if sets else self._all.copy()
            mask = key_mask(key[0])
            for bit, posting in postings.items():
                if not want >> bit & 1 and (mask is None or mask >> bit & 1):
                    found -= posting
            return found
        if it is It.BITS_ALL_SET:
            if want == 0:
                return BitMap()     # (2.6.0: no bit asked, no tuple)
            sets = []
            for bit in bit_numbers(want):
                posting = postings.get(bit)
                if posting is None:
                    return BitMap()
                sets.append(posting)
            sets.sort(key=len)      # (the smallest first: the cheapest intersection)
            return BitMap.intersection(*sets) if len(sets) > 1 else sets[0].copy()
        sets = [postings[bit] for bit in bit_numbers(want) if bit in postings]
        if it is It.BITS_ANY_SET:
            return BitMap.union(*sets) if sets else BitMap()
        return self._all - BitMap.union(*sets) if sets else self._all.copy()

    def _matches(self, it: It, key: Any, want: int, value: int) -> bool:
        if it is It.EQ:
            mask = key_mask(key)
            return value == want if mask is None else value & mask == want
        if it is It.BITS_ALL_SET:
            return want != 0 and value & want == want
        if it is It.BITS_ANY_SET:
            return value & want != 0
        return value & want == 0

    def _iterate(self, it: It, key: list, start: int = 0) -> Iterator[Any]:
        version = self._version
        ids = self._matching(it, key)
        want = None if it is It.ALL or not key else bits_of(key[0])
        tuples, values = self._tuples, self._bits
        for tid in ids.iter_equal_or_larger(start) if start else ids:
            if self._version != version:
                # changed since the search: the id may be free or someone else's now
                if tid >= len(tuples) or tuples[tid] is None:
                    continue
                if want is not None and not self._matches(it, key[0], want, values[tid]):
                    continue
            yield tuples[tid]

    def resume_after(self, it: It, key: list, after: Any) -> Iterator[Any]:
        """Lua's pairs() past tuple `after`, the last it was handed (lua/box/space.py
        iterate_after). 2.6.0's iterator goes on from its place in the bitmaps,
        whatever changed meanwhile: the ids above `after`'s, as the bitmaps are now.
        `after`'s id: that of the tuple with its primary key if it is still the same,
        else the one it had when it left the index (remembered by primary key)."""
        stored = stored_tuple(self, after)
        tid = None
        if stored is not None and tuple(stored) == tuple(after):
            tid = self._ids.get(id(stored))
        if tid is None and self.pk_def is not None:
            try:
                tid = self._freed_at.get(self.pk_def.tuple_key(after))
            except TypeError:           # (an unhashable key: not one of ours)
                tid = None
        if tid is None:
            return iter(())
        return self._iterate(it, key, tid + 1)

    def count(self, key: Any = None, iterator: Any = None) -> int:
        it, key = self._prepare(key, iterator)
        return len(self._all) if it is It.ALL else len(self._matching(it, key))

    def _values(self) -> list:
        tuples = self._tuples
        return [tuples[tid] for tid in self._all]

    def __len__(self) -> int:
        return len(self._data)
