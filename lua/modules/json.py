"""Tarantool's `json` module (lua/modules/json.lua): lua-cjson's encode and decode."""
from __future__ import annotations

from ..runtime import read_source
from ..serialize import core


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/json.lua"), "@json.lua")
    return chunk(core(runtime).table)
