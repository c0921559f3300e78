"""The Lua runtime: one LuaJIT state on the tx thread, entered only through the driver.

`LuaRuntime.call(fn, *args)` is the driver of DESIGN §2: it runs `fn` in a fresh Lua
coroutine, resuming it from the current fiber's greenlet. Whenever the coroutine
yields a wait-request, the driver (now outside Lua, switch guard released) runs the
request's Python callable — which may block the fiber — and resumes the coroutine with
the answer or the error.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import greenlet
import lupa.luajit21 as lupa

from spindle.core.fiber import Scheduler

from . import errors as lua_errors
from . import package_path
from .convert import Converter


class Multi(tuple):
    """Return several values to Lua from a bridged Python function."""


_SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))


def read_source(name: str) -> bytes:
    """A Lua file shipped with this package (a plain file read: importlib.resources
    would add ~4 ms of imports, zipfile among them, to every start)."""
    with open(os.path.join(_SOURCE_DIR, name), "rb") as source:
        return source.read()


class LuaRuntime:
    def __init__(self, sched: Scheduler):
        self.sched = sched
        self.lua = lupa.LuaRuntime(unpack_returned_tuples=True, register_eval=False,
                                   encoding=None)
        self.globals = self.lua.globals()
        self.globals[b"python"] = None       # user Lua never reaches Python directly
        self._loadstring = self.lua.eval("loadstring")
        self._error_helpers = self.load_file("errors.lua")()
        self.convert = Converter(self.lua, self.load_file("convert.lua")())
        driver = self.load_file("driver.lua")(self._error_helpers)
        self._entry = driver[b"entry"]
        self._protected = driver[b"protected"]
        self.wait = driver[b"wait"]          # Lua: wait(callable, args...)
        self.pack = driver[b"pack"]
        self._from_python = self._error_helpers[b"from_python"]
        self._check = self.lua.eval(
            "function(ok, ...) if ok then return ... end error((...), 2) end")
        self._make_bridge = self.lua.eval(
            "function(check, f) return function(...) return check(f(...)) end end")
        self.to_py = self.convert.to_py
        self.to_lua = self.convert.to_lua
        package_path.install(self)          # 2.6.0's package.path, LUA_PATH, cwd loader

    # ----------------------------------------------------------- loading code

    def load(self, code: str | bytes, chunkname: str | bytes | None = None):
        """Compile a chunk; raises LuaError with Lua's message on a syntax error."""
        if isinstance(code, str):
            code = code.encode("utf-8", "surrogateescape")
        if isinstance(chunkname, str):
            chunkname = chunkname.encode("utf-8", "surrogateescape")
        result = self._loadstring(code, chunkname) if chunkname else self._loadstring(code)
        if type(result) is tuple:   # (nil, message): a syntax error
            raise lua_errors.LuaError(self.convert.text(result[1]))
        return result

    def load_file(self, name: str):
        return self.load(read_source(name), f"@{name}")

    # ------------------------------------------------------------- the driver

    def call(self, fn, *args) -> tuple:
        """Run Lua `fn(*args)` as an entry in the current fiber; return its raw results
        as a tuple. A Lua error is raised as the Python exception it carries."""
        step = self._entry(fn)
        send = tuple(self.to_lua(a) for a in args)
        sched = self.sched
        while True:
            sched.switch_forbidden += 1
            try:
                result = step(*send)
            finally:
                sched.switch_forbidden -= 1
            tag = result[0] if type(result) is tuple else result
            if tag == b"wait":
                send = self._serve(result[1], result[2:])
            elif tag == b"done":
                return result[1:] if type(result) is tuple else ()
            elif tag == b"error":
                raise lua_errors.from_lua(result[1], self.convert.text)
            else:   # a stray top-level coroutine.yield(): resume with no values
                send = ()

    def invoke(self, fn, *args) -> tuple:
        """Call Lua `fn` directly, without a coroutine: for callbacks that must not
        block (a blocking call inside raises "fiber yield is not allowed here").
        Errors come back as the Python exceptions they carry, as with call()."""
        result = self._protected(fn, *[self.to_lua(a) for a in args])
        if result[0] == b"error":
            raise lua_errors.from_lua(result[1], self.convert.text)
        return result[1:] if type(result) is tuple else ()

    def _serve(self, request: Callable, args: tuple) -> tuple:
        """Run a wait-request's callable in this fiber, outside Lua."""
        try:
            value = request(*args)
        except greenlet.GreenletExit:
            raise   # the fiber is being killed: Lua is never resumed again
        except BaseException as exc:   # noqa: BLE001 - delivered into Lua as an error
            return False, self.error_to_lua(exc)
        if type(value) is Multi:
            return (True, *value)
        if value is None:
            return (True,)     # "no values", so the console prints nothing
        return True, value

    def error_to_lua(self, exc: BaseException):
        """The Lua error value for a Python exception; also box.error.last() of the
        current fiber. Errors Tarantool raises as plain strings (`lua_plain`) stay
        strings."""
        # The traceback's frames may hold lupa objects received as arguments of a
        # Lua->Python call; those must not outlive the call (DESIGN §2 rule 4).
        exc.__traceback__ = None
        if isinstance(exc, RecursionError):
            # a value nested past Python's stack: LuaJIT's word for it
            exc = lua_errors.LuaError("stack overflow")
        fiber = self.sched.current
        if fiber is not None:
            fiber.storage["last_error"] = exc
        if getattr(exc, "lua_plain", False):
            return str(exc).encode("utf-8", "surrogateescape")
        return self.error_object(exc)

    def error_object(self, exc: BaseException, depth: int = 0):
        """A box.error object for `exc` (with its prev chain) as a value (an error a
        peer sent), without making it the fiber's last error."""
        type_name, code, message = lua_errors.describe(exc)
        prev = getattr(exc, "prev", None)
        prev_object = (self.error_object(prev, depth + 1)
                       if isinstance(prev, BaseException) and depth < 64 else None)
        return self._from_python(exc, type_name.encode("utf-8", "surrogateescape"), code,
                                 message.encode("utf-8", "surrogateescape"),
                                 self.to_lua(lua_errors.lua_extra(exc)), prev_object)

    # ------------------------------------------------------- exposing Python

    def bridge(self, fn: Callable, convert_args: bool = True):
        """A Lua function calling Python `fn`, which must never block. Arguments become
        plain Python data (lupa objects die with the call); results go back through
        to_lua; a Python exception is raised in Lua as a box.error."""
        to_py, to_lua = self.to_py, self.to_lua
        error_to_lua = self.error_to_lua

        def guarded(*args):
            try:
                if convert_args:
                    args = [to_py(a) for a in args]
                result = fn(*args)
            except Exception as exc:   # noqa: BLE001 - becomes a Lua error
                return False, error_to_lua(exc)
            if type(result) is Multi:
                return (True, *[to_lua(v) for v in result])
            return True, to_lua(result)

        return self._make_bridge(self._check, guarded)

    def table(self, mapping: dict[str, Any] | None = None):
        """A Lua table from a dict of already-Lua-ready values (functions, tables)."""
        table = self.lua.table()
        for key, value in (mapping or {}).items():
            table[key.encode() if isinstance(key, str) else key] = value
        return table

    def register_module(self, name: str, module, as_global: bool = True) -> None:
        """Make `module` reachable as require(name) and, like Tarantool, as a global."""
        loaded = self.globals.package.loaded
        loaded[name.encode()] = module
        if as_global:
            self.globals[name.encode()] = module
