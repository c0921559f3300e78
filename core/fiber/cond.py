"""fiber.cond: a condition variable for fibers (Tarantool's fiber_cond)."""
from __future__ import annotations

import collections

from .fiber import Fiber


class Cond:
    __slots__ = ("sched", "_waiters")

    def __init__(self, sched):
        self.sched = sched
        self._waiters: collections.deque[Fiber] = collections.deque()

    def wait(self, timeout: float | None = None) -> bool:
        """True when signalled (or woken by fiber.wakeup: Tarantool allows such
        spurious wakeups), False on timeout. Raises if the fiber is cancelled."""
        me = self.sched.current
        me.testcancel()
        self._waiters.append(me)
        try:
            woken = self.sched.wait(timeout)
        finally:
            try:
                self._waiters.remove(me)
            except ValueError:
                pass   # already taken off by signal/broadcast
        me.testcancel()
        return woken

    def signal(self) -> None:
        if self._waiters:
            self.sched.wakeup(self._waiters.popleft())

    def broadcast(self) -> None:
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, collections.deque()
        for fiber in waiters:
            self.sched.wakeup(fiber)

    @property
    def waiting(self) -> int:
        return len(self._waiters)
