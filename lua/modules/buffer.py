"""Tarantool's `buffer` module: lua/modules/buffer.lua, over LuaJIT's FFI."""
from __future__ import annotations

from ..runtime import read_source
from .lazy import preload


def _make(instance):
    return instance.runtime.load(read_source("modules/buffer.lua"), "@builtin/buffer.lua")()


def build(instance):
    """Built at the first require('buffer') (see lazy.py)."""
    preload(instance, "buffer", lambda: _make(instance))
