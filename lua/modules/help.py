"""Tarantool's `help` module (lua/modules/help.lua): the globals help() and tutorial(),
and the module help.en_US with their texts. help() answers the console's \\help text."""
from __future__ import annotations

from ..console import HELP
from ..runtime import read_source


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/help.lua"), "@builtin/help.lua")
    module, en_us = chunk(HELP.encode())
    runtime.register_module("help.en_US", en_us, as_global=False)
    runtime.globals[b"help"] = module[b"help"]
    runtime.globals[b"tutorial"] = module[b"tutorial"]
    return module
