"""Tarantool's `strict` module: lua/modules/strict.lua, plain Lua (over LuaJIT's FFI where it
needs bytes)."""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    return instance.runtime.load(read_source("modules/strict.lua"), "@builtin/strict.lua")()
