"""Functional indexes (2.6.0's `create_index(name, {func = 'f', parts = ...})`).

The keys of a tuple are what a persistent function returns for it: a table of key
parts, or with the function's `opts = {is_multikey = true}` a table of such tables.
The index's parts describe the returned keys (their field numbers mean nothing).
As 2.6.0's memtx_tree.c and key_list.c:

* the function must be a Lua function with a body, deterministic and sandboxed
  (ER_WRONG_INDEX_OPTIONS otherwise); a primary key and a HASH index cannot use one;
* the keys are computed at every insert, replace, update and delete of a tuple; a
  function that raises is ER_FUNC_INDEX_FUNC ("can't evaluate function"), results of
  the wrong shape are ER_FUNC_INDEX_FORMAT with 2.6.0's reason (its typo included);
* equal keys of one tuple are one entry; a unique index refuses a key another tuple
  has; a non-unique one orders equal keys by primary key; a search returns a tuple
  once per entry it matches (multikey: index_multikey.py's iteration).

The engine has no Lua: the function is called through `Functions.call`, which the
Lua layer sets (lua/box/func.py) to run the function's body on a tuple and hand back
its results as Python values. Before that (or with no function of that id yet, as
in the middle of a snapshot, where `_index` comes before `_func`) a key cannot be
built. Each tuple's entry keys are kept while it is in the index, so a delete or a
rollback does not depend on calling the function again.
"""
from __future__ import annotations

from typing import Any, Callable

from spindle.core.box.field_types import is_compatible
from spindle.core.box.index import TreeIndex
from spindle.core.box.index_multikey import MultikeyTreeIndex
from spindle.core.iproto.errors import ClientError, ErrorCode

FUNC_SPACE_ID = 296          # _func
# _func fields: language, body, is_deterministic, is_sandboxed, opts
_LANGUAGE, _BODY, _IS_DETERMINISTIC, _IS_SANDBOXED, _OPTS = 4, 5, 11, 12, 15


class Functions:
    """The engine's door to persistent functions: `call(func_id, space_id, tuple)`
    returns the function's results as a list of Python values (or raises), and
    `definition(func_id)` reads its `_func` row."""

    def __init__(self, spaces: dict):
        self._spaces = spaces
        self.call: Callable[[int, int, Any], list] | None = None

    def definition(self, func_id: int) -> Any:
        space = self._spaces.get(FUNC_SPACE_ID)
        if space is None or 0 not in space.indexes:
            return None
        return space.get([func_id])


def _field(row: Any, no: int, default: Any) -> Any:
    return row[no] if len(row) > no else default


def check_func_index(index_def: Any, space_name: str, functions: Functions | None) -> bool:
    """index_def_check(), memtx's check and func_index_check_func() of 2.6.0 for an
    index with opts.func; returns whether the function is multikey."""
    if index_def.id == 0:
        raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name,
                          "primary key can not use a function")
    if str(index_def.type) != "TREE":
        raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name,
                          f"{index_def.type} index can not use a function")
    row = functions.definition(index_def.opts["func"]) if functions is not None else None
    if row is None:
        return False            # (not there yet: a snapshot has _func after _index)
    if (str(row[_LANGUAGE]).upper() != "LUA" or not _field(row, _BODY, "")
            or not _field(row, _IS_DETERMINISTIC, False)
            or not _field(row, _IS_SANDBOXED, False)):
        raise ClientError(ErrorCode.ER_WRONG_INDEX_OPTIONS, 0, "referenced function "
                          "doesn't satisfy functional index function constraints")
    opts = _field(row, _OPTS, {})
    return bool(isinstance(opts, dict) and opts.get("is_multikey"))


class FuncTreeIndex(MultikeyTreeIndex):
    """A TREE index whose entry keys are the function's keys (+ the primary key
    when not unique)."""

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        self.functions: Functions | None = getattr(space, "functions", None)
        self.func_id = index_def.opts["func"]
        check_func_index(index_def, getattr(space, "name", "?"), self.functions)
        TreeIndex.__init__(self, space, index_def, pk_def)
        kd = self.key_def
        self._plain = False
        self._point_lookup = False
        self._search_key = kd.key_sort_key       # entries are tuples of part keys
        self._pk = pk_def
        self._last_entry: dict = {}
        self._entry_key = self._resume_key
        self._kept: dict[int, tuple[Any, list]] = {}   # id(tuple) -> (tuple, entries)
        self._func_row: Any = None

    # -- the keys ---------------------------------------------------------------

    def _func_error(self, code: int, reason: str) -> ClientError:
        return ClientError(code, self.name, self._space_name(), reason)

    def _format_error(self, reason: str) -> ClientError:
        return self._func_error(ErrorCode.ER_FUNC_INDEX_FORMAT, reason)

    def _definition(self) -> Any:
        """The function's _func row (kept once there: a function an index uses
        cannot be dropped)."""
        row = self._func_row
        if row is None and self.functions is not None:
            row = self._func_row = self.functions.definition(self.func_id)
        return row

    def _results(self, tup: Any) -> list:
        functions = self.functions
        call = functions.call if functions is not None else None
        if call is None or self._definition() is None:
            raise self._func_error(ErrorCode.ER_FUNC_INDEX_FUNC, "can't evaluate function")
        try:
            return list(call(self.func_id, getattr(self.space, "id", 0), tup))
        except Exception:   # noqa: BLE001 - any failure of the function is 2.6.0's one error
            raise self._func_error(ErrorCode.ER_FUNC_INDEX_FUNC,
                                   "can't evaluate function") from None

    def _is_multikey(self) -> bool:
        row = self._definition()
        opts = _field(row, _OPTS, {}) if row is not None else {}
        return bool(isinstance(opts, dict) and opts.get("is_multikey"))

    def computed_keys(self, tup: Any) -> list:
        """key_list_iterator of 2.6.0: the function's keys for `tup`, validated."""
        results = self._results(tup)
        if len(results) != 1:
            raise self._format_error("to many values were returned")
        value = _as_array(results[0])
        if self._is_multikey():
            if value is None:
                raise self._format_error("a multikey function mustn't return a scalar")
            keys = [_as_array(item) for item in value]
        else:
            keys = [value]
        kd = self.key_def
        for key in keys:
            if key is None:
                raise self._format_error("supplied key type is invalid: expected array")
            if len(key) != kd.part_count:
                raise self._format_error(
                    f"Invalid key part count in an exact match "
                    f"(expected {kd.part_count}, got {len(key)})")
            for part, value in zip(kd.parts, key):
                if not is_compatible(part.type, value, part.is_nullable):
                    raise self._format_error("key does not follow functional index "
                                             "definition")
        return keys

    def entry_keys(self, tup: Any) -> list:
        return self._entries_of(tup, self.computed_keys(tup))

    def _entries_of(self, tup: Any, keys: list) -> list:
        """The entries of `keys` (computed for `tup`), without repeats, in order."""
        suffix_pk = () if self.unique else self._pk.tuple_sort_key(tup)
        key_sort_key = self.key_def.key_sort_key
        entries: list = []
        seen: set = set()
        for key in keys:
            entry = key_sort_key(key) + suffix_pk
            if entry not in seen:
                seen.add(entry)
                entries.append(entry)
        return entries

    # -- modification: remember each stored tuple's entries ----------------------
    # (replace, insert_raw and build are MultikeyTreeIndex's, through _put)

    def _put(self, tup: Any, entries: list) -> None:
        data = self.ordered()
        for entry in entries:
            data[entry] = tup
        self._kept[id(tup)] = (tup, entries)

    def _delete_raw(self, tup: Any) -> None:
        kept = self._kept.pop(id(tup), None)
        if kept is None:
            return              # (not in the index)
        data = self.ordered()
        for entry in kept[1]:
            data.pop(entry, None)

    def _resume_key(self, tup: Any) -> Any:
        found = self._last_entry.get(self._pk.tuple_key(tup))
        if found is not None:
            return found
        kept = self._kept.get(id(tup))
        if kept is None:
            try:
                entries = self.entry_keys(tup)
            except ClientError:
                entries = []
        else:
            entries = kept[1]
        return entries[0] if entries else ()

    def clear(self) -> None:
        super().clear()
        self._kept.clear()


def _as_array(value: Any) -> list | None:
    """A Lua result as a MsgPack array would carry it (an empty table is one), or None."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict) and not value:
        return []
    return None

