"""Multikey TREE indexes (2.6.0's `{2, 'unsigned', path = '[*]'}`, `'data[*].name'`).

A tuple has one entry per element of the array at the `[*]` of its multikey parts (all
of an index's multikey parts go through the same array: 2.6.0 refuses others as an
"incompatable multikey index path"); the other parts are the tuple's. As memtx_tree.c
with multikey key defs:

* equal keys of one tuple are one entry; a missing array (or an empty one) none;
* a unique index refuses a key another tuple has (ER_TUPLE_FOUND), a non-unique one
  orders equal keys by primary key;
* a search returns a tuple once per entry it matches (select{} lists a tuple of three
  elements three times), len() and count() count entries.

The format checks of the elements are json_path.PathChecks'.
"""
from __future__ import annotations

from typing import Any, Iterator

from spindle.core.box import json_path
from spindle.core.box.field_types import MAX_KEY
from spindle.core.box.index import _REVERSE, DupMode, TreeIndex, replace_check_dup
from spindle.core.iproto.constants import IteratorType as It
from spindle.core.iproto.errors import ClientError, ErrorCode

MULTIKEY = json_path.MULTIKEY


def multikey_split(tokens: tuple) -> tuple[tuple, tuple]:
    """(the path to the array, the path inside each element) of a multikey part."""
    at = tokens.index(MULTIKEY)
    return tokens[:at], tokens[at + 1:]


def check_multikey(index_def: Any, space_name: str) -> None:
    """key_def_new's and memtx's refusals of multikey definitions, in 2.6.0's words."""
    parts = index_def.key_def.parts
    prefix = None
    for no, part in enumerate(parts, 1):
        if not part.is_multikey:
            continue
        head, rest = multikey_split(part.tokens)
        if MULTIKEY in rest or (prefix is not None and (part.fieldno, head) != prefix):
            raise ClientError(ErrorCode.ER_WRONG_INDEX_OPTIONS, no,
                              "incompatable multikey index path")
        prefix = (part.fieldno, head)
    if prefix is None:
        return
    if index_def.id == 0:
        raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name,
                          "primary key cannot be multikey")
    if str(index_def.type) != "TREE":
        raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name,
                          f"{index_def.type} index cannot be multikey")


class MultikeyTreeIndex(TreeIndex):
    """Entries keyed by (part keys) for unique, (part keys + primary key) otherwise."""

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        super().__init__(space, index_def, pk_def)
        kd = self.key_def
        self._plain = False
        self._point_lookup = False
        first = next(p for p in kd.parts if p.is_multikey)
        self._fieldno = first.fieldno
        self._array_path, _ = multikey_split(first.tokens)
        # per part: (True, path inside an element) or (False, the tuple's extractor)
        self._getters_of = [
            (True, multikey_split(p.tokens)[1]) if p.is_multikey
            else (False, json_path.extractor(p.fieldno, p.tokens))
            for p in kd.parts]
        self._part_keys = [p._key for p in kd.parts]
        self._pk = pk_def
        # the entry each tuple was last handed out from (by primary key): where a
        # paused iteration goes on (lua/box/space.py's iterate_after)
        self._last_entry: dict = {}
        self._entry_key = self._resume_key

    def entry_keys(self, tup: Any) -> list:
        """The tuple's entry keys, without repeats, in element order."""
        n = len(tup)
        array = json_path.dig(tup[self._fieldno], self._array_path) \
            if self._fieldno < n else None
        if type(array) not in (list, tuple):
            return []
        suffix_pk = () if self.unique else self._pk.tuple_sort_key(tup)
        keys: list = []
        seen: set = set()
        getters: list[tuple[bool, Any]] = self._getters_of
        for element in array or ():
            key = tuple(
                get(json_path.dig(element, how) if multi else how(tup))
                for (multi, how), get in zip(getters, self._part_keys)
            ) + suffix_pk
            if key not in seen:
                seen.add(key)
                keys.append(key)
        return keys

    def _resume_key(self, tup: Any) -> Any:
        """The entry of `tup` an iteration handed out last (else its first)."""
        found = self._last_entry.get(self._pk.tuple_key(tup))
        if found is not None:
            return found
        keys = self.entry_keys(tup)
        return keys[0] if keys else ()

    # -- modification ---------------------------------------------------------

    def replace(self, old: Any, new: Any, mode: Any) -> Any:
        data = self.ordered()
        if new is not None:
            keys = self.entry_keys(new)
            if self.unique:
                for key in keys:
                    dup = data.get(key)
                    if dup is not None and dup is not old:
                        code = replace_check_dup(old, dup, DupMode.INSERT)
                        if code:
                            raise self._error(code).located(*self._replace_where)
            if old is not None:
                self._delete_raw(old)
            self._put(new, keys)
        elif old is not None:
            self._delete_raw(old)
        return old

    def _put(self, tup: Any, keys: list) -> None:
        """Store `tup` under each of its entries (a functional index also remembers
        them: index_func.py)."""
        data = self.ordered()
        for key in keys:
            data[key] = tup

    def insert_raw(self, tup: Any) -> None:
        self._put(tup, self.entry_keys(tup))

    def build(self, tuples: Any) -> None:
        data = self.ordered()
        for tup in tuples:
            keys = self.entry_keys(tup)
            if self.unique:
                for key in keys:
                    dup = data.get(key)
                    if dup is not None and dup is not tup:
                        raise self._error(ErrorCode.ER_TUPLE_FOUND)
            self._put(tup, keys)

    def _delete_raw(self, tup: Any) -> None:
        data = self.ordered()
        for key in self.entry_keys(tup):
            data.pop(key, None)

    def clear(self) -> None:
        super().clear()
        self._last_entry.clear()

    # -- reading --------------------------------------------------------------

    def _iterate(self, it: Any, key: list) -> Iterator[Any]:
        return self.resume_after(it, key, None)

    def resume_after(self, it: Any, key: list, after: Any) -> Iterator[Any]:
        """The iteration (TreeIndex's, over the entries), or its rest past the entry
        of tuple `after` it handed out last; each tuple's entry is remembered."""
        remember, pk_key = self._last_entry, self._pk.tuple_key
        if len(remember) > 4096:
            remember.clear()
        data = self.ordered()
        reverse = it in _REVERSE
        low: Any = None
        high: Any = None
        if key:
            prefix = self.key_def.key_sort_key(key)
            above = prefix + (MAX_KEY,)       # above every key that starts with prefix
            if it in (It.EQ, It.REQ):
                low, high = prefix, above
            elif it in (It.ALL, It.GE):
                low = prefix
            elif it is It.GT:
                low = above
            elif it is It.LT:
                high = prefix
            else:   # LE
                high = above
        inclusive = (True, not (key and it is It.LT))
        if after is not None:
            # past the entry handed out last: exclusive on the side we go on from
            if reverse:
                high, inclusive = self._resume_key(after), (inclusive[0], False)
            else:
                low, inclusive = self._resume_key(after), (False, inclusive[1])
        for entry in data.irange(low, high, inclusive, reverse):
            tup = data[entry]
            remember[pk_key(tup)] = entry
            yield tup
