"""Tarantool's `tarantool` module: what is running. Spindle says it is Spindle speaking
Tarantool 2.6.0: version is box.info.version's string (2.6.0-0-spindle<version>),
package "Spindle"; build describes the Python build that runs it. Also the global
_TARANTOOL (the version), as 2.6.0 sets it."""
from __future__ import annotations

import os
import platform
import sys
import time

from spindle.core.version import SPINDLE_VERSION, VERSION_STRING


def build(instance):
    runtime = instance.runtime
    started = time.monotonic()
    build_info = {
        "target": f"{platform.system()}-{platform.machine()}-Python{sys.version_info[0]}."
                  f"{sys.version_info[1]}",
        "options": f"spindle {SPINDLE_VERSION} (Python {platform.python_version()}, "
                   f"{platform.python_implementation()})",
        "compiler": platform.python_compiler(),
        "mod_format": "so",
        "flags": "",
    }
    module = runtime.table({
        "version": VERSION_STRING.encode(),
        "package": b"Spindle",
        "build": runtime.to_lua(build_info),
        # seconds since the instance started, as 2.6.0's (a float)
        "uptime": runtime.bridge(lambda: time.monotonic() - started),
        "pid": runtime.bridge(os.getpid),
    })
    runtime.globals[b"_TARANTOOL"] = VERSION_STRING.encode()
    return module
