"""box.space for Lua: the natives behind space and index objects (lua/box/space.lua).

How box.space stays current: Schema calls `on_space_change(space_id)` after every
change of a `_space` or `_index` row and after undoing one (lua/box hooks it), and
`SpaceApi.space_changed` pushes the space's new description (or None: dropped) into
Lua, which updates box.space[id] / box.space[name] and the space's index objects in
place, as Tarantool's on_alter_space trigger does. So box.space is a plain table
(plain field access, printable) and follows DDL from anywhere: Lua, IPROTO,
replication, recovery, and rollbacks.

Blocking rule: every DML may commit (an autocommit statement waits for the WAL), so
space.lua runs DML through wait() wherever Lua can yield, and calls the natives
directly only where it cannot (inside a transaction, nothing waits); both paths run
the same functions here, which take raw Lua arguments and return Lua values. Reads
never block.

Iteration (index:pairs) holds nothing in Python between steps: Lua keeps the key,
the iterator type and the last tuple it handed out, and asks for the next chunk
after that tuple (`iterate_after`), so a chunk never outlives a change made by Lua
DML (space.lua drops the rest of a chunk when any DML ran meanwhile).

Access (access_check_space() of 2.6.0): every read (get, select, count, min, max,
random, len, an index's bsize, pairs when it starts) needs read and every DML write
on the space, for the running fiber's effective user (box.session.su changes it),
with the errors the IPROTO requests give (Access.check_space). Admin, the user of
nearly every statement, costs one comparison; other users' checks that passed are
remembered by the Access object until the schema version moves.
"""
from __future__ import annotations

import itertools
import random
from typing import Any, Callable

from spindle.core import log
from spindle.core.box.access import ADMIN, Priv
from spindle.core.box.index import HashIndex, TreeIndex, _REVERSE
from spindle.core.box.space import NULL_TUPLE, Space
from spindle.core.box.stat import REQUESTS
from spindle.core.iproto.constants import IprotoType, IteratorType
from spindle.core.net.session import SESSION_KEY

from ..errors import LuaError
from ..runtime import read_source

_SELECT = int(IprotoType.SELECT)
# (an enum member read from its class costs ~0.2 µs on Python 3.11: read once)
_R, _W = Priv.R, Priv.W

UINT32_MAX = 4294967295


class SpaceApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        self.tuples = storage.tuples
        self._to_py = runtime.to_py
        self._check = self._access_checker()
        natives = {
            "get": self.get, "select": self.select, "count": self.count,
            "min": self.min, "max": self.max, "random": self.random,
            "len": self.len, "bsize": self.bsize, "index_bsize": self.index_bsize,
            "iterator_check": self.iterator_check, "iterator_next": self.iterator_next,
            "set_trigger": self.set_trigger, "frommap": self.frommap,
        }
        dml = {"insert": self.insert, "replace": self.replace, "update": self.update,
               "upsert": self.upsert, "delete": self.delete}
        natives.update({name: self._in_txn_only(fn) for name, fn in dml.items()})
        bridge = runtime.bridge
        lua_natives = {k: bridge(v, convert_args=False) for k, v in natives.items()}
        for name, rtype in (("insert_fields", IprotoType.INSERT),
                            ("replace_fields", IprotoType.REPLACE)):
            dml[name], lua_natives[name] = self._put_fields(int(rtype))
        chunk = runtime.load(read_source("box/space.lua"), "@box/space.lua")
        self.lua = chunk(runtime.table(lua_natives), runtime.table(dml), runtime.wait,
                         storage.tuple_lua, box_table)
        self._refresh = self.lua[b"refresh"]
        self._run_on_replace = self.lua[b"run_on_replace"]
        self._run_before_replace = self.lua[b"run_before_replace"]
        self.trigger_reset = self.lua[b"trigger_reset"]
        self.installed = False

    @property
    def engine(self):
        return self.storage.box.engine

    # ------------------------------------------------------------ box.space

    def install(self) -> None:
        """Build box.space from the catalogue (after the first box.cfg)."""
        self.installed = True
        for space_id in sorted(self.engine.spaces):
            self.space_changed(space_id)

    def space_changed(self, space_id: int) -> None:
        """Schema hook: push the space's description to Lua. Never raises (it runs
        inside DDL statements and their rollback)."""
        if not self.installed:
            return
        space = self.engine.find_space(space_id)
        try:
            self.runtime.invoke(self._refresh, space_id,
                                None if space is None else describe(space))
        except Exception as exc:   # noqa: BLE001 - a broken box.space must not break DDL
            log.error("box.space update for space %s failed: %s", space_id, exc)

    # ------------------------------------------------------------------ DML

    def _in_txn_only(self, fn: Callable) -> Callable:
        """The native a DML method calls first: `fn` inside a transaction, where
        nothing waits; outside one False, having done nothing (space.lua then calls
        `fn` through wait(), as the autocommit waits for the WAL)."""
        storage = self.storage

        def in_txn_only(*args):
            if storage.box.engine.txns.current is None:
                return False
            return fn(*args)
        return in_txn_only

    def _access_checker(self) -> Callable[[Space, int], None]:
        """check(space, access): Access.check_space for the running fiber's
        effective user (BoxStorage.euid and Session.euid, inline: it runs for every
        statement; an admin's session says so in one flag)."""
        storage, sched = self.storage, self.runtime.sched

        def check(space: Space, access: int) -> None:
            fiber = sched.current
            if fiber is None:
                return                        # (no fiber: no session, admin)
            fiber_storage = fiber.storage
            session = fiber_storage.get(SESSION_KEY)
            if session is None or session.admin_only:
                return                        # (no session: admin)
            su = fiber_storage.get(session._su_key)
            euid = su[-1].id if su else session.user.id
            if euid != ADMIN:
                storage.access.check_space_cached(euid, space, access)
        return check

    def _writable(self, space_id) -> Space:
        box = self.storage.box
        engine = box.engine
        # a space id from Lua is a number (an int when it is one): no conversion
        space = engine.spaces.get(space_id) if type(space_id) is int else None
        if space is None:
            space = engine.space(self._to_py(space_id))
        # (as box_process1: the read-only refusal first, then write access)
        if box.read_only_reasons:
            box.check_writable(space)
        self._check(space, _W)
        return space

    def insert(self, space_id, tup):
        space = self._writable(space_id)
        return self.tuples.to_lua(space.insert(self.tuples.from_lua(tup)))

    def replace(self, space_id, tup):
        space = self._writable(space_id)
        return self.tuples.to_lua(space.replace(self.tuples.from_lua(tup)))

    def _put_fields(self, rtype: int) -> tuple[Callable, Callable]:
        """insert() or replace() (`rtype`: Space.put's) of a tuple whose fields
        space.lua passed one by one (strings, booleans, numbers), as (the blocking
        function, the native space.lua calls first). Both answer True when the
        stored tuple is those fields (Lua builds the result from them).

        The native is called directly, not through bridge(): inside a transaction
        it puts the tuple at once, for half of what a wait() round trip costs;
        outside one it answers False, having done nothing (the autocommit then
        goes through wait(), as it waits for the WAL); an error is (False, the
        Lua error)."""
        writable, plain_fields, to_lua = self._writable, self._plain_fields, self.tuples.to_lua
        error_to_lua = self.runtime.error_to_lua

        def put_fields(space_id, *fields) -> Any:
            space = writable(space_id)
            given = plain_fields(fields)
            result = space.put(given, rtype)
            # the very tuple given is what got stored (a before_replace trigger
            # that changed it returns another one)
            return True if result is given else to_lua(result)

        storage, check, sched = self.storage, self._check, self.runtime.sched

        def put_fields_in_txn(space_id, *fields) -> Any:
            # (the usual case of _writable and _plain_fields inline: a space found
            # by its int id while nothing makes the instance read-only; fields
            # with no string to convert)
            try:
                box = storage.box
                space = box.engine.spaces.get(space_id) if type(space_id) is int else None
                if space is None or box.read_only_reasons:
                    space = writable(space_id)
                txns = space.txns
                txn = txns.open.get(txns.fiber_key())
                if txn is None:
                    return False
                # (check()'s first steps inline: the admin's statements skip the call)
                fiber = sched.current
                if fiber is not None:
                    session = fiber.storage.get(SESSION_KEY)
                    if session is not None and not session.admin_only:
                        check(space, _W)
                given = fields
                for value in fields:
                    if type(value) is bytes:
                        given = plain_fields(fields)
                        break
                result = space.put_in_txn(txn, given, rtype)
                return True if result is given else to_lua(result)
            except Exception as exc:   # noqa: BLE001 - becomes a Lua error
                return False, error_to_lua(exc)
        return put_fields, put_fields_in_txn

    def _plain_fields(self, fields: tuple) -> tuple:
        """to_py() of each plain field, inline: only strings change (to str, bytes
        that are not UTF-8 as surrogate escapes)."""
        for value in fields:
            if type(value) is bytes:
                break
        else:
            return fields        # numbers and booleans only: nothing to convert
        return tuple([v.decode("utf-8", "surrogateescape") if type(v) is bytes else v
                      for v in fields])

    def update(self, space_id, index_id, key, ops):
        space = self._writable(space_id)
        from_lua = self.tuples.from_lua
        return self.tuples.to_lua(space.update(from_lua(key), from_lua(ops),
                                               index_id=self._to_py(index_id)))

    def upsert(self, space_id, tup, ops):
        space = self._writable(space_id)
        from_lua = self.tuples.from_lua
        space.upsert(from_lua(tup), from_lua(ops))

    def delete(self, space_id, index_id, key):
        space = self._writable(space_id)
        return self.tuples.to_lua(space.delete(self.tuples.from_lua(key),
                                               index_id=self._to_py(index_id)))

    # ---------------------------------------------------------------- reads

    def _index(self, space_id, index_id):
        """check_index() of 2.6.0: the space, read access to it, then the index."""
        space = self.engine.space(self._to_py(space_id))
        self._check(space, _R)
        return space.index(self._to_py(index_id))

    def get(self, space_id, index_id, key):
        REQUESTS[_SELECT] += 1                      # box.stat(): as box_index_get
        return self.tuples.to_lua(self._index(space_id, index_id).get(self._to_py(key)))

    def select(self, space_id, index_id, key, iterator, offset, limit):
        REQUESTS[_SELECT] += 1
        index = self._index(space_id, index_id)
        limit = self._to_py(limit)
        rows = index.select(self._to_py(key), self._to_py(iterator),
                            offset=int(self._to_py(offset)),
                            limit=None if limit >= UINT32_MAX else int(limit))
        return self.tuples.list_to_lua(rows)

    def count(self, space_id, index_id, key, iterator):
        return self._index(space_id, index_id).count(self._to_py(key), self._to_py(iterator))

    def min(self, space_id, index_id, key):
        return self.tuples.to_lua(self._index(space_id, index_id).min(self._to_py(key)))

    def max(self, space_id, index_id, key):
        return self.tuples.to_lua(self._index(space_id, index_id).max(self._to_py(key)))

    def random(self, space_id, index_id, rnd):
        index = self._index(space_id, index_id)
        if index.type.value == "BITSET":     # (memtx's BITSET has no random())
            raise index.unsupported("random()")
        size = len(index)
        if size == 0:
            return None
        seed = self._to_py(rnd)
        position = int(seed if seed is not None else random.getrandbits(32)) % size
        return self.tuples.to_lua(next(itertools.islice(index.tuples(), position, None)))

    def len(self, space_id, index_id):
        return len(self._index(space_id, index_id))

    def bsize(self, space_id):
        return self.engine.space(self._to_py(space_id)).bsize()

    def index_bsize(self, space_id, index_id):
        return self._index(space_id, index_id).bsize()

    def iterator_check(self, space_id, index_id, key, iterator) -> None:
        """Validate key and iterator type when pairs() is called, as Tarantool does."""
        REQUESTS[_SELECT] += 1                      # (box_index_iterator counts it)
        self._index(space_id, index_id).pairs(self._to_py(key), self._to_py(iterator))

    def iterator_next(self, space_id, index_id, key, iterator, after, count):
        """Up to `count` tuples of the iteration, continuing after tuple `after`
        (access was checked when it started, as 2.6.0 checks it once per iterator)."""
        index = self.engine.space(self._to_py(space_id)).index(self._to_py(index_id))
        key, iterator = self._to_py(key), self._to_py(iterator)
        if after is None:
            source = index.pairs(key, iterator)
        else:
            it, key = index._prepare(key, iterator)
            source = iterate_after(index, it, key, self._to_py(after))
        return self.tuples.list_to_lua(list(itertools.islice(source, int(count))))

    def frommap(self, space_id, mapping):
        """space:frommap(): a tuple built from {field name = value}, checked against
        the space format."""
        space = self.engine.space(self._to_py(space_id))
        values = self._to_py(mapping)
        names = space.field_names
        fields: list[Any] = []
        for name, value in (values.items() if isinstance(values, dict) else ()):
            no = names.get(name) if isinstance(name, str) else None
            if no is None:
                raise LuaError(f"Unknown field '{name}'")
            fields.extend([None] * (no + 1 - len(fields)))
            fields[no] = value
        space.validate_tuple(fields)
        return self.tuples.to_lua(fields)

    # ------------------------------------------------------------- triggers

    def set_trigger(self, space_id, kind, on) -> None:
        """Install (or remove) the one Python trigger that runs a space's Lua
        triggers of `kind` ('on_replace' or 'before_replace')."""
        space = self.engine.space(self._to_py(space_id))
        kind = self._to_py(kind)
        triggers = space.on_replace if kind == "on_replace" else space.before_replace
        installed = getattr(space, "_lua_" + kind, None)
        if on and installed is None:
            make = self._on_replace_trigger if kind == "on_replace" else self._before_trigger
            dispatcher = make(space.id)
            setattr(space, "_lua_" + kind, dispatcher)
            triggers.add(dispatcher)
        elif not on and installed is not None:
            triggers.remove(installed)
            setattr(space, "_lua_" + kind, None)

    def _on_replace_trigger(self, space_id: int) -> Callable:
        invoke, to_lua, run = self.runtime.invoke, self.tuples.to_lua, self._run_on_replace

        def on_replace(old, new, space_name, op):
            invoke(run, space_id, to_lua(old), to_lua(new), space_name, op)
        return on_replace

    def _before_trigger(self, space_id: int) -> Callable:
        invoke, to_lua, run = self.runtime.invoke, self.tuples.to_lua, self._run_before_replace
        from_lua = self.tuples.from_lua

        def before_replace(old, new, space_name, op):
            result = invoke(run, space_id, to_lua(old), to_lua(new), space_name, op)
            kind = result[0] if result else 0
            if kind == 0:
                return None            # nothing changed
            if kind == 1:
                return NULL_TUPLE      # `return nil`: skip the statement
            if kind == 3:
                return old             # the old tuple: skip as well
            return tuple(from_lua(result[1]))
        return before_replace


# -------------------------------------------------------------------- helpers

def describe(space: Space) -> dict:
    """What a Lua space object shows, plus the format names for tuples."""
    flags = space.flags
    return {
        "id": space.id,
        "name": space.name,
        "engine": space.engine,
        "field_count": space.field_count,
        "temporary": bool(flags.get("temporary")),
        "is_local": space.is_local,
        "is_sync": space.is_sync,
        "enabled": 0 in space.indexes,
        "names": {name: no + 1 for name, no in space.field_names.items()},
        "indexes": [describe_index(space, index) for index in space.indexes.values()],
    }


def describe_index(space: Space, index) -> dict:
    parts = []
    for part in index.key_def.parts:
        shown = {"type": part.type.value, "is_nullable": part.is_nullable,
                 "fieldno": part.fieldno + 1}
        if part.collation is not None:
            shown["collation"] = part.collation
        path = getattr(part, "path", None)
        if path:
            shown["path"] = path
        parts.append(shown)
    described = {"id": index.id, "name": index.name, "type": index.type.value,
                 "unique": index.unique, "space_id": space.id, "parts": parts}
    if index.type.value in ("BITSET", "RTREE"):
        # (2.6.0's index objects of these kinds have no `unique`; an RTREE shows
        # its dimension)
        del described["unique"]
        if index.type.value == "RTREE":
            described["dimension"] = index.dimension
    func_id = index.index_def.opts.get("func")
    if func_id is not None:     # (a functional index: index_func.py)
        row = space.functions.definition(func_id)
        described["func"] = {"fid": func_id, "name": row[2] if row is not None else None}
    if index.id == 0 and space.sequence is not None:
        described["sequence_id"] = space.sequence.id
        described["sequence_fieldno"] = space.sequence_fieldno + 1
        if space.sequence_path is not None:
            described["sequence_path"] = space.sequence_path
    return described


def iterate_after(index, it: IteratorType, key: list, after: Any):
    """The rest of an iteration of `index` (type `it`, search key `key`) that has
    handed out tuple `after`: what the index's own iterator would return next,
    re-seeking from `after`'s position (it may have been deleted meanwhile)."""
    if hasattr(index, "resume_after"):      # (multikey: index_multikey.py)
        return index.resume_after(it, key, tuple(after))
    if isinstance(index, TreeIndex):
        return _tree_after(index, it, key, after)
    if isinstance(index, HashIndex):
        return _hash_after(index, it, after)
    return _scan_after(index, it, key, after)


def _scan_after(index, it: IteratorType, key: list, after: Any):
    """BITSET, RTREE (index_kinds.py): the iteration again, past tuple `after` (the
    rest of it, if `after` has gone meanwhile)."""
    source = index._iterate(it, key)
    after = tuple(after)
    for tup in source:
        if tup == after:        # (no two tuples of a space are equal)
            break
    yield from source


def _tree_after(index: TreeIndex, it: IteratorType, key: list, after: Any):
    data = index.ordered()
    m = len(key)
    reverse = it in _REVERSE
    stop_on_mismatch = m > 0 and it in (IteratorType.EQ, IteratorType.REQ)
    prefix = index._prefix(key) if stop_on_mismatch else None
    current = index._entry_key(after)
    keys = data.keys()
    while True:
        index.ordered()         # (keys added since the last step join the order)
        pos = data.bisect_left(current) - 1 if reverse else data.bisect_right(current)
        if not 0 <= pos < len(data):
            return
        current = keys[pos]
        if stop_on_mismatch and not index._starts_with(current, prefix, m):
            return
        yield data[current]


def _hash_after(index: HashIndex, it: IteratorType, after: Any):
    if it is IteratorType.EQ:
        return
    data = index._data
    keys = list(data)
    try:
        start = keys.index(index._entry_key(after)) + 1
    except ValueError:
        return    # the last tuple is gone: its place in the table is unknown
    for k in keys[start:]:
        tup = data.get(k)
        if tup is not None:
            yield tup
