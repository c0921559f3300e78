"""Tarantool's `uri` module: lua/modules/uri.lua, plain Lua."""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    return instance.runtime.load(read_source("modules/uri.lua"), "@builtin/uri.lua")()
