"""Tarantool's `fun` module (lua/modules/fun.lua): the luafun iterator API, in Lua.

Its chunk is named as 2.6.0's, so runtime errors inside it read "builtin/fun.lua:...".
"""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    return instance.runtime.load(read_source("modules/fun.lua"), "@builtin/fun.lua")()
