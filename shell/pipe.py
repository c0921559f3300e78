"""The console when stdin is not a terminal: read chunks, print each one's output.

No prompts or echo, so `spindle < statements.txt > out.yaml` gives just the results.
Input is read by a thread of its own, so that a `\\watch` without a count can tell
when more input arrives (or the input ends) while it waits between ticks.
"""
from __future__ import annotations

import codecs
import collections
import os
import queue
import sys
import threading
from typing import TextIO

from .link import TxLink
from .watch import CONSOLE_OVER, reply_text, watch_plain

_EOF = None


class InputLines:
    """Lines of `stream`, read ahead by a daemon thread. A real file descriptor is
    read with os.read: a daemon thread blocked inside a buffered stdin read holds its
    lock, and Python aborts at exit when it finds that lock taken."""

    def __init__(self, stream: TextIO):
        self._queue: queue.Queue = queue.Queue()
        self._held: collections.deque = collections.deque()
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):   # StringIO and friends
            fd = None
        target = self._read_fd if fd is not None else self._read_stream
        threading.Thread(target=target, args=(fd if fd is not None else stream,),
                         name="stdin", daemon=True).start()

    def _read_stream(self, stream: TextIO) -> None:
        try:
            for line in stream:
                self._queue.put(line)
        finally:
            self._queue.put(_EOF)

    def _read_fd(self, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                pending += decoder.decode(data, final=not data)
                *lines, pending = pending.split("\n")
                for line in lines:
                    self._queue.put(line + "\n")
                if not data:
                    break
            if pending:
                self._queue.put(pending)
        finally:
            self._queue.put(_EOF)

    def get(self) -> str | None:
        """The next line (with its newline), or None at the end of input."""
        item = self._held.popleft() if self._held else self._queue.get()
        if item is _EOF:
            self._held.appendleft(_EOF)   # the end stays the end
        return item

    def arrived(self, timeout: float) -> bool:
        """Wait up to `timeout` for a line or the end of input; keep it for get()."""
        if self._held:
            return True
        try:
            item = self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return False
        self._held.append(item)
        return True


def run_pipe_console(link: TxLink, stdin: TextIO | None = None,
                     stdout: TextIO | None = None) -> None:
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    lines = InputLines(stdin)
    pending: list[str] = []
    try:
        while (line := lines.get()) is not None:
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
            if reply.watch is not None:
                if watch_plain(link, reply.watch, stdout, lines.arrived) == CONSOLE_OVER:
                    break
                continue
            stdout.write(reply_text(link, reply))
            stdout.flush()
        if pending and "\n".join(pending).strip():   # an unfinished chunk at EOF
            stdout.write(link.submit("\n".join(pending)).text)
            stdout.flush()
    finally:
        link.close()
