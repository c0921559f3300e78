"""memtx indexes: TREE (ordered, sortedcontainers) and HASH (unique, dict).

Behaviour follows memtx_tree.c / memtx_hash.c / index.cc of 2.6.0:

* TREE iterators: EQ and ALL/GE start at lower_bound(key), GT at upper_bound; REQ and LE
  at upper_bound minus one, LT at lower_bound minus one, going backwards. EQ and REQ stop at
  the first tuple whose key prefix differs; ALL with a key behaves as GE (2.6.0 does not
  stop it). An empty key turns EQ/ALL/GE/GT into a forward full scan and REQ/LT/LE into a
  backward one.
* A non-unique TREE orders by key then primary key (memtx's cmp_def). A unique TREE with
  nullable parts lets any number of keys containing nil coexist (ordered by primary key).
* HASH: unique only; EQ and GT need a full key, ALL and GT also take an empty key; other
  iterators raise "does not support requested iterator type". GT returns what follows the
  key in the table's order, which (as in Tarantool) is arbitrary: here it is insertion order.
* Iteration is tolerant of changes made meanwhile: like memtx's iterator, each step re-seeks
  from the last returned entry (the first entry above it going forward, below it going
  backward), so deleted entries are skipped and new ones found.
* count(ALL, key) is the index size whatever the key (2.6.0's shortcut).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from sortedcontainers import SortedDict

from spindle.core.box.field_types import MAX_KEY
from spindle.core.box.key_def import KeyDef, KeyPart, normalize_key
from spindle.core.iproto.constants import IteratorType
from spindle.core.iproto.errors import ClientError, ErrorCode


class IndexType(str, enum.Enum):
    TREE = "TREE"
    HASH = "HASH"
    BITSET = "BITSET"
    RTREE = "RTREE"

    def __str__(self) -> str:
        return self.value


class DupMode(enum.Enum):
    """dup_replace_mode of memtx."""

    INSERT = 1              # a duplicate is an error
    REPLACE = 2             # a duplicate must exist (UPDATE: it must be the old tuple)
    REPLACE_OR_INSERT = 3   # replace a duplicate if any


_DUP_REPLACE = DupMode.REPLACE      # (an Enum member lookup costs as much as a call)
_dict_setitem = dict.__setitem__

_REVERSE = frozenset({IteratorType.REQ, IteratorType.LT, IteratorType.LE})
_ITERATOR_NAMES = {it.name: it for it in IteratorType}
_ITERATOR_NUMBERS = {int(it): it for it in IteratorType}
_EQ = IteratorType.EQ


def iterator_type(value: Any, key_is_empty: bool = False) -> IteratorType:
    """An IteratorType from a member, an int or a name; None gives the box API default
    (ALL for an empty key, EQ otherwise)."""
    if value is None:
        return IteratorType.ALL if key_is_empty else IteratorType.EQ
    if isinstance(value, IteratorType):
        return value
    if isinstance(value, str):
        try:
            return _ITERATOR_NAMES[value.upper()]
        except KeyError:
            raise ClientError(ErrorCode.ER_ITERATOR_TYPE, value) from None
    if isinstance(value, int) and not isinstance(value, bool):
        found = _ITERATOR_NUMBERS.get(value)
        if found is not None:
            return found
    raise ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "Invalid iterator type")


@dataclass
class IndexDef:
    id: int
    name: str
    type: IndexType | str = IndexType.TREE
    parts: Sequence[Any] = field(default_factory=lambda: [KeyPart(0)])
    unique: bool = True
    # the other options of the `_index` row (RTREE's dimension and distance, ...)
    opts: dict = field(default_factory=dict)

    def __post_init__(self):
        self.type = IndexType(str(self.type).upper())
        self.key_def = self.parts if isinstance(self.parts, KeyDef) else KeyDef(self.parts)
        self.parts = list(self.key_def.parts)


def replace_check_dup(old: Any, dup: Any, mode: DupMode) -> int:
    """replace_check_dup(): 0 or the error code of a replacement."""
    if dup is None:
        if mode is DupMode.REPLACE:
            return (ErrorCode.ER_CANT_UPDATE_PRIMARY_KEY if old is not None
                    else ErrorCode.ER_TUPLE_NOT_FOUND)
    elif dup is not old and (old is not None or mode is DupMode.INSERT):
        return ErrorCode.ER_TUPLE_FOUND
    return 0


class Index:
    """Common part of TREE and HASH. `space` supplies the name in errors and the
    primary key definition for non-unique ordering."""

    type: IndexType
    # Where 2.6.0's memtx index_replace() of this kind reports a refused replace
    # (ER_TUPLE_FOUND, ER_TUPLE_NOT_FOUND): the FILE/LINE of the IPROTO error.
    _replace_where: tuple[str, int] = ("./src/box/memtx_tree.c", 577)
    # replace() stores a new entry as SortedDict.__setitem__ does, without its call:
    # `_add_key(key)` puts a key that is not there yet in the key order (TREE; None
    # for HASH's plain dict), then the entry goes in with dict.__setitem__.
    _add_key: Any = None

    def __init__(self, space: Any, index_def: IndexDef, pk_def: KeyDef | None = None):
        self.space = space
        self.id = index_def.id
        self.name = index_def.name
        self.unique = index_def.unique
        self.key_def = index_def.key_def
        self.index_def = index_def
        self.pk_def = pk_def if index_def.id != 0 else None
        # An EQ search with a full key finds at most one entry, by hash: unique, and
        # no nil that would let equal keys coexist.
        self._point_lookup = self.unique and not self.key_def.is_nullable
        # Entry keys are tuples of part keys (the subclass sets _entry_key), unless
        # the subclass calls _key_by_tuple_key().
        self._plain = False
        self._search_key = self.key_def.key_sort_key

    # Subclasses: _entry_key, _insert_raw, _delete_raw, _lookup, __len__, _values,
    # _iterate, _validate_iterator.
    _data: dict                          # entry key -> tuple (TREE: a SortedDict)
    _entry_key: Callable[[Any], Any]     # a tuple's entry key
    if TYPE_CHECKING:   # (declared for the type checker; the subclasses define them)
        def _iterate(self, it: IteratorType, key: list) -> Iterator[Any]: ...
        def _validate_iterator(self, it: IteratorType) -> None: ...

    def _key_by_tuple_key(self) -> None:
        """Key entries by key_def.tuple_key and find them by key_def.search_key (a
        unique index without nils: one entry per key), plain when the key has one
        part (see KeyDef)."""
        kd = self.key_def
        self._entry_key, self._search_key, self._plain = kd.tuple_key, kd.search_key, kd.plain

    def __repr__(self) -> str:
        return f"<{self.type.value} index {self.name!r} #{self.id} of {self._space_name()!r}>"

    def _space_name(self) -> str:
        return getattr(self.space, "name", "?")

    def _error(self, code: int) -> ClientError:
        return ClientError(code, self.name, self._space_name())

    def unsupported(self, what: str) -> ClientError:
        engine = getattr(self.space, "engine", "memtx")
        return ClientError(ErrorCode.ER_UNSUPPORTED_INDEX_FEATURE, self.name,
                           self.type.value, self._space_name(), engine, what)

    # -- modification ---------------------------------------------------------

    def replace(self, old: Any, new: Any, mode: DupMode) -> Any:
        """memtx index_replace(): put `new` in place of `old`; returns the tuple that
        left the index (a duplicate replaced, or `old`). Raises without changing
        anything when replace_check_dup() refuses."""
        if new is not None:
            key = self._entry_key(new)
            data = self._data
            dup = data.get(key)
            if dup is not None or mode is _DUP_REPLACE:
                code = replace_check_dup(old, dup, mode)
                if code:
                    raise self._error(code).located(*self._replace_where)
            if dup is None and self._add_key is not None:
                self._add_key(key)
            _dict_setitem(data, key, new)
            if dup is not None:
                return dup
        if old is not None:
            self._delete_raw(old)
        return old

    def insert_raw(self, tup: Any) -> None:
        self._store(self._entry_key(tup), tup)

    def delete_raw(self, tup: Any) -> None:
        self._delete_raw(tup)

    def build(self, tuples: Sequence[Any]) -> None:
        """Fill an empty index; a duplicate in a unique index is ER_TUPLE_FOUND."""
        for tup in tuples:
            key = self._entry_key(tup)
            if self._lookup(key) is not None:
                raise self._error(ErrorCode.ER_TUPLE_FOUND)
            self._store(key, tup)

    # -- reading --------------------------------------------------------------

    def get(self, key: Any) -> Any:
        """box_index_get(): exact match on a unique index, or None."""
        key = normalize_key(key)
        if not self.unique:
            raise ClientError(ErrorCode.ER_MORE_THAN_ONE_TUPLE)
        self.key_def.validate_exact_key(key)
        return self.find(key)

    def find(self, key: Sequence[Any]) -> Any:
        """Lookup by a full, already validated key."""
        return self._lookup(self._search_key(key))

    def validate_search_key(self, it: IteratorType, key: list) -> None:
        """key_validate() of index.cc."""
        n = len(key)
        if n == 0 and (self.type is IndexType.TREE or it is IteratorType.ALL or
                       (self.type is IndexType.HASH and it is IteratorType.GT)):
            return
        if n > self.key_def.part_count:
            raise ClientError(ErrorCode.ER_KEY_PART_COUNT, self.key_def.part_count, n)
        if self.type is not IndexType.TREE and n < self.key_def.part_count:
            raise ClientError(ErrorCode.ER_PARTIAL_KEY, self.type.value,
                              self.key_def.part_count, n)
        self.key_def.validate_key(key)

    def _prepare(self, key: Any, iterator: Any) -> tuple[IteratorType, list]:
        key = normalize_key(key)
        it = iterator_type(iterator, not key)
        self.validate_search_key(it, key)
        self._validate_iterator(it)
        return it, key

    def pairs(self, key: Any = None, iterator: Any = None) -> Iterator[Any]:
        """A lazy iterator; tolerates changes to the index between steps."""
        it, key = self._prepare(key, iterator)
        return self._iterate(it, key)

    def select(self, key: Any = None, iterator: Any = None, *, offset: int = 0,
               limit: int | None = None) -> list:
        it, key = self._prepare(key, iterator)
        out: list = []
        if limit is not None and limit <= 0:
            return out
        if it is _EQ and self._point_lookup and len(key) == self.key_def.part_count:
            found = self._lookup(self._search_key(key))
            if found is not None and offset <= 0:
                out.append(found)
            return out
        for tup in self._iterate(it, key):
            if offset > 0:
                offset -= 1
                continue
            out.append(tup)
            if limit is not None and len(out) >= limit:
                break
        return out

    def count(self, key: Any = None, iterator: Any = None) -> int:
        key = normalize_key(key)
        it = iterator_type(iterator, not key)
        self.validate_search_key(it, key)
        if it is IteratorType.ALL:
            return len(self)
        self._validate_iterator(it)
        return sum(1 for _ in self._iterate(it, key))

    def min(self, key: Any = None) -> Any:
        if self.type is not IndexType.TREE:
            raise self.unsupported("min()")
        key = normalize_key(key)
        self.validate_search_key(IteratorType.GE, key)
        return next(self._iterate(IteratorType.GE, key), None)

    def max(self, key: Any = None) -> Any:
        if self.type is not IndexType.TREE:
            raise self.unsupported("max()")
        key = normalize_key(key)
        self.validate_search_key(IteratorType.LE, key)
        return next(self._iterate(IteratorType.LE, key), None)

    def len(self) -> int:
        return len(self)

    def bsize(self) -> int:
        """Approximate memory of the index structure (not of the tuples)."""
        return len(self) * (8 * (self.key_def.part_count + 2) + 16)

    def tuples(self) -> list:
        """Every tuple in index order (hash: table order)."""
        return list(self._values())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.tuples())

    def snapshot_tuples(self) -> list:
        """Every tuple, in no particular order, copied as fast as Python can (a plain
        dict values copy: ~16 ms for a million rows against ~115 ms in key order).
        Checkpoints use it; recovery does not need key order."""
        return list(dict.values(self._data))

    # Storage shared by TREE (a SortedDict) and HASH (a dict): `_data` maps an entry
    # key (from `_entry_key(tuple)`) to the tuple.
    def __len__(self) -> int:
        return len(self._data)

    def _lookup(self, key: tuple) -> Any:
        return self._data.get(key)

    def _store(self, key: tuple, tup: Any) -> None:
        self._data[key] = tup

    def _delete_raw(self, tup: Any) -> None:
        del self._data[self._entry_key(tup)]

    def _values(self):
        return self._data.values()

    def clear(self) -> None:
        self._data.clear()


class TreeIndex(Index):
    type = IndexType.TREE

    def __init__(self, space: Any, index_def: IndexDef, pk_def: KeyDef | None = None):
        super().__init__(space, index_def, pk_def)
        self._data: SortedDict = SortedDict()
        self._order = self._data._list       # the SortedList of the entry keys
        # Keys greater than every key in _order, ascending, not in it yet: an insert
        # past the end (growing ids, the usual case) only appends here. Whatever
        # needs the order, or could break the rule, merges them in first (ordered()).
        self._tail: list = []
        kd = self.key_def
        if index_def.id == 0 or self._point_lookup:
            self._key_by_tuple_key()
        else:
            pk = pk_def
            assert pk is not None   # a secondary index is made with its primary key's def
            if not self.unique:
                def entry_key(tup):
                    return kd.tuple_sort_key(tup) + pk.tuple_sort_key(tup)
            else:
                # Unique with nullable parts: a key holding nil never conflicts.
                def entry_key(tup):
                    key = kd.tuple_sort_key(tup)
                    if kd.tuple_has_null(tup):
                        return key + pk.tuple_sort_key(tup)
                    return key
            self._entry_key = entry_key

    # -- the key order ----------------------------------------------------------
    # SortedList.add costs two Python calls and ~80 bytecodes per key; appending to
    # the tail costs a compare. The tail joins _order as whole sublists, which is
    # what SortedList itself builds (sortedcontainers 2.x: `_lists` of sorted
    # sublists of at most 2 x `_load` keys, all but the last at least `_load` / 2,
    # `_maxes` their last keys, `_len`, and `_index` rebuilt on demand when empty);
    # the tests check the result with SortedList's own _check().

    def _add_key(self, key: Any) -> None:
        """Put a key that is not in the index yet into the order."""
        tail = self._tail
        if tail:
            if key > tail[-1]:
                tail.append(key)
                return
            self._settle()
        else:
            maxes = self._order._maxes
            if not maxes or key > maxes[-1]:
                tail.append(key)
                return
        self._order.add(key)

    def _settle(self) -> None:
        """Merge the tail into the order (at its end: every tail key is greater)."""
        tail, order = self._tail, self._order
        lists, maxes, load = order._lists, order._maxes, order._load
        start = 0
        if lists and len(lists[-1]) < load:
            # fill the last sublist first: only the last one may stay short
            last = lists[-1]
            start = load - len(last)
            last.extend(tail[:start])
            maxes[-1] = last[-1]
        for pos in range(start, len(tail), load):
            chunk = tail[pos:pos + load]
            lists.append(chunk)
            maxes.append(chunk[-1])
        order._len += len(tail)
        del order._index[:]
        tail.clear()

    def ordered(self) -> SortedDict:
        """The entries with every key in order (what bisects and positions need)."""
        if self._tail:
            self._settle()
        return self._data

    def _store(self, key: Any, tup: Any) -> None:
        data = self._data
        if key not in data:
            self._add_key(key)
        _dict_setitem(data, key, tup)

    def _delete_raw(self, tup: Any) -> None:
        key = self._entry_key(tup)
        tail = self._tail
        if tail and tail[-1] == key:
            # the newest key, as a rollback takes back what its statements added
            tail.pop()
            dict.__delitem__(self._data, key)
            return
        del self.ordered()[key]

    def _values(self):
        return self.ordered().values()

    def clear(self) -> None:
        self._tail.clear()
        self._data.clear()

    # Search keys in the shape of the entry keys: a tuple of the m leading part keys,
    # or for plain entries the one part key itself.

    def _prefix(self, key: list) -> Any:
        """The entry-shaped form of a non-empty search key."""
        prefix = self.key_def.key_sort_key(key)
        return prefix[0] if self._plain else prefix

    def _upper_bound(self, prefix: Any) -> int:
        """Position after every entry starting with `prefix`."""
        data = self.ordered()
        if self._plain:
            return data.bisect_right(prefix)
        return data.bisect_left(prefix + (MAX_KEY,))

    def _starts_with(self, entry: Any, prefix: Any, m: int) -> bool:
        """Whether entry key `entry` begins with the m-part search key `prefix`."""
        return entry == prefix if self._plain else entry[:m] == prefix

    def _validate_iterator(self, it: IteratorType) -> None:
        if it > IteratorType.GT:
            raise self.unsupported("requested iterator type")

    def _iterate(self, it: IteratorType, key: list) -> Iterator[Any]:
        data = self.ordered()
        m = len(key)
        if m == 0:
            it = IteratorType.LE if it in _REVERSE else IteratorType.GE
            prefix: tuple = ()
        else:
            prefix = self._prefix(key)
        reverse = it in _REVERSE
        stop_on_mismatch = it in (IteratorType.EQ, IteratorType.REQ)
        keys = data.keys()
        # First position.
        if m == 0:
            pos = len(data) - 1 if reverse else 0
        elif it in (IteratorType.ALL, IteratorType.EQ, IteratorType.GE, IteratorType.LT):
            pos = data.bisect_left(prefix)
            if it is IteratorType.LT:
                pos -= 1
        else:   # GT, REQ, LE: upper bound
            pos = self._upper_bound(prefix)
            if reverse:
                pos -= 1
        while 0 <= pos < len(data):
            current = keys[pos]
            if stop_on_mismatch and not self._starts_with(current, prefix, m):
                return
            yield data[current]
            # Re-seek from the entry just returned: the index may have changed.
            self.ordered()
            if reverse:
                pos = data.bisect_left(current) - 1
            else:
                pos = data.bisect_right(current)


class HashIndex(Index):
    type = IndexType.HASH
    _replace_where = ("./src/box/memtx_hash.c", 330)

    def __init__(self, space: Any, index_def: IndexDef, pk_def: KeyDef | None = None):
        if not index_def.unique:
            raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name,
                              getattr(space, "name", "?"), "HASH index must be unique")
        super().__init__(space, index_def, pk_def)
        self._data: dict = {}
        self._key_by_tuple_key()

    def _validate_iterator(self, it: IteratorType) -> None:
        if it not in (IteratorType.EQ, IteratorType.ALL, IteratorType.GT):
            raise self.unsupported("requested iterator type")

    def _iterate(self, it: IteratorType, key: list) -> Iterator[Any]:
        data = self._data
        if it is IteratorType.EQ:
            tup = data.get(self._search_key(key))
            if tup is not None:
                yield tup
            return
        if it is IteratorType.GT and key:
            start = self._search_key(key)
            if start not in data:
                return
            keys = list(data)
            idx = keys.index(start) + 1
        else:
            keys = list(data)
            idx = 0
        # Tolerate changes: skip entries deleted meanwhile.
        for k in keys[idx:]:
            tup = data.get(k)
            if tup is not None:
                yield tup


def make_index(space: Any, index_def: IndexDef, pk_def: KeyDef | None = None) -> Index:
    from spindle.core.box import index_kinds    # (it builds on this module)
    index_kinds.check_index_def(index_def, getattr(space, "name", "?"))
    if index_def.opts.get("func") is not None:
        from spindle.core.box import index_func
        return index_func.FuncTreeIndex(space, index_def, pk_def)
    if any(part.is_multikey for part in index_def.key_def.parts):
        from spindle.core.box import index_multikey
        index_multikey.check_multikey(index_def, getattr(space, "name", "?"))
        return index_multikey.MultikeyTreeIndex(space, index_def, pk_def)
    if index_def.type is IndexType.HASH:
        return HashIndex(space, index_def, pk_def)
    if index_def.type is IndexType.BITSET:
        return index_kinds.BitsetIndex(space, index_def, pk_def)
    if index_def.type is IndexType.RTREE:
        return index_kinds.RtreeIndex(space, index_def, pk_def)
    return TreeIndex(space, index_def, pk_def)
