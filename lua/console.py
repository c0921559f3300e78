"""The console's evaluator: Tarantool's rules for turning a typed line into output.

A line is tried first as an expression (`return <line>`), then as a statement. Input
whose compile error ends at '<eof>' is incomplete and the console keeps reading. Each
statement runs in its own fiber so Ctrl-C can cancel it while the console lives on.
Everything here runs on the tx thread; the REPL thread reaches it through shell/.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spindle.core.iproto.errors import BoxError

from .errors import LuaError
from .instance import Instance
from .render import render_values

OUTPUT_FORMATS = ("yaml", "lua", "table")

HELP = """\
To get help, see the Tarantool manual at https://tarantool.io/en/doc/
To start the interactive Tarantool tutorial, type 'tutorial()' here.

Available backslash commands:

  \\set language <language>   -- set language (lua or sql)
  \\set output <format>       -- set output format (yaml, lua or table)
  \\set delimiter <delimiter> -- set expression delimiter
  \\help                      -- show this screen
  \\quit                      -- quit interactive console
"""


@dataclass
class Reply:
    """What one submitted chunk produced: plain values or an error, and its text."""
    values: list[Any] = field(default_factory=list)
    error: str | None = None
    text: str = ""
    quit: bool = False


class ConsoleEngine:
    def __init__(self, instance: Instance):
        self.instance = instance
        self.runtime = instance.runtime
        self.sched = instance.sched
        self.output = "yaml"
        self.delimiter = ""
        self._statement = None     # the fiber running the current statement

    # ----------------------------------------------------------- completeness

    def is_complete(self, text: str) -> bool:
        """False while `text` is an unfinished Lua chunk (Tarantool's '<eof>' rule)."""
        stripped = text.strip()
        if not stripped or stripped.startswith("\\"):
            return True
        if self.delimiter:
            return stripped.endswith(self.delimiter)
        for candidate in ("return " + text, text):
            try:
                self.runtime.load(candidate, "=console")
                return True
            except LuaError as exc:
                last_error = exc.message
        return not last_error.endswith("'<eof>'")

    # -------------------------------------------------------------- executing

    def execute(self, text: str) -> Reply:
        """Run one complete chunk in a fresh fiber and wait for it (call from a fiber)."""
        stripped = text.strip()
        if stripped.startswith("\\"):
            return self._command(stripped)
        if self.delimiter and stripped.endswith(self.delimiter):
            text = stripped[: -len(self.delimiter)]
        fiber = self.sched.spawn(self._evaluate, text, name="console", start=False)
        fiber.set_joinable(True)
        self._statement = fiber
        try:
            ok, result = fiber.join()
        finally:
            self._statement = None
        if ok:
            return self._reply(values=result)
        return self._reply(error=_error_text(result))

    def interrupt(self) -> bool:
        """Ctrl-C: cancel the running statement; False if nothing was running."""
        if self._statement is None or self._statement.status == "dead":
            return False
        self.sched.cancel(self._statement)
        return True

    def _evaluate(self, text: str) -> list[Any]:
        # Chunks are named by their own text, so errors read [string "..."] as in
        # Tarantool's console.
        try:
            fn = self.runtime.load("return " + text)
        except LuaError:
            fn = self.runtime.load(text)
        results = self.runtime.call(fn)
        return [self.runtime.to_py(value) for value in results]

    def _reply(self, values: list[Any] | None = None, error: str | None = None) -> Reply:
        values = values or []
        fmt = "yaml" if self.output == "table" else self.output
        return Reply(values=values, error=error, text=render_values(values, error, fmt))

    # ------------------------------------------------------------- commands

    def _command(self, line: str) -> Reply:
        words = line[1:].split()
        if not words:
            return self._reply(error="Invalid command")
        name, rest = words[0], words[1:]
        if name in ("quit", "q"):
            return Reply(quit=True)
        if name in ("help", "h", "?"):
            return Reply(text=HELP)
        if name == "set" and len(rest) == 2:
            return self._set(rest[0], rest[1])
        if name == "set" and len(rest) == 1 and rest[0] == "delimiter":
            self.delimiter = ""
            return self._reply()
        return self._reply(error="Invalid command \\" + " ".join(words) +
                           ". Type \\help for help.")

    def _set(self, option: str, value: str) -> Reply:
        if option == "output":
            fmt = value.split(",")[0]
            if fmt not in OUTPUT_FORMATS:
                return self._reply(error="Unknown output format: " + value)
            self.output = fmt
            return self._reply(values=[True])
        if option == "language":
            if value == "lua":
                return self._reply(values=[True])
            if value == "sql":
                return self._reply(error="SQL is not supported by Spindle: "
                                   "only Lua can be used in this console")
            return self._reply(error="Unknown language: " + value)
        if option == "delimiter":
            self.delimiter = value
            return self._reply()
        return self._reply(error="Invalid command \\set " + option)


def _error_text(error: BaseException) -> str:
    if isinstance(error, BoxError):
        return error.message
    return f"{type(error).__name__}: {error}"
