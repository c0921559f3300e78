"""core/log.py: the log file of box.cfg{log = ...} and its reopening (SIGHUP,
log.rotate()), and the origin Tarantool prints for its scheduler fiber."""
from __future__ import annotations

import os
import re

import pytest

from spindle.core import log

PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[\d+\] ")


def lines(path) -> list[str]:
    return [PREFIX.sub("", line) for line in path.read_text().splitlines()]


@pytest.fixture
def log_file(tmp_path):
    opened = log.open_file(str(tmp_path / "instance.log"))
    yield opened
    log.close_file()


def test_lines_go_to_the_file_until_it_is_closed(tmp_path, log_file):
    log.info("first")
    assert lines(tmp_path / "instance.log") == ["main I> first"]
    log.close_file()
    log.info("to stderr")
    assert lines(tmp_path / "instance.log") == ["main I> first"]


def test_the_path_is_absolute_from_the_start(tmp_path):
    os.chdir(tmp_path)
    opened = log.open_file("relative.log")
    try:
        os.mkdir("elsewhere")
        os.chdir("elsewhere")          # box.cfg{work_dir = ...} after the log opened
        assert opened.path == str(tmp_path / "relative.log")
        (tmp_path / "relative.log").rename(tmp_path / "relative.log.1")
        log.rotate().join()
        assert lines(tmp_path / "relative.log") == ["coio I> log file has been reopened"]
    finally:
        log.close_file()


def test_rotate_reopens_the_file_by_its_name(tmp_path, log_file):
    current, rotated = tmp_path / "instance.log", tmp_path / "instance.log.1"
    log.info("before")
    current.rename(rotated)
    log.info("renamed, not reopened yet")
    thread = log.rotate()
    assert thread.name == "coio"
    thread.join()
    log.info("after")
    assert lines(rotated) == ["main I> before", "main I> renamed, not reopened yet"]
    assert lines(current) == ["coio I> log file has been reopened", "main I> after"]
    assert oct(current.stat().st_mode & 0o777) == oct(0o640 & ~_umask())


def test_rotate_without_a_log_file_does_nothing():
    assert log.rotate() is None


def test_a_failed_reopen_is_logged_to_the_old_file(tmp_path):
    directory = tmp_path / "logs"
    directory.mkdir()
    log.open_file(str(directory / "instance.log"))
    try:
        moved = tmp_path / "logs.old"
        directory.rename(moved)
        log.rotate().join()
        log.info("still logging")
        assert lines(moved / "instance.log") == [
            f"coio !> SystemError logrotate can't open {directory / 'instance.log'}: "
            "No such file or directory",
            "main I> still logging"]
    finally:
        log.close_file()


def test_the_scheduler_fiber_is_named_by_its_cord_only(tmp_path, log_file, sched):
    """Tarantool prints "main" for fiber 1 (the hub, "sched") and cord/id/name for
    the others; the hub's callbacks log as fiber 1."""
    sched.call_soon(lambda: log.crit("from the hub"))
    sched.spawn(lambda: log.info("from a fiber"), name="worker")
    sched.run(until_idle=True)
    found = lines(tmp_path / "instance.log")
    assert "main C> from the hub" in found
    assert any(re.fullmatch(r"main/\d+/worker I> from a fiber", line) for line in found)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
