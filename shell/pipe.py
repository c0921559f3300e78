"""The console when stdin is not a terminal: read chunks, print each one's output.

No prompts or echo, so `spindle < statements.txt > out.yaml` gives just the results.
"""
from __future__ import annotations

import sys
from typing import TextIO

from .link import TxLink


def run_pipe_console(link: TxLink, stdin: TextIO | None = None,
                     stdout: TextIO | None = None) -> None:
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    pending: list[str] = []
    try:
        for line in stdin:
            pending.append(line.rstrip("\n"))
            text = "\n".join(pending)
            if not link.call(link.engine.is_complete, text):
                continue
            pending.clear()
            if not text.strip():
                continue
            reply = link.submit(text)
            if reply.quit:
                break
            stdout.write(_reply_text(link, reply))
            stdout.flush()
        if pending and "\n".join(pending).strip():   # an unfinished chunk at EOF
            stdout.write(link.submit("\n".join(pending)).text)
            stdout.flush()
    finally:
        link.close()


def _reply_text(link: TxLink, reply) -> str:
    if reply.error is not None or not reply.values:
        return reply.text
    output = link.call(getattr, link.engine, "output")
    if output != "table":
        return reply.text
    from .render_table import render_reply   # rich only when a table is asked for
    return render_reply(reply, output)
