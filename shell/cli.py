"""`spindle`: start an instance with a console, a startup script, or a chunk of Lua.

    spindle                      console on a live instance
    spindle SCRIPT.lua [ARGS]    run a startup script, like `tarantool SCRIPT.lua`
    spindle -e CODE [-i]         run Lua, then (with -i) the console
    spindle cat FILE...          print .xlog/.snap rows, like `tarantoolctl cat`
    spindle demo [--dir DIR]     a local three-instance replica set, console on the first
    spindle spark SQL --dir DIR  Spark SQL over the views `xlog` and `snap` of a data dir
"""
from __future__ import annotations

import importlib
import sys
from types import SimpleNamespace

from spindle.core.version import SPINDLE_VERSION, TARANTOOL_VERSION

USAGE = "spindle [OPTIONS] [SCRIPT [ARGS]...]"

# `spindle NAME ARGS...`: NAME -> "module:function", called with ARGS, returns the exit code.
SUBCOMMANDS = {
    "cat": "spindle.shell.cat:main",
    "demo": "spindle.shell.demo:main",
    "spark": "spindle.shell.spark_cli:main",
}


def parse_args(argv: list[str]) -> SimpleNamespace:
    """The options (chunks, interactive, version, script, args) of a command line."""
    return parse_plain_args(argv) or parse_args_fully(argv)


def parse_plain_args(argv: list[str]) -> SimpleNamespace | None:
    """`spindle` and `spindle SCRIPT [ARGS]` (no option before SCRIPT, no `--`
    anywhere), read as argparse reads them, without argparse: it and what its help
    formatter imports (shutil, gettext, locale) cost ~5 ms of every start. None for
    any other command line."""
    if argv and (argv[0].startswith("-") or "--" in argv):
        return None
    script = argv[0] if argv else None
    return SimpleNamespace(chunks=[], interactive=False, version=False, script=script,
                           args=argv[1:])


def parse_args_fully(argv: list[str]) -> SimpleNamespace:
    import argparse
    parser = argparse.ArgumentParser(
        prog="spindle", usage=USAGE,
        description="Tarantool 2.6's replication core in Python, driven from Lua.",
        epilog="commands: " + ", ".join(f"spindle {name} --help" for name in SUBCOMMANDS))
    parser.add_argument("-e", dest="chunks", action="append", default=[], metavar="EXPR",
                        help="execute the Lua chunk EXPR (repeatable)")
    parser.add_argument("-i", dest="interactive", action="store_true",
                        help="enter the console after running SCRIPT or -e chunks")
    parser.add_argument("-v", "-V", "--version", action="store_true",
                        help="print the version and exit")
    parser.add_argument("script", nargs="?", help="Lua startup script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for SCRIPT")
    return parser.parse_args(argv, SimpleNamespace())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        module, _, function = SUBCOMMANDS[argv[0]].partition(":")
        return getattr(importlib.import_module(module), function)(argv[1:])
    options = parse_args(argv)
    if options.version:
        print(f"Spindle {SPINDLE_VERSION} (Tarantool {TARANTOOL_VERSION} compatible)")
        return 0
    from .launcher import Launcher   # heavy imports only when an instance starts
    interactive = options.interactive or (options.script is None and not options.chunks)
    launcher = Launcher(script=options.script, script_args=options.args,
                        chunks=options.chunks, interactive=interactive)
    return launcher.run()


if __name__ == "__main__":
    sys.exit(main())
