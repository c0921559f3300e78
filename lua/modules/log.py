"""Tarantool's `log` module for Lua (lua/modules/log.lua) over spindle.core.log."""
from __future__ import annotations

import os

from spindle.core import log
from spindle.core.iproto.errors import BoxError

from ..runtime import LuaRuntime, read_source


def _set_level(level) -> None:
    if isinstance(level, str) and level in log.LEVEL_NAMES:
        log.set_level(level)
    elif isinstance(level, int) and 0 <= level <= log.DEBUG:
        log.set_level(level)
    else:
        raise BoxError(f"log.level(): unknown level {level!r}")


def _rotate() -> None:
    """log.rotate(): what SIGHUP does; the reopen runs in a helper thread, as in
    Tarantool: it may not be done yet when log.rotate() returns."""
    log.rotate()


def build(runtime: LuaRuntime):
    natives = {
        "level": lambda: log.level,
        "set_level": _set_level,
        "say": lambda level, message, where=None: log.say(level, message, where=where),
        "pid": os.getpid,
        "rotate": _rotate,
    }
    chunk = runtime.load(read_source("modules/log.lua"), "@log.lua")
    levels = runtime.to_lua({name: value for name, value in log.LEVEL_NAMES.items()})
    return chunk(runtime.table({k: runtime.bridge(v) for k, v in natives.items()}), levels)
