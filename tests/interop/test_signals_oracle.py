"""Signals against real Tarantool 2.6.0 and Spindle: the same scenario is run on both
processes (tests/integration/signal_support.py) and what each shows from outside —
exit status, log lines, EOF markers of the xlogs, rows after a restart — must be the
same, and what 2.6.0 shows is what tests/integration/test_signals.py asks of Spindle.
"""
from __future__ import annotations

import signal

import pytest

from ..integration.cluster import Cluster
from ..integration.signal_support import (observe_kill9, observe_sighup_on_stderr,
                                          observe_sighup_unopenable,
                                          observe_sighup_with_log_file, observe_stop,
                                          observe_sigusr1)

STOP = [signal.SIGTERM, signal.SIGINT]


def both(tmp_path, observe, *args, **kwargs) -> tuple[dict, dict]:
    with Cluster(tmp_path) as cluster:
        return (observe(cluster, "tarantool", *args, **kwargs),
                observe(cluster, "spindle", *args, **kwargs))


@pytest.mark.parametrize("signum", STOP, ids=["TERM", "INT"])
def test_stop_signal_as_tarantool(tmp_path, signum):
    tarantool, spindle = both(tmp_path, observe_stop, signum)
    assert spindle == tarantool == {
        "status": 0, "lines after the signal": [], "xlog EOF markers": [True, True],
        "keys in the xlogs": 100, "rows after restart": 100}


@pytest.mark.parametrize("signum", STOP, ids=["TERM", "INT"])
def test_stop_signal_of_a_daemon_as_tarantool(tmp_path, signum):
    tarantool, spindle = both(tmp_path, observe_stop, signum, pid_file=True, rows=1)
    assert spindle == tarantool
    assert tarantool["lines after the signal"] == [
        f"main C> got signal {int(signum)} - {signal.strsignal(signum)}"]


def test_sigint_ignored_by_the_parent_as_tarantool(tmp_path):
    tarantool, spindle = both(tmp_path, observe_stop, signal.SIGINT, rows=10,
                              ignore_sigint=True)
    assert spindle == tarantool
    assert tarantool["status"] == 0 and tarantool["rows after restart"] == 10


def test_sighup_with_a_log_file_as_tarantool(tmp_path):
    tarantool, spindle = both(tmp_path, observe_sighup_with_log_file)
    assert spindle == tarantool == {
        "serving": True, "reopen lines in the new file": ["coio I> log file has been reopened"],
        "later line in the new file": True, "old file got": []}


def test_sighup_on_stderr_as_tarantool(tmp_path):
    tarantool, spindle = both(tmp_path, observe_sighup_on_stderr)
    assert spindle == tarantool == {"serving": True, "lines after the signal": []}


def test_sighup_unopenable_log_file_as_tarantool(tmp_path):
    tarantool, spindle = both(tmp_path, observe_sighup_unopenable)
    assert spindle == tarantool
    assert tarantool["serving"] and len(tarantool["errors"]) == 1


def test_sigusr1_as_tarantool(tmp_path):
    tarantool, spindle = both(tmp_path, observe_sigusr1)
    assert spindle == tarantool == {"serving": True, "snapshot at the vclock": True}


def test_kill_9_as_tarantool(tmp_path):
    tarantool, spindle = both(tmp_path, observe_kill9)
    assert spindle == tarantool == {"status": -signal.SIGKILL, "missing after restart": [],
                                    "acknowledged at least": True}
