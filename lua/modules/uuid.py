"""Tarantool's `uuid` module (lua/modules/uuid.lua): `struct tt_uuid` cdata values;
Python supplies only the random bytes of new uuids."""
from __future__ import annotations

import os

from ..runtime import read_source
from ..serialize import core


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/uuid.lua"), "@uuid.lua")
    return chunk(core(runtime).table, runtime.bridge(lambda: os.urandom(16)))
