"""Tarantool's `pickle` module: lua/modules/pickle.lua, plain Lua (over LuaJIT's FFI where it
needs bytes)."""
from __future__ import annotations

from ..runtime import read_source
from .lazy import preload


def _make(instance):
    return instance.runtime.load(read_source("modules/pickle.lua"), "@builtin/pickle.lua")()


def build(instance):
    """Built at the first require('pickle') (see lazy.py)."""
    preload(instance, "pickle", lambda: _make(instance))
