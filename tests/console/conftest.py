"""Drive the real console through a pty (pexpect), matching on the screen's text.

prompt-toolkit draws with escape sequences and redraws only what changed, so the
helper strips the escapes before matching, keeping one marker: `\\x01` where an
application starts (bracketed paste is switched on), so PROMPT matches only a freshly
drawn prompt, never the redraw of an accepted line.
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest

SPINDLE = str(Path(sys.executable).parent / "spindle")
TIMEOUT = 10.0
PROMPT = "\x01spindle>"
CONTINUATION = "       >"   # the trailing blank is drawn as a cursor move

_APP_START = "\x1b[?2004h"
_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>78])")


def screen_text(raw: str) -> str:
    return _ESCAPE.sub("", raw.replace(_APP_START, "\x01"))


class Console:
    PROMPT = PROMPT
    CONTINUATION = CONTINUATION

    def __init__(self, args: list[str], env: dict[str, str], cwd: str | None = None):
        self.child = pexpect.spawn(SPINDLE, args, env=env, cwd=cwd, encoding="utf-8",
                                   dimensions=(24, 120), timeout=TIMEOUT)
        self.raw = ""
        self.pos = 0   # how far the screen text has been consumed by expect()

    @property
    def text(self) -> str:
        return screen_text(self.raw)

    def expect(self, pattern: str, timeout: float = TIMEOUT) -> re.Match:
        """Wait until `pattern` (a regex) shows up after the last match."""
        regex = re.compile(pattern, re.S)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.text, self.pos)
            if match:
                self.pos = match.end()
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{pattern!r} not seen; screen after the last "
                                     f"match:\n{self.text[self.pos:]!r}")
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=min(left, 0.5))
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                match = regex.search(self.text, self.pos)
                if match:
                    self.pos = match.end()
                    return match
                raise AssertionError(f"EOF before {pattern!r}; screen:\n"
                                     f"{self.text[self.pos:]!r}") from None

    def expect_literal(self, text: str, timeout: float = TIMEOUT) -> re.Match:
        return self.expect(re.escape(text), timeout)

    def prompt(self) -> None:
        self.expect_literal(PROMPT)

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def run(self, line: str) -> str:
        """Type a complete chunk at a fresh prompt; return its YAML document's body."""
        self.send(line + "\r")
        body = self.expect(r"---\r?\n(.*?)\.\.\.\r?\n").group(1)
        self.prompt()
        return body.replace("\r\n", "\n")

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=0.5)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                break
        else:
            raise AssertionError(f"still running after {timeout} s; screen:\n"
                                 f"{self.text[self.pos:]!r}")
        self.child.wait()
        return self.child.exitstatus

    def terminate(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close(force=True)


@pytest.fixture
def console_env(tmp_path):
    env = dict(os.environ)
    env.pop("SPINDLE_PLAIN_CONSOLE", None)
    env.update(PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", HOME=str(tmp_path),
               SPINDLE_HISTORY=str(tmp_path / "history"), COLUMNS="120", LINES="24")
    return env


@pytest.fixture
def spawn_console(console_env):
    """spawn_console(*args) -> a Console at its first prompt; ended after the test."""
    started: list[Console] = []

    def spawn(*args: str, cwd: str | None = None, wait_prompt: bool = True) -> Console:
        console = Console(list(args), console_env, cwd)
        started.append(console)
        if wait_prompt:
            console.prompt()
        return console

    yield spawn
    for console in started:
        console.terminate()
