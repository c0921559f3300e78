"""Installs the modules that Tarantool offers to Lua beyond fiber, log and clock.

Each entry is (require name, builder(instance) -> Lua value, also a global?)."""
from __future__ import annotations

MODULES: list[tuple[str, str, bool]] = [
    # (name, "module.path:builder", global)
]


def install(instance) -> None:
    import importlib
    for name, target, as_global in MODULES:
        module_path, builder = target.split(":")
        module = importlib.import_module(module_path, __package__)
        instance.runtime.register_module(name, getattr(module, builder)(instance),
                                         as_global=as_global)
