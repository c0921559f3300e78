"""DDL as DML: box.schema.space/index/user/role/func/sequence of Tarantool 2.6.0.

Every call writes rows into the system spaces, in the order and with the contents
2.6.0's schema.lua writes them (DESIGN §5.1); the on_replace triggers of schema.py
turn the rows into spaces, indexes, users and grants. Nothing here touches the
catalogue itself.

What 2.6.0 checks where, and therefore here in the same order:

* schema.lua: argument and option checks (ER_ILLEGAL_PARAMS texts), existence
  (SPACE_EXISTS, USER_EXISTS, ...), name resolution through the `_v*` views (which
  show a non-admin only what it may see), grant/revoke bookkeeping with LuaJIT's
  32-bit signed bit operations (granting on top of ALL writes -1: a field type
  error, as in 2.6.0).
* box_process1: every read and write of a system space needs read/write access on
  it (checked when an `Access` is given; without one the caller acts as admin).
* the C triggers of alter.cc: row validation (identifiers, ids, formats, engines,
  ...) and access_check_ddl / priv_def_check. They run here just before the row is
  written, so a refused statement leaves nothing behind.

2.6.0 commits each of these statements on its own. With `atomic=True` (the default)
one call is one transaction instead, nested in the caller's transaction when one is
open; the rows are the same. `atomic=False` reproduces 2.6.0's boundaries.
"""
from __future__ import annotations

import contextlib
import re
import time
from typing import Any, Callable, Iterator

from spindle.core.box.access import VIEW_SOURCE, Access, Priv
from spindle.core.box.alter import (
    CK_CONSTRAINT, COLLATION, FK_CONSTRAINT, FUNC, FUNC_INDEX, INDEX, SCHEMA, SPACE,
    SYSTEM_ID_MAX, TRIGGER, TRUNCATE, USER, VFUNC, VINDEX, VPRIV, VSPACE, VUSER, AlterChecks,
)
from spindle.core.box.ddl_sequences import SequenceDdl
from spindle.core.box.ddl_users import (
    UserDdl, check_options, check_param, illegal, lua_pairs, lua_type,
)
from spindle.core.iproto.errors import ClientError, ErrorCode as E

SPACE_OPTIONS = {"if_not_exists": "boolean", "engine": "string", "id": "number",
                 "field_count": "number", "user": "string, number", "format": "table",
                 "is_local": "boolean", "temporary": "boolean", "is_sync": "boolean"}
INDEX_OPTIONS = {"unique": "boolean", "dimension": "number", "distance": "string",
                 "run_count_per_level": "number", "run_size_ratio": "number",
                 "range_size": "number", "page_size": "number", "bloom_fpr": "number",
                 "func": "number, string"}
ALTER_INDEX_OPTIONS = {"id": "number", "name": "string", "type": "string", "parts": "table",
                       "sequence": "boolean, number, string, table", **INDEX_OPTIONS}
CREATE_INDEX_OPTIONS = {**ALTER_INDEX_OPTIONS, "if_not_exists": "boolean"}
INDEX_OPT_ORDER = ("dimension", "unique", "distance", "page_size", "range_size",
                   "run_count_per_level", "run_size_ratio", "bloom_fpr", "func")
# type -> (default parts, default unique)
INDEX_TYPE_DEFAULTS: dict[str, tuple[list[Any], bool]] = {
    "rtree": ([2, "array"], False), "bitset": ([2, "unsigned"], False)}
PART_TYPE_ALIASES = {"num": "unsigned", "uint": "unsigned", "str": "string",
                     "int": "integer", "*": "any"}
FUNC_OPTIONS = {"setuid": "boolean", "if_not_exists": "boolean", "language": "string",
                "body": "string", "is_deterministic": "boolean", "is_sandboxed": "boolean",
                "comment": "string", "param_list": "table", "returns": "string",
                "exports": "table", "opts": "table"}

# ------------------------------------------------------------------------ Ddl

class Ddl(SequenceDdl, UserDdl):
    """box.schema.space/index/func (users and grants: UserDdl; sequences and the
    index option: SequenceDdl)."""

    def __init__(self, engine: Any, schema: Any, current_user_id: Callable[[], int], *,
                 session_user_id: Callable[[], int] | None = None,
                 access: Access | None = None, atomic: bool = True,
                 clock: Callable[[], float] = time.time,
                 check_writable: Callable[[Any], None] | None = None):
        self.engine = engine
        self.schema = schema
        self.current_user_id = current_user_id
        self.session_user_id = session_user_id or current_user_id
        self.access = access
        self.atomic = atomic
        self.clock = clock
        self.check_writable = check_writable    # ER_READONLY, before access (box_process1)
        self._su: list[int] = []
        self.checks = AlterChecks(engine, schema, access, self._euid)

    # ------------------------------------------------------------ plumbing

    def _euid(self) -> int:
        return self._su[-1] if self._su else self.current_user_id()

    @contextlib.contextmanager
    def _as(self, user_id: int) -> Iterator[None]:
        """box.session.su(user, fn): the effective user for the nested statements."""
        self._su.append(user_id)
        try:
            yield
        finally:
            self._su.pop()

    def _run(self, fn: Callable, *args: Any) -> Any:
        txns = self.engine.txns
        if not self.atomic or txns.current is not None:
            return fn(*args)
        return txns.atomic(fn, *args)

    def _read(self, space_id: int) -> Any:
        space = self.engine.space(space_id)
        if self.access is not None:
            self.access.check_space(self._euid(), space, Priv.R)
        return space

    def _write(self, space_id: int, method: str, *args: Any, check: Callable | None = None,
               **kwargs: Any) -> Any:
        """One DML statement on a system space: write access (box_process1), then the
        checks of its C trigger, then the statement."""
        space = self.engine.space(space_id)
        if self.check_writable is not None:
            self.check_writable(space)
        if self.access is not None:
            self.access.check_space(self._euid(), space, Priv.W)
        if check is not None:
            check()
        return getattr(space, method)(*args, **kwargs)

    def _view(self, view_id: int, key: Any = None, index: int = 0, iterator: Any = None) -> list:
        """A select from a `_v*` view: read access on it, rows filtered for the user."""
        self._read(view_id)
        rows = self.engine.space(VIEW_SOURCE[view_id]).select(key, index, iterator)
        if self.access is None:
            return rows
        uid = self._euid()
        return [row for row in rows if self.access.visible(uid, view_id, row)]

    def _view_get(self, view_id: int, key: Any, index: int = 0) -> Any:
        rows = self._view(view_id, key, index)
        return rows[0] if rows else None

    def _auto_increment(self, space_id: int, tail: list,
                        check: Callable[[list], None] | None = None) -> tuple:
        """space:auto_increment(): id = primary key max + 1 (read, then insert);
        `check(row)`: the trigger's checks (_user's and _func's by default)."""
        last = self._read(space_id).index(0).max()
        row = [(last[0] if last else 0) + 1, *tail]
        if check is None:
            check = (lambda row: self.checks.user_row(None, row)) if space_id == USER \
                else self.checks.func_row
        return self._write(space_id, "insert", row, check=lambda: check(row))

    # ------------------------------------------------------------ resolving

    def _user_row(self, name_or_id: Any) -> Any:
        if isinstance(name_or_id, str):
            return self._view_get(VUSER, [name_or_id], 2)
        if name_or_id is None:
            return None
        return self._view_get(VUSER, [name_or_id])

    def _resolve(self, name_or_id: Any, kind: str | None) -> int | None:
        row = self._user_row(name_or_id)
        if row is None or (kind is not None and row[3] != kind):
            return None
        return row[0]

    def _find_space(self, id_or_name: Any) -> Any:
        return self.engine.find_space(id_or_name) if isinstance(id_or_name, (int, str)) else None

    def _func_row(self, name_or_id: Any) -> Any:
        if isinstance(name_or_id, str):
            return self._view_get(VFUNC, [name_or_id], 2)
        return self._view_get(VFUNC, [name_or_id]) if isinstance(name_or_id, int) else None

    def _collation_id(self, name: Any) -> int | None:
        row = self._read(COLLATION).get([name], 1) if isinstance(name, str) else None
        return row[0] if row is not None else None

    # ================================================================ spaces

    def space_create(self, name: Any, options: Any = None) -> Any:
        """box.schema.space.create(): UPDATE _schema max_id, INSERT _space. Returns the
        Space (the existing one with if_not_exists)."""
        check_param(name, "name", "string")
        opts = {"engine": "memtx", "field_count": 0, "temporary": False,
                **check_options(options, SPACE_OPTIONS)}
        return self._run(self._space_create, name, opts)

    def _space_create(self, name: str, opts: dict) -> Any:
        existing = self.engine.find_space(name)
        if existing is not None:
            if opts.get("if_not_exists"):
                return existing
            raise ClientError(E.ER_SPACE_EXISTS, name)
        space_id = opts.get("id")
        if space_id is None:
            row = self._write(SCHEMA, "update", ["max_id"], [["+", 2, 1]])
            if row is None:
                last = self._read(SPACE).index(0).max()
                space_id = max(last[0] if last else 0, SYSTEM_ID_MAX)
                row = self._write(SCHEMA, "insert", ["max_id", space_id + 1])
            space_id = row[1]
        uid: int | None = self._euid()
        if opts.get("user") is not None:
            uid = self._resolve(opts["user"], None)
            if uid is None:
                raise ClientError(E.ER_NO_SUCH_USER, opts["user"])
        fmt = opts.get("format") or []
        check_param(fmt, "format", "table")
        flags: dict = {}
        if opts.get("is_local"):
            flags["group_id"] = 1
        if opts.get("temporary"):
            flags["temporary"] = True
        if opts.get("is_sync") is not None:
            flags["is_sync"] = opts["is_sync"]
        row = [space_id, uid, name, opts["engine"], opts["field_count"], flags,
               self.update_format(fmt)]
        self._write(SPACE, "insert", row,
                    check=lambda: self.checks.space_row(row, E.ER_CREATE_SPACE))
        return self.engine.space(space_id)

    def update_format(self, fmt: Any) -> list[dict]:
        """update_format(): user format entries -> `_space` format maps."""
        result = []
        for i, (_, given) in enumerate(lua_pairs(fmt), 1):
            field: dict = {}
            if lua_type(given) != "table":
                field["name"] = given
            else:
                items = lua_pairs(given)
                keys = {k for k, _ in items}
                for key, value in items:
                    if key == 1:
                        if "name" in keys:
                            field["type" if "type" not in keys else 1] = value
                        else:
                            field["name"] = value
                    elif key == 2 and "type" not in keys and "name" not in keys:
                        field["type"] = value
                    elif key == "collation":
                        coll = self._collation_id(value)
                        if coll is None:
                            raise illegal(f"format[{i}]: collation was not found "
                                          f"by name '{value}'")
                        field[key] = coll
                    else:
                        field[key] = value
            if not isinstance(field.get("name"), str):
                raise illegal(f"format[{i}]: name (string) is expected")
            if field.get("type") is None:
                field["type"] = "any"
            elif not isinstance(field["type"], str):
                raise illegal(f"format[{i}]: type must be a string")
            result.append(field)
        return result

    def _space_row(self, space_id: Any) -> Any:
        space = self.engine.find_space(SPACE)
        return space.get([space_id]) if isinstance(space_id, int) else None

    def _alter_space_row(self, space_id: int, ops: list) -> Any:
        """UPDATE _space (rename, format), checked as an altered definition."""
        return self._write(SPACE, "update", [space_id], ops,
                           check=lambda: self.checks.space_update(space_id, ops))

    def space_format(self, space_id: Any, fmt: Any = None) -> Any:
        """box.schema.space.format(id[, format])."""
        check_param(space_id, "id", "number")
        if fmt is None:
            row = self._view_get(VSPACE, [space_id])
            if row is None:
                raise ClientError(E.ER_NO_SUCH_SPACE, f"#{space_id}")
            return row[6]
        check_param(fmt, "format", "table")
        return self._run(lambda: self._alter_space_row(
            space_id, [["=", 7, self.update_format(fmt)]]))

    def space_rename(self, space_id: Any, name: Any) -> None:
        check_param(space_id, "space_id", "number")
        check_param(name, "space_name", "string")
        self._run(self._alter_space_row, space_id, [["=", 3, name]])

    def space_drop(self, space_id: Any, space_name: Any = None, options: Any = None) -> None:
        """box.schema.space.drop(): sequence link, triggers, constraints, indexes
        (secondary first), grants on it, _truncate, then _space."""
        check_param(space_id, "space_id", "number")
        opts = check_options(options, {"if_exists": "boolean"})
        self._run(self._space_drop, space_id, space_name, opts)

    def _space_drop(self, space_id: int, space_name: Any, opts: dict) -> None:
        self._drop_space_sequence(space_id)
        for row in self._read(TRIGGER).select([space_id], 1):
            self._write(TRIGGER, "delete", [row[0]])
        for row in self._read(FK_CONSTRAINT).select([space_id], 1):
            self._write(FK_CONSTRAINT, "delete", [row[0], space_id])
        for row in self._read(CK_CONSTRAINT).select([space_id]):
            self._write(CK_CONSTRAINT, "delete", [space_id, row[1]])
        for row in self._read(FUNC_INDEX).select([space_id]):
            self._write(FUNC_INDEX, "delete", [space_id, row[1]])
        for row in reversed(self._view(VINDEX, [space_id])):
            self._index_delete(row[0], row[1])
        self._revoke_object_privs("space", space_id)
        self._write(TRUNCATE, "delete", [space_id])
        old = self._space_row(space_id)
        if self._write(SPACE, "delete", [space_id],
                       check=lambda: self.checks.space_drop(old)) is None and \
                not opts.get("if_exists"):
            raise ClientError(E.ER_NO_SUCH_SPACE,
                              space_name if space_name is not None else f"#{space_id}")

    def space_truncate(self, space_id: Any) -> None:
        """space:truncate(): UPSERT _truncate {id, 1} with {{'+', 1, 1}} (0-based)."""
        space = self.engine.space(space_id)
        self._run(lambda: self._write(TRUNCATE, "upsert", [space.id, 1], [["+", 1, 1]],
                                      index_base=0, check=lambda: self.checks.truncate(space)))

    def _revoke_object_privs(self, object_type: str, object_id: Any) -> None:
        for row in self._view(VPRIV, [object_type, object_id], 2):
            self._priv_delete(row)

    # =============================================================== indexes

    def index_create(self, space_id: Any, name: Any, options: Any = None) -> Any:
        """box.schema.index.create(): INSERT _index. Returns the new Index."""
        check_param(space_id, "space_id", "number")
        check_param(name, "name", "string")
        opts = check_options(options, CREATE_INDEX_OPTIONS)
        space = self.engine.find_space(space_id)
        if space is None:
            raise ClientError(E.ER_NO_SUCH_SPACE, f"#{space_id}")
        return self._run(self._index_create, space, name, opts)

    def _space_format(self, space: Any) -> list:
        row = self._view_get(VSPACE, [space.id])
        return list(row[6]) if row is not None else []

    def _index_create(self, space: Any, name: str, opts: dict) -> Any:
        fmt = self._space_format(space)
        opts = {"type": "tree", **opts}
        default_parts, default_unique = INDEX_TYPE_DEFAULTS.get(opts["type"],
                                                                ([1, "unsigned"], True))
        if opts.get("parts") is None:
            fieldno = default_parts[0]
            if len(fmt) >= fieldno and fmt[fieldno - 1].get("type") != "any":
                opts["parts"] = [[fieldno, fmt[fieldno - 1].get("type")]]
        opts = {"parts": default_parts, "unique": default_unique, **opts}
        if self._view_get(VINDEX, [space.id, name], 2) is not None:
            if opts.get("if_not_exists"):
                return space.index(name)
            raise ClientError(E.ER_INDEX_EXISTS, name)
        iid = opts.get("id")
        if iid is None:
            iid = 0
            last = self._view(VINDEX, [space.id], 0, "LE")
            if last and last[0][0] == space.id:
                iid = last[0][1] + 1
        parts = self._index_parts(fmt, opts["parts"])
        index_opts = {k: opts[k] for k in INDEX_OPT_ORDER if opts.get(k) is not None}
        if isinstance(index_opts.get("func"), str):
            index_opts["func"] = self._func_id_by_name(index_opts["func"])
        proxy = self._space_sequence_prepare(fmt, parts, opts, space, iid, name)
        row = [space.id, iid, name, opts["type"], index_opts, parts]
        self._write(INDEX, "insert", row, check=lambda: self.checks.index_row(space, row, Priv.C))
        self._space_sequence_commit(proxy)
        if index_opts.get("func") is not None:
            self._write(FUNC_INDEX, "insert", [space.id, iid, index_opts["func"]])
        return space.index(iid)

    def _func_id_by_name(self, name: str) -> int:
        row = self._read(FUNC).get([name], 2)
        if row is None:
            raise ClientError(E.ER_NO_SUCH_FUNCTION, name)
        return row[0]

    def _index_parts(self, fmt: list, parts: Any) -> list:
        """update_index_parts() + type aliases + simplify_index_parts()."""
        if lua_type(parts) != "table":
            raise illegal("options.parts parameter should be a table")
        items = [v for _, v in lua_pairs(parts)]
        if not items:
            raise illegal("options.parts must have at least one part")
        second = items[1] if len(items) > 1 else None
        if lua_type(items[0]) == "number" and lua_type(second) == "string":
            result, simple = self._parts_1_6(items), True
        else:
            result, simple = [], True
            for i, given in enumerate(items, 1):
                part, plain = self._part(fmt, i, given)
                simple = simple and plain
                result.append(part)
        for part in result:
            if isinstance(part.get("type"), str):
                lowered = part["type"].lower()
                part["type"] = PART_TYPE_ALIASES.get(lowered, lowered)
        if simple:
            return [[part["field"], part["type"]] for part in result]
        return result

    @staticmethod
    def _parts_1_6(items: list) -> list:
        if len(items) % 2:
            raise illegal("options.parts: expected field_no (number), type (string) pairs")
        result = []
        for no, ftype in zip(items[::2], items[1::2]):
            if lua_type(no) != "number":
                raise illegal("options.parts: expected field_no (number), type (string) pairs")
            if no == 0:
                raise illegal("invalid index parts: field_no must be one-based")
            if lua_type(ftype) != "string":
                raise illegal("options.parts: expected field_no (number), type (string) pairs")
            result.append({"field": no - 1, "type": ftype})
        return result

    def _part(self, fmt: list, i: int, given: Any) -> tuple[dict, bool]:
        part: dict = {}
        simple = True
        if lua_type(given) != "table":
            part["field"] = given
        else:
            for key, value in lua_pairs(given):
                if key in (1, "field"):
                    part["field"] = value
                elif key in (2, "type"):
                    part["type"] = value
                elif key == "collation":
                    coll = self._collation_id(value)
                    if coll is None and isinstance(value, str):
                        coll = self._collation_id(value.lower())
                    if coll is None:
                        raise illegal(f"options.parts[{i}]: collation was not found "
                                      f"by name '{value}'")
                    part[key], simple = coll, False
                else:
                    part[key], simple = value, False
        where = f"options.parts[{i}]"
        if lua_type(part.get("field")) not in ("number", "string"):
            raise illegal(f"{where}: field (name or number) is expected")
        part["field"], path = self._resolve_field(fmt, part["field"], where)
        if path is not None:
            part["path"] = path
        simple = simple and part.get("path") is None
        spec = fmt[part["field"]] if part["field"] < len(fmt) else {}
        if part.get("type") is None:
            part["type"] = spec.get("type") or "scalar"
        elif lua_type(part["type"]) != "string":
            raise illegal(f"{where}: type (string) is expected")
        if part.get("is_nullable") is None:
            if spec.get("is_nullable"):
                part["is_nullable"], simple = True, False
        elif lua_type(part["is_nullable"]) != "boolean":
            raise illegal(f"{where}: type (boolean) is expected")
        if part.get("action") is None and spec.get("action") is not None:
            part["action"], simple = spec["action"], False
        return part, simple

    @staticmethod
    def _resolve_field(fmt: list, path: Any, where: str) -> tuple[int, str | None]:
        """format_field_resolve(): 1-based number, field name, or JSON path."""
        names = {f.get("name"): no for no, f in enumerate(fmt, 1)}
        rest = None
        if lua_type(path) == "number":
            idx = path
        elif path in names:
            idx = names[path]
        else:
            idx = None
            for pattern, skip in ((r"^\[(\d+)\]", 2), (r"^\[\"([^\]]+)\"\]", 4),
                                  (r"^\['([^\]]+)'\]", 4), (r"^([^.\[]+)", 0)):
                m = re.match(pattern, path)
                if m is None:
                    continue
                token = m.group(1)
                idx = int(token) if skip == 2 else names.get(token)
                if idx is not None:
                    rest = path[len(token) + skip:]
                    break
            if idx is None:
                raise illegal(f"{where}: field was not found by name '{path}'")
        if idx <= 0:
            raise illegal(f"{where}: field (number) must be one-based")
        return int(idx) - 1, rest

    def _index_delete(self, space_id: int, iid: int) -> Any:
        exists = self.engine.space(INDEX).get([space_id, iid]) is not None
        check = (lambda: self.checks.index_drop(space_id, iid)) if exists else None
        return self._write(INDEX, "delete", [space_id, iid], check=check)

    def index_drop(self, space_id: Any, index_id: Any) -> None:
        """box.schema.index.drop(): (primary: the sequence link), func index, _index."""
        check_param(space_id, "space_id", "number")
        check_param(index_id, "index_id", "number")

        def drop():
            if index_id == 0:
                self._drop_space_sequence(space_id)
            for row in self._read(FUNC_INDEX).select([space_id, index_id]):
                self._write(FUNC_INDEX, "delete", [row[0], row[1]])
            self._index_delete(space_id, index_id)
        self._run(drop)

    def index_rename(self, space_id: Any, index_id: Any, name: Any) -> None:
        check_param(space_id, "space_id", "number")
        check_param(index_id, "index_id", "number")
        check_param(name, "name", "string")
        self._run(self._index_update, space_id, index_id, [["=", 3, name]])

    def _index_update(self, space_id: int, index_id: int, ops: list) -> Any:
        return self._write(INDEX, "update", [space_id, index_id], ops,
                           check=lambda: self.checks.index_update(space_id, index_id, ops))

    def index_alter(self, space_id: Any, index_id: Any, options: Any = None) -> None:
        """box.schema.index.alter(): UPDATE (id/name/type only) or REPLACE _index."""
        space = self._find_space(space_id)
        if space is None:
            raise ClientError(E.ER_NO_SUCH_SPACE, f"#{space_id}")
        try:
            index = space.index(index_id)
        except ClientError:
            raise ClientError(E.ER_NO_SUCH_INDEX_ID, index_id, space.name) from None
        if options is None:
            return
        opts = check_options(options, ALTER_INDEX_OPTIONS)
        self._run(self._index_alter, space, index.index_def.id, opts)

    def _index_alter(self, space: Any, iid: int, opts: dict) -> None:
        fmt = self._space_format(space)
        if opts.get("id") is not None:
            extra = [k for k in opts if k not in ("id", "name", "type")]
            if extra:
                raise ClientError(E.ER_PROC_LUA, "Don't know how to update both id and" +
                                  "".join(" " + str(k) for k in extra))
            ops = [["=", no, opts[key]] for key, no in (("id", 2), ("name", 3), ("type", 4))
                   if opts.get(key)]
            self._index_update(space.id, iid, ops)
            return
        old = self._read(INDEX).get([space.id, iid])
        index_opts, parts = dict(old[4] or {}), list(old[5])
        name = opts.get("name", old[2])
        kind = opts.get("type", old[3])
        for key in INDEX_OPTIONS:
            if opts.get(key) is not None:
                index_opts[key] = opts[key]
        if opts.get("parts") is not None:
            parts = self._index_parts(fmt, opts["parts"])
        if isinstance(index_opts.get("func"), str):
            index_opts["func"] = self._func_id_by_name(index_opts["func"])
        proxy = self._space_sequence_prepare(fmt, parts, opts, space, iid, name)
        row = [space.id, iid, name, kind, index_opts, parts]
        self._write(INDEX, "replace", row, check=lambda: self.checks.index_row(space, row, Priv.A))
        if index_opts.get("func") is not None:
            self._write(FUNC_INDEX, "insert", [space.id, iid, index_opts["func"]])
        self._space_sequence_commit(proxy)

    # ============================================================== functions

    def func_create(self, name: Any, options: Any = None) -> int | None:
        """box.schema.func.create(): INSERT _func (id = max + 1). Returns the id."""
        opts = check_options(options, FUNC_OPTIONS)
        if self._func_row(name) is not None:
            if not opts.get("if_not_exists"):
                raise ClientError(E.ER_FUNCTION_EXISTS, name)
            return None
        now = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.clock()))
        opts = {"setuid": False, "language": "lua", "body": "", "routine_type": "function",
                "returns": "any", "param_list": [], "aggregate": "none",
                "sql_data_access": "none", "is_deterministic": False, "is_sandboxed": False,
                "is_null_call": True, "exports": ["LUA"], "opts": {}, "comment": "",
                "created": now, "last_altered": now, **opts}
        tail = [self._euid(), name, 1 if opts["setuid"] else 0, opts["language"].upper(),
                *(opts[k] for k in ("body", "routine_type", "param_list", "returns",
                                    "aggregate", "sql_data_access", "is_deterministic",
                                    "is_sandboxed", "is_null_call", "exports", "opts",
                                    "comment", "created", "last_altered"))]
        return self._run(lambda: self._auto_increment(FUNC, tail)[0])

    def func_drop(self, name: Any, options: Any = None) -> None:
        """box.schema.func.drop(): revoke grants on it, DELETE _func."""
        opts = check_options(options, {"if_exists": "boolean"})
        row = self._func_row(name)
        if row is None:
            if not opts.get("if_exists"):
                raise ClientError(E.ER_NO_SUCH_FUNCTION, name)
            return

        def drop():
            self._revoke_object_privs("function", row[0])
            old = self.engine.space(FUNC).get([row[0]])
            self._write(FUNC, "delete", [row[0]], check=lambda: self.checks.func_drop(old))
        self._run(drop)
