"""Tarantool's `msgpackffi` module (lua/modules/msgpackffi.lua) over the msgpack module."""
from __future__ import annotations

from ..runtime import read_source
from .lazy import preload


def _make(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/msgpackffi.lua"), "@builtin/msgpackffi.lua")
    return chunk(runtime.globals.package.loaded[b"msgpack"])


def build(instance):
    """Built at the first require('msgpackffi') (see lazy.py)."""
    preload(instance, "msgpackffi", lambda: _make(instance))
