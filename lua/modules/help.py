"""Tarantool's `help` module (lua/modules/help.lua): the globals help() and tutorial(),
and the module help.en_US with their texts. help() answers the console's \\help text."""
from __future__ import annotations

from ..runtime import read_source

# the console's \\help text (lua/console.py answers it too); kept here, not there, so
# that the help globals defined at start do not import the console and its renderer
HELP = """\
To get help, see the Tarantool manual at https://tarantool.io/en/doc/
To start the interactive Tarantool tutorial, type 'tutorial()' here.

Available backslash commands:

  \\set language <language>   -- set language (lua or sql)
  \\set output <format>       -- set output format (yaml, lua, table or ttable:
                                tables with the tuples' field names, folded into
                                a vertical layout when wider than the terminal)
  \\x                         -- switch to the next output format (\\xy \\xl \\xt \\xT:
                                yaml, lua, table, ttable)
  \\set delimiter <delimiter> -- set expression delimiter
  \\watch <seconds> [count=<n>] <expression>
                             -- evaluate <expression> every <seconds> and redraw its
                                value in place until Ctrl-C (or <n> times); without a
                                terminal, print each value, until the next input line
                                or end of input (or <n> times)
  \\help                      -- show this screen
  \\quit                      -- quit interactive console
"""


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/help.lua"), "@builtin/help.lua")
    module, en_us = chunk(HELP.encode())
    runtime.register_module("help.en_US", en_us, as_global=False)
    runtime.globals[b"help"] = module[b"help"]
    runtime.globals[b"tutorial"] = module[b"tutorial"]
    return module
