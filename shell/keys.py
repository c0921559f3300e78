"""Key bindings of the console: Enter, Ctrl-C and Ctrl-D.

Enter accepts the input only when the tx thread says the chunk is complete (Tarantool's
'<eof>' rule); otherwise it starts a new line of the same chunk. Ctrl-C abandons the
line being edited (a running statement is interrupted by SIGINT, see repl.py); Ctrl-D
on an empty line ends the console.
"""
from __future__ import annotations

import concurrent.futures
from typing import Callable

from prompt_toolkit.application import get_app
from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import Condition, has_focus, is_done
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

IS_COMPLETE_TIMEOUT = 5.0


def console_bindings(is_complete: Callable[[str], bool]) -> KeyBindings:
    """`is_complete(text)` answers for the whole buffer (it asks the tx thread)."""
    bindings = KeyBindings()
    editing = has_focus(DEFAULT_BUFFER) & ~is_done   # not while Ctrl-R search is open

    @bindings.add("enter", filter=editing)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.complete_state = None   # Enter in the menu takes the completion
            return
        if _complete(is_complete, buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @bindings.add("c-c", filter=editing)
    def _abandon(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    @bindings.add("c-d", filter=editing & Condition(_buffer_empty))
    def _eof(event: KeyPressEvent) -> None:
        event.app.exit(exception=EOFError, style="class:exiting")

    return bindings


def _buffer_empty() -> bool:
    return not get_app().current_buffer.text


def _complete(is_complete: Callable[[str], bool], text: str) -> bool:
    try:
        return bool(is_complete(text))
    except concurrent.futures.TimeoutError:
        return True   # the tx thread is stuck: let the statement queue behind it
