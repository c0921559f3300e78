"""`spindle`: start an instance with a console, a startup script, or a chunk of Lua.

The command line is `tarantool`'s (2.6.0's getopt "+hVvie:l:"):

    spindle                      console on a terminal; piped standard input runs as a script
    spindle SCRIPT.lua [ARGS]    run a startup script, like `tarantool SCRIPT.lua`
    spindle - [ARGS]             run standard input as the script
    spindle -e CODE -l NAME [-i] run Lua / require NAME into a global, in order, then
                                 the script (or standard input), then (with -i) the console
    spindle cat FILE...          print .xlog/.snap rows, like `tarantoolctl cat`
    spindle connect URI          this console on another instance (console or binary port)
    spindle demo [--dir DIR]     a local three-instance replica set, console on the first
    spindle spark SQL --dir DIR  Spark SQL over the views `xlog` and `snap` of a data dir

Options stop at the first argument that is not one (or at `--`): what follows the
script is the script's. A bad option ends the process with status 64 (EX_USAGE) and
getopt's message, a script that cannot be opened with status 2, as tarantool does.
"""
from __future__ import annotations

import importlib
import os
import sys
from types import SimpleNamespace

from spindle.core.version import SPINDLE_VERSION, TARANTOOL_VERSION

USAGE = "spindle [OPTIONS] [SCRIPT [ARGS]...]"
EX_USAGE = 64          # sysexits.h: what tarantool exits with on a bad option
EX_NOSCRIPT = 2        # tarantool's status for a script it cannot open

HELP = f"""Spindle - Tarantool 2.6's replication core in Python, driven from Lua

usage: {USAGE}

All command line options after SCRIPT are passed to the script.
When no script name is given, a terminal gets the console and piped
standard input is run as a script (with -i: read as console lines).
  -h, --help            display this help and exit
  -v, -V, --version     print the version and exit
  -e EXPR               execute string 'EXPR'
  -l NAME               require library 'NAME' into the global NAME
  -i                    enter interactive mode after the script (or -e)
  --                    stop handling options
  -                     execute standard input and stop handling options

commands: spindle cat --help, spindle connect --help, spindle demo --help,
          spindle spark --help
"""

# `spindle NAME ARGS...`: NAME -> "module:function", called with ARGS, returns the exit code.
SUBCOMMANDS = {
    "cat": "spindle.shell.cat:main",
    "connect": "spindle.shell.connect:main",
    "demo": "spindle.shell.demo:main",
    "spark": "spindle.shell.spark_cli:main",
}

_FLAGS = {"h": "help", "V": "version", "v": "version", "i": "interactive"}
_WITH_ARGUMENT = {"e": "chunk", "l": "library"}
_LONG = {"--help": "help", "--version": "version"}


class UsageError(Exception):
    """A command line tarantool's getopt refuses; the text is getopt's message."""


def parse_args(argv: list[str]) -> SimpleNamespace:
    """The options of a command line: `actions` (("chunk", code) and ("library",
    name), in order), interactive, help, version, script (None, a path or "-"), args.
    Raises UsageError as getopt would complain."""
    options = SimpleNamespace(actions=[], interactive=False, help=False, version=False,
                              script=None, args=[])
    position = 0
    while position < len(argv):
        word = argv[position]
        if word == "--":
            position += 1
            break
        if word in _LONG:
            setattr(options, _LONG[word], True)
            position += 1
            continue
        if not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            raise UsageError(f"unrecognized option '{word}'")
        letters = word[1:]
        position += 1
        for index, letter in enumerate(letters):
            if letter in _FLAGS:
                setattr(options, _FLAGS[letter], True)
            elif letter in _WITH_ARGUMENT:
                value = letters[index + 1:]
                if not value:
                    if position == len(argv):
                        raise UsageError(f"option requires an argument -- '{letter}'")
                    value = argv[position]
                    position += 1
                options.actions.append((_WITH_ARGUMENT[letter], value))
                break
            else:
                raise UsageError(f"invalid option -- '{letter}'")
    if position < len(argv):
        options.script = argv[position]
        options.args = argv[position + 1:]
    return options


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        module, _, function = SUBCOMMANDS[argv[0]].partition(":")
        return getattr(importlib.import_module(module), function)(argv[1:])
    try:
        options = parse_args(argv)
    except UsageError as error:
        print(f"spindle: {error}", file=sys.stderr)
        return EX_USAGE
    if options.help:
        sys.stdout.write(HELP)
        return 0
    if options.version:
        print(f"Spindle {SPINDLE_VERSION} (Tarantool {TARANTOOL_VERSION} compatible)")
        return 0
    script = options.script
    if script is not None and script != "-":
        try:
            os.stat(script)
        except OSError as error:
            # on standard output, where 2.6.0 prints it
            print(f"Can't open script {script}: {os.strerror(error.errno or 0)}")
            return EX_NOSCRIPT
    # Tarantool's rule: no script on a terminal is the console; no script on a pipe
    # (or `-`) runs standard input as the script. -i adds the console after the
    # script; with no script and a pipe, -i is the pipe console at once (tarantool
    # would run the pipe as a script and then find it at its end).
    tty = sys.stdin.isatty()
    from_stdin = script == "-" or (script is None and not tty and not options.interactive)
    interactive = options.interactive or (script is None and tty)
    from .launcher import Launcher   # heavy imports only when an instance starts
    launcher = Launcher(script=script, script_args=options.args, actions=options.actions,
                        interactive=interactive, from_stdin=from_stdin)
    return launcher.run()


if __name__ == "__main__":
    sys.exit(main())
