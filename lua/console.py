"""The console's evaluator: Tarantool's rules for turning a typed line into output.

A line is tried first as an expression (`return <line>`), then as a statement. Input
whose compile error ends at '<eof>' is incomplete and the console keeps reading. Each
statement runs in its own fiber so Ctrl-C can cancel it while the console lives on.
Everything here runs on the tx thread; the REPL thread reaches it through shell/.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from spindle.core.iproto.errors import BoxError

from .errors import LuaError
from .instance import ExitRequested, Instance
from .modules.help import HELP
from .render import render_values
from .serialize import NULL, SerializeError, display_table

OUTPUT_FORMATS = ("yaml", "lua", "table", "ttable")   # tt connect's, in its \x order
TABLE_FORMATS = ("table", "ttable")   # drawn by the shell (shell/render_table.py)
WIRE_FORMATS = ("yaml", "lua")    # a console socket: table output is the client's to draw
# tt connect's shortcuts: \x steps to the next format, \xy \xl \xt \xT set one
SWITCH_FORMATS = {"xy": "yaml", "xl": "lua", "xt": "table", "xT": "ttable"}
CONSOLE_KEY = "console"           # fiber.storage: the console a statement belongs to
                                  # (modules/console.py names it too, not to import this)
NETBOX_DELIMITER = "$EOF$"        # what net.box's console connections delimit lines with


# 2.6.0's \\help text, which a console socket answers with (as a YAML value)
WIRE_HELP = """\
To get help, see the Tarantool manual at https://tarantool.io/en/doc/
To start the interactive Tarantool tutorial, type 'tutorial()' here.

Available backslash commands:

  \\set language <language>   -- set language (lua or sql)
  \\set output <format>       -- set output format (lua[,line|block] or yaml)
  \\set delimiter <delimiter> -- set expression delimiter
  \\help                      -- show this screen
  \\quit                      -- quit interactive console
"""

WATCH_USAGE = "Usage: \\watch <seconds> [count=<n>] <expression>"
WATCH_MIN_INTERVAL = 0.01   # faster than this a watch only keeps the tx thread busy
_WATCH = re.compile(r"\\watch(?:\s+(\S+))?(?:\s+count=(\S+)(?=\s+\S))?(?:\s+(.*))?\Z", re.S)


@dataclass
class WatchRequest:
    """`\\watch`: what the front end should evaluate, how often, and how to show it.
    The front end (shell/watch.py) owns the timing and the drawing; each evaluation
    is an ordinary console statement submitted through the TxLink."""
    interval: float
    expression: str
    count: int | None = None
    output: str = "yaml"


@dataclass
class Reply:
    """What one submitted chunk produced: plain values or an error, and its text."""
    values: list[Any] = field(default_factory=list)
    error: str | None = None
    text: str = ""
    quit: bool = False
    watch: WatchRequest | None = None
    # 'table' or 'ttable' when `values` are a statement's results the shell draws as
    # tables; `columns` has, per value, the field names of its tuples' format (None
    # where there are none: the shell heads those columns col1..colN)
    layout: str | None = None
    columns: list[list[str | None] | None] | None = None


class ConsoleEngine:
    """One console's state (output format, delimiter, language) and its evaluator.
    `wire`: a session served over a socket (console.listen, console.eval), which
    answers as 2.6.0's console does on the wire: no table output, no \\watch, help
    as a YAML value. `remote`: set by console.connect, the peer every line goes to."""

    def __init__(self, instance: Instance, wire: bool = False):
        self.instance = instance
        self.runtime = instance.runtime
        self.sched = instance.sched
        self.wire = wire
        self.output = "yaml"
        self.output_opts = ""      # "line" or "block" for \set output lua,<opts>
        self.delimiter = ""
        self.language = "lua"
        self.remote = None
        self.fiber_name = "console"   # a console socket's: console/<peer>, as 2.6.0's
        # what a statement's fiber carries (its session, this console) in fiber.storage
        self.statement_storage: dict[str, Any] = {CONSOLE_KEY: self}
        self._statement = None     # the fiber running the current statement
        self._last_error: BaseException | None = None   # box.error.last() between them
        self._protect = self.runtime.load(_PROTECT, _PROTECT_NAME)()
        self._field_names = None   # the tuples' names for table output, loaded on use

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
        if self.remote is not None:
            return self.remote.execute(self, text)   # console.connect: the peer answers
        stripped = text.strip()
        if stripped.startswith("\\"):
            return self._command(stripped)
        if self.delimiter and stripped.endswith(self.delimiter):
            text = stripped[: -len(self.delimiter)]
        fiber = self.sched.spawn(self._evaluate, text, name=self.fiber_name, start=False)
        fiber.storage.update(self.statement_storage)
        fiber.storage["txn_key"] = self
        fiber.set_joinable(True)
        previous, self._statement = self._statement, fiber   # console.eval nests
        try:
            ok, result = fiber.join()
        finally:
            self._statement = previous
        if not ok:
            if isinstance(result, ExitRequested):
                raise result     # os.exit(): the console ends with the process, silently
            return self._reply(error=_error_text(result))
        values, error, columns = result
        if error is not None:
            return self._reply(error=error)
        reply = self._reply(values=values)
        if self.output in TABLE_FORMATS:
            reply.layout, reply.columns = self.output, columns
        return reply

    def interrupt(self) -> bool:
        """Ctrl-C: cancel the running statement; False if nothing was running."""
        if self._statement is None or self._statement.status == "dead":
            return False
        self.sched.cancel(self._statement)
        return True

    def _evaluate(self, text: str) -> tuple[list[Any], Any, list | None]:
        """(display values, None, columns) or ([], display of the error value, None);
        columns only under table output (see Reply). The chunk runs
        under pcall so that an error that is not a string (error({...}), error(nil))
        is shown as the value it is, as Tarantool's console shows it."""
        # Chunks are named by their own text, so errors read [string "..."] as in
        # Tarantool's console.
        # box.error.last() carries from one statement to the next, as in 2.6.0's
        # console, which runs them all in one fiber
        fiber_storage = self.sched.current.storage
        if self._last_error is not None:
            fiber_storage["last_error"] = self._last_error
        try:
            try:
                fn = self.runtime.load("return " + text)
            except LuaError:
                fn = self.runtime.load(text)
            ok, packed, count = self.runtime.call(self._protect, fn)
        finally:
            self._last_error = fiber_storage.get("last_error")
        # The console now waits for the next line: in Tarantool that wait is a yield
        # of the console fiber, which aborts a transaction the line left open.
        storage = getattr(self.instance, "storage", None)
        if storage is not None:
            storage.box.engine.txns.abort_on_yield()
        if self.output == "lua":
            return (*self._lua_display(ok, packed, count), None)
        try:
            if ok:
                columns = self._columns(packed, count) \
                    if self.output in TABLE_FORMATS else None
                return display_table(self.runtime, packed, count), None, columns
            error = display_table(self.runtime, packed, 1, null=NULL)[0]
        except SerializeError as exc:
            return [], ("console: an exception occurred when formatting the output: "
                        + exc.message), None
        return [], NULL if error is None else error, None

    def _columns(self, packed, count: int) -> list[list[str | None] | None]:
        """Per value, the field names of its tuples' format (lua/box/tuple.lua)."""
        if self._field_names is None:
            storage = getattr(self.instance, "storage", None)
            if storage is None:
                return [None] * count
            self._field_names = self.runtime.load(_FIELD_NAMES, "=console")(
                storage.tuple_lua[b"field_names"])
        columns: list[list[str | None] | None] = []
        for i in range(1, count + 1):
            try:
                names = self.runtime.call(self._field_names, packed, i)
            except LuaError:   # a value whose __index or __len raises: no names
                names = ()
            columns.append([name.decode(errors="replace") if isinstance(name, bytes)
                            else None for name in names] or None)
        return columns

    def _lua_display(self, ok: bool, packed, count: int) -> tuple[list[Any], Any]:
        """Lua output formats each value on its own: a value that fails to format
        shows as {error = ...} in its place."""
        if not ok:
            count = 1
        values = []
        for i in range(1, count + 1):
            try:
                values.append(display_table(self.runtime, packed, i, null=NULL, first=i)[0])
            except SerializeError as exc:
                values.append({"error": "console: exception while formatting output: "
                                        f'"{exc.message}"'})
        if ok:
            return values, None
        return [], NULL if values[0] is None else values[0]

    def _reply(self, values: list[Any] | None = None, error: Any = None) -> Reply:
        values = values or []
        if self.output == "lua":
            fmt = "lua," + self.output_opts if self.output_opts else "lua"
        else:
            fmt = "yaml"   # table output is rendered by the shell
        return Reply(values=values, error=error, text=render_values(values, error, fmt))

    # ------------------------------------------------------------- commands

    def _command(self, line: str) -> Reply:
        """A backslash command, parsed as 2.6.0's console parses it: words split on
        blanks, abbreviations (\\s o lua), words past the value ignored."""
        words = line[1:].split()
        if not words:
            return self._help()
        name = words[0]
        if name == "watch" and not self.wire:
            return self._watch(line)
        if name in ("quit", "q"):
            return Reply(quit=True)
        if name in ("help", "h") or (name == "?" and not self.wire):
            return self._help()
        if not self.wire and (name == "x" or name in SWITCH_FORMATS):
            return self._switch_output(name)
        if name in ("set", "s"):
            if len(words) < 2:
                return self._reply(error="Invalid set syntax, type \\help for help")
            handler = _SET_HANDLERS.get(words[1])
            if handler is None:
                return self._reply(error="Unknown parameter: " + words[1])
            return getattr(self, handler)(words[2] if len(words) > 2 else None)
        return self._reply(error="Invalid command \\" + line[1:] +
                           ". Type \\help for help.")

    def _help(self) -> Reply:
        if self.wire:
            return self._reply(values=[[WIRE_HELP]])   # help() is a list of texts
        return Reply(text=HELP)

    def _watch(self, line: str) -> Reply:
        """Check a `\\watch` line; the front end runs the watch itself."""
        match = _WATCH.match(line)
        seconds, count, expression = match.groups() if match else (None, None, None)
        if not seconds or not expression or not expression.strip():
            return self._reply(error=WATCH_USAGE)
        try:
            interval = float(seconds)
        except ValueError:
            interval = math.nan
        if not math.isfinite(interval) or interval < WATCH_MIN_INTERVAL:
            return self._reply(error="\\watch: the interval must be a number of seconds, "
                               f"at least {WATCH_MIN_INTERVAL}, got '{seconds}'")
        if count is not None and not (count.isdigit() and int(count) > 0):
            return self._reply(error=f"\\watch: count must be a positive integer, "
                               f"got '{count}'")
        expression = expression.strip()
        if expression.startswith("\\"):
            return self._reply(error="\\watch: only Lua can be watched, not a command")
        if self.delimiter and expression.endswith(self.delimiter):
            expression = expression[: -len(self.delimiter)]
        error = self._compile_error(expression)
        if error is not None:   # a syntax error would be the same on every tick
            return self._reply(error=error)
        return Reply(watch=WatchRequest(interval, expression,
                                        int(count) if count is not None else None,
                                        self.output))

    def _compile_error(self, text: str) -> str | None:
        """The message the console would show for a chunk that does not compile."""
        try:
            self.runtime.load("return " + text)
            return None
        except LuaError:
            pass
        try:
            self.runtime.load(text)
            return None
        except LuaError as exc:
            return exc.message

    def _set_output(self, value: str | None) -> Reply:
        error, fmt, opts = parse_output(value, WIRE_FORMATS if self.wire else OUTPUT_FORMATS)
        if error is not None:
            return self._reply(error=error)
        self.output = fmt
        self.output_opts = (opts or "") if fmt == "lua" else ""
        return self._reply(values=[True])

    def _switch_output(self, name: str) -> Reply:
        """tt connect's \\x and \\xy \\xl \\xt \\xT; answered with the format now in
        force, as \\set language answers."""
        fmt = switched_output(self.output, name)
        self.output, self.output_opts = fmt, ""
        return self._reply(values=[{"output": fmt}])

    def _set_language(self, value: str | None) -> Reply:
        if value is None:
            return self._reply(values=[{"language": self.language}])
        if value == "lua":
            self.language = value
            return self._reply(values=[True])
        if value == "sql":
            return self._reply(error="SQL is not supported by Spindle: "
                               "only Lua can be used in this console")
        return self._reply(error=f'Invalid language "{value}", supported languages: '
                                 "lua and sql.")

    def _set_delimiter(self, value: str | None) -> Reply:
        if self.delimiter == NETBOX_DELIMITER:
            # net.box's console connection reads replies by this delimiter
            return self._reply(error="Can not install delimiter for net box sessions")
        self.delimiter = value or ""
        return self._reply()


def switched_output(current: str, name: str) -> str:
    """The format \\<name> switches to: \\x the next one (cyclically), \\xy \\xl
    \\xt \\xT the one they name."""
    if name == "x":
        position = OUTPUT_FORMATS.index(current) if current in OUTPUT_FORMATS else 0
        return OUTPUT_FORMATS[(position + 1) % len(OUTPUT_FORMATS)]
    return SWITCH_FORMATS[name]


def parse_output(value: str | None, formats: tuple[str, ...] = WIRE_FORMATS
                 ) -> tuple[str | None, str, str | None]:
    """(None, format, options) of an output setting ('lua,block'), or (2.6.0's
    complaint, '', None): for \\set output and console.set_default_output."""
    if value is None:
        return "Specify output format: lua or yaml.", "", None
    parts = re.match(r"([^,]+),([^,]+)", value)
    fmt, opts = (parts.group(1), parts.group(2)) if parts else (value, None)
    if fmt not in formats:
        return f'Invalid format "{value}", supported languages: lua and yaml.', "", None
    if fmt == "lua" and opts is not None and opts not in ("line", "block"):
        return f'Wrong option "{opts}", expecting: line or block.', "", None
    return None, fmt, opts


_SET_HANDLERS = {
    "output": "_set_output", "o": "_set_output",
    "language": "_set_language", "lang": "_set_language", "l": "_set_language",
    "delimiter": "_set_delimiter", "delim": "_set_delimiter", "d": "_set_delimiter",
}


# Runs a console chunk under pcall (the console shows an error as the value raised)
# and keeps its results in a Lua table: a Lua thread would not survive lupa. The
# chunk is named, and its pcall placed on the line, where Tarantool 2.6's console
# calls user code, so error('x', 2) reads 'builtin/box/console.lua:402: x' as there.
_PROTECT = (
    "local pcall, select = pcall, select "
    "local function pack(ok, ...) return ok, {...}, select('#', ...) end "
    "return function(fn)" + "\n" * 401 + "return pack(pcall(fn)) end")
_PROTECT_NAME = "@builtin/box/console.lua"

# packed[i]'s field names, as several results (a Lua table does not survive lupa)
_FIELD_NAMES = (
    "local field_names = ... "
    "return function(packed, i) return field_names(packed[i]) end")


def _error_text(error: BaseException) -> str:
    if isinstance(error, BoxError):
        return error.message
    return f"{type(error).__name__}: {error}"
