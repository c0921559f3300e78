"""One Spindle instance's Lua side: the runtime with Tarantool's modules installed.

Everything here runs on the tx thread. The CLI builds one `Instance`, then runs a
script, a `-e` chunk or the console in fibers of its scheduler.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

import greenlet

from spindle.core.fiber import Scheduler

from .modules import clock as clock_module
from .modules import log as log_module
from .modules.fiber import FiberModule
from .runtime import LuaRuntime

_OS_EXIT = """
local wait, exit_now, run_shutdown_hooks = ...
os.exit = function(code)
    if code == true or code == nil then code = 0 elseif code == false then code = 1 end
    run_shutdown_hooks()
    return wait(exit_now, code)
end
"""


class ExitRequested(greenlet.GreenletExit):
    """os.exit(): unwinds the calling fiber without resuming Lua, then the loop stops."""


class Instance:
    def __init__(self, sched: Scheduler | None = None):
        self.sched = sched or Scheduler()
        self.exit_code: int | None = None
        # box.ctl.on_shutdown: run once, by os.exit() or SIGTERM/SIGINT, before the
        # loop stops (not on a fatal error, as in 2.6.0)
        self.shutdown_hooks: list[Callable[[], None]] = []
        self._shut_down = False
        self.runtime = runtime = LuaRuntime(self.sched)
        self.fiber = FiberModule(runtime)
        runtime.register_module("fiber", self.fiber.lua_module, as_global=False)
        runtime.register_module("log", log_module.build(runtime), as_global=False)
        runtime.register_module("clock", clock_module.build(runtime), as_global=False)
        self._install_extra_modules()
        runtime.load(_OS_EXIT, "=os.exit")(runtime.wait, self.exit_now,
                                           runtime.bridge(self.run_shutdown_hooks))

    def _install_extra_modules(self) -> None:
        """Serializer modules (json, yaml, msgpack, uuid) and the box table."""
        from .modules import extensions, registry
        extensions.install(self.runtime)   # 2.6.0's string/table/os/debug additions
        registry.install(self)
        from . import listen
        listen.install(self)          # box.cfg.listen, the IPROTO executor, box.session

    def run_shutdown_hooks(self) -> None:
        """In a fiber, once: what must run before the instance stops."""
        if self._shut_down:
            return
        self._shut_down = True
        for hook in self.shutdown_hooks:
            hook()

    def exit_now(self, code) -> None:
        """os.exit(code) from Python, in the fiber that asks (outside Lua)."""
        self.exit_code = int(code)
        self.sched.stop()
        raise ExitRequested()

    # ----------------------------------------------------------- package.path

    def add_package_dir(self, directory: str) -> None:
        """Let require() find Lua files in `directory`, first."""
        package = self.runtime.globals.package
        extra = f"{directory}/?.lua;{directory}/?/init.lua;".encode()
        package.path = extra + package.path

    # ---------------------------------------------------------------- running

    def run_chunk(self, code: str, chunkname: str, args: list[str] | None = None) -> tuple:
        """Compile and run Lua code in the current fiber."""
        fn = self.runtime.load(code, chunkname)
        return self.runtime.call(fn, *(args or []))

    def set_arg(self, zero: str, args: list[str]) -> None:
        """The global `arg` as tarantool sets it before -e, -l and the script run:
        arg[0] the script ('-' for standard input, the program without one),
        arg[1..n] its arguments, arg[-1] the program."""
        arg = {i + 1: value for i, value in enumerate(args)}
        arg[0] = zero
        arg[-1] = sys.argv[0]
        self.runtime.globals[b"arg"] = self.runtime.to_lua(arg)

    def require_global(self, name: str) -> None:
        """`-l NAME`: require(NAME) into the global NAME."""
        module = self.runtime.call(self.runtime.globals.require, name)
        self.runtime.globals[name.encode()] = module[0] if module else None

    def run_script(self, path: str, args: list[str]) -> tuple:
        """Run a startup script as Tarantool does: in the current fiber, named after the
        script, with the global `arg` table (arg[0] script, arg[-1] the binary)."""
        self.sched.current.name = os.path.basename(path)
        self.set_arg(path, args)
        self.add_package_dir(os.path.dirname(os.path.abspath(path)))
        try:
            with open(path, "rb") as source:
                code = source.read()
        except OSError as error:
            # luaL_loadfile's words, which tarantool reports as a LuajitError
            raise LuaLoadError(f"cannot read {path}: {os.strerror(error.errno or 0)}") from None
        return self.run_chunk(_unshebang(code), "@" + path, args)

    def run_stdin(self, args: list[str]) -> tuple:
        """`spindle -` or a pipe with no script: standard input is the script, its
        chunk named `stdin` as tarantool names it (errors read "stdin:2: ...")."""
        code = sys.stdin.buffer.read()
        return self.run_chunk(_unshebang(code), "=stdin", args)


class LuaLoadError(Exception):
    """A script that cannot be read; reported as tarantool reports it."""

    type = "LuajitError"

    @property
    def message(self) -> str:
        return str(self)


def _unshebang(code: bytes) -> bytes:
    """Keep line numbers: blank out a shebang line."""
    return b"--" + code[2:] if code.startswith(b"#!") else code
