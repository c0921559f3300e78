"""The process handling of `spindle demo` (shell/demo_children.py), with stand-in
children: start, wait for readiness with a deadline, fail fast on an exit, stop all
(SIGTERM, then SIGKILL), nothing left behind — not even when the parent is killed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ..integration.cluster import process_gone, wait_for
from spindle.shell import demo_children
from spindle.shell.demo_children import ChildProcess, Children, StartupFailed

DEADLINE = 20.0


def wait_until(condition, timeout: float = DEADLINE, what: str = "condition") -> None:
    wait_for(condition, timeout, what, interval=0.02)


def stand_in(tmp_path: Path, name: str, *, ready: bool = True, exit_code: int | None = None,
             ignore_term: bool = False) -> ChildProcess:
    """A child that (maybe) ignores SIGTERM, (maybe) writes its ready file, then
    exits with `exit_code` or sleeps until stopped."""
    directory = tmp_path / name
    directory.mkdir()
    ready_path = directory / "ready"
    code = textwrap.dedent(f"""
        import signal, sys, time
        if {ignore_term!r}:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if {ready!r}:
            open({str(ready_path)!r}, "w").close()
        if {exit_code!r} is not None:
            sys.exit({exit_code!r})
        while True:
            time.sleep(60)
    """)
    return ChildProcess(name, [sys.executable, "-c", code], directory, ready_path,
                        directory / "output.log")


class ManualMonotonic:
    """The `time` module as demo_children sees it, with a monotonic clock that moves
    only when the test says so."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def children_to_stop():
    """Children a test started; stopped after it whatever happened."""
    started: list[Children] = []
    yield started.append
    for children in started:
        children.stop_all(timeout=2)


def test_wait_ready_then_stop_all_leaves_nothing(tmp_path, children_to_stop):
    children = Children([stand_in(tmp_path, "demo2"), stand_in(tmp_path, "demo3")])
    children_to_stop(children)
    children.start_all()
    children.wait_ready(time.monotonic() + DEADLINE)
    pids = [child.pid for child in children]
    assert all(not process_gone(pid) for pid in pids)
    assert children.stop_all() == []          # they went on SIGTERM
    assert all(process_gone(pid) for pid in pids)


def test_children_run_in_sessions_of_their_own(tmp_path, children_to_stop):
    """The terminal's Ctrl-C (SIGINT to the foreground group) must not reach them."""
    children = Children([stand_in(tmp_path, "demo2")])
    children_to_stop(children)
    children.start_all()
    children.wait_ready(time.monotonic() + DEADLINE)
    pid = children.children[0].pid
    assert os.getsid(pid) == pid != os.getsid(0)


def test_a_child_that_exits_fails_the_start_at_once(tmp_path, children_to_stop):
    """With the deadline an hour away, the exit alone ends the wait (the test's own
    patience, DEADLINE, is what a wait for the hour would run into)."""
    children = Children([stand_in(tmp_path, "demo2"),
                         stand_in(tmp_path, "demo3", ready=False, exit_code=3)])
    children_to_stop(children)
    children.start_all()
    patience = time.monotonic() + DEADLINE

    def sleep(seconds):
        assert time.monotonic() < patience, "still waiting for the hour's deadline"
        time.sleep(seconds)
    with pytest.raises(StartupFailed, match=r"demo3 exited with status 3"):
        children.wait_ready(time.monotonic() + 3600, sleep=sleep)
    alive = children.children[0].pid
    children.stop_all()
    assert process_gone(alive)


def test_the_deadline_names_who_is_late(tmp_path, children_to_stop, monkeypatch):
    children = Children([stand_in(tmp_path, "demo2"),
                         stand_in(tmp_path, "demo3", ready=False)])
    children_to_stop(children)
    children.start_all()
    wait_until(lambda: children.children[0].ready(), what="demo2 ready")
    # On a clock of its own (the module's monotonic), which only the waits move:
    # it gives up once the deadline has come, not before.
    clock = ManualMonotonic()
    monkeypatch.setattr(demo_children, "time", clock)
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock.now += seconds
    with pytest.raises(StartupFailed, match=r"^demo3 not up by the deadline$"):
        children.wait_ready(clock.now + 0.25, sleep=sleep, interval=0.0625)
    assert slept == [0.0625] * 4           # (steps exact in binary: no rounding left)
    pids = [child.pid for child in children]
    children.stop_all()
    assert all(process_gone(pid) for pid in pids)


def test_stop_all_kills_a_child_that_ignores_sigterm(tmp_path, children_to_stop):
    children = Children([stand_in(tmp_path, "demo2", ignore_term=True),
                         stand_in(tmp_path, "demo3")])
    children_to_stop(children)
    children.start_all()
    children.wait_ready(time.monotonic() + DEADLINE)   # SIGTERM is ignored from here
    pids = [child.pid for child in children]
    assert children.stop_all(timeout=0.5) == ["demo2"]     # SIGKILLed at the deadline
    assert all(process_gone(pid) for pid in pids)


def test_children_die_with_a_parent_killed_outright(tmp_path):
    """SIGKILL of the demo runs no cleanup: the kernel's parent-death signal does it."""
    pid_file = tmp_path / "pids"
    parent = textwrap.dedent(f"""
        import sys, time
        sys.path[:0] = {sys.path!r}
        from spindle.shell.demo_children import Children
        from test_demo_children_stand_in import make
        children = Children([make({str(tmp_path)!r}, "demo2")])
        children.start_all()
        children.wait_ready(time.monotonic() + {DEADLINE!r})
        open({str(pid_file)!r}, "w").write(" ".join(str(c.pid) for c in children))
        while True:
            time.sleep(60)
    """)
    helper = tmp_path / "test_demo_children_stand_in.py"
    helper.write_text(textwrap.dedent("""
        import sys
        from pathlib import Path
        from spindle.shell.demo_children import ChildProcess

        def make(root, name):
            directory = Path(root) / name
            directory.mkdir()
            code = ("open(%r, 'w').close()\\nimport time\\nwhile True: time.sleep(60)"
                    % str(directory / "ready"))
            return ChildProcess(name, [sys.executable, "-c", code], directory,
                                directory / "ready", directory / "output.log")
    """))
    process = subprocess.Popen([sys.executable, "-c", parent], cwd=tmp_path,
                               env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    child = None
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text(), what="the pids")
        child = int(pid_file.read_text())
        assert not process_gone(child)
        process.send_signal(signal.SIGKILL)
        process.wait(DEADLINE)
        wait_until(lambda: process_gone(child), what="the orphan to be terminated")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if child is not None and not process_gone(child):   # the test failed: tidy up
            os.kill(child, signal.SIGKILL)
