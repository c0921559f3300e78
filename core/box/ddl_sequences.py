"""box.schema.sequence and the `sequence` option of indexes, as 2.6.0's schema.lua
writes them.

* sequence.create(name, opts): name and options checked (check_param,
  check_param_table), defaults by direction (ascending: min 1, max INT64_MAX, start
  min; descending: min INT64_MIN, max -1, start max), an existing name is
  ER_SEQUENCE_EXISTS (with if_not_exists: that one, "not created"), then INSERT
  `_sequence` {max id + 1, euid, name, step, min, max, start, cache, cycle}.
* sequence.alter(name, opts): REPLACE `_sequence` with the options over the row.
* sequence.drop(name, opts): revoke the grants on it, DELETE `_sequence_data`, DELETE
  `_sequence`.
* The `sequence` option of index.create/alter (space_sequence_alter_prepare and
  _commit): true (a sequence '<space>_seq' generated for the space), a name or an id,
  {id = ..., field = ...} (the field: a number, a name or a JSON path; unknown keys
  ignored), false (detach). Before the `_index` row: the option is resolved and
  checked against the new parts (an integer part, of the primary key only), a new
  generated sequence is created and the old link DELETEd; after it: INSERT
  `_space_sequence` {space id, sequence id, is_generated, field, path}, and a
  generated sequence the space no longer uses is dropped. Without the option an
  attached sequence must still fit the new parts.

`SequenceDdl` is a mixin of `ddl.Ddl`, whose plumbing (_run, _write, _read, _view,
checks) it uses.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable

from spindle.core.box.alter import SEQUENCE, SEQUENCE_DATA, SPACE_SEQUENCE, VSEQUENCE
from spindle.core.box.ddl_users import check_options, check_param, lua_pairs, lua_type
from spindle.core.box.sequence import INT64_MAX, INT64_MIN
from spindle.core.iproto.errors import ClientError, ErrorCode as E

if TYPE_CHECKING:
    from spindle.core.box.alter import AlterChecks

SEQUENCE_OPTIONS = {"step": "number", "min": "number", "max": "number", "start": "number",
                    "cache": "number", "cycle": "boolean"}
CREATE_SEQUENCE_OPTIONS = {**SEQUENCE_OPTIONS, "if_not_exists": "boolean"}
ALTER_SEQUENCE_OPTIONS = {**SEQUENCE_OPTIONS, "name": "string"}
_FIELDS = ("id", "uid", "name", "step", "min", "max", "start", "cache", "cycle")


def _part_field(part: Any) -> tuple[Any, str, Any]:
    """(field, path or '', type) of an index part: a map or a [field, type] pair."""
    if isinstance(part, dict):
        return part.get("field"), part.get("path") or "", part.get("type")
    return part[0], "", part[1]


class SequenceDdl:
    """Sequences and their links to spaces (a mixin of ddl.Ddl)."""

    if TYPE_CHECKING:
        # What this mixin uses of ddl.Ddl, declared for the type checker only.
        engine: Any
        checks: AlterChecks

        def _euid(self) -> int: ...
        def _as(self, user_id: int) -> AbstractContextManager[None]: ...
        def _run(self, fn: Callable, *args: Any) -> Any: ...
        def _read(self, space_id: int) -> Any: ...
        def _write(self, space_id: int, method: str, *args: Any,
                   check: Callable | None = None, **kwargs: Any) -> Any: ...
        def _view_get(self, view_id: int, key: Any, index: int = 0) -> Any: ...
        def _auto_increment(self, space_id: int, tail: list,
                            check: Callable | None = None) -> tuple: ...
        def _revoke_object_privs(self, object_type: str, object_id: Any) -> None: ...
        @staticmethod
        def _resolve_field(fmt: list, path: Any, where: str) -> tuple[int, str | None]: ...

    def _sequence_row(self, name_or_id: Any) -> Any:
        """sequence_resolve(): the `_vsequence` row by name or id (a key of another
        type fails as that index refuses it)."""
        if isinstance(name_or_id, str):
            return self._view_get(VSEQUENCE, [name_or_id], 2)
        if name_or_id is None:
            return None
        return self._view_get(VSEQUENCE, [name_or_id])

    # ============================================================ sequences

    def sequence_create(self, name: Any, options: Any = None) -> tuple[int, bool]:
        """box.schema.sequence.create(): (the sequence id, whether it was created)."""
        check_param(name, "name", "string")
        opts = check_options(options if options is not None else {},
                             CREATE_SEQUENCE_OPTIONS)
        ascending = opts.get("step") is None or opts["step"] > 0
        defaults = {"step": 1, "min": 1 if ascending else INT64_MIN,
                    "max": INT64_MAX if ascending else -1,
                    "start": (opts.get("min") if opts.get("min") is not None else 1)
                    if ascending else
                    (opts.get("max") if opts.get("max") is not None else -1),
                    "cache": 0, "cycle": False}
        opts = {**defaults, **opts}
        row = self._sequence_row(name)
        if row is not None:
            if not opts.get("if_not_exists"):
                raise ClientError(E.ER_SEQUENCE_EXISTS, name)
            return row[0], False
        tail = [self._euid(), name, *(opts[k] for k in _FIELDS[3:])]
        created = self._run(self._auto_increment, SEQUENCE, tail,
                            lambda row: self.checks.sequence_row(row, E.ER_CREATE_SEQUENCE))
        return created[0], True

    def sequence_alter(self, name: Any, options: Any = None) -> None:
        """box.schema.sequence.alter(): REPLACE `_sequence`."""
        opts = check_options(options, ALTER_SEQUENCE_OPTIONS)
        row = self._sequence_row(name)
        if row is None:
            raise ClientError(E.ER_NO_SUCH_SEQUENCE, name)
        if options is None:
            return
        current = dict(zip(_FIELDS, row))
        opts = {**current, **opts}
        new = [current["id"], current["uid"], *(opts[k] for k in _FIELDS[2:])]
        self._run(lambda: self._write(
            SEQUENCE, "replace", new,
            check=lambda: self.checks.sequence_row(new, E.ER_ALTER_SEQUENCE)))

    def sequence_drop(self, name_or_id: Any, options: Any = None) -> None:
        """box.schema.sequence.drop(): grants, `_sequence_data`, `_sequence`."""
        opts = check_options(options if options is not None else {},
                             {"if_exists": "boolean"})
        row = self._sequence_row(name_or_id)
        if row is None:
            if not opts.get("if_exists"):
                raise ClientError(E.ER_NO_SUCH_SEQUENCE, name_or_id)
            return

        # Three statements, each committed on its own as in 2.6.0 (not one `_run`):
        # a sequence a space still uses is refused at the last, after its grants and
        # its `_sequence_data` row are gone (its value reset, if next() had set one).
        self._run(self._revoke_object_privs, "sequence", row[0])
        self._run(self._write, SEQUENCE_DATA, "delete", [row[0]])
        old = self.engine.space(SEQUENCE).get([row[0]])
        self._run(lambda: self._write(SEQUENCE, "delete", [row[0]],
                                      check=lambda: self.checks.sequence_drop(old)))

    # ====================================================== space <-> sequence

    def _space_sequence_delete(self, space_id: int) -> Any:
        """DELETE `_space_sequence` {space id}; returns the link it removed."""
        old = self.engine.space(SPACE_SEQUENCE).get([space_id])
        return self._write(SPACE_SEQUENCE, "delete", [space_id],
                           check=lambda: self.checks.space_sequence_row(old, False))

    def _space_sequence_prepare(self, fmt: list, parts: list, opts: dict, space: Any,
                                iid: int, index_name: Any) -> dict | None:
        """space_sequence_alter_prepare(): before the `_index` row."""
        option = opts.get("sequence")
        if iid != 0:
            if option is None or option is False:      # (Lua's `not option`)
                return None
            raise ClientError(E.ER_MODIFY_INDEX, index_name, space.name,
                              "sequence cannot be used with a secondary key")
        link = self._read(SPACE_SEQUENCE).get([space.id])
        old = None
        if link is not None:
            old = {"id": link[1], "is_generated": link[2],
                   "field": link[3] if len(link) > 3 else None,
                   "path": link[4] if len(link) > 4 else None}
        if option is None:
            if old is not None and old["field"] is not None:
                self._space_sequence_check(old, parts, space.name, index_name)
            return None
        new: dict | None
        if lua_type(option) == "table":
            given = dict(lua_pairs(option))
            new = {"id": given.get("id"), "field": given.get("field")}
        elif option is True:
            new = {}
        elif option is False:
            new = None
        else:
            new = {"id": option}
        if new is not None:
            self._resolve_new_sequence(new, old, fmt, parts, space, index_name)
        if old is not None:
            self._space_sequence_delete(space.id)
        return {"space_id": space.id, "new": new, "old": old}

    def _resolve_new_sequence(self, new: dict, old: dict | None, fmt: list, parts: list,
                              space: Any, index_name: Any) -> None:
        if new.get("id") is not None:
            row = self._sequence_row(new["id"])
            if row is None:
                raise ClientError(E.ER_NO_SUCH_SEQUENCE, new["id"])
            users = self._read(SPACE_SEQUENCE).select([row[0]], 1)
            if users and users[0][2] is True:
                raise ClientError(E.ER_ALTER_SPACE, space.name,
                                  "can not attach generated sequence")
            new["id"] = row[0]
        if new.get("field") is not None:
            new["field"], new["path"] = self._resolve_field(fmt, new["field"],
                                                            "sequence field")
        if old is not None:
            if new.get("id") is None and old["is_generated"]:
                new["id"], new["is_generated"] = old["id"], True
            if new.get("field") is None:
                new["field"], new["path"] = old["field"], old["path"]
        self._space_sequence_check(new, parts, space.name, index_name)
        if new.get("id") is None:
            new["id"] = self.sequence_create(space.name + "_seq")[0]
            new["is_generated"] = True
        new["is_generated"] = bool(new.get("is_generated"))

    @staticmethod
    def _space_sequence_check(sequence: dict, parts: list, space_name: str,
                              index_name: Any) -> None:
        """space_sequence_check(): the sequence field is an integer part (the first
        part when none is given)."""
        found = None
        if sequence.get("field") is not None:
            sequence["path"] = sequence.get("path") or ""
            for part in parts:
                field, path, _ = _part_field(part)
                if sequence["field"] == field and sequence["path"] == path:
                    found = part
                    break
            if found is None:
                raise ClientError(E.ER_MODIFY_INDEX, index_name, space_name,
                                  "sequence field must be a part of the index")
        else:
            found = parts[0]
            sequence["field"], sequence["path"], _ = _part_field(found)
        if _part_field(found)[2] not in ("integer", "unsigned"):
            raise ClientError(E.ER_MODIFY_INDEX, index_name, space_name,
                              "sequence cannot be used with a non-integer key")

    def _space_sequence_commit(self, proxy: dict | None) -> None:
        """space_sequence_alter_commit(): after the `_index` row."""
        if proxy is None:
            return
        new, old = proxy["new"], proxy["old"]
        if new is not None:
            row = [proxy["space_id"], new["id"], new["is_generated"], new["field"],
                   new["path"]]
            self._write(SPACE_SEQUENCE, "insert", row,
                        check=lambda: self.checks.space_sequence_row(row, True))
        if old is not None and old["is_generated"] and (new is None or
                                                        old["id"] != new["id"]):
            self.sequence_drop(old["id"])

    def _drop_space_sequence(self, space_id: int) -> None:
        """What index.drop (of the primary key) and space.drop do first: unlink the
        sequence, and drop it when the space generated it."""
        link = self._space_sequence_delete(space_id)
        if link is not None and link[2] is True:
            self.sequence_drop(link[1])

