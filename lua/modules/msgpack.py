"""Tarantool's `msgpack` module (lua/modules/msgpack.lua): encode/decode in Lua, with
integers beyond 1e14 - 1 decoded as int64_t/uint64_t cdata, as Tarantool does."""
from __future__ import annotations

from ..runtime import read_source
from ..serialize import core


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/msgpack.lua"), "@msgpack.lua")
    return chunk(core(runtime).table)
