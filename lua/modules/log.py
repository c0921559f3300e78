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


def _set_format(name) -> None:
    log.set_format(name)


def build(runtime: LuaRuntime):
    natives = {
        "level": lambda: log.level,
        "set_level": _set_level,
        "format": lambda: log.log_format,
        "set_format": _set_format,
        "say": lambda level, message, where=None, fields=None: log.say(
            level, message, where=where, fields=fields),
        "pid": os.getpid,
        "rotate": _rotate,
    }
    chunk = runtime.load(read_source("modules/log.lua"), "@log.lua")
    levels = runtime.to_lua({name: value for name, value in log.LEVEL_NAMES.items()})
    module = chunk(runtime.table({k: runtime.bridge(v) for k, v in natives.items()}), levels)
    # log.cfg follows the level and the format however they change (box.cfg too)
    sync = module[b"cfg_sync"]
    module[b"cfg_sync"] = None
    log.add_listener(lambda: runtime.invoke(sync))
    return module
