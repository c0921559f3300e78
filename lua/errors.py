"""Errors across the Lua boundary, both ways, without losing type or traceback."""
from __future__ import annotations

from typing import Any

import greenlet
import lupa.luajit21 as lupa

from spindle.core.iproto.errors import BoxError
from spindle.core.fiber import FiberSwitchForbidden


class LuaError(BoxError):
    """An error raised by Lua code (error('text') or error(non-box-value))."""

    type = "LuajitError"

    def __init__(self, message: str, lua_traceback: str = ""):
        super().__init__(message)
        self.lua_traceback = lua_traceback


def describe(exc: BaseException) -> tuple[str, int, str]:
    """(type, code, message) of a Python exception as box.error shows it."""
    if isinstance(exc, BoxError):
        return exc.type, int(exc.code), exc.message
    if isinstance(exc, greenlet.GreenletExit):
        return "FiberIsCancelled", 0, "fiber is cancelled"
    if isinstance(exc, lupa.LuaError):
        return "LuajitError", 0, str(exc)
    return type(exc).__name__, 0, f"{type(exc).__name__}: {exc}"


_FROM_LUA_TYPES = {"FiberSwitchForbidden": FiberSwitchForbidden}


def from_lua(info: Any, to_text) -> BaseException:
    """Rebuild the Python exception for an entry's error record {err, traceback}.

    `to_text(value)` renders a Lua value as tostring() would."""
    err, lua_traceback = info[b"err"], info[b"traceback"]
    lua_traceback = lua_traceback.decode(errors="replace") if lua_traceback else ""
    lua_traceback = _user_frames(lua_traceback)
    exc: BaseException
    py = _field(err, b"_py")
    if py is not None:
        exc = py
    elif _field(err, b"message") is not None and _field(err, b"code") is not None:
        type_name = to_text(_field(err, b"type"))
        cls = _FROM_LUA_TYPES.get(type_name)
        exc = cls() if cls else BoxError(to_text(_field(err, b"message")),
                                         int(_field(err, b"code")))
        if not cls:
            exc.type = type_name
    else:
        exc = LuaError(to_text(err))
    try:
        exc.lua_traceback = lua_traceback
    except AttributeError:
        pass
    return exc


def _user_frames(lua_traceback: str) -> str:
    """Drop the driver's own frames: the user wants to see only their code."""
    lines = [line for line in lua_traceback.strip("\n").splitlines()
             if "driver.lua:" not in line and "in function 'xpcall'" not in line]
    return "\n".join(lines)


def _field(value: Any, key: bytes) -> Any:
    try:
        return value[key]
    except (TypeError, KeyError, AttributeError):
        return None
