"""Trigger lists with Tarantool's semantics: newest first, replace in place."""
from __future__ import annotations

from typing import Any, Callable


class TriggerList(list):
    """The installed triggers, newest first. A list itself, so that `len()` and a
    truth test (asked by every DML statement of a space: are there triggers to
    run?) cost no Python call."""

    def __iter__(self):
        # a snapshot: a trigger may add or remove triggers while the list runs
        return iter(self[:])

    def add(self, trigger: Callable) -> Callable:
        self.insert(0, trigger)   # Tarantool runs the latest trigger first
        return trigger

    def replace(self, old: Callable | None, new: Callable | None) -> Callable | None:
        """The on_xxx(new, old) contract: swap old for new in place, add new, or delete
        old; ValueError if `old` is not installed."""
        if old is not None:
            index = self.index(old)
            if new is None:
                del self[index]
            else:
                self[index] = new
        elif new is not None:
            self.add(new)
        return new

    def run(self, *args: Any) -> None:
        """Run every trigger; the first exception stops the run and propagates."""
        for trigger in self[:]:
            trigger(*args)
