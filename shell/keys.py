"""Key bindings of the console: Enter, Ctrl-C and Ctrl-D; and the keys typed while
no prompt reads them.

Enter accepts the input only when the tx thread says the chunk is complete (Tarantool's
'<eof>' rule); otherwise it starts a new line of the same chunk. Ctrl-C abandons the
line being edited (a running statement is interrupted by SIGINT, see repl.py); Ctrl-D
on an empty line ends the console.

Between prompts (a statement running, its output printing) the terminal is held by
keys_held(): not canonical, so the line discipline keeps every key as the byte it is
for the next prompt. A cooked terminal would take a Ctrl-D typed then as its
end-of-file mark, which reaches the next prompt as a NUL byte: the Ctrl-D was lost.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import sys
from typing import Callable, Iterator

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


@contextlib.contextmanager
def keys_held(drop: bool = False) -> Iterator[None]:
    """While no prompt reads the terminal: keys are neither echoed (the next prompt
    shows them, in its line; an echo would tear the output) nor cooked (Ctrl-D stays
    a key, Enter a carriage return). ISIG stays on: Ctrl-C is SIGINT, which stops a
    running statement. A prompt-toolkit prompt inside sets raw mode and gives this
    mode back when it returns. `drop`: the keys typed meanwhile are thrown away at the
    end (a \\watch: they were typed to stop it). The terminal is given back as it was
    on the way out, at process exit too (os.exit() does not wait for this thread)."""
    try:
        import termios
    except ImportError:   # not a POSIX terminal: nothing to hold
        yield
        return
    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError, AttributeError):
        yield
        return
    held = list(saved)
    held[0] &= ~termios.ICRNL            # Enter typed ahead stays Enter (\r)
    held[3] &= ~(termios.ECHO | termios.ICANON)
    held[6] = list(saved[6])
    held[6][termios.VMIN], held[6][termios.VTIME] = 1, 0

    def give_back() -> None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)
            if drop:
                termios.tcflush(fd, termios.TCIFLUSH)

    atexit.register(give_back)
    try:
        termios.tcsetattr(fd, termios.TCSANOW, held)
        yield
    finally:
        give_back()
        atexit.unregister(give_back)

