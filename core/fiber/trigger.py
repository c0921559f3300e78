"""Trigger lists with Tarantool's semantics: newest first, replace in place."""
from __future__ import annotations

from typing import Any, Callable


class TriggerList:
    def __init__(self):
        self._triggers: list[Callable] = []

    def __iter__(self):
        return iter(list(self._triggers))

    def __len__(self) -> int:
        return len(self._triggers)

    def add(self, trigger: Callable) -> Callable:
        self._triggers.insert(0, trigger)   # Tarantool runs the latest trigger first
        return trigger

    def remove(self, trigger: Callable) -> None:
        self._triggers.remove(trigger)

    def replace(self, old: Callable | None, new: Callable | None) -> Callable | None:
        """The on_xxx(new, old) contract: swap old for new in place, add new, or delete
        old; ValueError if `old` is not installed."""
        if old is not None:
            index = self._triggers.index(old)
            if new is None:
                del self._triggers[index]
            else:
                self._triggers[index] = new
        elif new is not None:
            self.add(new)
        return new

    def run(self, *args: Any) -> None:
        """Run every trigger; the first exception stops the run and propagates."""
        for trigger in list(self._triggers):
            trigger(*args)
