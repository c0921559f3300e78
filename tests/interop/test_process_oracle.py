"""The process part of the first box.cfg against 2.6.0's: work_dir must exist,
background needs log and pid_file, the pid file is locked, written and removed, and
background = true detaches (issue 23, process behaviour). Same script, same output
and exit status on both."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .oracle import SPINDLE, tarantool_binary

BINARIES = {"tarantool": tarantool_binary, "spindle": lambda: SPINDLE}


def run_e(kind: str, code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([BINARIES[kind](), "-e", code], cwd=cwd, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def wait_for(predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(params=sorted(BINARIES))
def kind(request):
    return request.param


@pytest.mark.parametrize("code, message", [
    ("box.cfg{work_dir = 'nosuch'}", "can't chdir to `nosuch': No such file or directory"),
    ("print(pcall(box.cfg, {work_dir = 'nosuch'}))",
     "can't chdir to `nosuch': No such file or directory"),
    ("box.cfg{work_dir = 'afile'}", "can't chdir to `afile': Not a directory"),
    ("box.cfg{background = true}",
     "'background' requires 'log' configuration option to be set"),
    ("box.cfg{background = true, log = 'x.log'}",
     "'background' requires 'pid_file' configuration option to be set"),
    ("box.cfg{pid_file = 'nodir/p.pid'}",
     "failed to create pid file '{cwd}/nodir/p.pid': No such file or directory"),
])
def test_refused_process_options_end_the_process(kind, code, message, tmp_path):
    (tmp_path / "afile").write_text("")
    result = run_e(kind, code, tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    # (Spindle's stall watchdog may add its warning on a loaded machine)
    lines = [line for line in result.stderr.splitlines() if "without yielding" not in line]
    assert lines[-1] == message.format(cwd=tmp_path)
    assert not (tmp_path / "nosuch").exists()
    assert sorted(os.listdir(tmp_path)) == ["afile"]      # no data, no log, no pid file


def test_pid_file_holds_the_pid_in_work_dir_until_exit(kind, tmp_path):
    (tmp_path / "w").mkdir()
    result = run_e(kind, "box.cfg{work_dir = 'w', pid_file = 'p.pid', log = 'l.log'} "
                         "local f = io.open('p.pid') print(f:read('*a') == tostring(box.info.pid)) "
                         "f:close() os.exit(0)", tmp_path)
    assert (result.returncode, result.stdout) == (0, "true\n"), result.stderr
    assert not (tmp_path / "w" / "p.pid").exists()        # removed at exit
    assert (tmp_path / "w" / "l.log").exists()


def test_a_locked_pid_file_refuses_a_second_instance(kind, tmp_path):
    first = subprocess.Popen(
        [BINARIES[kind](), "-e", "box.cfg{pid_file = 'p.pid', log = 'one.log'} "
                                 "local fiber = require('fiber') "
                                 "while io.open('stop') == nil do fiber.sleep(0.05) end "
                                 "os.exit(0)"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        pid = wait_for(lambda: (tmp_path / "p.pid").exists()
                       and (tmp_path / "p.pid").read_text().strip(), "the pid file")
        assert pid == str(first.pid)
        (tmp_path / "two").mkdir()
        second = run_e(kind, "box.cfg{pid_file = '../p.pid', log = 'two.log', "
                             "work_dir = 'two'}", tmp_path)
        assert second.returncode == 1
        assert second.stderr.splitlines()[-1] == f"the daemon is already running: PID {pid}"
        assert os.listdir(tmp_path / "two") == []
        (tmp_path / "stop").write_text("")
        assert first.wait(timeout=60) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_background_detaches_and_the_child_goes_on(kind, tmp_path):
    script = ("box.cfg{background = true, log = 'bg.log', pid_file = 'bg.pid'} "
              "require('log').info('the child goes on') print('to /dev/null') "
              "local fiber = require('fiber') "
              "while io.open('stop') == nil do fiber.sleep(0.05) end os.exit(0)")
    parent = run_e(kind, script, tmp_path)
    assert (parent.returncode, parent.stdout, parent.stderr) == (0, "", "")
    pid = int(wait_for(lambda: (tmp_path / "bg.pid").exists()
                       and (tmp_path / "bg.pid").read_text().strip(), "the pid file"))
    try:
        log = wait_for(lambda: "the child goes on" in (tmp_path / "bg.log").read_text()
                       and (tmp_path / "bg.log").read_text(), "the child's log line")
        assert f"[{pid}] " in log.split("the child goes on")[0].splitlines()[-1]
        os.kill(pid, 0)                                    # alive, detached
        assert os.getsid(pid) == pid                       # its own session
    finally:
        (tmp_path / "stop").write_text("")
        try:
            wait_for(lambda: not (tmp_path / "bg.pid").exists(), "the child's exit")
        except AssertionError:
            os.kill(pid, signal.SIGKILL)                   # never leave it behind
            raise
