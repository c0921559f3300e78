"""Tarantool's `tap` module (lua/modules/tap.lua), printing through the yaml module.

Its chunk is named as 2.6.0's: the traces of failed checks list its frames by that name.
"""
from __future__ import annotations

from ..runtime import read_source


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/tap.lua"), "@builtin/tap.lua")
    return chunk(runtime.globals.package.loaded[b"yaml"])
