"""Tarantool's `msgpackffi` module (lua/modules/msgpackffi.lua) over the msgpack module."""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/msgpackffi.lua"), "@builtin/msgpackffi.lua")
    return chunk(runtime.globals.package.loaded[b"msgpack"])
