"""A fiber mutex with FIFO hand-off (Tarantool's latch)."""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from spindle.core.iproto.errors import BoxError

from .fiber import Fiber

if TYPE_CHECKING:
    from .scheduler import Scheduler


class Latch:
    def __init__(self, sched: Scheduler):
        self.sched = sched
        self.owner: Fiber | None = None
        self._queue: collections.deque[Fiber] = collections.deque()

    def trylock(self) -> bool:
        if self.owner is None and not self._queue:
            self.owner = self.sched.current
            return True
        return False

    def lock(self, timeout: float | None = None) -> bool:
        """Take the latch; False on timeout. Ownership passes in arrival order."""
        if self.trylock():
            return True
        me = self.sched.current
        if me is None:   # (sched.wait's own error, before `None` could queue)
            raise RuntimeError("blocking call outside of a fiber")
        if self.owner is me:
            raise BoxError("latch is already held by this fiber")
        self._queue.append(me)
        try:
            while self.owner is not me:
                if not self.sched.wait(timeout):
                    return False
        finally:
            if self.owner is not me and me in self._queue:
                self._queue.remove(me)
        return True

    def unlock(self) -> None:
        if self.owner is not self.sched.current:
            raise BoxError("latch is not held by this fiber")
        self.owner = self._queue.popleft() if self._queue else None
        if self.owner is not None:
            self.sched.wakeup(self.owner)

    def __enter__(self):
        self.lock()
        return self

    def __exit__(self, *exc):
        self.unlock()
