"""Privileges: who may do what, computed from the `_priv` and `_user` rows.

Facts from 2.6.0 (user.cc, space.c, func.c, sequence.c, session.cc, alter.cc,
sysview.c):

* A user's effective access is its own `_priv` rows plus, recursively, those of the
  roles it has. A role is had through a row `(role, id, execute)` whose privilege is
  exactly execute; any `role` row with the execute bit is not a privilege on an
  object. 'public' counts only through such a row (box.schema.user.create writes it
  for every user; guest has it from bootstrap). A row with object id '' grants on
  every object of its type (an "entity" grant); `universe` rows give universal
  access, which covers every object.
* Admin (id 1) holds ALL on universe and 2.6.0 refuses to take it away, so admin
  may always do everything.
* A space, function or sequence owner needs no grant on it for DML/CALL, but still
  needs global usage. A DDL statement (access_check_ddl) needs usage plus the
  privilege, which the owner has implicitly unless it is `create`.
* Errors are AccessDeniedError (code 42, "%s access to %s '%s' is denied for user
  '%s'"); the access word is the lowest bit missing (priv_name() takes the first
  set bit), so asking a space for alter without usage reads "Usage access ...".

The answers are cached per user and dropped whenever the schema version moves
(every change to a system space, and every rollback of one, bumps it).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from spindle.core.iproto.errors import ClientError, ErrorCode

SPACE_SPACE_ID, SEQUENCE_SPACE_ID = 280, 284
# sysview id -> the system space it shows
VIEW_SOURCE = {277: 276, 281: 280, 286: 284, 289: 288, 297: 296, 305: 304, 313: 312}
ADMIN, PUBLIC = 1, 2


class Priv(enum.IntFlag):
    R = 1
    W = 2
    X = 4
    S = 8
    U = 16
    C = 32
    D = 64
    A = 128
    REFERENCE = 256
    TRIGGER = 512
    INSERT = 1024
    UPDATE = 2048
    DELETE = 4096
    GRANT = 8192
    REVOKE = 16384


PRIV_ALL = 0xFFFFFFFF
PRIV_WRDA = Priv.W | Priv.D | Priv.A | Priv.R
_PRIV_WORDS = ("Read", "Write", "Execute", "Session", "Usage", "Create", "Drop", "Alter",
               "Reference", "Trigger", "Insert", "Update", "Delete", "Grant", "Revoke")
OBJECT_TYPES = ("universe", "space", "function", "user", "role", "sequence", "collation")


def priv_name(access: int) -> str:
    """The word for the lowest set bit, as priv_name() of user_def.c."""
    access = int(access) & 0xFFFFFFFF
    if not access:
        return "Any"
    bit_no = (access & -access).bit_length()
    return _PRIV_WORDS[bit_no - 1] if bit_no <= len(_PRIV_WORDS) else "Any"


class AccessDeniedError(ClientError):
    """ER_ACCESS_DENIED with the parts 2.6.0 keeps (box.error fields)."""

    type = "AccessDeniedError"

    def __init__(self, access_type: str, object_type: str, object_name: Any, user_name: str):
        super().__init__(ErrorCode.ER_ACCESS_DENIED, access_type, object_type,
                         object_name, user_name)
        self.access_type = access_type
        self.object_type = object_type
        self.object_name = object_name
        # 2.6.0 sends these in the error's MP_ERROR FIELDS, in this order; a 2.6
        # net.box refuses an AccessDeniedError entry without all three.
        self.fields = {"object_type": object_type, "object_name": str(object_name),
                       "access_type": access_type}


# Where 2.6.0 raises each access error (its IPROTO FILE/LINE, Lua's `trace`).
_SESSION_C = "./src/box/session.cc"
_SPACE_C = "./src/box/space.c"
_SEQUENCE_C = "./src/box/sequence.c"
_ALTER_CC = "./src/box/alter.cc"
# priv_def_check(), one diag_set per object type
_GRANT_LINE = {"universe": 3897, "space": 3912, "function": 3929, "sequence": 3946,
               "role": 3970, "user": 3992}
_GRANT_ENTITY_LINE = 4008


@dataclass
class UserAccess:
    """Effective access of one user or role (own grants + its roles', recursively)."""

    universal: int = 0
    entity: dict[str, int] = field(default_factory=dict)        # type -> bits on all
    objects: dict[tuple[str, Any], int] = field(default_factory=dict)
    roles: set[int] = field(default_factory=set)                # every role it has

    def add(self, object_type: str, object_id: Any, bits: int) -> None:
        if object_type == "universe":
            self.universal |= bits
        elif object_id == "":
            self.entity[object_type] = self.entity.get(object_type, 0) | bits
        else:
            key = (object_type, object_id)
            self.objects[key] = self.objects.get(key, 0) | bits

    def merge(self, other: "UserAccess") -> None:
        self.universal |= other.universal
        for object_type, bits in other.entity.items():
            self.add(object_type, "", bits)
        for (object_type, object_id), bits in other.objects.items():
            self.add(object_type, object_id, bits)
        self.roles |= other.roles

    def on(self, object_type: str, object_id: Any) -> int:
        return self.objects.get((object_type, object_id), 0)


class Access:
    def __init__(self, schema: Any):
        self.schema = schema
        self._cache: dict[int, UserAccess] = {}
        self._version: int | None = None
        # (user, space id, access) of the space checks that passed at _passed_version
        self._passed: set[tuple[int, int, int]] = set()
        self._passed_version: int | None = None

    # ------------------------------------------------------------- effective

    def invalidate(self) -> None:
        self._cache.clear()
        self._version = None
        self._passed.clear()
        self._passed_version = None

    def effective(self, user_id: int) -> UserAccess:
        if self._version != self.schema.version:
            self._cache.clear()
            self._version = self.schema.version
        found = self._cache.get(user_id)
        if found is None:
            found = self._cache[user_id] = self._compute(user_id, frozenset())
        return found

    def _compute(self, user_id: int, visiting: frozenset) -> UserAccess:
        result = UserAccess()
        direct: list[int] = []
        for grant in self.schema.grants:
            if grant.grantee != user_id:
                continue
            bits = int(grant.privilege) & PRIV_ALL if isinstance(grant.privilege, int) else 0
            if grant.object_type == "role" and grant.object_id != "" and bits & Priv.X:
                if bits == Priv.X:
                    direct.append(grant.object_id)
                continue
            result.add(grant.object_type, grant.object_id, bits)
        visiting = visiting | {user_id}
        for role_id in direct:
            if role_id in visiting or role_id not in self.schema.users:
                continue
            result.roles.add(role_id)
            result.merge(self._compute(role_id, visiting))
        return result

    def has_role(self, user_id: int, role_id: int) -> bool:
        return role_id in self.effective(user_id).roles

    def members(self, role_id: int) -> set[int]:
        """Users and roles that have `role_id` directly (user->users of 2.6.0)."""
        return {g.grantee for g in self.schema.grants
                if g.object_type == "role" and g.object_id == role_id and g.privilege == Priv.X}

    # ------------------------------------------------------------------ names

    def user_name(self, user_id: int) -> str:
        user = self.schema.users.get(user_id)
        if user is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_USER, str(user_id))
        return user.name

    def _row(self, space_id: int, key: Any) -> Any:
        space = self.schema.engine.find_space(space_id)
        if space is None or space.primary is None:
            return None
        return space.get([key])

    def space_owner(self, space_id: int) -> int:
        row = self._row(SPACE_SPACE_ID, space_id)
        return row[1] if row is not None else ADMIN

    def sequence_row(self, seq_id: Any) -> Any:
        return self._row(SEQUENCE_SPACE_ID, seq_id) if isinstance(seq_id, int) else None

    def object_name(self, object_type: str, object_id: Any) -> str:
        """schema_find_name(): the name an error shows ('' for universe/entity)."""
        if object_type == "universe" or object_id == "":
            return ""
        if object_type == "space":
            space = self.schema.engine.find_space(object_id)
            return space.name if space is not None else "(nil)"
        if object_type == "function":
            func = self.schema.funcs.get(object_id)
            return func.name if func is not None else "(nil)"
        if object_type == "sequence":
            row = self.sequence_row(object_id)
            return row[2] if row is not None else "(nil)"
        user = self.schema.users.get(object_id)
        return user.name if user is not None else "(nil)"

    def owner_of(self, object_type: str, object_id: Any) -> int | None:
        if object_type == "space":
            return self.space_owner(object_id)
        if object_type == "function":
            func = self.schema.funcs.get(object_id)
            return func.owner if func is not None else None
        if object_type == "sequence":
            row = self.sequence_row(object_id)
            return row[1] if row is not None else None
        if object_type in ("user", "role"):
            user = self.schema.users.get(object_id)
            return user.owner if user is not None else None
        return ADMIN

    # ----------------------------------------------------------------- checks

    def check(self, user_id: int, object_type: str, object_id: Any, privilege: int) -> None:
        """Raise AccessDeniedError unless `user_id` may use `privilege` on the object,
        the way 2.6.0 checks that kind of object."""
        if object_type == "universe":
            self.check_universe(user_id, privilege)
        elif object_type == "space":
            self.check_space(user_id, object_id, privilege)
        elif object_type == "function":
            self.check_function(user_id, object_id)
        elif object_type == "sequence":
            self.check_sequence(user_id, object_id, privilege)
        else:
            self.check_ddl(user_id, self.object_name(object_type, object_id), object_id,
                           self.owner_of(object_type, object_id), object_type, privilege)

    def allowed(self, user_id: int, object_type: str, object_id: Any, privilege: int) -> bool:
        try:
            self.check(user_id, object_type, object_id, privilege)
        except ClientError:
            return False
        return True

    def check_session(self, user_id: int) -> None:
        """access_check_session(): the `session` bit on universe, for AUTH/connect."""
        if not self.effective(user_id).universal & Priv.S:
            raise AccessDeniedError("Session", "universe", "", self.user_name(user_id)).located(
                _SESSION_C, 307)

    def check_universe(self, user_id: int, access: int, object_type: str = "universe",
                       object_name: str = "") -> None:
        """access_check_universe_object(): usage plus `access` granted universally."""
        if user_id == ADMIN:
            return
        access = int(access) | Priv.U
        denied = access & ~self.effective(user_id).universal
        if denied:
            raise AccessDeniedError(priv_name(denied), object_type, object_name,
                                    self.user_name(user_id)).located(_SESSION_C, 332)

    def check_space(self, user_id: int, space: Any, access: int) -> None:
        """access_check_space() for DML and reads of `space` (a Space or its id)."""
        if user_id == ADMIN:
            return
        if isinstance(space, int):
            space = self.schema.engine.space(space)
        ua = self.effective(user_id)
        access = int(access) | Priv.U
        need = access & ~ua.universal & ~ua.entity.get("space", 0)
        if need and (need & Priv.U or (self.space_owner(space.id) != user_id and
                                       need & ~ua.on("space", space.id))):
            name = self.user_name(user_id)
            if not ua.universal & Priv.U:
                raise AccessDeniedError("Usage", "universe", "", name).located(_SPACE_C, 86)
            raise AccessDeniedError(priv_name(access), "space", space.name, name).located(
                _SPACE_C, 91)

    def check_space_cached(self, user_id: int, space: Any, access: int) -> None:
        """check_space() of a Space, remembered once it passed until the schema version
        moves: every grant, revoke, user, role and space owner is a system space row,
        and a change of one (or its rollback) moves the version. For box.space's
        natives, which check every statement a non-admin user runs from Lua."""
        version = self.schema.version
        if self._passed_version != version:
            self._passed.clear()
            self._passed_version = version
        key = (user_id, space.id, access)
        if key not in self._passed:
            self.check_space(user_id, space, access)
            self._passed.add(key)

    def check_function(self, user_id: int, func: Any) -> None:
        """func_access_check(): execute (+ usage) on the function; always says Execute."""
        if user_id == ADMIN:
            return
        if isinstance(func, int):
            func = self.schema.funcs.get(func)
            if func is None:
                raise ClientError(ErrorCode.ER_NO_SUCH_FUNCTION, "")
        ua = self.effective(user_id)
        if ua.universal & (Priv.X | Priv.U) == Priv.X | Priv.U:
            return
        access = (Priv.X | Priv.U) & ~ua.entity.get("function", 0)
        need = access & ~ua.universal
        if need & Priv.U or (func.owner != user_id and need & ~ua.on("function", func.id)):
            raise AccessDeniedError("Execute", "function", func.name,
                                    self.user_name(user_id)).located("./src/box/func.c", 629)

    def check_sequence(self, user_id: int, seq_id: int, access: int = Priv.W) -> None:
        """access_check_sequence(): usage + write on the sequence (or universally)."""
        if user_id == ADMIN:
            return
        ua = self.effective(user_id)
        access = Priv.U | Priv.W
        need = access & ~ua.universal & ~ua.entity.get("sequence", 0)
        owner = self.owner_of("sequence", seq_id)
        if need and (need & Priv.U or (owner != user_id and need & ~ua.on("sequence", seq_id))):
            name = self.user_name(user_id)
            if not ua.universal & Priv.U:
                raise AccessDeniedError("Usage", "universe", "", name).located(
                    _SEQUENCE_C, 287)
            raise AccessDeniedError(priv_name(access), "sequence",
                                    self.object_name("sequence", seq_id), name).located(
                _SEQUENCE_C, 292)

    def check_ddl(self, user_id: int, name: str, object_id: Any, owner_id: int | None,
                  object_type: str, priv: int) -> None:
        """access_check_ddl(): what the _space/_index/_user/_func/_priv triggers ask."""
        if user_id == ADMIN:
            return
        ua = self.effective(user_id)
        access = (Priv.U | int(priv)) & ~ua.universal
        if not access:
            return
        is_owner = owner_id == user_id
        access &= ~ua.entity.get(object_type, 0)
        if not access or (is_owner and not access & (Priv.U | Priv.C)):
            return
        if not access & Priv.U:
            access &= ~ua.on(object_type, object_id)
            if not access:
                return
        user_name = self.user_name(user_id)
        if access & Priv.U:
            raise AccessDeniedError("Usage", "universe", "", user_name).located(_ALTER_CC, 117)
        raise AccessDeniedError(priv_name(access), object_type, name, user_name).located(
            _ALTER_CC, 117)

    def check_grant(self, user_id: int, row: Any, priv_type: int) -> None:
        """priv_def_check(): may the grantor in a `_priv` row give/take it (checked
        when the row is written by `user_id`)."""
        grantor_id, grantee_id, object_type, object_id, access = row[:5]
        grantor = self.schema.users.get(grantor_id)
        if grantor is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_USER, str(grantor_id))
        grantee = self.schema.users.get(grantee_id)
        if grantee is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_USER, str(grantee_id))
        if object_type not in OBJECT_TYPES:
            raise ClientError(ErrorCode.ER_UNKNOWN_SCHEMA_OBJECT, object_type)
        name = self.object_name(object_type, object_id)
        self.check_ddl(user_id, name, object_id, grantor_id, object_type, priv_type)
        word = priv_name(priv_type)
        entity = object_id == "" and object_type != "universe"
        if object_type == "universe" or entity:
            if grantor_id != ADMIN:
                raise AccessDeniedError(word, object_type, name, grantor.name).located(
                    _ALTER_CC, _GRANT_ENTITY_LINE if entity else _GRANT_LINE["universe"])
        elif object_type in ("space", "function", "sequence"):
            if object_type == "space":
                if self.schema.engine.find_space(object_id) is None:
                    raise ClientError(ErrorCode.ER_NO_SUCH_SPACE, str(object_id))
            elif self.owner_of(object_type, object_id) is None:
                code = (ErrorCode.ER_NO_SUCH_FUNCTION if object_type == "function"
                        else ErrorCode.ER_NO_SUCH_SEQUENCE)
                raise ClientError(code, str(object_id))
            if self.owner_of(object_type, object_id) != grantor_id and grantor_id != ADMIN:
                raise AccessDeniedError(word, object_type, name, grantor.name).located(
                    _ALTER_CC, _GRANT_LINE[object_type])
        elif object_type in ("role", "user"):
            target = self.schema.users.get(object_id)
            if target is None or target.type != object_type:
                code = ErrorCode.ER_NO_SUCH_ROLE if object_type == "role" else \
                    ErrorCode.ER_NO_SUCH_USER
                raise ClientError(code, target.name if target is not None else str(object_id))
            public_x = object_type == "role" and object_id == PUBLIC and access == Priv.X
            if target.owner != grantor_id and grantor_id != ADMIN and not public_x:
                raise AccessDeniedError(word, object_type, name, grantor.name).located(
                    _ALTER_CC, _GRANT_LINE[object_type])
            if object_type == "role":
                self.check_role_loop(grantee_id, object_id)
        if not access:
            raise ClientError(ErrorCode.ER_GRANT, "the grant tuple has no privileges")

    def check_role_loop(self, grantee_id: int, role_id: int) -> None:
        """role_check(): granting `role_id` to `grantee_id` must not close a cycle."""
        closure, layer = {grantee_id}, {grantee_id}
        while layer:
            layer = set().union(*(self.members(uid) for uid in layer)) - closure
            closure |= layer
        if role_id in closure:
            raise ClientError(ErrorCode.ER_ROLE_LOOP, self.user_name(role_id),
                              self.user_name(grantee_id))

    # -------------------------------------------------------------- sysviews

    def visible(self, user_id: int, view_id: int, tup: Any) -> bool:
        """The sysview filter of `_v*` space `view_id` for one row of its source."""
        if user_id == ADMIN:
            return True
        ua = self.effective(user_id)
        source = VIEW_SOURCE[view_id]
        source_read = bool(ua.on("space", source) & Priv.R)
        if view_id in (281, 289):                                   # _vspace, _vindex
            if ua.universal & PRIV_WRDA or ua.entity.get("space", 0) & PRIV_WRDA or source_read:
                return True
            if self.schema.engine.find_space(tup[0]) is None:
                return False
            return bool(ua.on("space", tup[0]) & PRIV_WRDA) or self.space_owner(tup[0]) == user_id
        if view_id == 305:                                          # _vuser
            if ua.universal & PRIV_WRDA or source_read:
                return True
            return tup[0] == user_id or tup[1] == user_id or tup[0] == PUBLIC
        if view_id == 313:                                          # _vpriv
            if ua.universal & PRIV_WRDA or source_read:
                return True
            return tup[0] == user_id or tup[1] == user_id
        if view_id in (297, 286):                                   # _vfunc, _vsequence
            kind = "function" if view_id == 297 else "sequence"
            wanted = PRIV_WRDA | Priv.X
            if ua.universal & wanted or ua.entity.get(kind, 0) & wanted or source_read:
                return True
            return tup[1] == user_id or bool(ua.on(kind, tup[0]) & wanted)
        return True                                                 # _vcollation
