"""Tarantool's `msgpack` module (lua/modules/msgpack.lua): encode/decode in Lua, with
integers beyond 1e14 - 1 decoded as int64_t/uint64_t cdata, as Tarantool does; an
MP_ERROR extension decoded into a box.error object by core/iproto/msgpack.py."""
from __future__ import annotations

from spindle.core.iproto.msgpack import error_unpack

from ..runtime import read_source
from ..serialize import core


def build(instance):
    runtime = instance.runtime

    def decode_error(data: bytes):
        """An MP_ERROR payload as a box.error object; None where 2.6.0 cannot parse
        one."""
        err = error_unpack(data)
        return None if err is None else runtime.error_object(err)

    chunk = runtime.load(read_source("modules/msgpack.lua"), "@msgpack.lua")
    return chunk(core(runtime).table, runtime.bridge(decode_error, convert_args=False))
