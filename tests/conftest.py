"""Shared fixtures: a scheduler with a fake clock, and a helper to run code in a fiber."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from spindle.core import log
from spindle.core.fiber import Scheduler

# Tests never assert on time: no per-example deadline (hypothesis' default is 200 ms,
# which a busy CI machine overran) and no "too slow" health check.
settings.register_profile("spindle", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("spindle")


@pytest.fixture(autouse=True)
def isolate_process_state():
    """The log sink/level and the working directory are process-wide (box.cfg sets
    them, as Tarantool does): give every test a clean copy and put them back."""
    sink, level, cwd = log.set_sink(None), log.level, os.getcwd()
    log.set_sink(sink)
    # lines in the configured format (a spindle process writes its boot logger's
    # plain lines until its first box.cfg: the process tests see that)
    booting, log.booting = log.booting, False
    yield
    log.set_sink(sink)
    log.set_level(level)
    log.booting = booting
    os.chdir(cwd)


class FakeClock:
    """Time that moves only when the hub would otherwise sleep: timeouts are exact
    and tests that 'wait' an hour finish at once."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def sched(clock):
    scheduler = Scheduler(clock=clock)
    yield scheduler
    scheduler.shutdown(timeout=1.0)
    scheduler.close()


@pytest.fixture
def run(sched):
    """run(fn, *args): run fn as the main fiber to completion and return its result."""
    def runner(fn, *args):
        return sched.run(fn, *args)
    return runner


@pytest.fixture
def collector_paused():
    """For tests that measure a thread's CPU time or count the loop's turns around
    long work: no automatic full garbage collection of what earlier tests left in
    this process (100+ ms of CPU with the suite's heap) may land inside the measured
    run, so the collector is paused for the test.
    (Freezing the heap instead, or forcing a collection, crashed the interpreter in
    the full suite: other tests' greenlets and Lua states must be left to the
    collector's own timing.)"""
    import gc
    was_enabled = gc.isenabled()
    gc.disable()
    yield
    if was_enabled:
        gc.enable()
