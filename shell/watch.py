"""`\\watch SECONDS [count=N] EXPR`: the front-end half (REPL thread).

The engine (lua/console.py) only checks the line and hands back a WatchRequest. The
REPL thread then keeps the rhythm: each tick submits EXPR through the TxLink like a
typed statement (so it runs in its own fiber on the tx thread and never blocks the
scheduler), and draws the reply — in place with rich's Live on a terminal, as one
plain document per tick in pipe mode. Ticks are kept on a fixed grid (start + k *
interval) so slow evaluations do not make the watch drift; a tick that is already
late is run at once rather than skipped silently.

Ctrl-C reaches the tx thread as SIGINT (the terminal is not in raw mode while Live
draws); its handler cancels a running evaluation and sets `link.interrupted`, which
the waits between ticks listen to. An error in EXPR is shown like any value and the
watch goes on.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, TextIO

if TYPE_CHECKING:
    from spindle.lua.console import Reply, WatchRequest

    from .link import TxLink
    from .output import ConsoleStdout

# run_watch's outcomes
WATCH_DONE = "done"          # count reached, Ctrl-C, or (pipe mode) more input
CONSOLE_OVER = "over"        # the console ended during the watch (os.exit in EXPR...)


def run_watch(link: TxLink, request: WatchRequest, show: Callable[[Reply, int], None],
              wait_stop: Callable[[float], bool],
              cancelled: Callable[[], bool] = lambda: False) -> str:
    """Evaluate `request.expression` on its grid until done. `show(reply, tick)` draws
    a reply; `wait_stop(seconds)` waits up to `seconds` and returns True when the
    watch must end (Ctrl-C, input...); `cancelled()` tells that an evaluation ended
    because the user stopped the watch (its "fiber is cancelled" is not shown)."""
    next_at = time.monotonic()
    tick = 0
    while True:
        try:
            reply = link.submit(request.expression)
        except BaseException:   # noqa: BLE001 - the console fiber was killed (os.exit)
            return CONSOLE_OVER
        if reply.quit:
            return CONSOLE_OVER
        if cancelled():
            return WATCH_DONE   # Ctrl-C during the evaluation: keep the last good value
        tick += 1
        show(reply, tick)
        if request.count is not None and tick >= request.count:
            return WATCH_DONE
        next_at = max(next_at + request.interval, time.monotonic())
        if wait_stop(next_at - time.monotonic()):
            return WATCH_DONE


def reply_text(link: TxLink, reply: Reply, width: int = 120, color: bool = False) -> str:
    """What the console prints for one reply: its text, or its values drawn as tables
    under table output (with box.info.election, asked through `link`, next to a
    replication table). The one place every front end (prompt, pipe, watch) asks."""
    if reply.layout is None or reply.error is not None or not reply.values:
        return reply.text
    from .render_replication import election_state
    from .render_table import render_reply   # rich only when a table is asked for
    return render_reply(reply, width=width, color=color,
                        election=lambda: election_state(link.submit))


# ===================================================================== pipe mode

def watch_plain(link: TxLink, request: WatchRequest, stdout: TextIO,
                input_arrived: Callable[[float], bool]) -> str:
    """Pipe mode: print each value as the document a statement would print. Without a
    count, the watch ends when more input arrives or the input ends
    (`input_arrived(timeout)` tells); with one, after that many documents."""
    def show(reply: Reply, tick: int) -> None:
        stdout.write(reply_text(link, reply))
        stdout.flush()

    if request.count is not None:
        never = threading.Event()
        return run_watch(link, request, show, never.wait)
    return run_watch(link, request, show, input_arrived)


# ====================================================================== terminal

def watch_live(link: TxLink, request: WatchRequest, out: ConsoleStdout) -> str:
    """Terminal: redraw the value in place until Ctrl-C (or `count` ticks)."""
    from rich.console import Console, Group
    from rich.live import Live
    from rich.text import Text

    from .keys import keys_held

    out.drain()   # what was printed before the watch stays above it
    terminal = out.original_stdout or sys.__stdout__
    console = Console(file=terminal, highlight=False, markup=False, emoji=False)
    link.interrupted.clear()
    live = Live(_header(request, None), console=console,
                auto_refresh=False, transient=False, redirect_stdout=False,
                redirect_stderr=False, vertical_overflow="ellipsis")

    def show(reply: Reply, tick: int) -> None:
        body = reply_text(link, reply, width=console.width, color=True)
        parts = [_header(request, tick)]
        if reply.layout is None:   # a table shows the election itself
            parts += _election(link, reply)
        live.update(Group(*parts, Text.from_ansi(body.rstrip("\n"))), refresh=True)

    def print_above(text: str) -> None:
        # Log lines and Lua print() from background fibers go above the live value.
        console.print(Text.from_ansi(text.rstrip("\n")))

    # keys typed meanwhile were typed to stop the watch: they go with it
    with keys_held(drop=True), live, out.diverted(print_above):
        outcome = run_watch(link, request, show, link.interrupted.wait,
                            link.interrupted.is_set)
    link.interrupted.clear()
    return outcome


def _header(request: WatchRequest, tick: int | None):
    """One line, like watch(1)'s: what is watched (cut to fit), then when and which
    tick."""
    from rich.table import Table
    from rich.text import Text

    count = f"/{request.count}" if request.count is not None else ""
    when = time.strftime("%H:%M:%S") + (f"  #{tick}{count}" if tick else "")
    grid = Table.grid(expand=True, padding=(0, 2))
    grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    grid.add_column(no_wrap=True, justify="right")
    grid.add_row(Text(f"Every {request.interval:g} s: {request.expression}", style="dim"),
                 Text(f"{when}  Ctrl-C to stop", style="dim"))
    return grid


def _election(link: TxLink, reply: Reply) -> list:
    """box.info.election's line over a watched replication value (election on)."""
    from .render_replication import election_line, election_state, replication_peers
    if reply.error is not None or not reply.values or \
            replication_peers(reply.values[0]) is None:
        return []
    state = election_state(link.submit)
    return [election_line(state)] if state is not None else []
