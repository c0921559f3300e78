"""Tarantool's `csv` module: lua/modules/csv.lua, plain Lua."""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    return instance.runtime.load(read_source("modules/csv.lua"), "@builtin/csv.lua")()
