"""Errors across the Lua boundary, both ways, without losing type or traceback."""
from __future__ import annotations

import itertools
from typing import Any

import greenlet
import lupa.luajit21 as lupa

from spindle.core.box import stat
from spindle.core.iproto.errors import BoxError, CustomError, error_location
from spindle.core.fiber import FiberSwitchForbidden

# error chains longer than this are cut (as the IPROTO error stack is)
_PREV_DEPTH_MAX = 64
# ids of the box.error objects made for Python exceptions (lua/errors.lua)
_lua_ids = itertools.count(1)


class LuaError(BoxError):
    """An error raised by Lua code (error('text') or error(non-box-value))."""

    type = "LuajitError"
    # where 2.6.0's luaT_toerror() makes one (its IPROTO FILE/LINE, Lua's trace)
    file, line = "./src/lua/utils.c", 1005

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
    exc = error_from_lua(err, to_text)
    try:
        exc.lua_traceback = lua_traceback
    except AttributeError:
        pass
    return exc


def error_from_lua(err: Any, to_text, depth: int = 0) -> BaseException:
    """The Python exception for a Lua error value: a box.error object (lua/errors.lua)
    with its type, code, message, trace, errno, class fields and prev chain, or any
    other value as a LuajitError."""
    if _field(err, b"message") is None or _field(err, b"base_type") is None:
        return LuaError(to_text(err))
    py = _field(err, b"_py")
    exc: BaseException
    if py is not None:
        exc = py
    else:
        exc = _made_in_lua(err, to_text)
    _remember_id(exc, _field(err, b"_id"))
    if isinstance(exc, BoxError):
        # set_prev() may have changed the chain of an error that came from Python
        prev = _field(err, b"prev")
        exc.prev = (error_from_lua(prev, to_text, depth + 1)   # type: ignore[assignment]
                    if prev is not None and depth < _PREV_DEPTH_MAX else None)
    return exc


def _made_in_lua(err: Any, to_text) -> BaseException:
    """A box.error.new() object as the exception 2.6.0 would have: a CustomError, or
    a box error of the object's type, located where the object says."""
    type_name = to_text(_field(err, b"type"))
    base_type = to_text(_field(err, b"base_type"))
    message = to_text(_field(err, b"message"))
    cls = _FROM_LUA_TYPES.get(type_name)
    if cls is not None:
        return cls()
    code = _field(err, b"code")
    exc: BoxError
    if base_type == "CustomError":
        exc = CustomError(type_name, message, int(code or 0))
        # (box.error.new counted it in box.stat().ERROR when Lua made it)
        stat.REQUESTS[stat.ERROR] -= 1
    else:
        # (a code-less type goes out with its class's code: iproto_code())
        exc = BoxError(message, int(code or 0))
        exc.type = type_name
        if base_type != type_name:
            exc.base_type = base_type
    errno = _field(err, b"errno")
    if errno:
        exc.errno = int(errno)
    trace = _field(_field(err, b"trace"), 1)
    file, line = _field(trace, b"file"), _field(trace, b"line")
    if file is not None and line is not None:
        exc.located(to_text(file), int(line))
    return exc


REFLECTED = ("custom_type", "object_type", "object_name", "access_type")


def _remember_id(exc: BaseException, lua_id: Any) -> None:
    """Tie `exc` to its box.error object's id: the exception going back into Lua
    finds that object again."""
    if lua_id is not None:
        try:
            exc._lua_id = int(lua_id)    # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass


def lua_extra(exc: BaseException) -> dict[str, Any]:
    """What lua/errors.lua's new() takes besides type, code and message: the id of
    the exception's object, the base type, errno, the class fields, and the trace
    of an error that has a location."""
    lua_id = getattr(exc, "_lua_id", None)
    if lua_id is None:
        lua_id = next(_lua_ids)
        _remember_id(exc, lua_id)
    if not isinstance(exc, BoxError):
        return {"id": lua_id}
    extra: dict[str, Any] = {"id": lua_id, "base_type": exc.base_type or exc.type}
    errno = getattr(exc, "errno", 0)
    if errno:
        extra["errno"] = int(errno)
    for key, value in (exc.fields or {}).items():
        if key in REFLECTED:
            extra[key] = value
    where = error_location(exc)
    if where is not None:
        extra["trace"] = [{"file": where[0], "line": where[1]}]
    return extra


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
