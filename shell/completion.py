"""Tab completion for the console, answered by the tx thread from the live Lua state.

The REPL thread never reads Lua: it asks through TxLink.call with a short timeout,
so a busy tx thread costs the user an empty menu, never a frozen line.
"""
from __future__ import annotations

import concurrent.futures
from typing import Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from spindle.lua.completion import complete

from .link import TxLink

TIMEOUT = 0.5   # seconds the completer waits for the tx thread
REMOTE_TIMEOUT = 2.0   # ... and for the peer of console.connect / spindle connect


class LuaCompleter(Completer):
    def __init__(self, link: TxLink, timeout: float = TIMEOUT):
        self.link = link
        self.timeout = timeout

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        try:
            candidates = self.link.call(_complete_on_tx, self.link.engine, text,
                                        timeout=self.timeout)
            if isinstance(candidates, concurrent.futures.Future):   # the peer answers
                candidates = candidates.result(REMOTE_TIMEOUT)
        except concurrent.futures.TimeoutError:
            return
        except Exception:   # noqa: BLE001 - completion must never break the line
            return
        word = _partial_word(text)
        for name, kind in candidates:
            yield Completion(name, start_position=-len(word), display_meta=kind)


def _complete_on_tx(engine, text: str):
    """The candidates, or (console connected to a peer) a future of the peer's: the
    question goes over the connection in a fiber of its own, not on the hub."""
    remote = engine.remote
    if remote is None:
        return complete(engine.runtime, text)
    future: concurrent.futures.Future = concurrent.futures.Future()

    def ask() -> None:
        try:
            found = remote.complete(text)
        except Exception as exc:   # noqa: BLE001 - handed to the REPL thread
            future.set_exception(exc)
        except BaseException as exc:   # the fiber is cancelled: the instance stops
            future.set_exception(exc)
            raise
        else:
            future.set_result(found)

    engine.sched.spawn(ask, name="completion", start=False)
    return future


def _partial_word(text: str) -> str:
    end = len(text)
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return text[start:end]
