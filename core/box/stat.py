"""Request statistics of box.stat() and box.stat.net(), as 2.6.0's rmean counters.

Counting is a plain integer increment of a list item at the places requests pass
through (`REQUESTS[IprotoType.X] += 1`): Space's DML entry points (Lua and IPROTO),
the IPROTO executor and Lua's readers for SELECT, the executor for CALL/EVAL/AUTH.
The lists are the process's, as 2.6.0's `rmean_box`/`rmean_net` are.

rps is rmean's: a timer moves the totals into per-second buckets once a second, and
rps is the mean of the last `WINDOW` seconds (an integer).
"""
from __future__ import annotations

from typing import Any

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import count_client_errors

WINDOW = 5                                   # RMEAN_WINDOW of rmean.h
ERROR = IprotoType.TYPE_STAT_MAX             # the slot of "ERROR" (rmean_error)

# request type -> its name in box.stat(), in 2.6.0's slots
BOX_NAMES = {
    IprotoType.SELECT: "SELECT", IprotoType.INSERT: "INSERT",
    IprotoType.REPLACE: "REPLACE", IprotoType.UPDATE: "UPDATE",
    IprotoType.DELETE: "DELETE", IprotoType.AUTH: "AUTH", IprotoType.EVAL: "EVAL",
    IprotoType.UPSERT: "UPSERT", IprotoType.CALL: "CALL",
    IprotoType.EXECUTE: "EXECUTE", IprotoType.PREPARE: "PREPARE", ERROR: "ERROR",
}
NET_SENT, NET_RECEIVED, NET_CONNECTIONS, NET_REQUESTS = range(4)
NET_NAMES = {NET_SENT: "SENT", NET_RECEIVED: "RECEIVED",
             NET_CONNECTIONS: "CONNECTIONS", NET_REQUESTS: "REQUESTS"}

# the totals, counted in place (NET: by core/net/iproto_server.py)
REQUESTS: list[int] = [0] * (ERROR + 1)
NET: list[int] = [0] * 4
count_client_errors(REQUESTS, ERROR)


class Rmean:
    """Per-second history of one counter list: `tick()` once a second."""

    def __init__(self, counts: list[int]):
        self.counts = counts
        self.last = list(counts)
        self.buckets: list[list[int]] = []     # the newest last, WINDOW at most

    def tick(self) -> None:
        counts = self.counts
        self.buckets.append([now - then for now, then in zip(counts, self.last)])
        del self.buckets[:-WINDOW]
        self.last = list(counts)

    def rps(self, slot: int) -> int:
        return sum(bucket[slot] for bucket in self.buckets) // WINDOW

    def reset(self) -> None:
        for i in range(len(self.counts)):
            self.counts[i] = 0
        self.last = list(self.counts)
        self.buckets.clear()


class BoxStat:
    """The rmean timers of one running box (box.stat is there after box.cfg)."""

    def __init__(self, sched):
        self.sched = sched
        self.box = Rmean(REQUESTS)
        self.net = Rmean(NET)
        self._timer: Any = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = self.sched.call_later(1.0, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self.box.tick()
        self.net.tick()
        self._timer = self.sched.call_later(1.0, self._tick)

    def requests(self) -> dict:
        """box.stat()."""
        box = self.box
        return {name: {"total": REQUESTS[slot], "rps": box.rps(slot)}
                for slot, name in BOX_NAMES.items()}

    def network(self, connections: int, requests: int) -> dict:
        """box.stat.net(): bytes sent and received; connections and requests, with
        those open / in progress now as `current`."""
        net = self.net
        current = {NET_CONNECTIONS: connections, NET_REQUESTS: requests}
        result: dict[str, dict] = {}
        for slot, name in NET_NAMES.items():
            entry = {"total": NET[slot], "rps": net.rps(slot)}
            if slot in current:
                entry["current"] = current[slot]
            result[name] = entry
        return result

    def reset(self) -> None:
        """box.stat.reset(): every total and rate back to 0 (current ones stay)."""
        self.box.reset()
        self.net.reset()
