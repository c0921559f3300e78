"""The fiber scheduler: ordering, timeouts, cancel, join, cond, channel, latch, sockets,
the stall watchdog and thread-safe calls. Time-dependent tests use the fake clock."""
from __future__ import annotations

import errno
import selectors
import socket
import threading
import time

import pytest

from spindle.core.fiber import Channel, Cond, FiberSwitchForbidden, Latch, Scheduler, TriggerList
from spindle.core.fiber import coio
from spindle.core.fiber import scheduler as scheduler_module
from spindle.core.iproto.errors import BoxError, FiberIsCancelled, TimedOut


def test_create_runs_new_fiber_first_then_caller(sched, run):
    order = []

    def child():
        order.append("child starts")
        sched.yield_()
        order.append("child resumes")

    def main():
        sched.spawn(child)
        order.append("caller resumes")
        sched.yield_()
        order.append("caller after yield")

    run(main)
    assert order == ["child starts", "caller resumes", "child resumes", "caller after yield"]


def test_new_fiber_starts_at_creator_yield(sched, run):
    order = []

    def main():
        sched.spawn(lambda: order.append("child"), start=False)
        order.append("creator")
        sched.yield_()
        order.append("creator again")

    run(main)
    assert order == ["creator", "child", "creator again"]


def test_sleep_ordering_by_deadline(sched, clock, run):
    order = []

    def sleeper(name, seconds):
        sched.sleep(seconds)
        order.append((name, clock()))

    def main():
        start = clock()
        for name, seconds in [("c", 3), ("a", 1), ("b", 2)]:
            sched.spawn(sleeper, name, seconds)
        sched.sleep(5)
        return start

    start = run(main)
    assert [name for name, _ in order] == ["a", "b", "c"]
    assert [at - start for _, at in order] == [1, 2, 3]


def test_wakeup_ends_sleep_early(sched, clock, run):
    def main():
        me = sched.current
        sched.call_later(1, sched.wakeup, me)
        started = clock()
        sched.sleep(100)
        return clock() - started

    assert run(main) == 1


def test_cancel_is_sticky_and_raises_in_blocking_calls(sched, run):
    seen = []

    def victim():
        for _ in range(2):
            try:
                sched.sleep(10)
            except FiberIsCancelled:
                seen.append("cancelled")

    def main():
        fiber = sched.spawn(victim)
        fiber.cancel()
        sched.yield_()
        return fiber.status

    assert run(main) == "dead"
    assert seen == ["cancelled", "cancelled"]


def test_join_returns_result_or_error(sched, run):
    def main():
        good = sched.spawn(lambda: 42, start=False)
        good.set_joinable(True)
        bad = sched.spawn(lambda: 1 / 0, start=False)
        bad.set_joinable(True)
        ok1, value1 = good.join()
        ok2, value2 = bad.join()
        return ok1, value1, ok2, type(value2)

    assert run(main) == (True, 42, False, ZeroDivisionError)


def test_join_refuses_non_joinable_and_self(sched, run):
    def main():
        fiber = sched.spawn(lambda: None, start=False)
        with pytest.raises(BoxError, match="not joinable"):
            fiber.join()
        me = sched.current
        me.set_joinable(True)
        with pytest.raises(BoxError, match="join itself"):
            me.join()

    run(main)


def test_cond_wait_timeout_and_signal(sched, clock, run):
    def main():
        cond = Cond(sched)
        started = clock()
        assert cond.wait(2) is False
        assert clock() - started == 2
        sched.spawn(lambda: (sched.sleep(1), cond.signal()))
        assert cond.wait(10) is True
        return clock() - started

    assert run(main) == 3


def test_cond_broadcast_wakes_all(sched, run):
    def main():
        cond = Cond(sched)
        woken = []
        for i in range(3):
            sched.spawn(lambda i=i: woken.append((i, cond.wait())))
        assert cond.waiting == 3
        cond.broadcast()
        sched.yield_()
        return woken

    assert run(main) == [(0, True), (1, True), (2, True)]


def test_channel_buffered_and_rendezvous(sched, clock, run):
    def main():
        buffered = Channel(sched, 2)
        assert buffered.put(1, 0) and buffered.put(2, 0)
        assert buffered.is_full() and buffered.put(3, 0) is False
        assert [buffered.get(), buffered.get()] == [1, 2]
        rendezvous = Channel(sched, 0)
        assert rendezvous.put("x", 1) is False          # nobody reading
        got = []
        sched.spawn(lambda: got.append(rendezvous.get()))
        assert rendezvous.put("y", 1) is True
        started = clock()
        assert rendezvous.get(3) is None
        assert clock() - started == 3
        return got

    assert run(main) == ["y"]


def test_channel_writer_blocks_until_room(sched, run):
    def main():
        ch = Channel(sched, 1)
        ch.put("a")
        done = []
        sched.spawn(lambda: done.append(ch.put("b")))
        assert done == [] and ch.has_writers()
        assert ch.get() == "a"
        sched.yield_()
        assert done == [True]
        return ch.get(0)

    assert run(main) == "b"


def test_channel_close_wakes_everyone(sched, run):
    def main():
        ch = Channel(sched, 0)
        results = []
        sched.spawn(lambda: results.append(("get", ch.get())))
        sched.spawn(lambda: results.append(("put", Channel.put(ch2, 1))))
        ch.close()
        ch2.close()
        sched.yield_()
        assert ch.put(1) is False and ch.get() is None
        return sorted(results)

    ch2 = None

    def setup():
        nonlocal ch2
        ch2 = Channel(sched, 0)
        return main()

    assert run(setup) == [("get", None), ("put", False)]


def test_latch_is_fifo(sched, run):
    order = []

    def worker(latch, name):
        with latch:
            order.append(name)
            sched.yield_()

    def main():
        latch = Latch(sched)
        latch.lock()
        for name in "abc":
            sched.spawn(worker, latch, name)
        latch.unlock()
        sched.sleep(0.1)
        assert latch.lock(timeout=1)
        return order

    assert run(main) == ["a", "b", "c"]


def test_triggers_run_newest_first_and_replace():
    calls = []
    triggers = TriggerList()
    first = triggers.add(lambda: calls.append(1))
    triggers.add(lambda: calls.append(2))
    triggers.run()
    assert calls == [2, 1]
    triggers.replace(first, lambda: calls.append(3))
    calls.clear()
    triggers.run()
    assert calls == [2, 3]
    with pytest.raises(ValueError):
        triggers.replace(first, None)


def test_switch_forbidden_raises_clear_error(sched, run):
    def main():
        sched.switch_forbidden += 1
        try:
            with pytest.raises(FiberSwitchForbidden, match="fiber yield is not allowed here"):
                sched.sleep(0)
        finally:
            sched.switch_forbidden -= 1
        sched.sleep(0)   # allowed again
        return "alive"

    assert run(main) == "alive"


def test_error_in_fiber_is_logged_and_loop_survives(sched, run, capsys):
    def main():
        sched.spawn(lambda: 1 / 0, name="doomed")
        sched.yield_()
        return "alive"

    assert run(main) == "alive"
    # in Tarantool's terms, no Python exception name (its traceback: debug level)
    err = capsys.readouterr().err
    assert "E> SystemError: division by zero" in err and "ZeroDivisionError" not in err


class SteppedMonotonic:
    """The `time` module as the scheduler sees it, with a monotonic clock that moves
    1 µs per reading (loops that wait for it end) and jumps by `advance`."""

    def __init__(self):
        self.now = time.monotonic()

    def monotonic(self) -> float:
        self.now += 1e-6
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name):
        return getattr(time, name)


def test_the_watchdog_keeps_a_bounded_record_of_stalls(capsys):
    """Scheduler.stalls keeps the newest STALLS_KEPT (a long-lived instance would
    otherwise grow it for ever); every stall is still logged."""
    from spindle.core.fiber import scheduler as scheduler_module
    sched = Scheduler()
    fiber = type("F", (), {"name": "", "id": 0})()
    total = scheduler_module.STALLS_KEPT + 20
    for number in range(total):
        fiber.name = f"f{number}"
        sched._begin_segment(fiber)
        sched._segment_start -= 1.0          # as if it ran a second
        sched._end_segment()
    assert [name for name, _ in sched.stalls] == [
        f"f{number}" for number in range(20, total)]
    assert capsys.readouterr().err.count("without yielding") == total
    sched.close()


def test_watchdog_logs_a_stall_with_the_fiber_name(capsys):
    sched = Scheduler()

    def hog():
        time.sleep(0.08)   # a deliberate stall: no yield for 80 ms

    def main():
        sched.spawn(hog, name="hog")

    sched.run(main)
    # (only the hog is certain: on a loaded machine any fiber may seem to stall)
    assert "hog" in [name for name, _ in sched.stalls]
    assert "fiber 'hog'" in capsys.readouterr().err
    sched.close()


def test_call_soon_threadsafe_wakes_idle_loop():
    sched = Scheduler()
    got = []

    def main():
        me = sched.current

        def from_thread():
            sched.call_soon_threadsafe(lambda: (got.append(threading.current_thread().name),
                                                sched.wakeup(me)))

        threading.Thread(target=from_thread, name="other").start()
        assert sched.wait(10) is True

    sched.run(main)
    assert got == ["MainThread"]   # the callback ran on the hub, not the other thread
    sched.close()


def test_sockets_with_deadlines():
    sched = Scheduler()

    def main():
        server = coio.listen(sched, "127.0.0.1", 0)
        port = server.name()[1]
        received = []

        def serve():
            conn, _ = server.accept(timeout=5)
            received.append(conn.readn(5, timeout=5))
            conn.write(b"pong")
            with pytest.raises(TimedOut):
                conn.readn(1, timeout=0.05)
            conn.close()

        sched.spawn(serve)
        client = coio.connect(sched, "127.0.0.1", port, timeout=5)
        client.write(b"hello")
        reply = client.readn(4, timeout=5)
        with pytest.raises(coio.SocketError):
            client.readn(1, timeout=5)   # server closes after its timeout
        client.close()
        server.close()
        return received, reply

    assert sched.run(main) == ([b"hello"], b"pong")
    sched.close()


def test_connect_refused_is_a_clear_error():
    sched = Scheduler()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()

    def main():
        # 2.6.0's wording, with the errno that box.info's system_message shows
        with pytest.raises(coio.SocketError, match="^connect, called on fd") as caught:
            coio.connect(sched, "127.0.0.1", port, timeout=5)
        assert caught.value.errno == errno.ECONNREFUSED

    sched.run(main)
    sched.close()


def test_connect_by_name_and_to_a_unix_socket(tmp_path):
    """The one connect path takes what a replication URI names: a host name
    (resolved in a thread), a literal address, or `unix/` with a path."""
    sched = Scheduler()
    path = str(tmp_path / "s.sock")

    def main():
        tcp = coio.listen(sched, "127.0.0.1", 0)
        unix = coio.listen_unix(sched, path)
        out = []
        for server, host, port in ((tcp, "localhost", tcp.name()[1]),
                                   (tcp, "127.0.0.1", tcp.name()[1]),
                                   (unix, "unix/", path)):
            client = coio.connect(sched, host, port, timeout=5)
            peer, _ = server.accept(timeout=5)
            client.write(b"x")
            out.append(peer.readn(1, timeout=5))
            peer.close()
            client.close()
        tcp.close()
        unix.close()
        return out

    assert sched.run(main) == [b"x", b"x", b"x"]
    sched.close()


def test_run_in_thread_returns_result_and_raises_errors():
    sched = Scheduler()

    def main():
        assert coio.run_in_thread(sched, lambda: 7) == 7
        with pytest.raises(KeyError):
            coio.run_in_thread(sched, lambda: {}["x"])

    sched.run(main)
    sched.close()


def test_shutdown_cancels_and_joins_every_fiber():
    sched = Scheduler()
    finished = []

    def sleeper():
        try:
            sched.sleep(1000)
        finally:
            finished.append(sched.current.id)

    def main():
        for _ in range(5):
            sched.spawn(sleeper)
        sched.stop()

    sched.run(main)
    assert len(sched.fibers) == 5
    assert sched.shutdown(timeout=2) == []
    assert len(finished) == 5 and not sched.fibers
    sched.close()


def test_pooled_greenlets_are_reused(sched, run):
    def main():
        for _ in range(50):
            sched.spawn(lambda: None)
        return len(sched._pool)

    assert run(main) <= 2


def test_no_lost_wakeup_under_a_flood_of_thread_calls():
    """Another thread queuing callbacks while the hub drains the wakeup socket must
    never leave the loop asleep with callbacks queued (a lost-wakeup race; the window
    is narrow, so this is a stress run that catches it only some of the time)."""
    sched = Scheduler()
    rounds = 200000
    done = []

    def main():
        me = sched.current
        state = {"n": 0}

        def tick():
            state["n"] += 1
            if state["n"] == rounds:
                sched.wakeup(me)

        def producer():
            for i in range(rounds):
                sched.call_soon_threadsafe(tick)
                if i % 7 == 0:
                    time.sleep(0)   # vary the interleaving with the hub

        worker = threading.Thread(target=producer)
        worker.start()
        assert sched.wait(60) is True, f"loop stalled after {state['n']} callbacks"
        worker.join()
        done.append(state["n"])

    sched.run(main)
    assert done == [rounds]
    sched.close()


# yield_turn(): a yield that skips the loop iteration when it could only resume the
# caller, and is sleep(0) whenever anything else is due.

def test_yield_turn_alone_returns_at_once_with_what_a_yield_does(sched, run):
    yields = []
    sched.on_yield = yields.append

    def main():
        me = sched.current
        csw = me.csw
        for _ in range(3):
            sched.yield_turn()
        return me, me.csw - csw

    me, switches = run(main)
    assert switches == 3 and yields == [me, me, me]


@pytest.mark.parametrize("due", ["fiber", "soon", "timer"])
def test_yield_turn_lets_whatever_is_due_run_first(sched, run, due):
    order = []

    def main():
        if due == "fiber":
            sched.spawn(lambda: order.append("due"), start=False)
        elif due == "soon":
            sched.call_soon(order.append, "due")
        else:
            sched.call_later(0, order.append, "due")
        sched.yield_turn()
        order.append("caller")

    run(main)
    assert order == ["due", "caller"]


@pytest.fixture
def socket_reader(sched):
    """(order, b, reader): `reader`, a fiber body, waits until the other end of
    socket `b` is readable, then notes "reader" in `order`."""
    order = []
    a, b = socket.socketpair()

    def reader():
        sched.wait_io(a, selectors.EVENT_READ)
        order.append("reader")
    yield order, b, reader
    a.close()
    b.close()


def test_yield_turn_with_io_ready_goes_through_the_loop(sched, run, socket_reader,
                                                       monkeypatch):
    """A fiber woken by ready I/O runs at the caller's next yield, as after sleep(0)
    (were the iteration skipped, it would wait one more). YIELD_IO_CHECK is 0 here:
    every yield_turn looks for I/O (the loop's own poll counts as a look)."""
    monkeypatch.setattr(scheduler_module, "YIELD_IO_CHECK", 0)
    order, b, reader = socket_reader

    def main():
        sched.spawn(reader)          # waits for the socket
        b.send(b"x")
        sched.yield_turn()
        order.append("caller")
        sched.yield_turn()
        order.append("caller again")

    run(main)
    assert order == ["caller", "reader", "caller again"]


def test_yield_turn_looks_for_ready_io_at_most_every_interval(sched, run, monkeypatch,
                                                              socket_reader):
    """Within YIELD_IO_CHECK of its last look for ready I/O, yield_turn skips the
    loop iteration: a fiber the I/O would wake is not woken yet. The first yield
    after the interval looks, and goes through the loop as sleep(0) does: the
    woken fiber runs at the caller's next yield. (The scheduler's monotonic clock
    is a stepped one: a slow machine cannot stretch "within".)"""
    monkeypatch.setattr(scheduler_module, "YIELD_IO_CHECK", 0.05)
    clock = SteppedMonotonic()
    monkeypatch.setattr(scheduler_module, "time", clock)
    order, b, reader = socket_reader

    def main():
        sched.spawn(reader)
        sched.sleep(0)              # the reader waits for the socket
        sched.yield_turn()          # looks for ready I/O: none
        b.send(b"x")
        sched.yield_turn()
        order.append("within")
        sched.yield_turn()
        order.append("within again")
        clock.advance(0.06)         # the interval over
        sched.yield_turn()
        order.append("after")
        sched.yield_turn()
        order.append("after again")

    run(main)
    assert order == ["within", "within again", "after", "reader", "after again"]


@pytest.mark.parametrize("yields", [True, False])
def test_yield_turn_starts_a_new_watchdog_segment(monkeypatch, yields):
    """12 steps of 10 ms (on a stepped clock, so that a loaded machine adds
    nothing): with a yield_turn after each, no segment reaches the watchdog's 50 ms;
    without, the one segment does."""
    clock = SteppedMonotonic()
    monkeypatch.setattr(scheduler_module, "time", clock)
    sched = Scheduler()

    def main():
        for _ in range(12):
            clock.advance(0.01)
            if yields:
                sched.yield_turn()

    sched.run(main)
    assert [name for name, _ in sched.stalls] == ([] if yields else ["main"])
    sched.close()


# ------------------------------------------------ hand-off between fibers (no hub)

def _count_calls(monkeypatch, obj, name) -> list:
    calls = []
    original = getattr(obj, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)
    monkeypatch.setattr(obj, name, counted)
    return calls


def test_a_batch_is_a_chain_each_yield_resumes_the_next(monkeypatch):
    """Ten fibers yielding 20 times each: every loop iteration runs all ten in order,
    and the hub switches into only the first of each batch (each one's yield hands
    the CPU straight to the next, as Tarantool chains its ready fibers). YIELD_IO_CHECK
    0: no batch starts without the loop's poll."""
    monkeypatch.setattr(scheduler_module, "YIELD_IO_CHECK", 0)
    sched = Scheduler()
    order = []

    def worker(number):
        for _ in range(20):
            order.append(number)
            sched.sleep(0)

    def main():
        for number in range(10):
            sched.spawn(worker, number, start=False)
    switches = _count_calls(monkeypatch, sched, "_switch_into")
    sched.run(main)
    sched.close()
    assert order == list(range(10)) * 20
    # main; the first batch: a new greenlet is started by the hub only (ten); one per
    # later batch (19); each end of a fiber goes back to the hub (ten)
    assert len(switches) == 1 + 10 + 19 + 10


@pytest.mark.parametrize("interval,chained", [(3600.0, True), (0, False)])
def test_fibers_woken_in_a_batch_run_next_without_the_loop(monkeypatch, interval,
                                                           chained):
    """Two fibers in a fiber.cond ping-pong, 1000 rounds: while the loop looked for
    I/O less than YIELD_IO_CHECK ago, the fiber a batch woke runs as the next batch
    at once (no poll between); with YIELD_IO_CHECK 0, every batch follows a poll.
    (A stepped clock: a slow machine cannot close the window.)"""
    monkeypatch.setattr(scheduler_module, "YIELD_IO_CHECK", interval)
    monkeypatch.setattr(scheduler_module, "time", SteppedMonotonic())
    sched = Scheduler()
    ping, pong = Cond(sched), Cond(sched)
    rounds = []

    def ponger():
        for _ in range(1000):
            ping.wait()
            pong.signal()

    def main():
        sched.spawn(ponger)
        for number in range(1000):
            ping.signal()
            pong.wait()
            rounds.append(number)
    polls = _count_calls(monkeypatch, sched._poller, "poll")
    sched.run(main)
    sched.close()
    assert len(rounds) == 1000
    if chained:
        assert len(polls) < 10
    else:
        assert len(polls) >= 2000


def _ping_pong_until(sched, done) -> int:
    """Run two fibers in a fiber.cond ping-pong until done() (at most 10^6 rounds);
    returns the rounds run."""
    ping, pong = Cond(sched), Cond(sched)
    count = [0]

    def ponger():
        while not done() and count[0] < 10**6:
            ping.wait()
            pong.signal()

    def pinger():
        while not done() and count[0] < 10**6:
            count[0] += 1
            ping.signal()
            pong.wait()
        ping.signal()       # the ponger's last wait
    a = sched.spawn(ponger, start=False)
    b = sched.spawn(pinger, start=False)
    for fiber in (a, b):
        fiber.set_joinable(True)
    for fiber in (b, a):
        fiber.join()
    return count[0]


def test_a_chain_of_batches_lets_timers_and_thread_calls_in(monkeypatch):
    """A due timer and a callback from another thread end a chain of batches at
    once (the next batch goes through the loop), however long ago I/O was looked at
    (YIELD_IO_CHECK is an hour here)."""
    monkeypatch.setattr(scheduler_module, "YIELD_IO_CHECK", 3600.0)
    sched = Scheduler()
    woke, called = [], []

    def sleeper():
        sched.sleep(0.001)
        woke.append(True)

    def main():
        sched.spawn(sleeper)
        rounds = _ping_pong_until(sched, lambda: woke)
        thread = threading.Thread(
            target=lambda: sched.call_soon_threadsafe(called.append, True))
        thread.start()
        rounds += _ping_pong_until(sched, lambda: called)
        thread.join()
        return rounds
    rounds = sched.run(main)
    sched.close()
    assert woke and called and rounds < 2 * 10**6


def test_a_chain_of_batches_looks_for_io_every_interval(monkeypatch):
    """A fiber waiting for a readable socket runs while two others ping-pong for ever:
    the chain of batches ends once YIELD_IO_CHECK has passed since the loop's last
    poll (100 readings of the stepped clock at 1 µs)."""
    monkeypatch.setattr(scheduler_module, "YIELD_IO_CHECK", 0.0001)
    monkeypatch.setattr(scheduler_module, "time", SteppedMonotonic())
    sched = Scheduler()
    order = []
    a, b = socket.socketpair()

    def reader():
        sched.wait_io(a, selectors.EVENT_READ)
        order.append("reader")

    def main():
        sched.spawn(reader)
        b.send(b"x")
        return _ping_pong_until(sched, lambda: order)
    rounds = sched.run(main)
    sched.close()
    a.close()
    b.close()
    assert order == ["reader"] and rounds < 10**6


def test_the_watchdog_times_each_fiber_of_a_chain(capsys, monkeypatch):
    """A fiber that stalls and then hands the CPU to the next of its batch is logged
    by name; the next one starts a segment of its own. (A stepped clock: the stall
    is 80 ms of it, whatever the machine does.)"""
    clock = SteppedMonotonic()
    monkeypatch.setattr(scheduler_module, "time", clock)
    sched = Scheduler()

    def hog():
        clock.advance(0.08)     # a stall: no yield for 80 ms of the clock
        sched.sleep(0)

    def main():
        sched.spawn(hog, name="hog", start=False)
        sched.spawn(lambda: None, name="next", start=False)
    sched.run(main)
    sched.close()
    assert [name for name, _ in sched.stalls] == ["hog"]
    assert "fiber 'hog'" in capsys.readouterr().err
