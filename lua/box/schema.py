"""box.schema for Lua (lua/box/schema.lua) over core/box/ddl.py.

DDL runs through one wait-request, `ddl(method, args...)`: the Ddl method gets plain
Python arguments, and what it returns becomes what box.schema returns in Lua (a
space or index is returned by id, and Lua hands out the box.space object).
"""
from __future__ import annotations

from typing import Any

from spindle.core.iproto.auth import password_hash
from spindle.core.iproto.errors import ClientError, ErrorCode

from ..runtime import Multi, read_source

PRIV_SPACE = 312
_PRIV_NAMES = ("read", "write", "execute", "session", "usage", "create", "drop", "alter",
               "reference", "trigger", "insert", "update", "delete")


class SchemaApi:
    def __init__(self, storage, box_table, sequence_lua):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        natives = {
            "user_exists": lambda name: self.ddl.user_exists(name),
            "role_exists": lambda name: self.ddl.role_exists(name),
            "func_exists": lambda name: self.ddl._func_row(name) is not None,
            "user_info": self.user_info,
            "password": password_hash,
        }
        chunk = runtime.load(read_source("box/schema.lua"), "@box/schema.lua")
        self.lua = chunk(runtime.table({k: runtime.bridge(v) for k, v in natives.items()}),
                         runtime.table({"ddl": self.call}), runtime.wait, box_table,
                         sequence_lua[b"bless"])

    @property
    def ddl(self):
        return self.storage.ddl

    def call(self, method: str, *args: Any) -> Any:
        """The wait-request of every DDL call (it commits, so it may block)."""
        to_py = self.runtime.to_py
        method = to_py(method)
        args = [to_py(a) for a in args]
        while args and args[-1] is None:
            args.pop()
        result = getattr(self.ddl, method)(*args)
        if method in ("space_create", "index_create"):
            return result.id
        if method == "sequence_create":          # (id, created)
            return Multi(result[:1] if result[1] else (result[0], "not created"))
        if method == "space_format" and len(args) < 2 and result is not None:
            return self.storage.tuples.value_to_lua(result)
        return None

    def user_info(self, name: Any, kind: str) -> list:
        """box.schema.user.info() / role.info(): {privileges, object type, object
        name} for each `_priv` row of the grantee, in `_priv` order."""
        schema = self.storage.box.schema
        if name is None:
            uid = self.storage.uid()
        else:
            uid = self.ddl._resolve(name, kind)
            if uid is None:
                code = ErrorCode.ER_NO_SUCH_USER if kind == "user" else ErrorCode.ER_NO_SUCH_ROLE
                raise ClientError(code, name)
        rows = self.storage.box.engine.space(PRIV_SPACE).select([uid])
        return [[privilege_name(row[4]), row[2], self._object_name(schema, row[2], row[3])]
                for row in rows]

    def _object_name(self, schema, object_type: str, object_id: Any) -> str:
        if object_type == "universe" or object_id == "":
            return ""
        if object_type == "space":
            space = self.storage.box.engine.find_space(object_id)
            return space.name if space is not None else ""
        if object_type in ("user", "role"):
            user = schema.users.get(object_id)
            return user.name if user is not None else ""
        if object_type == "function":
            func = schema.funcs.get(object_id)
            return func.name if func is not None else ""
        if object_type == "sequence":
            seq = schema.sequences.by_id.get(object_id)
            return seq.name if seq is not None else ""
        return str(object_id)


def privilege_name(bits: int) -> str:
    bits &= 0xFFFFFFFF
    return ",".join(name for no, name in enumerate(_PRIV_NAMES) if bits & (1 << no))
