"""The checks 2.6.0's system-space triggers (alter.cc) make before a row counts.

A row written into `_space`, `_index`, `_user`, `_func`, `_priv`, `_truncate`,
`_sequence` or `_space_sequence` is validated (names, ids, formats, engines,
password hashes, ...) and the effective user's right to make that change is
checked (access_check_ddl / priv_def_check), in
2.6.0's order; each method raises the ClientError 2.6.0 raises. Ddl runs them just
before writing the row, so a refused statement leaves nothing behind. They are plain
functions of the row and the current catalogue, so the schema triggers can call them
too.
"""
from __future__ import annotations

import unicodedata
from typing import Any, Callable

from spindle.core.box import json_path
from spindle.core.box.access import PRIV_ALL, Access, Priv
from spindle.core.box.field_types import field_type_by_name
from spindle.core.box.sequence import sequence_def_from_tuple
from spindle.core.box.update import update_tuple
from spindle.core.iproto.errors import ClientError, ErrorCode as E

SCHEMA, COLLATION, SPACE, VSPACE, SEQUENCE, SEQUENCE_DATA, VSEQUENCE = \
    272, 276, 280, 281, 284, 285, 286
INDEX, VINDEX, FUNC, VFUNC, USER, VUSER, PRIV, VPRIV = 288, 289, 296, 297, 304, 305, 312, 313
TRIGGER, TRUNCATE, SPACE_SEQUENCE, FK_CONSTRAINT, CK_CONSTRAINT, FUNC_INDEX = \
    328, 330, 340, 356, 364, 372
SYSTEM_ID_MIN, SYSTEM_ID_MAX, SPACE_ID_MAX, FUNCTION_MAX = 256, 511, 0x7FFFFFFF, 32000
NAME_MAX, INVALID_NAME_MAX, USER_MAX = 65000, 64, 32
ADMIN, GUEST, PUBLIC, SUPER = 1, 0, 2, 31
EMPTY_PASSWORD = "vhvewKp0tNyweZQ+cFKAlsyphfg="          # chap-sha1 of ''
ENGINES = ("memtx", "vinyl", "blackhole", "sysview", "service")


def is_identifier(name: Any) -> bool:
    """identifier_check(): valid UTF-8, not empty, no unassigned/control/separator."""
    if isinstance(name, bytes):
        try:
            name = name.decode("utf-8")
        except UnicodeDecodeError:
            return False
    if not isinstance(name, str) or not name:
        return False
    # (a Lua string that is not UTF-8 comes as a str with surrogate escapes:
    # category Cs, which no valid UTF-8 decodes to)
    return all(ch != "\ufffd" and unicodedata.category(ch) not in ("Cn", "Cc", "Zl", "Zp", "Cs")
               for ch in name)


def check_identifier(name: Any) -> None:
    if not is_identifier(name):
        raise ClientError(E.ER_IDENTIFIER, name)


def _short(name: Any) -> Any:
    return name[:INVALID_NAME_MAX] if isinstance(name, (str, bytes)) else name


def _too_long(name: Any) -> bool:
    return isinstance(name, (str, bytes)) and len(name) > NAME_MAX


def _valid_type(name: Any) -> bool:
    try:
        field_type_by_name(name)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


class AlterChecks:
    def __init__(self, engine: Any, schema: Any, access: Access | None,
                 euid: Callable[[], int]):
        self.engine = engine
        self.schema = schema
        self.access = access
        self.euid = euid
        self._grants = access or Access(schema)

    # ------------------------------------------------------------- helpers

    def ddl(self, name: Any, object_id: Any, owner: Any, object_type: str, priv: int) -> None:
        """access_check_ddl() for the effective user (a no-op without an Access)."""
        if self.access is not None:
            self.access.check_ddl(self.euid(), name, object_id, owner, object_type, priv)

    def single_statement(self, what: str) -> None:
        """txn_check_singlestatement(): a rebuild over data must open its transaction."""
        txn = self.engine.txns.current
        if txn is not None and txn.statements:
            raise ClientError(E.ER_MULTISTATEMENT_TRANSACTION, what)

    def row(self, space_id: int, key: list) -> Any:
        return self.engine.space(space_id).get(key)

    def space_owner(self, space_id: int) -> int:
        row = self.row(SPACE, [space_id])
        return row[1] if row is not None else ADMIN

    # -------------------------------------------------------------- _space

    def space_row(self, row: list, errcode: int) -> None:
        """space_def_new_from_tuple() + access_check_ddl (create or alter)."""
        space_id, uid, name, engine, field_count, flags, fmt = row[:7]
        if _too_long(name):
            raise ClientError(errcode, _short(name), "space name is too long")
        check_identifier(name)
        if isinstance(space_id, int) and space_id > SPACE_ID_MAX:
            raise ClientError(errcode, name, "space id is too big")
        if space_id == 0:
            raise ClientError(errcode, name, "space id 0 is reserved")
        check_identifier(engine)
        for no, field in enumerate(fmt or [], 1):
            if not isinstance(field, dict):
                raise ClientError(errcode, name, f"field {no} is not map")
            if field.get("name") is None:
                raise ClientError(errcode, name, f"field {no} name is not specified")
            check_identifier(field["name"])
            if not _valid_type(field.get("type", "any")):
                raise ClientError(errcode, name, f"field {no} has unknown field type")
        if isinstance(field_count, int) and 0 < field_count < len(fmt or []):
            raise ClientError(errcode, name, "exact_field_count must be either 0 or >= "
                              "formatted field count")
        group = (flags or {}).get("group_id", 0)
        if group not in (0, 1):
            raise ClientError(E.ER_NO_SUCH_GROUP, str(group))
        if (flags or {}).get("is_sync") and group == 1:
            raise ClientError(errcode, name, "local space can't be synchronous")
        if engine not in ENGINES:
            raise ClientError(E.ER_NO_SUCH_ENGINE, engine)
        priv = Priv.C if errcode == E.ER_CREATE_SPACE else Priv.A
        self.ddl(name, space_id, uid, "space", priv)

    def space_update(self, space_id: int, ops: list) -> None:
        old = self.row(SPACE, [space_id])
        if old is None:
            return
        new = list(update_tuple(old, ops))
        self.space_row(new, E.ER_ALTER_SPACE)
        if list(new[6]) != list(old[6]) and len(self.engine.space(space_id)):
            self.single_statement("space format check")

    def space_drop(self, old: Any) -> None:
        if old is not None:
            self.ddl(old[2], old[0], old[1], "space", Priv.D)

    def truncate(self, space: Any) -> None:
        if SYSTEM_ID_MIN <= space.id <= SYSTEM_ID_MAX:
            raise ClientError(E.ER_TRUNCATE_SYSTEM_SPACE, space.name)
        if self.access is not None:
            self.access.check_space(self.euid(), space, Priv.W)

    # -------------------------------------------------------------- _index

    def index_row(self, space: Any, row: list, priv: int) -> None:
        """on_replace_dd_index before the engine builds: access, type, part types."""
        self.ddl(space.name, space.id, self.space_owner(space.id), "space", priv)
        kind = str(row[3]).upper()
        if kind not in ("TREE", "HASH", "RTREE", "BITSET"):
            raise ClientError(E.ER_INDEX_TYPE, row[2], space.name)
        check_identifier(row[2])
        for part in row[5]:
            if not _valid_type(part.get("type") if isinstance(part, dict) else part[1]):
                raise ClientError(E.ER_WRONG_INDEX_PARTS, "unknown field type")
        old = space.indexes.get(row[1])
        if len(space) and (old is None or self._rebuilds(old, row)):
            self.single_statement("index build")

    def _rebuilds(self, index: Any, row: list) -> bool:
        """Would this _index row rebuild the index (more than a rename)?"""
        parts = []
        for p in row[5]:
            if isinstance(p, dict):
                coll = self.schema.collations.get(p.get("collation"))
                parts.append((p.get("field"), p.get("type"), bool(p.get("is_nullable")),
                              None if coll in ("none", "binary") else coll,
                              json_path.parse(p["path"]) if p.get("path") else ()))
            else:
                parts.append((p[0], p[1], False, None, ()))
        d = index.index_def
        return (str(row[3]).upper(), bool((row[4] or {}).get("unique", True)), parts) != \
            (str(d.type), bool(d.unique),
             [(p.fieldno, p.type.value, p.is_nullable, p.collation, p.tokens)
              for p in d.parts])

    def index_update(self, space_id: int, iid: int, ops: list) -> None:
        old = self.row(INDEX, [space_id, iid])
        space = self.engine.find_space(space_id)
        if old is not None and space is not None:
            self.index_row(space, list(update_tuple(old, ops)), Priv.A)

    def index_drop(self, space_id: int, iid: int) -> None:
        space = self.engine.space(space_id)
        self.ddl(space.name, space_id, self.space_owner(space_id), "space", Priv.D)
        if iid == 0 and SYSTEM_ID_MIN <= space_id <= SYSTEM_ID_MAX:
            raise ClientError(E.ER_LAST_DROP, space.name)

    # --------------------------------------------------------------- _user

    def user_row(self, old: Any, new: list) -> None:
        """user_def_new_from_tuple() + access_check_ddl + the user cache limit."""
        uid, owner, name, kind = new[:4]
        if _too_long(name):
            raise ClientError(E.ER_CREATE_USER, _short(name), "user name is too long")
        if kind not in ("user", "role"):
            raise ClientError(E.ER_CREATE_USER, name, "unknown user type")
        check_identifier(name)
        auth = new[4] if len(new) > 4 else None
        if auth and kind == "role":
            raise ClientError(E.ER_CREATE_ROLE, name,
                              "authentication data can not be set for a role")
        if isinstance(auth, dict):
            hashed = next((v for k, v in auth.items()
                           if isinstance(k, str) and k.lower() == "chap-sha1"), None)
            if isinstance(hashed, str) and len(hashed) not in (0, len(EMPTY_PASSWORD)):
                raise ClientError(E.ER_CREATE_USER, name, "invalid user password")
            if uid == GUEST and hashed is not None and hashed != EMPTY_PASSWORD[:len(hashed)]:
                raise ClientError(E.ER_GUEST_USER_PASSWORD)
        elif auth is not None and not isinstance(auth, (list, tuple)):
            raise ClientError(E.ER_CREATE_USER, name, "invalid password format, "
                              "use box.schema.user.passwd() to reset password")
        if old is None:
            self.ddl(name, uid, owner, kind, Priv.C)
            if uid not in self.schema.users and len(self.schema.users) >= USER_MAX:
                raise ClientError(E.ER_USER_MAX, USER_MAX)
        else:
            self.ddl(name, uid, uid, old[3], Priv.A)

    def user_update(self, uid: int, ops: list) -> None:
        old = self.row(USER, [uid])
        if old is not None:
            self.user_row(old, list(update_tuple(old, ops)))

    def user_drop(self, old: Any) -> None:
        uid, name = old[0], old[2]
        self.ddl(name, uid, old[1], old[3], Priv.D)
        if uid <= PUBLIC or uid == SUPER:
            raise ClientError(E.ER_DROP_USER, name, "the user or the role is a system")
        owns = any(self.engine.space(sid).select([uid], 1, limit=1)
                   for sid in (SPACE, FUNC, SEQUENCE, PRIV))
        if owns or self.engine.space(PRIV).select([uid], 0, limit=1) or \
                self._grants.members(uid):
            raise ClientError(E.ER_DROP_USER, name, "the user has objects")

    # --------------------------------------------------------------- _func

    def func_row(self, new: list) -> None:
        """func_def_new_from_tuple() + access_check_ddl of on_replace_dd_func."""
        fid, owner, name = new[:3]
        if _too_long(name):
            raise ClientError(E.ER_CREATE_FUNCTION, _short(name), "function name is too long")
        check_identifier(name)
        if len(new) > 5:
            for no, want, what in ((6, "function", "routine_type"),
                                   (10, "none", "sql_data_access")):
                if not isinstance(new[no], str) or new[no].lower() != want:
                    raise ClientError(E.ER_CREATE_FUNCTION, name, f"unsupported {what} value")
            if new[13] is not True:
                raise ClientError(E.ER_CREATE_FUNCTION, name, "unsupported is_null_call value")
        if isinstance(fid, int) and fid > FUNCTION_MAX:
            raise ClientError(E.ER_CREATE_FUNCTION, name, "function id is too big")
        language = new[4] if len(new) > 4 else "LUA"
        if language not in ("LUA", "C"):
            raise ClientError(E.ER_FUNCTION_LANGUAGE, language, name)
        body = new[5] if len(new) > 5 else ""
        sandboxed = len(new) > 12 and bool(new[12])
        # func_def_check(): a sandbox is for a body (a functional index needs both)
        if language == "C" and (body or sandboxed):
            raise ClientError(E.ER_CREATE_FUNCTION, name,
                              "body and is_sandboxed options are not compatible with C language")
        if language == "LUA" and sandboxed and not body:
            raise ClientError(E.ER_CREATE_FUNCTION, name, "is_sandboxed option may be set "
                              "only for a persistent Lua function (one with a non-empty body)")
        self.ddl(name, fid, owner, "function", Priv.C)

    def func_drop(self, old: Any) -> None:
        if old is None:
            return
        self.ddl(old[2], old[0], old[1], "function", Priv.D)
        if self.engine.space(FUNC_INDEX).select([old[0]], 1, limit=1):
            raise ClientError(E.ER_DROP_FUNCTION, old[1], "function has references")
        if len(old) > 4 and old[4] == "SQL_BUILTIN":
            raise ClientError(E.ER_DROP_FUNCTION, old[1], "function is SQL built-in")

    # --------------------------------------------------------------- _priv

    def priv_row(self, row: Any, priv_type: int) -> None:
        """on_replace_dd_priv: priv_def_check (+ what grant_or_revoke refuses). Without
        an Access the statement has admin's rights, but a grantor must still own what
        it grants, and role grants must not loop."""
        if not isinstance(row[4], int) or row[4] < 0:
            return                       # the engine refuses the field type first
        user_id = self.euid() if self.access is not None else ADMIN
        self._grants.check_grant(user_id, row, priv_type)
        if priv_type == Priv.GRANT and row[1] == ADMIN and row[2] == "universe" and \
                row[4] != PRIV_ALL:
            raise ClientError(E.ER_GRANT, "can't revoke universe from the admin user")

    # ---------------------------------------------- _sequence, _space_sequence

    def sequence_row(self, new: list, errcode: int) -> None:
        """sequence_def_new_from_tuple() + access_check_ddl: create on the new
        definition, alter on the one it replaces."""
        fields = sequence_def_from_tuple(new, errcode)
        if errcode == E.ER_CREATE_SEQUENCE:
            self.ddl(fields[2], fields[0], fields[1], "sequence", Priv.C)
            return
        seq = self.schema.sequences.by_id.get(fields[0])
        if seq is not None:
            self.ddl(seq.name, seq.id, seq.uid, "sequence", Priv.A)

    def sequence_drop(self, old: Any) -> None:
        if old is not None:
            self.ddl(old[2], old[0], old[1], "sequence", Priv.D)

    def space_sequence_row(self, row: Any, creating: bool) -> None:
        """on_replace_dd_space_sequence's access checks: create (drop) on a generated
        sequence, drop on any detached one, read and write on one attached as it is;
        alter on the space."""
        if row is None:
            return
        seq = self.schema.sequences.by_id.get(row[1])
        space = self.engine.find_space(row[0])
        if seq is None or space is None:
            return                       # the trigger refuses the row
        if row[2] is True or not creating:
            self.ddl(seq.name, seq.id, seq.uid, "sequence", Priv.C if creating else Priv.D)
        else:
            self.ddl(seq.name, seq.id, seq.uid, "sequence", Priv.R)
            self.ddl(seq.name, seq.id, seq.uid, "sequence", Priv.W)
        self.ddl(space.name, space.id, self.space_owner(space.id), "space", Priv.A)
