"""fiber.channel: a bounded FIFO between fibers (Tarantool's fiber_channel).

Size 0 is a rendezvous: put() completes only when a reader takes the value. A closed
channel refuses put() and makes get() return None at once, even with values still
buffered, as Tarantool's channel does.
"""
from __future__ import annotations

import collections
from typing import Any

from .fiber import Fiber


class _Waiter:
    __slots__ = ("fiber", "value", "done")

    def __init__(self, fiber: Fiber, value: Any = None):
        self.fiber, self.value, self.done = fiber, value, False


class Channel:
    def __init__(self, sched, size: int = 0):
        if size < 0:
            raise ValueError("channel size must be >= 0")
        self.sched = sched
        self.size = size
        self.closed = False
        self._buffer: collections.deque = collections.deque()
        self._readers: collections.deque[_Waiter] = collections.deque()
        self._writers: collections.deque[_Waiter] = collections.deque()

    def count(self) -> int:
        return len(self._buffer)

    def is_full(self) -> bool:
        return len(self._buffer) >= self.size

    def is_empty(self) -> bool:
        return not self._buffer

    def has_readers(self) -> bool:
        return bool(self._readers)

    def has_writers(self) -> bool:
        return bool(self._writers)

    def put(self, value: Any, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else self.sched.clock() + timeout
        while True:
            if self.closed:
                return False
            if self._readers:
                reader = self._readers.popleft()
                reader.value, reader.done = value, True
                self.sched.wakeup(reader.fiber)
                return True
            if len(self._buffer) < self.size:
                self._buffer.append(value)
                return True
            waiter = _Waiter(self.sched.current, value)
            if self._block(self._writers, waiter, deadline):
                return True
            if deadline is not None and self.sched.clock() >= deadline:
                return False

    def get(self, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else self.sched.clock() + timeout
        while True:
            if self.closed:
                return None
            if self._buffer:
                value = self._buffer.popleft()
                if self._writers:          # room freed: let the first writer in
                    writer = self._writers.popleft()
                    self._buffer.append(writer.value)
                    writer.done = True
                    self.sched.wakeup(writer.fiber)
                return value
            if self._writers:              # rendezvous with a waiting writer
                writer = self._writers.popleft()
                writer.done = True
                self.sched.wakeup(writer.fiber)
                return writer.value
            waiter = _Waiter(self.sched.current)
            if self._block(self._readers, waiter, deadline):
                return waiter.value
            if deadline is not None and self.sched.clock() >= deadline:
                return None

    def _block(self, queue: collections.deque, waiter: _Waiter, deadline) -> bool:
        waiter.fiber.testcancel()
        queue.append(waiter)
        remaining = None if deadline is None else max(0.0, deadline - self.sched.clock())
        try:
            self.sched.wait(remaining)
        finally:
            if not waiter.done:
                try:
                    queue.remove(waiter)
                except ValueError:
                    pass
        if not waiter.done:
            waiter.fiber.testcancel()
        return waiter.done

    def close(self) -> None:
        self.closed = True
        for queue in (self._readers, self._writers):
            while queue:
                self.sched.wakeup(queue.popleft().fiber)
