"""Tarantool's `pickle` module: lua/modules/pickle.lua, plain Lua (over LuaJIT's FFI where it
needs bytes)."""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    return instance.runtime.load(read_source("modules/pickle.lua"), "@builtin/pickle.lua")()
