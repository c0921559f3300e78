"""CALL, CALL_16 and EVAL: the part of the box executor that runs Lua (2.6.0's
call.c and lua/call.c). Everything else a request does to the box (SELECT, DML,
VOTE, access, replication) is core/net/box_executor.py's, which this extends.

* CALL/CALL_16: a function in `_func` needs execute on it (a setuid one runs as its
  owner); any other name needs execute on the universe, and is looked up as Lua's
  global `a.b.c` or `a.b:method`. CALL sends every returned value; CALL_16 turns
  each one into a tuple as 1.6 did (see `call16_tuples`).
* EVAL: execute on the universe, then the chunk runs with the arguments as `...`.
* Lua errors go out as ER_PROC_LUA with their message; box.error objects keep their
  code and type. A function may not leave a transaction open (ER_FUNCTION_TX_ACTIVE).

Every request runs in its own fiber (the server's), bound to its session, so
box.session.* in Lua code called from here sees the connection's session.
"""
from __future__ import annotations

import uuid as uuid_module
from decimal import Decimal
from typing import Any, Callable

import lupa.luajit21 as lupa

from spindle.core.box.access import Access, Priv
from spindle.core.box.schema import FUNC_ID
from spindle.core.iproto.msgpack import (
    DECIMAL_ROOM, MP_EXT_DECIMAL, MP_EXT_ERROR, MP_EXT_UUID, KeyMap, MsgpackRaw, RawExt,
    error_unpack, ext_code, packb,
)
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.net import requests as rq
from spindle.core.net.box_executor import BoxExecutor
from spindle.core.net.session import Session, SessionUser

from .box.func import compile_body
from .errors import LuaError

_INT_MIN, _UINT_MAX = -(1 << 63), (1 << 64) - 1

# Name resolution of CALL, as box_lua_find(): every '.' piece but the last must be a
# table; 'obj:method' calls method with obj as self; the callee must be a function
# or a table (a callable one). Returns found, results...
_CALL_LUA = b"""
local find, sub = string.find, string.sub
local function resolve(name)
    local scope, start = _G, 1
    while true do
        local dot = find(name, '.', start, true)
        if dot == nil then break end
        scope = scope[sub(name, start, dot - 1)]
        if type(scope) ~= 'table' then return nil end
        start = dot + 1
    end
    local object
    local colon = find(name, ':', start, true)
    if colon ~= nil then
        object = scope[sub(name, start, colon - 1)]
        local kind = type(object)
        if kind ~= 'table' and kind ~= 'userdata' then return nil end
        scope, start = object, colon + 1
    end
    local fn = scope[sub(name, start)]
    local kind = type(fn)
    if kind ~= 'function' and kind ~= 'table' then return nil end
    if kind == 'table' then
        local mt = debug.getmetatable(fn)
        if mt == nil or mt.__call == nil then
            -- what lua_call from C says: no position, no variable name
            error('attempt to call a table value', 0)
        end
    end
    return fn, object, colon ~= nil
end
local function call(name, ...)
    local fn, object, is_method = resolve(name)
    if fn == nil then
        return false
    end
    if is_method then
        return true, fn(object, ...)
    end
    return true, fn(...)
end
-- whether call() finds `name` (a table without __call counts: it fails later)
local function exists(name)
    local ok, fn = pcall(resolve, name)
    return not ok or fn ~= nil
end
return call, exists
"""


def proc_lua_error(message: str) -> BoxError:
    """A Lua-side failure as 2.6.0 reports it: LuajitError, ER_PROC_LUA."""
    exc = LuaError(message)
    exc.code = ErrorCode.ER_PROC_LUA
    return exc


class LuaBoxExecutor(BoxExecutor):
    """The instance's executor: core/net/box_executor.py's BoxExecutor (SELECT, DML,
    VOTE, access, replication), with CALL, CALL_16 and EVAL run by the instance's
    Lua runtime."""

    def __init__(self, runtime, box_provider: Callable[[], Any],
                 access_provider: Callable[[], Access] | None = None):
        super().__init__(box_provider, access_provider, replication=_replication)
        self.runtime = runtime
        self.sched = runtime.sched
        self._call_by_name = self._call_exists = None
        self._bodies: dict = {}

    # ----------------------------------------------------------- functions

    def call(self, session: Session, request: rq.Call) -> list:
        results = self.call_function(session, request.name, self._lua_args(request.args))
        return self._call_result(request, results)

    def call_function(self, session: Session, name: str, args: list | BoxError) -> tuple:
        """The function a CALL (or box.func.<name>:call()) names, run as `session`:
        a persistent one of _func (execute access to it, its owner's rights when
        setuid, its body or the global of its name), else a global Lua function
        (execute access to the universe). Returns its Lua results."""
        func = self.box.schema.func_by_name(name)
        if func is None:
            self.access.check_universe(session.euid, Priv.X, "function", name)
            return self._run_global(name, args)
        self.access.check_function(session.euid, func)
        owner = self.box.schema.users.get(func.owner) if func.setuid else None
        if owner is None:
            return self._run_function(name, func, args)
        with session.su(SessionUser(owner.id, owner.name)):
            return self._run_function(name, func, args)

    def _wire_results(self, results: tuple) -> list:
        """Lua results as they go out (a result nested past what Python's stack
        takes is past encode_max_depth anyway)."""
        try:
            return [_to_wire(self.runtime.to_py(value)) for value in results]
        except RecursionError:
            raise _too_deep(ENCODE_MAX_DEPTH) from None

    def _call_result(self, request: rq.Call, results: tuple) -> list:
        values = self._wire_results(results)
        if isinstance(request, rq.Call16):
            values = call16_tuples(values)
        return [MsgpackRaw(packb(value)) for value in values]

    def _run_function(self, name: str, func, args: list | BoxError) -> tuple:
        if func.language.upper() != "LUA":
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "Spindle",
                              f"{func.language} functions")
        if func.body:
            compiled = self._compiled(func)
            if isinstance(args, BoxError):
                raise args
            return self._guarded(lambda: self.runtime.call(compiled, *args))
        return self._run_global(name, args)

    def _compiled(self, func):
        """The Lua function of a persistent function's body, compiled once per body
        (on the main state: safe to keep)."""
        key = (func.id, func.body)
        compiled = self._bodies.get(key)
        if compiled is None:
            if len(self._bodies) > 1000:
                self._bodies.clear()
            row = self.box.engine.space(FUNC_ID).get([func.id])
            if row is None:     # (the catalogue has it: its _func row is there)
                row = [func.id, func.owner, func.name, func.setuid, func.language, func.body]
            compiled = self._bodies[key] = compile_body(self.runtime, row)   # (sandboxed?)
        return compiled

    def _run_global(self, name: str, args: list | BoxError) -> tuple:
        if self._call_by_name is None:
            self._call_by_name, self._call_exists = self.runtime.load(_CALL_LUA, "=call")()
        if isinstance(args, BoxError):
            # 2.6.0 finds the function before it decodes the arguments
            if self.runtime.invoke(self._call_exists, name)[0]:
                raise args
            results = ()
        else:
            results = self._guarded(lambda: self.runtime.call(self._call_by_name, name, *args))
        if not results or results[0] is not True:
            encoded = name.encode("utf-8", "surrogateescape")
            raise ClientError(ErrorCode.ER_NO_SUCH_PROC, len(encoded), name)
        return results[1:]

    def eval(self, session: Session, request: rq.Eval) -> list:
        self.access.check_universe(session.euid, Priv.X)
        args = self._lua_args(request.args)

        def run() -> tuple:
            try:
                chunk = self.runtime.load(request.expr.encode("utf-8", "surrogateescape"),
                                          "=eval")
            except LuaError as exc:     # a syntax error: 2.6.0's lua/call.c reports it
                raise exc.located("./src/box/lua/call.c", 384) from None
            if isinstance(args, BoxError):
                raise args          # (a syntax error comes first, as in 2.6.0)
            return self.runtime.call(chunk, *args)
        results = self._guarded(run)
        return [MsgpackRaw(packb(value)) for value in self._wire_results(results)]

    def _lua_args(self, args: list) -> list | BoxError:
        """CALL/EVAL arguments as 2.6.0's luamp_decode gives them to Lua (nil as
        box.NULL, arrays and maps with their serializer hints), or the error it
        raises on the first extension Lua cannot hold (returned: it is raised where
        2.6.0 decodes the arguments, after finding the function)."""
        values = list(args)
        for value in values:
            if type(value) not in _PLAIN or value is None:
                try:
                    return [self._lua_arg(value) for value in values]
                except BoxError as exc:
                    return exc
                except RecursionError:      # (LuaJIT's word for too deep)
                    return proc_lua_error("stack overflow")
        return values

    def _lua_arg(self, value: Any) -> Any:
        convert = self.runtime.convert
        kind = type(value)
        if value is None:
            return convert.NULL
        if kind is list or kind is tuple:
            items = []                  # (a loop, not a comprehension: a frame a level)
            for item in value:
                items.append(self._lua_arg(item))
            return convert._setmetatable(convert._table(*items), convert.array_mt)
        if kind is dict or kind is KeyMap:
            table = convert._table()
            for key, item in value.items():
                table[self._lua_arg(key)] = self._lua_arg(item)
            return convert._setmetatable(table, convert.map_mt)
        if isinstance(value, Decimal):
            if len(value.as_tuple().digits) > DECIMAL_ROOM:     # more than Lua holds
                raise proc_lua_error("msgpack.decode: invalid MsgPack")
            return convert.to_lua(value)
        code = ext_code(value)
        if code is None:
            return convert.to_lua(value)
        if code in (MP_EXT_DECIMAL, MP_EXT_UUID):      # one its payload does not make
            raise proc_lua_error("msgpack.decode: invalid MsgPack")
        if code == MP_EXT_ERROR:
            err = error_unpack(value.data)
            if err is None:
                raise proc_lua_error("Can not parse an error from MsgPack")
            return self.runtime.error_object(err)
        raise proc_lua_error(f"Unsuported MsgPack extension type: {code & 0xFFFFFFFF}")

    def _guarded(self, run: Callable[[], tuple]) -> tuple:
        """Run Lua for a request: Lua errors become ER_PROC_LUA, and a transaction
        the code left open is rolled back with ER_FUNCTION_TX_ACTIVE (2.6.0)."""
        txns = self.box.engine.txns
        try:
            results = run()
        except LuaError as exc:
            if exc.code == ErrorCode.ER_UNKNOWN and type(exc) is LuaError:
                exc.code = ErrorCode.ER_PROC_LUA
            self._rollback_open(txns)
            raise
        except lupa.LuaError as exc:
            self._rollback_open(txns)
            raise proc_lua_error(str(exc)) from None
        except BaseException:
            self._rollback_open(txns)
            raise
        if txns.current is not None:
            self._rollback_open(txns)
            raise ClientError(ErrorCode.ER_FUNCTION_TX_ACTIVE)
        return results

    @staticmethod
    def _rollback_open(txns) -> None:
        if txns.current is not None:
            txns.rollback()


def _replication(executor, session: Session, request: rq.ReplicationRequest, stream) -> None:
    """JOIN / SUBSCRIBE / FETCH_SNAPSHOT / REGISTER: the master side of replication
    (core/replication/master.py) takes over the connection. Imported at the first
    such request, not at start: a lone instance never loads the relay."""
    from spindle.core.replication.master import box_process_replication
    box_process_replication(executor, session, request, stream)


# ------------------------------------------------------------------ values

_PLAIN = frozenset({int, str, bytes, float, bool, type(None)})


# msgpack.cfg.encode_max_depth's default: a container nested deeper is an error
ENCODE_MAX_DEPTH = 128


def _to_wire(value: Any, level: int = 0) -> Any:
    """A Lua result as 2.6.0's serializer encodes it: strings always as MsgPack str,
    integral numbers out of the 64-bit range as doubles, functions and other Lua
    objects refused, containers nested deeper than encode_max_depth refused."""
    kind = type(value)
    if kind is str or kind is bool or kind is float or value is None:
        return value
    if kind is int:
        return value if _INT_MIN <= value <= _UINT_MAX else float(value)
    if kind is bytes:
        return value.decode("utf-8", "surrogateescape")
    if kind is list or kind is tuple:
        if level >= ENCODE_MAX_DEPTH:
            raise _too_deep(level)
        return [_to_wire(item, level + 1) for item in value]
    if kind is dict:
        raised = value.get("_py")
        if isinstance(raised, BoxError):      # a box.error object made from it
            return raised.message
        if level >= ENCODE_MAX_DEPTH:
            raise _too_deep(level)
        return {_key_to_wire(k, level + 1): _to_wire(v, level + 1) for k, v in value.items()}
    if isinstance(value, (uuid_module.UUID, Decimal, RawExt, bytearray)):
        return value
    if isinstance(value, BoxError):
        # an error object (pcall's, a peer's): with error marshaling off, as 2.6.0
        # has it by default, its message
        return value.message
    lua_kind = lupa.lua_type(value)
    if lua_kind is not None:
        raise proc_lua_error(f"unsupported Lua type '{lua_kind}'")
    if isinstance(value, (list, tuple)):
        return [_to_wire(item, level + 1) for item in value]
    raise proc_lua_error(f"unsupported Lua type '{type(value).__name__}'")


def _too_deep(level: int) -> BoxError:
    return proc_lua_error(f"Too high nest level - {level + 1}")


def _key_to_wire(key: Any, level: int) -> Any:
    """_to_wire of a map key: a table used as a key stays hashable (KeyMap)."""
    if type(key) is tuple:
        return tuple(_key_to_wire(item, level + 1) for item in key)
    if type(key) is KeyMap:
        return KeyMap({_key_to_wire(k, level + 1): _to_wire(v, level + 1)
                       for k, v in key.items()})
    return _to_wire(key, level)


def _is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def call16_tuples(values: list) -> list:
    """CALL_16 results (luamp_encode_call_16 of 2.6.0): every returned value becomes a
    tuple; a single returned array is a list of tuples, unless its first item is a
    scalar (then it is one tuple); scalars among tuples are wrapped one by one."""
    if len(values) != 1:
        return [value if _is_array(value) else [value] for value in values]
    root = values[0]
    if not _is_array(root):
        return [[root]]
    if not root:
        return [[]]
    out = []
    for position, item in enumerate(root):
        if _is_array(item):
            out.append(item)
        elif position == 0:
            return [root]
        else:
            out.append([item])
    return out
