"""The catalogue, built from the rows of the system spaces (DESIGN §5.1: schema is data).

Spaces, indexes, users, privileges, functions, sequences and replicas exist because
rows in `_space`, `_index`, `_user`, `_priv`, `_func`, `_sequence` and `_cluster` say so
(sequence values and links to spaces: sequence.py): on_replace
triggers on those spaces change the in-memory catalogue, so a DDL statement is a DML
statement that replicates and recovers like any other. A change made inside a
transaction is undone by that transaction's rollback.

The system spaces themselves are created at start-up from the definitions in the
bootstrap data (`bootstrap.mp`: the rows a fresh Tarantool 2.6.0 holds), so snapshot
rows of `_schema` (id 272) can be loaded before the `_space` rows (id 280) that
describe them, as Tarantool does with its built-in system space definitions.
"""
from __future__ import annotations

from spindle.core import log

import os
from dataclasses import dataclass, field
from typing import Any, Callable

import msgpack

from spindle.core.iproto.constants import GroupId
from spindle.core.iproto.errors import ClientError, ErrorCode

from . import collation, json_path
from .index import IndexDef
from .key_def import KeyPart
from .sequence import Sequences, check_sequence_part
from .space import Space
from .txn import Engine

# System space ids (schema_def.h facts).
SCHEMA_ID, COLLATION_ID, SPACE_ID, SEQUENCE_ID, SEQUENCE_DATA_ID = 272, 276, 280, 284, 285
INDEX_ID, FUNC_ID, USER_ID, PRIV_ID, CLUSTER_ID = 288, 296, 304, 312, 320
TRUNCATE_ID, SPACE_SEQUENCE_ID = 330, 340
SYSTEM_ID_MIN, SYSTEM_ID_MAX = 256, 511

ADMIN, GUEST, PUBLIC, REPLICATION, SUPER = 1, 0, 2, 3, 31


def load_bootstrap_rows() -> list[tuple[int, list]]:
    with open(os.path.join(os.path.dirname(__file__), "bootstrap.mp"), "rb") as source:
        data = source.read()        # not importlib.resources: ~4 ms of imports a start
    return [(space_id, tup) for space_id, tup in msgpack.unpackb(data, raw=False)]


@dataclass
class User:
    id: int
    owner: int
    name: str
    type: str            # 'user' or 'role'
    auth: dict = field(default_factory=dict)

    @property
    def password_hash(self) -> str | None:
        return self.auth.get("chap-sha1")


@dataclass(frozen=True)
class Grant:
    grantor: int
    grantee: int
    object_type: str
    object_id: Any
    privilege: int


@dataclass
class Func:
    id: int
    owner: int
    name: str
    setuid: int
    language: str
    body: str = ""


class Schema:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.version = 1                   # IPROTO schema_version: bumped on DDL
        self.users: dict[int, User] = {}
        self.grants: set[Grant] = set()
        self.funcs: dict[int, Func] = {}
        self.collations: dict[int, str] = {}
        self.cluster: dict[int, str] = {}  # replica id -> instance uuid
        self.replicaset_uuid: str | None = None
        self.max_id = SYSTEM_ID_MAX
        self.schema_version_row: tuple | None = None
        # replication hooks: fn(replica_id, old_uuid, new_uuid) after a _cluster change
        self.on_cluster_change: list[Callable[[int, str | None, str | None], None]] = []
        # fn(space_id) after a `_space`/`_index` change of that space, or its undo
        # (the Lua box.space follows the catalogue through it)
        self.on_space_change: list[Callable[[int], None]] = []
        # fn(sequence_id) after a `_sequence` change, or its undo (box.sequence)
        self.on_sequence_change: list[Callable[[int], None]] = []
        self.sequences = Sequences(engine)
        self._handlers = {
            SPACE_ID: self._on_space, INDEX_ID: self._on_index, USER_ID: self._on_user,
            PRIV_ID: self._on_priv, FUNC_ID: self._on_func, CLUSTER_ID: self._on_cluster,
            SCHEMA_ID: self._on_schema, TRUNCATE_ID: self._on_truncate,
            COLLATION_ID: self._on_collation, SEQUENCE_ID: self.sequences.on_sequence,
            SEQUENCE_DATA_ID: self.sequences.on_sequence_data,
            SPACE_SEQUENCE_ID: self.sequences.on_space_sequence,
        }

    # ------------------------------------------------------------- start-up

    def create_system_spaces(self, bootstrap_rows: list[tuple[int, list]]) -> None:
        """Create every system space, empty, from the bootstrap `_space`/`_index`
        rows, and hang the catalogue triggers on them."""
        for space_id, tup in bootstrap_rows:
            if space_id == COLLATION_ID:
                self._on_collation(None, tup)
        for space_id, tup in bootstrap_rows:
            if space_id == SPACE_ID:
                self._create_space(tup)
        for space_id, tup in bootstrap_rows:
            if space_id == INDEX_ID:
                self.engine.space(tup[0]).create_index(self._index_def(tup))
        for space_id, handler in self._handlers.items():
            self.engine.space(space_id).on_replace.add(self._trigger(handler))
        # As 2.6.0's memtx gives `_sequence_data` an index of its own kind: a
        # checkpoint (or a JOIN) takes the sequence values, which auto-increment
        # moves without writing that space.
        data = self.engine.space(SEQUENCE_DATA_ID).primary
        assert data is not None
        data.snapshot_tuples = self.sequences.snapshot_tuples  # type: ignore[method-assign]

    def _trigger(self, handler: Callable[[Any, Any], Any]):
        # a sequence value is no schema change (box.sequence.x:next() writes one)
        versioned = handler != self.sequences.on_sequence_data

        def on_replace(old, new, space_name, op):
            undo = handler(old, new)
            if versioned:
                self.version += 1
            txns = self.engine.txns
            if txns.current is not None:
                txns.current.on_rollback.add(lambda txn: self._undo(handler, old, new, undo))
            self._notify(handler, old, new)
        return on_replace

    def _undo(self, handler, old, new, undo) -> None:
        if callable(undo):
            undo()
        else:
            handler(new, old)
        if handler != self.sequences.on_sequence_data:
            self.version += 1
        self._notify(handler, old, new)

    def _notify(self, handler, old, new) -> None:
        """The hooks that follow the catalogue: a space changed (`_space`, `_index`,
        its sequence link) or a sequence did."""
        row = new if new is not None else old
        if handler in (self._on_space, self._on_index, self.sequences.on_space_sequence):
            for hook in self.on_space_change:
                hook(row[0])
        elif handler == self.sequences.on_sequence:
            for hook in self.on_sequence_change:
                hook(row[0])

    # ------------------------------------------------------------------ _space

    def _create_space(self, tup) -> Space:
        space_id, _owner, name, engine_name, field_count, flags, fmt = tup[:7]
        return self.engine.create_space(space_id, name, engine=engine_name,
                                        field_count=field_count, flags=dict(flags or {}),
                                        format=list(fmt or []))

    def _on_space(self, old, new):
        if new is None:                                  # drop
            space = self.engine.space(old[0])
            if space.indexes:
                raise ClientError(ErrorCode.ER_DROP_SPACE, space.name,
                                  "the space has indexes")
            self.engine.drop_space(space.id)
            return lambda: self._restore_space(space)
        existing = self.engine.find_space(new[0])
        if existing is None:                             # create
            if self.engine.find_space(new[2]) is not None:
                raise ClientError(ErrorCode.ER_SPACE_EXISTS, new[2])
            self._create_space(new)
            if new[0] > self.max_id and new[0] <= 0x7fffffff:
                pass   # ids above max_id are fine: box.schema bumps max_id itself
            return None
        # alter (or a system space re-read from a snapshot): undone by altering back
        # (not by handler(new, old), which would drop the space)
        self._alter_space(existing, new)
        return lambda: self._alter_space(existing, old) if old is not None else None

    def _restore_space(self, space: Space) -> None:
        self.engine.spaces[space.id] = space
        self.engine._by_name[space.name] = space

    def _alter_space(self, space: Space, tup) -> None:
        _id, _owner, name, engine_name, field_count, flags, fmt = tup[:7]
        if name != space.name:
            self.engine.rename_space(space.id, name)
        space.flags = dict(flags or {})
        if list(fmt or []) != space.format or field_count != space.field_count:
            space.set_format(list(fmt or []), field_count)

    # ------------------------------------------------------------------ _index

    def _index_def(self, tup) -> IndexDef:
        _space_id, iid, name, index_type, opts, parts = tup[:6]
        return IndexDef(iid, name, index_type,
                        [self._key_part(p, no) for no, p in enumerate(parts, 1)],
                        unique=bool((opts or {}).get("unique", True)), opts=dict(opts or {}))

    def _key_part(self, part, no: int = 1) -> KeyPart:
        if isinstance(part, dict):   # {field=, type=, is_nullable=, collation=, path=}
            collation = part.get("collation")
            if isinstance(collation, int):
                collation = self.collations.get(collation)
            path = part.get("path")
            if path and json_path.parse(path) is None:
                raise ClientError(ErrorCode.ER_WRONG_INDEX_OPTIONS, no, "invalid path")
            return KeyPart(part.get("field", 0), part.get("type", "unsigned"),
                           bool(part.get("is_nullable", False)), collation, path)
        return KeyPart(part[0], part[1])    # the 1.x-style [fieldno, type]

    def _on_index(self, old, new):
        if new is None:
            space = self.engine.space(old[0])
            index = space.index(old[1])
            if old[1] == 0 and space.sequence is not None and len(space.indexes) == 1:
                raise ClientError(ErrorCode.ER_ALTER_SPACE, space.name, "can not drop "
                                  "primary key while space sequence exists")
            space.drop_index(old[1])
            return lambda: self._restore_index(space, index)
        space = self.engine.space(new[0])
        if new[1] == 0 and space.sequence is not None:
            check_sequence_part(self._index_def(new), space.sequence_fieldno,
                                space.sequence_path, space.name)
        if old is not None or new[1] in space.indexes:
            previous = space.indexes.get(new[1])
            if previous is not None and self._same_index(previous.index_def, new):
                return lambda: None       # a system index re-read from a snapshot
            if previous is not None and self._same_index(previous.index_def, new,
                                                         ignore_name=True):
                old_name = previous.name   # a rename: keep the built index
                self._rename_index(previous, new[2])
                return lambda: self._rename_index(previous, old_name)
            before = space.alter_index(self._index_def(new))
            return lambda: space.restore_indexes(before)
        space.create_index(self._index_def(new))
        return lambda: space.drop_index(new[1])

    def _same_index(self, index_def: IndexDef, tup, ignore_name: bool = False) -> bool:
        other = self._index_def(tup)
        name_matches = ignore_name or other.name == index_def.name
        return name_matches and (other.type, other.unique, list(other.key_def.parts)) == \
            (index_def.type, index_def.unique, list(index_def.key_def.parts))

    @staticmethod
    def _rename_index(index, name: str) -> None:
        index.name = name
        index.index_def.name = name

    @staticmethod
    def _restore_index(space: Space, index) -> None:
        space.indexes[index.index_def.id] = index
        space.indexes = dict(sorted(space.indexes.items()))
        space._rebuild_format()

    # ---------------------------------------------------- users, privileges, funcs

    def _on_user(self, old, new):
        if new is None:
            del self.users[old[0]]
        else:
            self.users[new[0]] = User(new[0], new[1], new[2], new[3], dict(new[4] or {}))
        return None

    def _on_priv(self, old, new):
        if old is not None:
            self.grants.discard(Grant(*old[:5]))
        if new is not None:
            self.grants.add(Grant(*new[:5]))
        return None

    def _on_func(self, old, new):
        if new is None:
            del self.funcs[old[0]]
        else:
            self.funcs[new[0]] = Func(new[0], new[1], new[2], new[3], new[4],
                                      new[5] if len(new) > 5 else "")
        return None

    def _on_collation(self, old, new):
        if new is None:
            self.collations.pop(old[0], None)
        else:
            self.collations[new[0]] = new[1]
            if len(new) > 5:    # (an ICU collation's locale and options: collation.py)
                collation.define(new[1], new[3], new[4], new[5])
        return None

    # ----------------------------------------------------- _cluster, _schema, ...

    def _on_cluster(self, old, new):
        if new is None:
            replica_id, uuid = old[0], None
            self.cluster.pop(replica_id, None)
        else:
            replica_id, uuid = new[0], new[1]
            self.cluster[replica_id] = uuid
        for hook in self.on_cluster_change:
            hook(replica_id, old[1] if old is not None else None, uuid)
        return None

    def _on_schema(self, old, new):
        row = new if new is not None else old
        key = row[0]
        value = new[1] if new is not None and len(new) > 1 else None
        if key == "cluster":
            self.replicaset_uuid = value
            if value is not None:
                log.info("cluster uuid %s", value)
        elif key == "max_id":
            self.max_id = value if value is not None else SYSTEM_ID_MAX
        elif key == "version":
            self.schema_version_row = tuple(new[1:]) if new is not None else None
        return None

    def _on_truncate(self, old, new):
        if new is None:
            return None
        space = self.engine.find_space(new[0])
        if space is None:
            return None
        if space.is_temporary or space.is_local:
            self._mark_local_row(new)
        removed = space.truncate()
        return lambda: self._untruncate(space, removed)

    def _mark_local_row(self, new) -> None:
        """2.6.0 logs the truncation of a temporary or local space as a local row."""
        txn = self.engine.txns.current
        for stmt in reversed(txn.statements if txn is not None else []):
            if stmt.new_tuple is new and stmt.row is not None:
                stmt.row.group_id = GroupId.LOCAL
                return

    @staticmethod
    def _untruncate(space: Space, removed: list) -> None:
        for index in space.indexes.values():
            index.build(removed)

    # ---------------------------------------------------------------- lookups

    def user_by_name(self, name: str) -> User | None:
        for user in self.users.values():
            if user.name == name:
                return user
        return None

    def func_by_name(self, name: str) -> Func | None:
        for func in self.funcs.values():
            if func.name == name:
                return func
        return None

    def replica_id_by_uuid(self, uuid: str) -> int | None:
        for replica_id, replica_uuid in self.cluster.items():
            if replica_uuid == uuid:
                return replica_id
        return None
