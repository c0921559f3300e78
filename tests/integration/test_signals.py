"""Signals sent by PID to a real Spindle process (issue 21): SIGTERM and SIGINT close
the WAL with its EOF marker and exit 0, SIGHUP reopens the log file and never kills,
SIGUSR1 takes a checkpoint, kill -9 loses no acknowledged row of wal_mode = 'write'.
tests/interop/test_signals_oracle.py runs the same scenarios against Tarantool 2.6.0.
"""
from __future__ import annotations

import signal

import pytest

from .cluster import Cluster, wait_for
from .signal_support import (keep_serving, observe_kill9, observe_sighup_on_stderr,
                             observe_sighup_unopenable, observe_sighup_with_log_file,
                             observe_stop, observe_sigusr1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_stop_signal_closes_the_wal_and_exits_0(tmp_path, signum):
    with Cluster(tmp_path) as cluster:
        observed = observe_stop(cluster, "spindle", signum)
    assert observed["status"] == 0
    assert observed["lines after the signal"] == []     # no pid_file: nothing logged
    # the xlog written to and the empty one named by the final vclock
    assert observed["xlog EOF markers"] == [True, True]
    assert observed["keys in the xlogs"] == 100
    assert observed["rows after restart"] == 100


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_daemon_logs_the_signal_that_stopped_it(tmp_path, signum):
    with Cluster(tmp_path) as cluster:
        observed = observe_stop(cluster, "spindle", signum, pid_file=True, rows=1)
    assert observed["status"] == 0
    assert observed["lines after the signal"] == [
        f"main C> got signal {int(signum)} - {signal.strsignal(signum)}"]
    assert observed["xlog EOF markers"] == [True, True]


def test_sigint_stops_an_instance_started_with_sigint_ignored(tmp_path):
    """A shell starts a background job with SIGINT ignored; Tarantool's handler (and
    so Spindle's) is installed anyway."""
    with Cluster(tmp_path) as cluster:
        observed = observe_stop(cluster, "spindle", signal.SIGINT, rows=10,
                                ignore_sigint=True)
    assert observed["status"] == 0
    assert observed["xlog EOF markers"] == [True, True]
    assert observed["rows after restart"] == 10


def test_sighup_reopens_the_log_file(tmp_path):
    with Cluster(tmp_path) as cluster:
        observed = observe_sighup_with_log_file(cluster, "spindle")
    assert observed == {"serving": True,
                        "reopen lines in the new file": ["coio I> log file has been reopened"],
                        "later line in the new file": True,
                        "old file got": []}


def test_sighup_without_a_log_file_changes_nothing(tmp_path):
    with Cluster(tmp_path) as cluster:
        observed = observe_sighup_on_stderr(cluster, "spindle")
    assert observed == {"serving": True, "lines after the signal": []}


def test_sighup_when_the_log_file_cannot_be_opened(tmp_path):
    with Cluster(tmp_path) as cluster:
        observed = observe_sighup_unopenable(cluster, "spindle")
    assert observed == {"serving": True, "errors": [
        "coio !> SystemError logrotate can't open <logs>/instance.log: "
        "No such file or directory"]}


def test_log_rotate_from_lua_reopens_the_file(tmp_path):
    with Cluster(tmp_path) as cluster:
        node = cluster.add("spindle", "lua-rotate", {"log": "instance.log"})
        node.start()
        current = node.workdir / "instance.log"
        current.rename(node.workdir / "instance.log.1")
        node.eval("require('log').rotate()")
        wait_for(lambda: current.exists() and "reopened" in current.read_text(), 30,
                 "a new log file")
        assert keep_serving(node)


def test_sigusr1_takes_a_checkpoint(tmp_path):
    with Cluster(tmp_path) as cluster:
        observed = observe_sigusr1(cluster, "spindle")
    assert observed == {"serving": True, "snapshot at the vclock": True}


def test_kill_9_loses_no_acknowledged_row(tmp_path):
    with Cluster(tmp_path) as cluster:
        observed = observe_kill9(cluster, "spindle")
    assert observed == {"status": -signal.SIGKILL, "missing after restart": [],
                        "acknowledged at least": True}
