"""box.func for Lua (lua/box/func.lua): the definitions of _func as 2.6.0 shows them,
and func:call(args), which runs the function as an IPROTO CALL of it would
(lua/iproto.py `call_function`: access, setuid, body or global) as the caller's
session."""
from __future__ import annotations

import weakref
from typing import Any

from spindle.core.box.schema import FUNC_ID

from ..runtime import Multi, read_source

# _func fields (2.6.0's format)
_ID, _NAME, _SETUID, _LANGUAGE, _BODY, _RETURNS, _AGGREGATE = 0, 2, 3, 4, 5, 8, 9
_IS_DETERMINISTIC, _IS_SANDBOXED, _EXPORTS, _OPTS = 11, 12, 14, 15


# The Lua function of a persistent function's body, in 2.6.0's sandbox when
# is_sandboxed: what lua/call.c's default_sandbox_exports give, each table a copy
# (the function cannot change the real ones).
_COMPILE_LUA = """
local EXPORTS = {'assert', 'error', 'ipairs', 'math', 'next', 'pairs', 'pcall', 'print',
                 'select', 'string', 'table', 'tonumber', 'tostring', 'type', 'unpack',
                 'xpcall', 'utf8'}
local function sandbox()
    local env = {}
    for _, name in ipairs(EXPORTS) do
        local value = rawget(_G, name)
        if type(value) == 'table' then
            local copy = {}
            for k, v in pairs(value) do
                copy[k] = v
            end
            value = copy
        end
        env[name] = value
    end
    return env
end
return function(body, name, sandboxed)
    local chunk, err = loadstring('return ' .. body, '=' .. name)
    if chunk == nil then
        error(err, 0)
    end
    if sandboxed then
        setfenv(chunk, sandbox())
    end
    return chunk()
end
"""
_compilers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_body(runtime, row: Any) -> Any:
    """The Lua function of the body of `_func` row `row` (sandboxed or not)."""
    compiler = _compilers.get(runtime)
    if compiler is None:
        compiler = _compilers[runtime] = runtime.load(_COMPILE_LUA, "=func")()
    sandboxed = bool(row[_IS_SANDBOXED]) if len(row) > _IS_SANDBOXED else False
    return runtime.invoke(compiler, row[_BODY], row[_NAME], sandboxed)[0]


def definition(row: list) -> dict[str, Any]:
    """One _func row as box.func.<name> holds it: `body` and `is_sandboxed` only for
    a function with a body, `exports` as {lua = bool, sql = bool}."""
    def field(number: int, default: Any) -> Any:
        return row[number] if len(row) > number else default

    exports = [str(item).upper() for item in field(_EXPORTS, ["LUA"]) or []]
    opts = field(_OPTS, {}) or {}
    result = {
        "id": row[_ID], "name": row[_NAME], "setuid": bool(row[_SETUID]),
        "language": row[_LANGUAGE], "returns": field(_RETURNS, "any"),
        "aggregate": field(_AGGREGATE, "none"),
        "is_deterministic": bool(field(_IS_DETERMINISTIC, False)),
        "is_multikey": bool(opts.get("is_multikey", False)) if isinstance(opts, dict) else False,
        "exports": {"lua": "LUA" in exports, "sql": "SQL" in exports},
    }
    body = field(_BODY, "")
    if body:
        result["body"] = body
        result["is_sandboxed"] = bool(field(_IS_SANDBOXED, False))
    return result


class FuncApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        runtime = storage.runtime
        native = {"schema_version": lambda: self.storage.box.schema.version,
                  "definitions": self.definitions}
        blocking = {"call": self.call}
        chunk = runtime.load(read_source("box/func.lua"), "@box/func.lua")
        self.lua = chunk(runtime.table({k: runtime.bridge(v) for k, v in native.items()}),
                         runtime.table(blocking), runtime.wait, box_table)
        # (looked up once: a Lua table read from Python while a fiber's coroutine is
        # suspended in a wait-request can come back as a tuple of stack values)
        self._index_call = self.lua[b"index_call"]
        self._bless_for = storage.spaces.lua[b"bless_for"]
        self._index_funcs: dict = {}        # (id, body) -> the compiled function

    def definitions(self) -> list[dict[str, Any]]:
        space = self.storage.box.engine.space(FUNC_ID)
        return [definition(list(row)) for row in space.select()]

    def call(self, name: str, args: Any) -> tuple:
        """func:call(args), in the calling fiber (a wait-request: it may yield)."""
        to_py = self.storage.runtime.to_py
        name, args = to_py(name), to_py(args)
        if isinstance(args, dict):          # {} or a table with holes
            args = [args[key] for key in sorted(k for k in args if isinstance(k, int))]
        service = self.storage.instance.iproto
        session = service.sessions.current()
        return Multi(service.executor.call_function(session, name, list(args or [])))

    # ------------------------------------------------------ functional indexes

    def index_call(self, func_id: int, space_id: int, tup: Any) -> list:
        """The engine's Functions.call (core/box/index_func.py): the results of
        persistent function `func_id` on a tuple of space `space_id`, which it gets
        as a box.tuple (field names work). It must not yield (it runs inside a
        statement), and runs in its sandbox when is_sandboxed."""
        runtime = self.storage.runtime
        row = self.storage.box.engine.space(FUNC_ID).get([func_id])
        if row is None:
            raise LookupError(f"no function {func_id}")
        body = row[_BODY] if len(row) > _BODY else ""
        key = (func_id, body)
        compiled = self._index_funcs.get(key)
        if compiled is None:
            if len(self._index_funcs) > 1000:
                self._index_funcs.clear()
            compiled = self._index_funcs[key] = compile_body(runtime, row)
        results = runtime.invoke(self._index_call, compiled, self._bless_for, space_id,
                                 self.storage.tuples.to_lua(tup))
        to_py = runtime.to_py
        return [to_py(value) for value in results]
