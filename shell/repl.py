"""The interactive console: a prompt-toolkit session in the REPL thread.

This thread owns only UI state (the line being edited, history, the menu). Whatever
needs Lua — is the chunk complete? what completes `box.`? run this — goes to the tx
thread through the TxLink; the statement itself runs in the console fiber there.

The launcher imports this module on the tx thread, so prompt-toolkit, pygments and rich
are imported only inside run_repl, in the REPL thread: a ~100 ms import must not stall
the fiber loop.
"""
from __future__ import annotations

import os
import shutil
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import History

    from .link import TxLink
    from .output import ConsoleStdout

PROMPT = "spindle> "


def continuation_prompt(prompt: str = PROMPT) -> str:
    """Tarantool aligns the '> ' of continuation lines under the prompt's."""
    return " " * (len(prompt) - 2) + "> "


def echo(prompt: str, text: str) -> str:
    """The accepted input as the screen keeps it: the prompt, the lines of the chunk
    (the continuation prompt before each further one), as plain text."""
    return prompt + text.replace("\n", "\n" + continuation_prompt(prompt)) + "\n"


def history_path() -> str:
    return os.environ.get("SPINDLE_HISTORY") or os.path.expanduser("~/.spindle_history")


def open_history() -> History:
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    path = history_path()
    try:
        with open(path, "a"):
            pass
    except OSError:
        return InMemoryHistory()   # an unwritable home must not stop the console
    return FileHistory(path)


def make_session(link: TxLink) -> PromptSession:
    from prompt_toolkit import PromptSession

    from .completion import LuaCompleter
    from .keys import IS_COMPLETE_TIMEOUT, console_bindings
    from .lexer import lua_lexer

    engine = link.engine

    def is_complete(text: str) -> bool:
        return link.call(engine.is_complete, text, timeout=IS_COMPLETE_TIMEOUT)

    def prompt() -> str:
        # after console.connect (or `spindle connect`) the prompt names the peer, as
        # Tarantool's does; a plain attribute read, no Lua
        remote = engine.remote
        return f"{remote.prompt}> " if remote is not None else PROMPT

    return PromptSession(
        message=prompt,
        # only on the real new lines of a chunk: a soft-wrapped line copied from the
        # screen must not bring the prompt along
        prompt_continuation=lambda width, line_number, wrap_count:
            continuation_prompt(prompt()) if wrap_count == 0 else "",
        # prompt-toolkit draws each screen row on its own (autowrap off), so even
        # without the prompt a wrapped line would copy as two; the line typed is
        # printed again as text instead (echo()), which the terminal wraps itself
        erase_when_done=True,
        multiline=True,   # Enter is ours: keys.py decides between accept and newline
        key_bindings=console_bindings(is_complete),
        history=open_history(),
        lexer=lua_lexer(),
        completer=LuaCompleter(link),
        complete_in_thread=True,
        complete_while_typing=False,
        enable_history_search=False,
        include_default_pygments_style=True,
    )


def run_repl(link: TxLink) -> None:
    """Read chunks until Ctrl-D or \\quit, showing each reply above the next prompt."""
    from .keys import keys_held
    from .output import console_stdout, install_signal, redirect_lua_output, restore_signal

    previous: dict[int, object] = {}
    try:
        with console_stdout() as out, keys_held():
            session = make_session(link)
            link.call(redirect_lua_output, link.engine)
            previous[signal.SIGINT] = link.call(install_signal, signal.SIGINT,
                                                link.interrupt)
            previous[signal.SIGWINCH] = link.call(install_signal, signal.SIGWINCH,
                                                  lambda: _on_resize(session))
            _loop(link, session, out)
    finally:
        try:
            for signum, handler in previous.items():
                link.call(restore_signal, signum, handler, timeout=2.0)
        except Exception:   # noqa: BLE001 - the tx thread may already be gone
            pass
        link.close()


def _on_resize(session: PromptSession) -> None:
    """SIGWINCH reaches only the main (tx) thread: pass it to the prompt's loop."""
    app = session.app
    loop = app.loop if app.is_running else None
    if loop is not None:
        loop.call_soon_threadsafe(app._on_resize)


def _loop(link: TxLink, session: PromptSession, out: ConsoleStdout) -> None:
    from .watch import reply_text
    while True:
        try:
            text = session.prompt()
        except KeyboardInterrupt:
            # Ctrl-C while editing: drop the line (left on the screen), fresh prompt
            out.write(echo(session.message(), session.default_buffer.text))
            continue
        except EOFError:
            return     # Ctrl-D on an empty line
        out.write(echo(session.message(), text))
        if not text.strip():
            continue
        try:
            reply = link.submit(text)
        except BaseException:   # noqa: BLE001 - the console fiber was killed (os.exit)
            return
        if reply.quit:
            if reply.text:    # why it ends (the peer of console.connect went away)
                out.write(reply.text + "\n")
                out.drain()
            return
        if reply.watch is not None:
            from .watch import CONSOLE_OVER, watch_live
            if watch_live(link, reply.watch, out) == CONSOLE_OVER:
                return
            continue
        width = shutil.get_terminal_size((120, 24)).columns
        out.write(reply_text(link, reply, width=width, color=True) + "\n")
        out.drain()
