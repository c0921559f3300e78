"""Child processes of `spindle demo`: start, check, wait with a deadline, stop all.

Kept apart from the demo's Lua and console parts so the process handling can be
tested with any command as the child. Nothing here sleeps on its own: callers poll
`check()` / `all_ready()` with their own sleep (a fiber sleep on the tx thread), or
use `wait_ready()` with a deadline.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

STOP_TIMEOUT = 10.0        # SIGTERM, then this long, then SIGKILL
_PR_SET_PDEATHSIG = 1


class StartupFailed(Exception):
    """A child exited while the demo was starting, or it did not get ready in time."""


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec function asking the kernel to SIGTERM the child when this process
    dies without stopping it (SIGKILL, a crash). libc is loaded here, in the parent:
    loading a library between fork and exec is not safe."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):   # not Linux: stop_all() is all there is
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    return preexec


def late(names: list[str]) -> str:
    return f"{', '.join(names)} not up by the deadline"


class ChildProcess:
    """One child: `argv` run in `cwd`, output to `output_path`; ready when
    `ready_path` exists."""

    def __init__(self, name: str, argv: list[str], cwd: Path, ready_path: Path,
                 output_path: Path):
        self.name, self.argv, self.cwd = name, argv, cwd
        self.ready_path, self.output_path = ready_path, output_path
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        with open(self.output_path, "ab") as output:   # the child keeps its own copy
            self.proc = subprocess.Popen(
                self.argv, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                # A session of its own: the terminal's Ctrl-C is for the console only.
                start_new_session=True, preexec_fn=_parent_death_signal())

    def exit_status(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def ready(self) -> bool:
        return self.proc is not None and self.ready_path.exists()

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.terminate()
            except ProcessLookupError:
                pass

    def wait_gone(self, deadline: float) -> bool:
        """Wait for the child to exit (and reap it) until `deadline`; then SIGKILL."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
            return True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return False


class Children:
    def __init__(self, children: list[ChildProcess]):
        self.children = children

    def __iter__(self) -> Iterator[ChildProcess]:
        return iter(self.children)

    def start_all(self) -> None:
        for child in self.children:
            child.start()

    def check(self) -> None:
        """Raise StartupFailed if a child has exited."""
        for child in self.children:
            status = child.exit_status()
            if status is not None:
                raise StartupFailed(f"{child.name} exited with status {status} "
                                    f"(see {child.output_path})")

    def all_ready(self) -> bool:
        return all(child.ready() for child in self.children)

    def not_ready(self) -> list[str]:
        return [child.name for child in self.children if not child.ready()]

    def wait_ready(self, deadline: float, sleep: Callable[[float], None] = time.sleep,
                   interval: float = 0.05) -> None:
        """Until every child is ready; StartupFailed when one exits or at `deadline`."""
        while True:
            self.check()
            if self.all_ready():
                return
            if time.monotonic() >= deadline:
                raise StartupFailed(late(self.not_ready()))
            sleep(min(interval, max(0.0, deadline - time.monotonic())))

    def stop_all(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """SIGTERM everyone at once, wait for them together, SIGKILL whoever is left
        at the deadline. Returns the names of those that had to be killed."""
        for child in self.children:
            child.terminate()
        deadline = time.monotonic() + timeout
        return [child.name for child in self.children if not child.wait_gone(deadline)]
