"""Installs the modules that Tarantool offers to Lua beyond fiber, log and clock.

Each entry is (require name, "module.path:builder", also a global?); a builder takes
the Instance and returns the Lua value of the module.
"""
from __future__ import annotations

import importlib

MODULES: list[tuple[str, str, bool]] = [
    ("json", ".json:build", False),
    ("msgpack", ".msgpack:build", False),
    ("yaml", ".yaml:build", False),
    ("uuid", ".uuid:build", False),
    ("decimal", ".decimal:build", False),
    ("errno", ".errno:build", False),
    ("crypto", ".crypto:build", False),
    ("digest", ".digest:build", False),
    ("fio", ".fio:build", False),
    ("pwd", ".pwd:build", False),
    ("socket", ".socket:build", False),
    ("popen", ".popen:build", False),
    ("fun", ".fun:build", False),
    ("tap", ".tap:build", False),
    ("pickle", ".pickle:build", False),
    ("strict", ".strict:build", False),
    ("tarantool", ".tarantool:build", False),
    ("title", ".title:build", False),
    ("help", ".help:build", False),
    ("utf8", ".utf8:build", True),
    ("uri", ".uri:build", False),
    ("csv", ".csv:build", False),
    ("msgpackffi", ".msgpackffi:build", False),
    ("key_def", ".key_def:build", False),
    ("iconv", ".iconv:build", False),
    ("buffer", ".buffer:build", False),
    ("box", ".box:build", True),
    ("console", ".console:build", False),
    ("net.box", ".netbox:build", False),
]


def install(instance) -> None:
    for name, target, as_global in MODULES:
        module_path, builder = target.split(":")
        module = importlib.import_module(module_path, __package__)
        instance.runtime.register_module(name, getattr(module, builder)(instance),
                                         as_global=as_global)
