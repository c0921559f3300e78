"""coio.run_in_thread's worker pool: threads reused from call to call, a new one only
when all are busy (so blocked calls never wait for each other), at most `keep` idle
ones left after a burst, idle ones ended by shutdown; results, errors and timeouts
reach the waiting fiber as before while the other fibers run."""
from __future__ import annotations

import threading
import time

import pytest

from spindle.core.fiber import Scheduler, coio
from spindle.core.iproto.errors import TimedOut


def test_sequential_calls_reuse_one_thread():
    sched = Scheduler()
    idents = []

    def main():
        for _ in range(50):
            idents.append(coio.run_in_thread(sched, threading.get_ident))

    sched.run(main)
    sched.close()
    assert len(set(idents)) == 1
    assert threading.get_ident() not in idents


def test_blocked_calls_do_not_wait_for_each_other_and_fibers_run():
    sched = Scheduler()
    count = 8       # more than the pool keeps: every call needs its own thread
    barrier = threading.Barrier(count, timeout=10)
    results, ticks = [], []

    def call(i):
        results.append(coio.run_in_thread(sched, lambda: (barrier.wait(), i)[1]))

    def ticker():
        while len(results) < count:
            ticks.append(1)
            sched.sleep(0.001)

    def main():
        fibers = [sched.spawn(call, i, start=False) for i in range(count)]
        for fiber in fibers:
            fiber.set_joinable(True)      # (they start at this fiber's next yield)
        sched.spawn(ticker, start=False)
        for fiber in fibers:
            fiber.join()

    sched.run(main)
    sched.close()
    assert sorted(results) == list(range(count))
    assert ticks
    pool = coio._POOL
    assert pool._idle <= pool.keep


def test_results_errors_and_timeouts_reach_the_fiber():
    sched = Scheduler()

    def main():
        assert coio.run_in_thread(sched, lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(ZeroDivisionError):
            coio.run_in_thread(sched, lambda: 1 / 0)
        with pytest.raises(TimedOut):
            coio.run_in_thread(sched, time.sleep, 0.5, timeout=0.05)
        assert coio.run_in_thread(sched, lambda: "after") == "after"

    sched.run(main)
    sched.close()


def test_a_pool_keeps_few_idle_threads_and_shutdown_ends_them():
    pool = coio.WorkerPool(keep=2)
    started = threading.Barrier(6, timeout=10)
    done = threading.Semaphore(0)
    for _ in range(5):
        pool.submit(started.wait, (), lambda result, error: done.release())
    started.wait()
    for _ in range(5):
        assert done.acquire(timeout=10)
    deadline = time.monotonic() + 10
    while pool._threads > 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (pool._idle, pool._threads) == (2, 2)
    names = {t for t in threading.enumerate() if t.name == "coio"}
    pool.shutdown()
    assert pool._threads == 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = {t for t in threading.enumerate() if t.name == "coio"}
        if len(names - alive) >= 2:
            break
        time.sleep(0.01)
    assert len(names - alive) >= 2
