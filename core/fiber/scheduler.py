"""The fiber scheduler: a ready queue, a timer heap and an I/O poll, run by a hub.

The hub is the greenlet that called `Scheduler.run()`. Every fiber is a pooled greenlet
whose parent is the hub; a fiber gives up the CPU only through `Scheduler._park()`, the
one choke point where the stall watchdog, the cancel flag and the Lua switch guard are
checked. Other OS threads talk to the hub only through `call_soon_threadsafe`, which
writes to a wakeup socket so a sleeping poll returns at once.

I/O readiness comes from epoll (any `selectors` poller where there is none). A socket
stays registered after its waiter leaves: a connection that waits on the same socket
again (a server reading its next request) costs no `epoll_ctl` at all. A registration
is narrowed only when the poller reports an event nobody waits for (level-triggered
polling would otherwise spin) and dropped when the socket is closed through
`forget_io()`. A socket object seen on a file descriptor that some other object used
before is registered afresh (the old one was closed, its registration went with it).

After I/O (and while fibers keep running right after it) the next `IO_SPIN` seconds
are spent polling without sleeping (yielding the CPU to anything runnable between
polls) before the hub blocks. A synchronous client sends its next request within tens
of microseconds of a reply; a hub that went to sleep meanwhile must be woken, which on
a small VM costs ~40 µs per wakeup (an idle vCPU is halted) and dominated the round
trip. An idle server never spins; a busy one spends at most IO_SPIN of CPU per quiet
gap, and timers alone never start a spin.

Ready fibers run in batches, as Tarantool chains them: a fiber that parks switches
straight to the next of its batch (`_hand_off`), and the fibers the batch woke run
as the next batch without the hub's loop iteration while the loop's last look for
I/O is less than `YIELD_IO_CHECK` old and no timer, hub or thread callback is due
(`_next_batch`): a worker fiber that wakes the fiber its reply was for, then waits
for its socket again, hands the CPU straight to it. Each loop iteration costs an
epoll call, two clock readings and two greenlet switches (~3 µs of Python); a
hand-off, one switch (~1 µs).

A committer's yield (`yield_turn`) skips the loop iteration when nothing else could
run; whether I/O is ready takes an epoll call, made at most every `YIELD_IO_CHECK`
by a stream of commits: I/O then waits that long at most, and each one-row commit
of such a stream saves the system call (~1 µs per commit for a master whose replica
ACKs keep arriving: each look that found one sent that commit through the loop).
"""
from __future__ import annotations

import collections
import errno
import heapq
import itertools
import os
import select
import selectors
import socket
import threading
import time
import weakref
from typing import Any, Callable

import greenlet

from spindle.core import log
from spindle.core.iproto.errors import BoxError

from .fiber import Fiber, FiberSwitchForbidden

STALL_THRESHOLD = 0.05        # a fiber running longer than this without yielding is logged
STALLS_KEPT = 100             # stalls remembered in Scheduler.stalls (the log has all)
IO_SPIN = 0.0001            # after an I/O event, poll this long before sleeping (0: never)
# yield_turn's looks for ready I/O are at least this far apart (see the module doc;
# any other wait goes through the loop's own poll)
YIELD_IO_CHECK = 0.0001
_POOL_LIMIT = 1024          # greenlets kept for reuse (a fresh one costs ~10 µs, reuse ~1 µs)
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_sched_yield = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


def _mask(waiters: dict[int, Fiber]) -> int:
    mask = 0
    for event in waiters:
        mask |= event
    return mask


class _Watch:
    """The poller's view of one file descriptor: the object waited on (weakly: a
    registration must not keep a socket alive), the event mask registered with the
    poller (-1: unknown, after the fd changed hands) and the fiber waiting for each
    event."""

    __slots__ = ("ref", "registered", "waiters", "persistent")

    def __init__(self, fileobj):
        self.ref = _reference(fileobj)
        self.registered = 0
        self.waiters: dict[int, Fiber] = {}
        # A bare fd number cannot tell its reuse by another file: never kept.
        self.persistent = not isinstance(fileobj, int)


def _reference(fileobj) -> Callable[[], Any]:
    try:
        return weakref.ref(fileobj)
    except TypeError:           # an fd number, or an object without weak references
        return lambda: fileobj


class _EpollPoller:
    """epoll with `selectors` event masks (EVENT_READ / EVENT_WRITE)."""

    def __init__(self):
        self._epoll = select.epoll()

    @staticmethod
    def _native(mask: int) -> int:
        return (select.EPOLLIN if mask & _READ else 0) | (select.EPOLLOUT if mask & _WRITE else 0)

    def register(self, fd: int, mask: int) -> None:
        self._epoll.register(fd, self._native(mask))

    def modify(self, fd: int, mask: int) -> None:
        self._epoll.modify(fd, self._native(mask))

    def unregister(self, fd: int) -> None:
        self._epoll.unregister(fd)

    def poll(self, timeout: float | None) -> list[tuple[int, int]]:
        """(fd, events) pairs; an error or hang-up wakes readers and writers alike,
        as `selectors` reports it."""
        out = []
        for fd, native in self._epoll.poll(-1 if timeout is None else timeout):
            if native == select.EPOLLIN:
                out.append((fd, _READ))
            elif native == select.EPOLLOUT:
                out.append((fd, _WRITE))
            else:
                out.append((fd, (_WRITE if native & ~select.EPOLLIN else 0)
                            | (_READ if native & ~select.EPOLLOUT else 0)))
        return out

    def close(self) -> None:
        self._epoll.close()


class _SelectorsPoller:
    """The same interface on whatever `selectors` offers (systems without epoll)."""

    def __init__(self):
        self._selector = selectors.DefaultSelector()

    def register(self, fd: int, mask: int) -> None:
        try:
            self._selector.register(fd, mask)
        except KeyError:
            raise FileExistsError(errno.EEXIST, "already registered") from None

    def modify(self, fd: int, mask: int) -> None:
        try:
            self._selector.modify(fd, mask)
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, "not registered") from None

    def unregister(self, fd: int) -> None:
        try:
            self._selector.unregister(fd)
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, "not registered") from None

    def poll(self, timeout: float | None) -> list[tuple[int, int]]:
        return [(key.fd, events) for key, events in self._selector.select(timeout)]

    def close(self) -> None:
        self._selector.close()


def _make_poller():
    return _EpollPoller() if hasattr(select, "epoll") else _SelectorsPoller()


class TimerHandle:
    """A callback scheduled on the hub; `cancel()` before it fires to drop it."""

    __slots__ = ("callback", "args", "cancelled")

    def __init__(self, callback: Callable, args: tuple):
        self.callback, self.args, self.cancelled = callback, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    def __init__(self, clock: Callable[[], float] | None = None):
        # `clock` drives timers; a fake clock with an `advance(dt)` method makes the hub
        # jump over idle time instead of sleeping (deterministic tests).
        self.clock = clock or time.monotonic
        self._clock_advance: Callable[[float], object] | None = getattr(
            self.clock, "advance", None)
        self._ready: collections.deque[Fiber] = collections.deque()
        # How many fibers at the head of _ready still belong to this loop iteration's
        # batch: a fiber that parks hands the CPU straight to the next of them.
        self._batch_left = 0
        self._timers: list = []
        self._timer_seq = itertools.count()
        self._poller = _make_poller()
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        self._waker_w.setblocking(False)
        self._waker_fd = self._waker_r.fileno()
        self._poller.register(self._waker_fd, _READ)
        self._threadsafe: collections.deque = collections.deque()
        self._soon: collections.deque = collections.deque()     # hub callbacks from tx
        self._spin_until = 0.0   # poll without sleeping until then (see IO_SPIN)
        self._io_check_at = 0.0  # yield_turn's next look for ready I/O (YIELD_IO_CHECK)
        self._watches: dict[int, _Watch] = {}    # fd -> what is registered and who waits
        self._wakeup_pending = False
        self._pool: list[greenlet.greenlet] = []
        self._fiber_ids = itertools.count(101)   # Tarantool reserves ids up to 100
        self.fibers: dict[int, Fiber] = {}       # every fiber not yet dead
        self.current: Fiber | None = None
        self.hub: greenlet.greenlet | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        # Raised by the Lua layer while a lupa call is on the current greenlet's stack:
        # switching then would corrupt lupa's state bookkeeping (DESIGN §2).
        self.switch_forbidden = 0
        # the newest stalls the watchdog saw (fiber name, seconds): a bounded record
        self.stalls: collections.deque[tuple[str, float]] = collections.deque(maxlen=STALLS_KEPT)
        # fn(fiber) when a fiber gives up the CPU: box aborts a memtx transaction
        # that spans a yield, as Tarantool does. One slot: the hot path stays cheap.
        self.on_yield: Callable[[Fiber], None] | None = None
        self._segment_fiber: Fiber | None = None
        self._segment_start = 0.0
        self.wall_time = time.time()     # fiber.time(): cached once per loop iteration
        log.set_fiber_provider(self._log_identity)

    # ---------------------------------------------------------------- fibers

    def spawn(self, fn: Callable, *args, name: str | None = None,
              start: bool = True, **kwargs) -> Fiber:
        """Create a fiber. With start=True it runs at once (Tarantool's fiber.create: the
        caller resumes when the new fiber first yields); otherwise it starts at the
        creator's next yield (fiber.new)."""
        fiber = Fiber(self, next(self._fiber_ids), name or "lua", fn, args, kwargs)
        self.fibers[fiber.id] = fiber
        if start and self.current is not None:
            self._check_switch_allowed()
            caller = self.current
            # The caller goes first in the ready queue, so it resumes as soon as the
            # new fiber yields, as Tarantool's fiber_call returns to its caller.
            caller._ready = True
            self._ready.appendleft(caller)
            fiber._greenlet = self._acquire_greenlet()
            self.current = fiber
            self._end_segment()
            self._begin_segment(fiber)
            fiber._greenlet.switch(fiber)
            self._resumed(caller)
        else:
            self._make_ready(fiber)
        return fiber

    def _acquire_greenlet(self) -> greenlet.greenlet:
        if self._pool:
            return self._pool.pop()
        return greenlet.greenlet(self._fiber_main, parent=self.hub)

    def _fiber_main(self, fiber: Fiber) -> None:
        """Body of every pooled greenlet: run one fiber, then park in the pool."""
        while True:
            try:
                fiber._run()
            finally:   # also when GreenletExit ends this greenlet for good
                self.fibers.pop(fiber.id, None)
                fiber._greenlet = None
                self.current = None
            if len(self._pool) >= _POOL_LIMIT or self._stopping:
                return
            self._pool.append(greenlet.getcurrent())
            assert self.hub is not None   # run() set it before any fiber ran
            fiber = self.hub.switch()

    # -------------------------------------------------------- waiting/waking

    def _make_ready(self, fiber: Fiber) -> None:
        if not fiber._ready and fiber.status != "dead":
            fiber._ready = True
            self._ready.append(fiber)

    def wakeup(self, fiber: Fiber) -> None:
        """Tarantool's fiber_wakeup: a waiting fiber returns from its wait early; waking
        the running fiber makes its next yield return at the next loop iteration."""
        self._make_ready(fiber)

    def has_ready(self) -> bool:
        """True when some fiber is queued to run (later in this loop iteration, or
        in the next one)."""
        return bool(self._ready)

    def _check_switch_allowed(self) -> None:
        if self.switch_forbidden:
            raise FiberSwitchForbidden()
        if self.current is None:
            raise RuntimeError("blocking call outside of a fiber")

    def _park(self, timeout: float | None) -> bool:
        """Suspend the current fiber until woken or until `timeout` seconds pass.
        Returns False on timeout. Never raises for cancellation: callers decide."""
        if self.switch_forbidden:
            raise FiberSwitchForbidden()
        fiber = self.current
        if fiber is None:
            raise RuntimeError("blocking call outside of a fiber")
        if self.on_yield is not None:
            self.on_yield(fiber)
        fiber._wait_token += 1
        fiber._timed_out = False
        if timeout is not None:
            if timeout <= 0:
                # sleep(0)/yield: back of the ready queue, after this loop's I/O poll
                self._make_ready(fiber)
            else:
                heapq.heappush(self._timers, (self.clock() + timeout, next(self._timer_seq),
                                              fiber, fiber._wait_token))
        if self._ready:
            self._hand_off()
        else:
            hub = self.hub
            assert hub is not None   # a fiber is current: run() set the hub before it ran
            hub.switch()
        self.current = fiber
        fiber.csw += 1
        fiber._wait_token += 1   # invalidates a pending timer of this wait
        return not fiber._timed_out

    def _hand_off(self) -> None:
        """Switch from the parking fiber straight to the next fiber of this loop
        iteration's batch, as Tarantool chains a batch of ready fibers (each one's
        yield resumes the next): no trip through the hub between them. The watchdog's
        segment passes to the new fiber; with nothing left to run, the hub resumes."""
        ready_queue = self._ready
        while True:
            if self._batch_left <= 0 and not self._next_batch():
                break
            self._batch_left -= 1
            fiber = ready_queue.popleft()
            fiber._ready = False
            if fiber.status == "dead":
                continue
            glet = fiber._greenlet
            if glet is None:
                if not self._pool:
                    # A new greenlet starts on the stack (and Python's recursion
                    # depth) of whoever starts it: only the hub does, so chains of
                    # new fibers never nest.
                    fiber._ready = True
                    ready_queue.appendleft(fiber)
                    self._batch_left += 1
                    break
                glet = fiber._greenlet = self._pool.pop()
                first = True
            else:
                first = False
            now = time.monotonic()
            if now - self._segment_start > STALL_THRESHOLD:
                self._end_segment()
            self._segment_fiber = fiber
            self._segment_start = now
            self.current = fiber
            if first:
                glet.switch(fiber)
            elif glet is not greenlet.getcurrent():
                glet.switch()
            return      # (the parking fiber itself was next: it goes on)
        hub = self.hub
        assert hub is not None   # a fiber is current: run() set the hub before it ran
        hub.switch()

    def _next_batch(self) -> bool:
        """At the end of a batch, whether the fibers made ready meanwhile may run as
        the next batch at once, without the hub's loop iteration between: only while
        I/O was looked at less than YIELD_IO_CHECK ago and no hub callback, thread
        callback or timer is due (a worker waking the fiber its reply was for, then
        waiting for the socket again, hands the CPU straight to it). A fake clock
        always goes through the hub."""
        ready_queue = self._ready
        if (not ready_queue or self._soon or self._threadsafe or self._stopping
                or self._clock_advance is not None):
            return False
        now = time.monotonic()
        if now >= self._io_check_at:
            return False
        timers = self._timers
        if timers and timers[0][0] <= self.clock():
            return False
        self._batch_left = len(ready_queue)
        return True

    def _resumed(self, fiber: Fiber) -> None:
        self.current = fiber
        fiber.csw += 1

    def yield_turn(self) -> None:
        """A yield that waits for nothing (the WAL write of a committer that was
        alone is done already). When the loop iteration it would go through could
        only resume this fiber — no fiber ready, no hub callback queued, no timer due,
        no I/O ready — that iteration is skipped: the fiber goes on at once, with what
        a yield does for it (on_yield, csw, a new watchdog segment, fiber.time()).
        Otherwise it is a sleep(0) without the cancellation check."""
        fiber = self.current
        timers = self._timers
        if (self._ready or self._soon or self._threadsafe or self.switch_forbidden
                or fiber is None or (timers and timers[0][0] <= self.clock())):
            self._park(0)
            return
        now = time.monotonic()
        if now >= self._io_check_at:
            # (ready I/O is looked for at most every YIELD_IO_CHECK: see there)
            self._io_check_at = now + YIELD_IO_CHECK
            if self._poller.poll(0):
                self._io_check_at = 0.0    # ready I/O: no batch may skip the loop now
                self._park(0)
                return
        if self.on_yield is not None:
            self.on_yield(fiber)
        fiber.csw += 1
        self.wall_time = time.time()
        if now - self._segment_start > STALL_THRESHOLD:
            self._end_segment()
        self._begin_segment(fiber)

    def sleep(self, seconds: float) -> None:
        """fiber.sleep: returns after `seconds` or on wakeup; raises if cancelled
        (before sleeping too, so a cancelled fiber that catches the error and loops
        cannot sleep on)."""
        fiber = self.current
        if fiber is None:
            raise RuntimeError("blocking call outside of a fiber")
        fiber.testcancel()
        self._park(max(0.0, float(seconds)))
        fiber.testcancel()

    def yield_(self) -> None:
        self.sleep(0)

    def wait(self, timeout: float | None = None) -> bool:
        """Park until woken (True) or until timeout (False). Cancellation is checked by
        the caller, as Tarantool's fiber_yield_timeout leaves it to its callers."""
        return self._park(timeout)

    def wait_io(self, fileobj, events: int, timeout: float | None = None) -> bool:
        """Park until `fileobj` is readable/writable (selectors.EVENT_*) or timeout."""
        fiber = self.current
        if fiber is None:   # (_park's error, before a waiter could be registered)
            raise RuntimeError("blocking call outside of a fiber")
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        watch = self._watches.get(fd)
        if (watch is not None and watch.ref() is fileobj and not watch.waiters
                and watch.registered > 0 and not events & ~watch.registered):
            # The common case: the same socket waited on again, still registered.
            waiters = watch.waiters
            waiters[events] = fiber
        else:
            waiters = self._watch(fd, watch, fileobj, events, fiber)
            watch = self._watches[fd]
        try:
            return self._park(timeout)
        finally:
            if waiters.get(events) is fiber:
                del waiters[events]
            if not waiters and not watch.persistent:
                self._narrow(fd, watch)

    def _watch(self, fd: int, watch: _Watch | None, fileobj, events: int,
               fiber: Fiber) -> dict[int, Fiber]:
        """Register `fiber` as the waiter of `events` on `fd` (wait_io's slow path)."""
        if watch is None:
            if fd < 0:
                raise ValueError(f"Invalid file descriptor: {fd}")
            watch = self._watches[fd] = _Watch(fileobj)
        elif watch.ref() is not fileobj and not watch.waiters:
            # Another object on this fd: the one registered before was closed.
            watch.ref = _reference(fileobj)
            watch.persistent = not isinstance(fileobj, int)
            watch.registered = -1
        waiters = watch.waiters
        if events in waiters:
            raise BoxError("fd is already waited on by another fiber")
        waiters[events] = fiber
        registered = watch.registered
        if registered < 0 or events & ~registered:
            try:
                self._register(fd, watch, _mask(waiters) | max(registered, 0))
            except BaseException:
                del waiters[events]
                if not waiters and watch.registered <= 0:
                    del self._watches[fd]
                raise
        return waiters

    def _register(self, fd: int, watch: _Watch, mask: int) -> None:
        poller = self._poller
        if watch.registered == 0:
            try:
                poller.register(fd, mask)
            except FileExistsError:
                poller.modify(fd, mask)
        else:
            try:
                poller.modify(fd, mask)
            except FileNotFoundError:
                poller.register(fd, mask)
        watch.registered = mask

    def _narrow(self, fd: int, watch: _Watch) -> None:
        """Register only what the waiters of `fd` want; forget it when nobody waits."""
        mask = _mask(watch.waiters)
        try:
            if mask:
                self._poller.modify(fd, mask)
            elif watch.registered:
                self._poller.unregister(fd)
        except (ValueError, OSError):
            pass   # closed meanwhile: the poller dropped it with the file
        if mask:
            watch.registered = mask
        elif self._watches.get(fd) is watch:
            del self._watches[fd]

    def forget_io(self, fileobj) -> None:
        """`fileobj` is about to be closed: drop its registration (call before close)."""
        try:
            fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        except (ValueError, OSError):
            return
        watch = self._watches.get(fd)
        if watch is None or watch.waiters:
            return      # a waiter still holds it: it unregisters when it leaves
        del self._watches[fd]
        if watch.registered:
            try:
                self._poller.unregister(fd)
            except (ValueError, OSError):
                pass

    def cancel(self, fiber: Fiber) -> None:
        """Sticky cancel: the flag stays set and every later blocking call raises."""
        if fiber.status == "dead":
            return
        fiber.cancelled = True
        if fiber is not self.current:
            self._make_ready(fiber)

    # --------------------------------------------------------------- timers

    def call_later(self, delay: float, callback: Callable, *args) -> TimerHandle:
        """Run `callback(*args)` on the hub after `delay` s. It must not block."""
        handle = TimerHandle(callback, args)
        heapq.heappush(self._timers, (self.clock() + max(0.0, delay),
                                      next(self._timer_seq), handle, None))
        return handle

    def call_soon(self, callback: Callable, *args) -> None:
        """Run `callback(*args)` on the hub at the next loop iteration, after its I/O
        poll (which does not sleep then). Only for the tx thread; it must not block."""
        self._soon.append((callback, args))

    def call_soon_threadsafe(self, callback: Callable, *args) -> None:
        """The only entry for other OS threads: queue a hub callback and wake the poll."""
        self._threadsafe.append((callback, args))
        if not self._wakeup_pending:
            self._wakeup_pending = True
            try:
                self._waker_w.send(b"\0")
            except (BlockingIOError, OSError):
                pass   # the socket buffer is full: the hub is already due to wake

    # ----------------------------------------------------------------- loop

    def run(self, main: Callable | None = None, *args, name: str = "main",
            until_idle: bool = True) -> Any:
        """Run the loop in the calling greenlet (which becomes the hub).

        With `main`, it runs as the first fiber and its result is returned when the
        loop ends. The loop ends on `stop()`, or with until_idle when no fiber is alive
        and no timer, watched fd or thread callback is pending."""
        self.hub = greenlet.getcurrent()
        self._thread = threading.current_thread()
        main_fiber = self.spawn(main, *args, name=name, start=False) if main else None
        if main_fiber:
            main_fiber.set_joinable(True)
            # A failing main fiber (a startup script that raised) ends the loop at once.
            def stop_on_error(fiber: Fiber) -> None:
                if fiber._error is not None:
                    self.stop()
            main_fiber.on_exit.append(stop_on_error)
        self._stopping = False
        while not self._stopping:
            if until_idle and not self.fibers and not self._has_pending_work():
                break
            self._run_once()
        error = main_fiber._error if main_fiber is not None else None
        if error is not None and not isinstance(error, greenlet.GreenletExit):
            raise error
        return main_fiber._result if main_fiber else None

    def stop(self) -> None:
        self._stopping = True
        self.call_soon_threadsafe(lambda: None)

    def _has_pending_work(self) -> bool:
        live_io = any(watch.waiters for watch in self._watches.values())
        return bool(self._ready or self._threadsafe or self._soon or live_io or
                    any(not self._is_stale(entry) for entry in self._timers))

    @staticmethod
    def _is_stale(entry) -> bool:
        _, _, target, token = entry
        if isinstance(target, TimerHandle):
            return target.cancelled
        return target._wait_token != token or target.status == "dead"

    def _run_once(self) -> None:
        timeout = self._poll_timeout()
        if self._clock_advance is not None and timeout:
            self._clock_advance(timeout)
            timeout = 0
        watches = self._watches
        if timeout != 0 and self._spin_until > time.monotonic():
            ready = self._spin(timeout)
        else:
            ready = self._poller.poll(timeout)
        for fd, events in ready:
            watch = watches.get(fd)
            if watch is None:
                if fd == self._waker_fd:
                    self._drain_waker()
                else:       # nobody's: never report it again
                    try:
                        self._poller.unregister(fd)
                    except (ValueError, OSError):
                        pass
                continue
            wanted = 0
            for mask, fiber in watch.waiters.items():
                wanted |= mask
                if events & mask:
                    self._make_ready(fiber)
            if events & watch.registered & ~wanted:
                # Level-triggered: an event nobody waits for would come back on
                # every poll. Keep only what the waiters want.
                self._narrow(fd, watch)
        self.wall_time = time.time()
        if self._timers:
            self._run_timers()
        if self._threadsafe:
            self._run_threadsafe()
        if self._soon:
            soon = self._soon
            for _ in range(len(soon)):
                callback, args = soon.popleft()
                self._run_callback(callback, args)
        # Run the fibers ready now as one batch. A fiber of the batch that parks hands
        # the CPU to the next one itself (_hand_off); fibers made ready meanwhile run
        # as the next batch at once only within YIELD_IO_CHECK of this poll (see
        # _next_batch), so sleep(0) cannot starve I/O. The hub goes on with whatever
        # is left when the CPU comes back here.
        ready_queue = self._ready
        runnable = self._batch_left = len(ready_queue)
        if runnable:
            now = time.monotonic()
            self._io_check_at = now + YIELD_IO_CHECK     # I/O was just looked at
        while self._batch_left > 0:
            self._batch_left -= 1
            fiber = ready_queue.popleft()
            fiber._ready = False
            if fiber.status != "dead":
                now = self._switch_into(fiber, now)
        if IO_SPIN > 0:
            # I/O opens the spin window; fibers that run while it is open (a commit
            # completing, a reply going out) keep it open. Timers alone never do.
            if ready:
                self._spin_until = time.monotonic() + IO_SPIN
            elif runnable and self._spin_until:
                now = time.monotonic()
                self._spin_until = now + IO_SPIN if now < self._spin_until else 0.0

    def _spin(self, timeout: float | None) -> list[tuple[int, int]]:
        """Poll without sleeping until the spin window (or `timeout`) ends, then as
        usual; sched_yield() between polls lets a client on this CPU run."""
        start = now = time.monotonic()
        limit = self._spin_until if timeout is None else min(self._spin_until, start + timeout)
        poll = self._poller.poll
        while now < limit:
            ready = poll(0)
            if ready:
                return ready
            _sched_yield()
            now = time.monotonic()
        if timeout is not None:
            timeout = max(0.0, timeout - (now - start))
        return poll(timeout)

    def _poll_timeout(self) -> float | None:
        if self._ready or self._threadsafe or self._soon or self._stopping:
            return 0
        timers = self._timers
        while timers:
            _, _, target, token = timers[0]
            if type(target) is TimerHandle:
                if not target.cancelled:
                    break
            elif target._wait_token == token and target.status != "dead":
                break
            heapq.heappop(timers)       # stale: cancelled, or its wait is over
        if not timers:
            return None
        return max(0.0, timers[0][0] - self.clock())

    def _run_timers(self) -> None:
        now = self.clock()
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, target, token = heapq.heappop(timers)
            if isinstance(target, TimerHandle):
                if not target.cancelled:
                    self._run_callback(target.callback, target.args)
            elif target._wait_token == token and target.status != "dead":
                target._timed_out = True
                self._make_ready(target)

    def _run_threadsafe(self) -> None:
        calls = self._threadsafe
        while calls:
            callback, args = calls.popleft()
            self._run_callback(callback, args)

    def _drain_waker(self) -> None:
        # Drain first, then re-arm: re-arming first would let a byte sent meanwhile
        # be drained while the flag stays set, and no thread would ever wake us again.
        # Callbacks queued before the re-arm still run in this loop pass.
        try:
            while self._waker_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        self._wakeup_pending = False

    def _run_callback(self, callback: Callable, args: tuple) -> None:
        try:
            callback(*args)
        except Exception as exc:   # a hub callback must never stop the loop
            log.error("hub callback %r failed: %s", callback, exc)

    def _switch_into(self, fiber: Fiber, now: float) -> float:
        """Hand the CPU to `fiber` (from `now`, the monotonic time) until the CPU
        comes back to the hub; the watchdog times the run. Returns the time then."""
        previous = self.current
        self.current = fiber
        self._segment_fiber = fiber                 # _begin_segment(fiber), inlined
        self._segment_start = now
        glet = fiber._greenlet
        if glet is None:
            glet = fiber._greenlet = self._acquire_greenlet()
            glet.switch(fiber)
        else:
            glet.switch()
        now = time.monotonic()
        if now - self._segment_start > STALL_THRESHOLD:
            self._end_segment()
        self.current = previous
        return now

    # The watchdog times "segments": one fiber holding the CPU. A segment ends when the
    # CPU goes back to the hub, or when fiber.create hands it straight to a new fiber.
    def _begin_segment(self, fiber: Fiber) -> None:
        self._segment_fiber = fiber
        self._segment_start = time.monotonic()

    def _end_segment(self) -> None:
        ran = time.monotonic() - self._segment_start
        if ran > STALL_THRESHOLD:
            fiber = self._segment_fiber
            # a segment ends only after one began: a fiber became current with it
            assert fiber is not None
            self.stalls.append((fiber.name, ran))
            log.warn("fiber '%s' (id %d) ran %.0f ms without yielding",
                     fiber.name, fiber.id, ran * 1000)

    # ------------------------------------------------------------- shutdown

    def shutdown(self, timeout: float = 5.0) -> list[Fiber]:
        """Cancel every fiber and run the loop until they are gone (or `timeout`).
        Returns the fibers that refused to die; their greenlets are then killed."""
        for fiber in list(self.fibers.values()):
            self.cancel(fiber)
        deadline = time.monotonic() + timeout
        hub_was = self.hub
        self.hub = greenlet.getcurrent()
        try:
            while self.fibers and time.monotonic() < deadline:
                self._run_once()
        finally:
            self.hub = hub_was or self.hub
        stubborn = list(self.fibers.values())
        self._stopping = True
        for fiber in stubborn:
            if fiber._greenlet is not None:
                fiber._greenlet.throw(greenlet.GreenletExit)
        for pooled in self._pool:
            pooled.throw(greenlet.GreenletExit)
        self._pool.clear()
        self.fibers.clear()
        return stubborn

    def close(self) -> None:
        self._poller.close()
        self._waker_r.close()
        self._waker_w.close()

    # ---------------------------------------------------------------- info

    def _log_identity(self) -> tuple[int, str]:
        fiber = self.current
        return (fiber.id, fiber.name) if fiber else (1, "sched")

    def find(self, fid: int) -> Fiber | None:
        return self.fibers.get(fid)
