"""Tarantool's `buffer` module: lua/modules/buffer.lua, over LuaJIT's FFI."""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    return instance.runtime.load(read_source("modules/buffer.lua"), "@builtin/buffer.lua")()
