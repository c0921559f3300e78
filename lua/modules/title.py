"""Tarantool's `title` module (lua/modules/title.lua); the process title is set with
setproctitle, so ps and top show it as they show 2.6.0's."""
from __future__ import annotations

import os
import sys

from ..runtime import read_source


def _set_title(text: str) -> None:
    import setproctitle    # imported at the first update: not every run sets a title
    setproctitle.setproctitle(text)


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/title.lua"), "@builtin/title.lua")
    native = runtime.table({"set": runtime.bridge(_set_title)})
    return chunk(native, os.path.basename(sys.argv[0]).encode())
