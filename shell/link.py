"""The REPL thread's handle on the tx thread (DESIGN §1: only tx touches Lua).

The REPL thread never calls Lua. It asks the tx thread through the scheduler's
thread-safe wakeup: `call()` runs a quick non-blocking function on the hub (is the
chunk complete? what completes `box.`?), `submit()` hands a chunk to the console fiber
and waits for its Reply, `interrupt()` cancels the running statement (Ctrl-C) and
sets `interrupted`, which a `\\watch` in the REPL thread waits on between ticks.
"""
from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Any, Callable

from spindle.core.fiber import Cond
from spindle.lua.console import ConsoleEngine, Reply

_CLOSE = object()


class TxLink:
    def __init__(self, engine: ConsoleEngine):
        self.engine = engine
        self.sched = engine.sched
        self._inbox: collections.deque = collections.deque()
        self._arrived = Cond(self.sched)
        self.closed = concurrent.futures.Future()   # set when the console fiber ends
        self.interrupted = threading.Event()          # Ctrl-C seen (cleared by its reader)

    # -------------------------------------------------- called from the REPL thread

    def call(self, fn: Callable, *args, timeout: float | None = 10.0) -> Any:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:   # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

        self.sched.call_soon_threadsafe(run)
        return future.result(timeout)

    def submit(self, text: str) -> Reply:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.sched.call_soon_threadsafe(self._enqueue, (text, future))
        return future.result()

    def interrupt(self) -> None:
        """Ctrl-C (called from the SIGINT handler): never blocks, never touches Lua."""
        self.interrupted.set()
        self.sched.call_soon_threadsafe(self.engine.interrupt)

    def close(self) -> None:
        """The user is done (EOF, \\quit): end the console fiber."""
        self.sched.call_soon_threadsafe(self._enqueue, _CLOSE)

    # ------------------------------------------------------------- tx side

    def _enqueue(self, item) -> None:
        self._inbox.append(item)
        self._arrived.signal()

    def serve(self) -> None:
        """Body of the console fiber: run submitted chunks one at a time."""
        try:
            while True:
                while not self._inbox:
                    self._arrived.wait()
                item = self._inbox.popleft()
                if item is _CLOSE:
                    return
                text, future = item
                try:
                    future.set_result(self.engine.execute(text))
                except Exception as exc:   # noqa: BLE001 - the REPL shows it
                    future.set_exception(exc)
                except BaseException:
                    # os.exit() or the loop stopping: the REPL quits quietly
                    future.set_result(Reply(quit=True))
                    raise
        finally:
            self._fail_pending()
            self.closed.set_result(True)

    def _fail_pending(self) -> None:
        while self._inbox:
            item = self._inbox.popleft()
            if item is not _CLOSE:
                item[1].set_result(Reply(quit=True))
