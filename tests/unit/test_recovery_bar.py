"""The recovery progress bar: drawn only on a terminal and only for long recoveries."""
from __future__ import annotations

import io
from dataclasses import dataclass

from spindle.shell.recovery_bar import RecoveryBar


@dataclass
class Progress:
    bytes_done: int
    bytes_total: int
    rows: int


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_quiet_for_short_recoveries_and_pipes():
    pipe = io.StringIO()
    RecoveryBar(pipe, min_bytes=10)(Progress(5, 100, 1))
    assert pipe.getvalue() == ""
    tty = FakeTty()
    RecoveryBar(tty, min_bytes=1000)(Progress(5, 100, 1))
    assert tty.getvalue() == ""


def test_draws_and_finishes_on_a_terminal():
    tty = FakeTty()
    bar = RecoveryBar(tty, min_bytes=10)
    bar(Progress(50, 100, 500))
    assert bar._progress is not None
    bar(Progress(100, 100, 1000))
    assert bar._progress is None          # closed when everything is read
    assert "recovering" in tty.getvalue()
