"""box.schema.user / box.schema.role of Tarantool 2.6.0, and the Lua-side helpers.

Users, roles and grants are rows of `_user` and `_priv`, written in 2.6.0's order:
user.create = INSERT _user (id = max + 1, the first user gets 32), REPLACE _priv
role public, alter on itself, then, as admin, session+usage on universe; a grant
REPLACEs the `_priv` row with the old bits OR the new ones (computed, like LuaJIT's
`bit` library, in signed 32 bits), a revoke REPLACEs it with fewer bits or DELETEs
it; user.drop drops what the user owns, takes its role away from whoever has it,
revokes everything it has and DELETEs the `_user` row.

`UserDdl` is a mixin of `ddl.Ddl`, whose plumbing (_run, _write, _view, _as,
checks) it uses. The helpers at the top mirror schema.lua's check_param /
check_param_table and privilege_resolve / privilege_check, with their exact texts.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable

from spindle.core.box.access import PRIV_ALL, Priv
from spindle.core.box.cfg_options import lua_type
from spindle.core.box.alter import (
    ADMIN, GUEST, PRIV, PUBLIC, SUPER, USER, VFUNC, VPRIV, VSEQUENCE, VSPACE, VUSER,
)
from spindle.core.iproto.auth import password_hash   # box.schema.user.password()
from spindle.core.iproto.errors import ClientError, ErrorCode as E

if TYPE_CHECKING:
    from spindle.core.box.alter import AlterChecks

_PRIV_WORDS = (("read", Priv.R), ("write", Priv.W), ("execute", Priv.X), ("session", Priv.S),
               ("usage", Priv.U), ("create", Priv.C), ("drop", Priv.D), ("alter", Priv.A),
               ("reference", Priv.REFERENCE), ("trigger", Priv.TRIGGER),
               ("insert", Priv.INSERT), ("update", Priv.UPDATE), ("delete", Priv.DELETE))


def tobit(value: int) -> int:
    """LuaJIT's bit.* result: the value as a signed 32-bit integer."""
    value = int(value) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


_PRIV_COMBO = {
    "universe": tobit(PRIV_ALL),
    "space": tobit(PRIV_ALL ^ Priv.S ^ Priv.REVOKE ^ Priv.GRANT),  # sic: execute allowed
    "sequence": int(Priv.R | Priv.W | Priv.U | Priv.C | Priv.A | Priv.D),
    "function": int(Priv.X | Priv.U | Priv.C | Priv.D),
    "role": int(Priv.X | Priv.U | Priv.C | Priv.D),
    "user": int(Priv.C | Priv.A | Priv.D),
}


# ----------------------------------------------------------------- Lua-side checks

def illegal(message: str) -> ClientError:
    return ClientError(E.ER_ILLEGAL_PARAMS, message)


def lua_pairs(table: Any) -> list[tuple[Any, Any]]:
    """A Lua table as (key, value) pairs: array part (1-based) first, nils dropped."""
    if isinstance(table, dict):
        ints = sorted((k, v) for k, v in table.items() if type(k) is int)
        rest = [(k, v) for k, v in table.items() if type(k) is not int]
        pairs = ints + rest
    else:
        pairs = list(enumerate(table, 1))
    return [(k, v) for k, v in pairs if v is not None]


def check_param(value: Any, name: str, expected: str) -> None:
    if lua_type(value) != expected:
        raise illegal(f"{name} should be a {expected}")


def check_options(options: Any, template: dict[str, str]) -> dict:
    """check_param_table(): the options as a dict, or ER_ILLEGAL_PARAMS."""
    if options is None:
        return {}
    if lua_type(options) != "table":
        raise illegal("options should be a table")
    pairs = lua_pairs(options)
    result = dict(pairs)
    if result.get("dont_check"):
        return result
    for key, value in pairs:
        want = template.get(key)
        if want is None:
            raise illegal(f"unexpected option '{key}'")
        if want == "any":
            continue
        if "," not in want:
            if lua_type(value) != want:
                raise illegal(f"options parameter '{key}' should be of type {want}")
        elif lua_type(value) not in [t.strip() for t in want.split(",")]:
            raise illegal(f"options parameter '{key}' should be one of types: {want}")
    return result


def privilege_resolve(privilege: Any) -> Any:
    if isinstance(privilege, str):
        lowered = privilege.lower()
        return sum(int(bit) for word, bit in _PRIV_WORDS if word in lowered)
    return privilege


def privilege_check(privilege: Any, object_type: Any) -> int:
    bits = privilege_resolve(privilege)
    combo = _PRIV_COMBO.get(object_type)
    if combo is None:
        raise ClientError(E.ER_UNKNOWN_SCHEMA_OBJECT, object_type)
    if lua_type(bits) != "number" or bits == 0 or tobit(bits & combo) != bits:
        raise ClientError(E.ER_UNSUPPORTED_PRIV, object_type, privilege)
    return bits


# ------------------------------------------------------------------- UserDdl

class UserDdl:
    """Users, roles and grants (a mixin of ddl.Ddl)."""

    if TYPE_CHECKING:
        # What this mixin uses of ddl.Ddl, declared for the type checker only (Ddl
        # defines them; mypy checks that its definitions match these).
        engine: Any
        checks: AlterChecks
        session_user_id: Callable[[], int]

        def _euid(self) -> int: ...
        def _as(self, user_id: int) -> AbstractContextManager[None]: ...
        def _run(self, fn: Callable, *args: Any) -> Any: ...
        def _write(self, space_id: int, method: str, *args: Any,
                   check: Callable | None = None, **kwargs: Any) -> Any: ...
        def _view(self, view_id: int, key: Any = None, index: int = 0,
                  iterator: Any = None) -> list: ...
        def _view_get(self, view_id: int, key: Any, index: int = 0) -> Any: ...
        def _auto_increment(self, space_id: int, tail: list) -> tuple: ...
        def _user_row(self, name_or_id: Any) -> Any: ...
        def _resolve(self, name_or_id: Any, kind: str | None) -> int | None: ...
        def _find_space(self, id_or_name: Any) -> Any: ...
        def _func_row(self, name_or_id: Any) -> Any: ...
        def _sequence_row(self, name_or_id: Any) -> Any: ...
        def space_drop(self, space_id: Any, space_name: Any = None,
                       options: Any = None) -> None: ...
        def func_drop(self, name: Any, options: Any = None) -> None: ...
        def sequence_drop(self, name_or_id: Any, options: Any = None) -> None: ...

    def user_exists(self, name: Any) -> bool:
        return self._resolve(name, "user") is not None

    def role_exists(self, name: Any) -> bool:
        return self._resolve(name, "role") is not None

    def user_create(self, name: Any, options: Any = None) -> int | None:
        """box.schema.user.create(): INSERT _user, then role public, alter on itself,
        and (as admin) session+usage on universe. Returns the new id."""
        uid = self._resolve(name, None)
        opts = check_options(options, {"password": "string", "if_not_exists": "boolean"})
        if uid is not None:
            if not opts.get("if_not_exists"):
                raise ClientError(E.ER_USER_EXISTS, name)
            return None
        auth = {"chap-sha1": password_hash(opts["password"])} if "password" in opts else {}
        return self._run(self._user_create, name, auth)

    def _user_create(self, name: str, auth: dict) -> int:
        uid = self._auto_increment(USER, [self._euid(), name, "user", auth])[0]
        self.user_grant(uid, "public")
        self.user_grant(uid, "alter", "user", uid)
        with self._as(ADMIN):
            self.user_grant(uid, "session,usage", "universe", None, {"if_not_exists": True})
        return uid

    def role_create(self, name: Any, options: Any = None) -> int | None:
        opts = check_options(options, {"if_not_exists": "boolean"})
        if self._resolve(name, None) is not None:
            if not opts.get("if_not_exists"):
                raise ClientError(E.ER_ROLE_EXISTS, name)
            return None
        return self._run(lambda: self._auto_increment(USER, [self._euid(), name, "role", {}])[0])

    def user_passwd(self, name: Any, new_password: Any = None) -> None:
        """box.schema.user.passwd([name,] password): UPDATE _user auth."""
        if name is None:
            raise ClientError(E.ER_PROC_LUA, "Usage: box.schema.user.passwd([user,] password)")
        if new_password is None:
            session_uid = self.session_user_id()
            with self._as(ADMIN):
                self._run(self._chpasswd, session_uid, name)
            return
        uid = self._resolve(name, "user")
        if uid is None:
            raise ClientError(E.ER_NO_SUCH_USER, name)
        self._run(self._chpasswd, uid, new_password)

    def _chpasswd(self, uid: int, password: Any) -> None:
        ops = [["=", 5, {"chap-sha1": password_hash(password)}]]
        self._write(USER, "update", [uid], ops, check=lambda: self.checks.user_update(uid, ops))

    def user_drop(self, name: Any, options: Any = None) -> None:
        """box.schema.user.drop(): drops what the user owns, revokes, DELETE _user."""
        opts = check_options(options, {"if_exists": "boolean"})
        uid = self._resolve(name, "user")
        if uid is None:
            if not opts.get("if_exists"):
                raise ClientError(E.ER_NO_SUCH_USER, name)
            return
        if GUEST <= uid <= PUBLIC:
            raise ClientError(E.ER_DROP_USER, name, "the user or the role is a system")
        if uid in (self.session_user_id(), self._euid()):
            raise ClientError(E.ER_DROP_USER, name, "the user is active in the current session")
        self._run(self._drop, uid)

    def role_drop(self, name: Any, options: Any = None) -> None:
        opts = check_options(options, {"if_exists": "boolean"})
        uid = self._resolve(name, "role")
        if uid is None:
            if not opts.get("if_exists"):
                raise ClientError(E.ER_NO_SUCH_ROLE, name)
            return
        if GUEST <= uid <= PUBLIC or uid == SUPER:
            raise ClientError(E.ER_DROP_USER, name, "the user or the role is a system")
        self._run(self._drop, uid)

    def _drop(self, uid: int) -> None:
        for row in self._view(VSPACE, [uid], 1):
            self.space_drop(row[0], row[2])
        for row in self._view(VFUNC, [uid], 1):
            self.func_drop(row[0])
        for row in self._view(VPRIV, ["role", uid], 2):
            self._revoke(row[1], row[1], uid)
        for row in self._view(VSEQUENCE, [uid], 1):
            self.sequence_drop(row[0])
        if self._view_get(VUSER, [uid])[3] == "user":
            with self._as(ADMIN):
                self.user_revoke(uid, "session,usage", "universe", None, {"if_exists": True})
        for row in self._view(VPRIV, [uid]):
            with self._as(ADMIN):
                self._revoke(uid, uid, row[4], row[2], row[3])
        old = self.engine.space(USER).get([uid])
        self._write(USER, "delete", [uid], check=lambda: self.checks.user_drop(old))

    # ----------------------------------------------------------- grant/revoke

    def user_grant(self, user_name: Any, *args: Any) -> None:
        """box.schema.user.grant(user, privilege, object_type, object_name, options)
        or (user, role)."""
        uid = self._resolve(user_name, "user")
        if uid is None:
            raise ClientError(E.ER_NO_SUCH_USER, user_name)
        self._run(self._grant, uid, user_name, *args)

    def user_revoke(self, user_name: Any, *args: Any) -> None:
        uid = self._resolve(user_name, "user")
        if uid is None:
            raise ClientError(E.ER_NO_SUCH_USER, user_name)
        self._run(self._revoke, uid, user_name, *args)

    def role_grant(self, role_name: Any, *args: Any) -> None:
        uid = self._resolve(role_name, "role")
        if uid is None:
            raise ClientError(E.ER_NO_SUCH_ROLE, role_name)
        self._check_role_priv(args[0] if args else None)
        self._run(self._grant, uid, role_name, *args)

    def role_revoke(self, role_name: Any, *args: Any) -> None:
        uid = self._resolve(role_name, "role")
        if uid is None:
            raise ClientError(E.ER_NO_SUCH_ROLE, role_name)
        self._check_role_priv(args[0] if args else None)
        self._run(self._revoke, uid, role_name, *args)

    def user_enable(self, user: Any) -> None:
        self.user_grant(user, "session,usage", "universe", None, {"if_not_exists": True})

    def user_disable(self, user: Any) -> None:
        self.user_revoke(user, "session,usage", "universe", None, {"if_exists": True})

    @staticmethod
    def _check_role_priv(priv: Any) -> None:
        text = str(priv).lower() if isinstance(priv, (str, int, float)) else ""
        if isinstance(priv, str) and ("session" in text or "usage" in text):
            raise ClientError(E.ER_GRANT, "system privilege can not be granted to role")

    def _grant(self, uid: int, name: Any, privilege: Any, object_type: Any = None,
               object_name: Any = None, options: Any = None) -> None:
        if object_name is None:
            if object_type is None:
                object_type, object_name, privilege = "role", privilege, "execute"
            else:
                object_name = ""
        bits = privilege_check(privilege, object_type)
        oid = self._object_resolve(object_type, object_name)
        options = dict(options or {})
        grantor = self._euid() if options.get("grantor") is None else \
            self._resolve(options["grantor"], None)
        row = self._view_get(VPRIV, [uid, object_type, oid])
        old = row[4] if row is not None else 0
        bits = tobit(bits | old)
        if bits != old:
            new = [grantor, uid, object_type, oid, bits]
            self._write(PRIV, "replace", new, check=lambda: self.checks.priv_row(new, Priv.GRANT))
        elif not options.get("if_not_exists"):
            if object_type == "role" and object_name != "" and privilege == "execute":
                raise ClientError(E.ER_ROLE_GRANTED, name, object_name)
            shown = "" if object_type == "universe" else f" '{object_name}'"
            raise ClientError(E.ER_PRIV_GRANTED, name, privilege, object_type, shown)

    def _revoke(self, uid: int, name: Any, privilege: Any, object_type: Any = None,
                object_name: Any = None, options: Any = None) -> None:
        if object_name is None:
            if object_type is None:
                object_type, object_name, privilege = "role", privilege, "execute"
            else:
                object_name = ""
        bits = privilege_check(privilege, object_type)
        options = dict(options or {})
        oid = self._object_resolve(object_type, object_name)
        row = self._view_get(VPRIV, [uid, object_type, oid])
        if row is None:
            if options.get("if_exists"):
                return
            if object_type == "role" and object_name != "" and privilege == "execute":
                raise ClientError(E.ER_ROLE_NOT_GRANTED, name, object_name)
            raise ClientError(E.ER_PRIV_NOT_GRANTED, name, privilege, object_type, object_name)
        old = row[4]
        bits = tobit(old & tobit(~bits))
        if bits == old:
            if options.get("if_exists"):
                return
            raise ClientError(E.ER_PRIV_NOT_GRANTED, name, privilege, object_type, object_name)
        if bits != 0:
            new = [row[0], uid, object_type, oid, bits]
            self._write(PRIV, "replace", new, check=lambda: self.checks.priv_row(new, Priv.GRANT))
        else:
            self._priv_delete(row)

    def _priv_delete(self, row: Any) -> Any:
        return self._write(PRIV, "delete", [row[1], row[2], row[3]],
                           check=lambda: self.checks.priv_row(row, Priv.REVOKE))

    def _object_resolve(self, object_type: Any, object_name: Any) -> Any:
        if object_name is not None and lua_type(object_name) not in ("string", "number"):
            raise illegal("wrong object name type")
        if object_type == "universe":
            return 0
        if object_type in ("space", "function", "sequence", "role", "user") and object_name == "":
            return ""
        if object_type == "space":
            space = self._find_space(object_name)
            if space is None:
                raise ClientError(E.ER_NO_SUCH_SPACE, object_name)
            return space.id
        if object_type == "function":
            row = self._func_row(object_name)
            if row is None:
                raise ClientError(E.ER_NO_SUCH_FUNCTION, object_name)
            return row[0]
        if object_type == "sequence":
            row = self._sequence_row(object_name)
            if row is None:
                raise ClientError(E.ER_NO_SUCH_SEQUENCE, object_name)
            return row[0]
        if object_type in ("role", "user"):
            row = self._user_row(object_name)
            if row is not None and row[3] == object_type:
                return row[0]
            raise ClientError(E.ER_NO_SUCH_ROLE if object_type == "role" else E.ER_NO_SUCH_USER,
                              object_name)
        raise ClientError(E.ER_UNKNOWN_SCHEMA_OBJECT, object_type)
