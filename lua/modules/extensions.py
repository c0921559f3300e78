"""What Tarantool 2.6.0 adds to Lua's string, table, os and debug libraries
(lua/modules/extensions.lua, extensions_debug.lua), installed once at start."""
from __future__ import annotations

from ..runtime import read_source


def install(runtime) -> None:
    runtime.invoke(runtime.load(read_source("modules/extensions.lua"), "@extensions.lua"))
    # named as 2.6.0's file: sourcefile(1) and getinfo's errors show this name
    runtime.invoke(runtime.load(read_source("modules/extensions_debug.lua"),
                                "@builtin/debug.lua"))
