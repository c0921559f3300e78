"""Shared fixtures: a scheduler with a fake clock, and a helper to run code in a fiber."""
from __future__ import annotations

import os

import pytest

from spindle.core import log
from spindle.core.fiber import Scheduler


@pytest.fixture(autouse=True)
def isolate_process_state():
    """The log sink/level and the working directory are process-wide (box.cfg sets
    them, as Tarantool does): give every test a clean copy and put them back."""
    sink, level, cwd = log.set_sink(None), log.level, os.getcwd()
    log.set_sink(sink)
    yield
    log.set_sink(sink)
    log.set_level(level)
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
def frozen_heap():
    """For tests that assert the stall watchdog stays quiet: the objects earlier tests
    left in this process are frozen first, so a full garbage collection over them
    (100+ ms with the suite's heap) cannot land inside the measured run. The server
    freezes its heap after start-up for the same reason. No gc.collect() here: forcing
    a collection of other tests' leftovers (greenlets, Lua states, py4j threads' objects)
    at an arbitrary point crashed the interpreter once."""
    import gc
    gc.freeze()
    yield
    gc.unfreeze()
