"""Where text goes while the console's prompt is on screen.

Everything that may print while the user types — log lines (any thread), Lua print()
and io.write() from background fibers (tx thread), replies (REPL thread) — goes through
one prompt-toolkit stdout proxy, which draws it above the prompt without corrupting the
line being edited, and keeps it in the order it was written.

`ConsoleStdout.drain()` waits until what was written is on the terminal, so a reply is
never drawn after the next prompt has started.
"""
from __future__ import annotations

import contextlib
import queue
import signal
import sys
import threading
import time
from typing import Callable, Iterator

from prompt_toolkit.patch_stdout import StdoutProxy

from spindle.core import log

# Lua's own print/io.write go to C stdio, straight to the terminal; these write
# through Python's sys.stdout instead (the proxy while the console runs).
_LUA_OUTPUT = """
local write = ...
local select, tostring, type, concat = select, tostring, type, table.concat
print = function(...)
    local parts = {}
    for i = 1, select('#', ...) do parts[i] = tostring((select(i, ...))) end
    write(concat(parts, '\\t') .. '\\n')
end
local stdout = io.stdout
io.write = function(...)
    local parts = {}
    for i = 1, select('#', ...) do
        local value = select(i, ...)
        if type(value) ~= 'string' and type(value) ~= 'number' then
            error(("bad argument #%d to 'write' (string expected, got %s)"):format(
                i, type(value)), 2)
        end
        parts[i] = tostring(value)
    end
    write(concat(parts))
    return stdout
end
"""


class ConsoleStdout(StdoutProxy):
    """prompt-toolkit's StdoutProxy plus drain(): wait until earlier writes are out;
    and diverted(): hand the text to someone else while they own the screen (a
    `\\watch` drawing with rich's Live prints it above its value)."""

    _divert: Callable[[str], None] | None = None

    @contextlib.contextmanager
    def diverted(self, sink: Callable[[str], None]) -> Iterator[None]:
        self.drain()
        self._divert = sink
        try:
            yield
        finally:
            self.drain()   # what is queued still goes to `sink`, whose screen it is
            self._divert = None

    def _write_and_flush(self, loop, text: str) -> None:
        divert = self._divert
        if divert is not None:
            try:
                divert(text)
                return
            except Exception:   # noqa: BLE001 - never lose output over a drawing error
                pass
        super()._write_and_flush(loop, text)

    def drain(self, timeout: float = 2.0) -> None:
        done = threading.Event()
        with self._lock:
            self._flush()
            self._flush_queue.put(done)   # type: ignore[arg-type]
        done.wait(timeout)

    def _write_thread(self) -> None:   # the proxy's writer, which knows drain markers
        finished = False
        while not finished:
            items = [self._flush_queue.get()]
            while True:
                try:
                    items.append(self._flush_queue.get_nowait())
                except queue.Empty:
                    break
            text = "".join(i for i in items if isinstance(i, str))
            finished = any(not isinstance(i, (str, threading.Event)) for i in items)
            app_loop = self._get_app_loop()
            if text:
                self._write_and_flush(app_loop, text)
            for item in items:
                if isinstance(item, threading.Event):
                    item.set()
            if text and app_loop is not None:
                time.sleep(self.sleep_between_writes)


@contextlib.contextmanager
def console_stdout() -> Iterator[ConsoleStdout]:
    """Like prompt_toolkit.patch_stdout(raw=True), with log lines routed in too."""
    proxy = ConsoleStdout(raw=True, sleep_between_writes=0.05)
    saved = sys.stdout, sys.stderr

    def to_console(line: str) -> None:
        proxy.write(line + "\n")

    # A log that box.cfg{log = ...} sent to a file stays there, as in Tarantool; only
    # the default stderr log is drawn above the prompt.
    previous_sink = log.set_sink(None)          # the current sink; stderr's installed
    stderr_sink = log.set_sink(previous_sink)
    routed = previous_sink is stderr_sink
    if routed:
        log.set_sink(to_console)
    sys.stdout = sys.stderr = proxy   # type: ignore[assignment]
    try:
        yield proxy
    finally:
        if routed:
            current = log.set_sink(previous_sink)
            if current is not to_console:   # box.cfg{log = ...} ran meanwhile: keep it
                log.set_sink(current)
        sys.stdout, sys.stderr = saved
        proxy.close()


def write_to_stdout(text) -> None:
    """What Lua's print/io.write call (tx thread): never blocks."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    sys.stdout.write(text)
    if text.endswith("\n"):
        sys.stdout.flush()


def redirect_lua_output(engine) -> None:
    """Make Lua's print() and io.write() write through sys.stdout (run on tx)."""
    runtime = engine.runtime
    runtime.load(_LUA_OUTPUT, "=console output")(runtime.bridge(write_to_stdout))


def install_signal(signum: int, callback: Callable[[], None]):
    """Run on tx (the main thread, the only one Python delivers signals to): call
    `callback` on `signum`. Returns the previous handler, or None where signals can't
    be handled. SIGINT comes here only while a statement runs (the prompt keeps the
    terminal raw, so Ctrl-C is a key then); SIGWINCH at any time."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signum, lambda number, frame: callback())


def restore_signal(signum: int, previous) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signum, previous)
