"""Time slices: how a fiber that never has to wait gives the loop back.

A loop whose input is always there (a socket buffer that stays full, xlog blocks
read ahead, a read view being sent) never parks on its own, and a fiber that does
not park holds the whole instance: other fibers, WAL completions, timers and I/O
wait for it (the scheduler's watchdog logs a run over STALL_THRESHOLD, 50 ms).
`TimeSlice` measures the fiber's current run on the CPU — from the moment it last
got the CPU back, i.e. since its `csw` last moved (any wait restarts the slice) —
and `maybe_yield()` goes to the back of the ready queue (sleep(0): after this loop
iteration's I/O poll) once that run is longer than the slice's budget.

The budgets, each with its reason:

* `APPLIER_SLICE` (1 ms) — the applier's reader (JOIN stages and SUBSCRIBE; checked
  before each read). The WAL write of what it applied meanwhile and the ACK for it
  go out at that turn, so this bounds how long a master waits for the ACK of a
  transaction the replica has applied: with 1 ms instead of 10 a master's 100 sync
  committers stop moving in lock-step with one ACK per burst (scripts/bench/qsync.py:
  ~26k -> ~34k txn/s), for ~1% of a busy replica's CPU in extra loop turns.
* `RELAY_SLICE` (10 ms) — the relay's sender (SUBSCRIBE, final JOIN; checked around
  each read of the cursor and each full send buffer) and the initial JOIN's read
  view (checked every 1024 tuples: a clock read per tuple would cost more than the
  tuple's framing). Reading a file block and sending its rows each take a few ms:
  the loop gets the CPU back between them, well under the watchdog's 50 ms, while a
  slice long enough for a few sends keeps the relay's per-yield cost small.
* `RECOVERY_SLICE` (10 ms) — local recovery at start-up (checked after each xlog or
  snapshot block, never inside a transaction). 2.6.0 listens before it recovers and
  yields every 32000 WAL rows (100000 snapshot rows), so a client or a peer gets
  answers while the instance loads (box.info.status 'loading', writes refused as
  read-only), and signals are handled; Spindle recovers ~50k rows per CPU second, so
  a time budget keeps those answers as prompt as 2.6.0's.

Loops that yield after a count of items rather than a time are batch boundaries,
not time slices (each yield is unconditional and ends a unit of work), and keep
their counts: the IPROTO reader yields after 256 packets (`_BATCH_MAX`,
core/net/iproto_server.py: 2.6.0's net thread handles input per event), a JOIN's
snapshot rows are applied 1000 per transaction with a yield after each
(`SNAPSHOT_BATCH`, core/replication/apply.py), box.spark hands a result to Lua
2000 rows per turn (`CHUNK_ROWS`, lua/box/spark.py). The WAL committer's
`Scheduler.yield_turn()` is a yield per commit, not per budget.
"""
from __future__ import annotations

from typing import Any

APPLIER_SLICE = 0.001
RELAY_SLICE = 0.010
RECOVERY_SLICE = 0.010


class TimeSlice:
    """One fiber's budget of CPU between two turns of the loop.

    Made by (or first asked by) the fiber whose run it measures; `due()` is True
    once that fiber has run `budget` seconds since it last got the CPU back, and
    `maybe_yield()` yields then. Cheap enough to ask before every read: an
    attribute compare and a clock read."""

    __slots__ = ("sched", "budget", "fiber", "switches", "since")

    def __init__(self, sched: Any, budget: float):
        self.sched = sched
        self.budget = budget
        self.fiber: Any = None
        self.switches = -1
        self.since = 0.0
        self.restart()

    def restart(self) -> None:
        """A new slice from now, for the fiber running now."""
        sched = self.sched
        self.fiber = fiber = sched.current
        self.switches = -1 if fiber is None else fiber.csw
        self.since = sched.clock()

    def due(self) -> bool:
        """Whether the fiber has used its budget (a switch since the last look
        starts a new slice: that look says no)."""
        fiber = self.fiber
        if fiber is None or fiber.csw != self.switches:
            self.restart()
            return False
        return self.sched.clock() - self.since > self.budget

    def maybe_yield(self) -> None:
        """Yield (sleep(0): raises if the fiber is cancelled) once the budget is used;
        the yield's switch starts the next slice."""
        fiber = self.fiber
        if fiber is None or fiber.csw != self.switches:
            self.restart()
        elif self.sched.clock() - self.since > self.budget:
            self.sched.sleep(0)
