"""Modules built at their first require() (package.preload) instead of at start.

Those whose Lua defines FFI types (key_def, iconv, buffer, msgpackffi, pickle): every
ffi.cdef/ffi.typeof at start would move the numbers LuaJIT gives later ctypes, which
2.6.0 shows in tostring(ffi.typeof(...)) of anonymous structs; built on demand, a
script that does not use them sees 2.6.0's numbers."""
from __future__ import annotations

from typing import Any, Callable

_PRELOADER = """
local build = ...
return function() return build() end
"""


def preload(instance, name: str, build: Callable[[], Any]) -> None:
    """require(name) runs `build()` (Python, returning the module's Lua value) once."""
    runtime = instance.runtime
    loader = runtime.load(_PRELOADER, "=preload")(runtime.bridge(build, convert_args=False))
    runtime.globals.package.preload[name.encode()] = loader
