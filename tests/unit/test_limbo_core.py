"""The limbo as a pure core (core/box/limbo.py), driven by a virtual-time simulation.

Committers are greenlets of a tiny deterministic loop (`Sim`): time only moves when
every fiber waits, so a scenario is a table of timed steps and its outcome — each
transaction's result, the CONFIRM/ROLLBACK rows written, the order transactions were
decided in — is exact. The committers run the real commit glue
(`limbo_txn.limbo_commit`) over a fake box whose WAL assigns LSNs at once and
finishes each write `wal_delay` later (so an ACK can arrive "before the write
returns", the seed's first race).
"""
from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import random
from dataclasses import dataclass, field

import greenlet
import pytest

from spindle.core.box.limbo import (CONFIRM, PROMOTE, ROLLBACK, LimboEntry, TxnLimbo,
                                    quorum_confirm_lsn)
from spindle.core.instance.limbo_txn import (LimboWaiters, _enter, limbo_after_recovery,
                                             limbo_commit)
from spindle.core.iproto.constants import GroupId
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.xrow import XRow
from spindle.core.instance.synchro import box_clear_synchro_queue

OWNER = 1
TIMEOUT = ErrorCode.ER_SYNC_QUORUM_TIMEOUT
ROLLED = ErrorCode.ER_SYNC_ROLLBACK


# ------------------------------------------------------------------ the loop

class SimFiber:
    def __init__(self, sim, fn, name):
        self.name = name
        self.token = 0
        self.woken = False
        self.done = False
        self.cancelled = False
        self.switches = 0           # how many times it was run (woken or started)
        self.g = greenlet.greenlet(self._main, parent=sim.hub)
        self.fn = fn

    def _main(self):
        try:
            self.fn()
        finally:
            self.done = True


class Sim:
    """Ready queue + timer heap on virtual time; the sched interface LimboWaiters
    uses (current, wait, wakeup)."""

    def __init__(self):
        self.now = 0.0
        self.hub = greenlet.getcurrent()
        self.current = None
        self._ready: collections.deque = collections.deque()
        self._timers: list = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    def spawn(self, fn, name="fiber", at=0.0):
        fiber = SimFiber(self, fn, name)
        heapq.heappush(self._timers, (at, next(self._seq), fiber, None))
        return fiber

    def wait(self, timeout=None) -> bool:
        fiber = self.current
        fiber.token += 1
        fiber.woken = False
        if timeout is not None:
            heapq.heappush(self._timers, (self.now + timeout, next(self._seq), fiber,
                                          fiber.token))
        self.hub.switch()
        fiber.token += 1
        return fiber.woken

    def sleep(self, seconds: float) -> None:
        deadline = self.now + seconds
        while self.now < deadline:
            self.wait(deadline - self.now)

    def wakeup(self, fiber) -> None:
        if fiber not in self._ready:
            fiber.woken = True
            self._ready.append(fiber)

    def _switch(self, fiber) -> None:
        self.current = fiber
        fiber.switches += 1
        fiber.g.switch()
        self.current = None

    def run(self, until: float = 1000.0) -> None:
        while True:
            while self._ready:
                fiber = self._ready.popleft()
                if not fiber.done:
                    self._switch(fiber)
            if not self._timers:
                return
            when, _, fiber, token = heapq.heappop(self._timers)
            if when > until:
                return
            if fiber.done or (token is not None and token != fiber.token):
                continue
            self.now = max(self.now, when)
            fiber.woken = False
            self._switch(fiber)


# ----------------------------------------------------------- the fake box

class FakeWal:
    """LSNs of the owner's component at submit; the write returns `delay` later."""

    def __init__(self, sim, delay):
        self.sim = sim
        self.delay = delay
        self.lsn = 0
        self.synchro: list[tuple[str, int, int]] = []   # (kind, body owner, body lsn)
        self.fail_next = 0

    def _write(self) -> int:
        if self.fail_next:
            self.fail_next -= 1
            self.sim.sleep(self.delay)
            raise ClientError(ErrorCode.ER_WAL_IO)
        self.lsn += 1
        lsn = self.lsn
        self.sim.sleep(self.delay)
        return lsn

    def write_rows(self, rows):
        lsn = self._write()
        rows[-1].lsn = lsn

    def write_synchro(self, kind, owner, lsn):
        self._write()
        self.synchro.append(("CONFIRM" if kind == CONFIRM else "ROLLBACK", owner, lsn))


@dataclass
class FakeTxn:
    name: str
    is_sync: bool


@dataclass
class FakeGate:
    closed: bool = False


@dataclass
class FakeBox:
    limbo: TxnLimbo
    wal: FakeWal
    checkpoint_gate: FakeGate = field(default_factory=FakeGate)
    instance_id: int = OWNER
    configured: bool = True

    def journal_write(self, rows):
        self.wal.write_rows(rows)


@dataclass
class World:
    sim: Sim
    wal: FakeWal
    limbo: TxnLimbo
    box: FakeBox
    cfg: dict
    decided: list = field(default_factory=list)      # (txn name, "commit"/"rollback")
    results: dict = field(default_factory=dict)      # txn name -> "ok" or error code
    finished_at: dict = field(default_factory=dict)


# Committers park on their own entry (the box's wiring), or — the limbo's fallback
# when the glue gives no wait_entry/wake_entry — all in the limbo-wide wait: every
# scenario runs both ways.
WAKEUPS = {"targeted": True}


@pytest.fixture(autouse=True, params=["targeted wakeups", "broadcast only"])
def wakeups(request):
    WAKEUPS["targeted"] = request.param == "targeted wakeups"
    yield request.param
    WAKEUPS["targeted"] = True


def make_world(quorum=2, timeout=5.0, wal_delay=1.0, instance_id=OWNER) -> World:
    sim = Sim()
    wal = FakeWal(sim, wal_delay)
    cfg = {"quorum": quorum, "timeout": timeout}
    waiters = LimboWaiters(sim)
    world_ref: list[World] = []

    def on_complete(entry):
        world_ref[0].decided.append(
            (entry.txn.name, "commit" if entry.is_commit else "rollback"))

    limbo = TxnLimbo(instance_id=lambda: instance_id, quorum=lambda: cfg["quorum"],
                     synchro_timeout=lambda: cfg["timeout"], clock=sim.clock,
                     wait=waiters.wait, broadcast=waiters.broadcast,
                     write_synchro=wal.write_synchro, on_complete=on_complete,
                     **({"wait_entry": waiters.wait_entry, "wake_entry": waiters.wake_entry}
                        if WAKEUPS["targeted"] else {}))
    world = World(sim, wal, limbo, FakeBox(limbo, wal), cfg)
    world_ref.append(world)
    return world


# ------------------------------------------------------------------ steps

def commit(at, name, sync=True):
    def step(world):
        def body():
            txn = FakeTxn(name, sync)
            try:
                limbo_commit(world.box, txn, [XRow(type=2)])
                world.results[name] = "ok"
            except ClientError as exc:
                world.results[name] = exc.code
            world.finished_at[name] = world.sim.now
        world.sim.spawn(body, name, at)
    return step


def event(at, action):
    def step(world):
        world.sim.spawn(lambda: action(world), "event", at)
    return step


def ack(at, replica_id, lsn):
    return event(at, lambda w: w.limbo.txn_limbo_ack(replica_id, lsn))


def set_cfg(at, **values):
    def action(world):
        world.cfg.update(values)
        world.limbo.txn_limbo_on_parameters_change()
    return event(at, action)


def clear_synchro_queue(at):
    """box.ctl.clear_synchro_queue() on this instance, the limbo's owner."""
    return event(at, lambda w: box_clear_synchro_queue(w.box))


def run(world, *steps, until=1000.0):
    for step in steps:
        step(world)
    world.sim.run(until)
    return world


# ------------------------------------------------------------ scenarios

@dataclass
class Scenario:
    name: str
    steps: list
    results: dict
    synchro: list
    decided: list | None = None
    quorum: int = 2
    timeout: float = 5.0


SCENARIOS = [
    Scenario("quorum 1: the own write is the quorum",
             [commit(0, "s1")], {"s1": "ok"}, [("CONFIRM", OWNER, 1)], quorum=1),
    Scenario("master's write finishes first, the replica ACKs later",
             [commit(0, "s1"), ack(3.0, 2, 1)], {"s1": "ok"}, [("CONFIRM", OWNER, 1)]),
    Scenario("early ACK: the replica ACKs before the master's write returns",
             [commit(0, "s1"), ack(0.5, 2, 1)], {"s1": "ok"}, [("CONFIRM", OWNER, 1)]),
    Scenario("no ACK: timeout, ROLLBACK of the entry",
             [commit(0, "s1")], {"s1": TIMEOUT}, [("ROLLBACK", OWNER, 1)],
             [("s1", "rollback")]),
    Scenario("cascading rollback: the first timeout takes everything after it, newest first",
             [commit(0, "s1"), commit(0.1, "s2"), commit(0.2, "s3"),
              commit(0.3, "a4", sync=False)],
             {"s1": TIMEOUT, "s2": ROLLED, "s3": ROLLED, "a4": ROLLED},
             [("ROLLBACK", OWNER, 1)],
             [("a4", "rollback"), ("s3", "rollback"), ("s2", "rollback"),
              ("s1", "rollback")]),
    Scenario("async behind sync waits for its CONFIRM",
             [commit(0, "s1"), commit(0.1, "a2", sync=False), ack(3.0, 2, 1)],
             {"s1": "ok", "a2": "ok"}, [("CONFIRM", OWNER, 1)],
             [("s1", "commit"), ("a2", "commit")]),
    Scenario("async with an empty limbo does not wait",
             [commit(0, "a1", sync=False)], {"a1": "ok"}, [], []),
    Scenario("one ACK covering ten entries: one CONFIRM",
             [commit(0.01 * i, f"s{i}") for i in range(1, 11)] + [ack(3.0, 2, 10)],
             {f"s{i}": "ok" for i in range(1, 11)}, [("CONFIRM", OWNER, 10)]),
    Scenario("ACKs of two replicas: quorum 3 needs both",
             [commit(0, "s1"), commit(0, "s2"), ack(2.0, 2, 2), ack(2.5, 3, 1)],
             {"s1": "ok", "s2": TIMEOUT}, [("CONFIRM", OWNER, 1), ("ROLLBACK", OWNER, 2)],
             quorum=3),
    Scenario("a CONFIRM being written when the timeout fires wins",
             [commit(0, "s1"), ack(5.5, 2, 1)], {"s1": "ok"}, [("CONFIRM", OWNER, 1)]),
    Scenario("timed out behind a confirmed entry: rolls back once it is first",
             [commit(0, "s1"), commit(0.1, "s2"), ack(5.9, 2, 1)],
             {"s1": "ok", "s2": TIMEOUT}, [("CONFIRM", OWNER, 1), ("ROLLBACK", OWNER, 2)],
             [("s1", "commit"), ("s2", "rollback")]),
    Scenario("the quorum lowered by box.cfg confirms what has it",
             [commit(0, "s1"), ack(2.0, 2, 1), set_cfg(3.0, quorum=2)],
             {"s1": "ok"}, [("CONFIRM", OWNER, 1)], quorum=3),
    Scenario("the timeout shortened by box.cfg applies to waiting entries",
             [commit(0, "s1"), set_cfg(2.0, timeout=0.5)],
             {"s1": TIMEOUT}, [("ROLLBACK", OWNER, 1)], timeout=100.0),
    Scenario("clear_synchro_queue on the owner leaves a pending entry to its timeout",
             [commit(0, "s1"), commit(0.1, "a2", sync=False), clear_synchro_queue(2.0)],
             {"s1": TIMEOUT, "a2": ROLLED}, [("ROLLBACK", OWNER, 1)],
             [("a2", "rollback"), ("s1", "rollback")]),
    Scenario("clear_synchro_queue on the owner leaves a pending entry to its quorum",
             [commit(0, "s1"), clear_synchro_queue(2.0), ack(3.0, 2, 1)],
             {"s1": "ok"}, [("CONFIRM", OWNER, 1)]),
]


@pytest.mark.parametrize("case", SCENARIOS, ids=lambda case: case.name)
def test_scenario(case):
    world = run(make_world(case.quorum, case.timeout), *case.steps)
    assert world.results == case.results
    assert world.wal.synchro == case.synchro
    if case.decided is not None:
        assert world.decided == case.decided
    assert world.limbo.txn_limbo_is_empty()


def test_clear_synchro_queue_on_the_owner_decides_nothing():
    """2.6.0's box_clear_synchro_queue returns at once on the limbo's owner: the
    entry keeps waiting until its own timeout (write 0..1, wait 1..6, ROLLBACK
    6..7), as if the call had not been made."""
    world = make_world(quorum=2, timeout=5.0, wal_delay=1.0)
    cleared_at = []
    run(world, commit(0, "s1"), clear_synchro_queue(2.0),
        event(2.0, lambda w: cleared_at.append((w.sim.now, w.limbo.len))))
    assert cleared_at == [(2.0, 1)]
    assert world.finished_at["s1"] == pytest.approx(7.0)


def test_early_ack_is_counted_when_the_lsn_arrives():
    world = make_world(quorum=2, wal_delay=1.0)
    run(world, commit(0, "s1"), ack(0.5, 2, 1))
    # confirmed right after the master's write (t=1) plus one CONFIRM write
    assert world.finished_at["s1"] == pytest.approx(2.0)
    assert world.limbo.vclock == {2: 1, OWNER: 1}


def test_async_behind_sync_finishes_only_after_the_confirm():
    world = run(make_world(), commit(0, "s1"), commit(0.1, "a2", sync=False),
                ack(3.0, 2, 1))
    assert world.finished_at["a2"] >= 3.0


def test_timeout_is_measured_after_the_write():
    world = run(make_world(quorum=2, timeout=5.0, wal_delay=1.0), commit(0, "s1"))
    # write 0..1, wait 1..6, ROLLBACK write 6..7
    assert world.finished_at["s1"] == pytest.approx(7.0)
    assert world.limbo.rollback_count == 1


def test_confirms_are_batched_while_one_is_written():
    # quorum 1: every committer acks itself; the ones acking while the first CONFIRM
    # is written are covered by one more CONFIRM, not one each
    world = run(make_world(quorum=1), *[commit(0, f"s{i}") for i in range(1, 21)])
    assert all(result == "ok" for result in world.results.values())
    assert [row[0] for row in world.wal.synchro] == ["CONFIRM", "CONFIRM"]
    assert world.wal.synchro[-1] == ("CONFIRM", OWNER, 20)


def test_wal_error_aborts_the_entry():
    world = make_world()
    world.wal.fail_next = 1
    run(world, commit(0, "s1"))
    assert world.results == {"s1": ErrorCode.ER_WAL_IO}
    assert world.limbo.txn_limbo_is_empty() and world.wal.synchro == []
    assert world.limbo.rollback_count == 1


def test_nothing_enters_the_limbo_while_a_rollback_is_written():
    world = make_world(timeout=1.0, wal_delay=1.0)
    # s1: write 0..1, timeout at 2, ROLLBACK written 2..3; s2 commits at 2.5
    run(world, commit(0, "s1"), commit(2.5, "s2"))
    assert world.results == {"s1": TIMEOUT, "s2": ROLLED}
    assert world.wal.lsn == 2          # s2 never reached the WAL


def test_wait_confirm_for_join():
    outcomes = {}

    def joiner(world):
        try:
            world.limbo.txn_limbo_wait_confirm()
            outcomes[world.sim.now] = "ok"
        except ClientError as exc:
            outcomes[world.sim.now] = exc.code

    run(make_world(), commit(0, "s1"), event(1.5, joiner), ack(3.0, 2, 1))
    assert list(outcomes.values()) == ["ok"]
    outcomes.clear()
    # the committer's timeout comes first (write done at 0.1, ROLLBACK at 5.1..5.2)
    run(make_world(timeout=5.0, wal_delay=0.1), commit(0, "s1"), event(0.5, joiner))
    assert list(outcomes.values()) == [ROLLED]
    outcomes.clear()
    # the joiner's own timeout comes first (at 5.5; the committer's at 6)
    run(make_world(timeout=5.0), commit(0, "s1"), event(0.5, joiner))
    assert list(outcomes.values()) == [TIMEOUT]


# ------------------------------------------------ replica side, no fibers

def replica_limbo(instance_id=2):
    decided, written = [], []
    limbo = TxnLimbo(instance_id=lambda: instance_id, quorum=lambda: 2,
                     synchro_timeout=lambda: 5.0, clock=lambda: 0.0,
                     wait=lambda timeout: False, broadcast=lambda: None,
                     write_synchro=lambda kind, owner, lsn: written.append((kind, owner, lsn)),
                     on_complete=lambda e: decided.append(
                         (e.txn, "commit" if e.is_commit else "rollback")))
    return limbo, decided, written


def master_entries(limbo, *spec):
    """Replicated transactions of master 1: ("s", lsn) sync, ("a", lsn) async."""
    entries = []
    for kind, lsn in spec:
        entry = limbo.txn_limbo_append(1, f"{kind}{lsn}", wait_ack=kind == "s")
        if kind == "s":
            limbo.txn_limbo_assign_lsn(entry, lsn)
        entries.append(entry)
    return entries


def test_replica_confirm_commits_up_to_its_lsn_and_the_async_between():
    limbo, decided, _ = replica_limbo()
    master_entries(limbo, ("s", 5), ("a", 6), ("s", 7))
    limbo.txn_limbo_process(CONFIRM, 1, 5)
    assert decided == [("s5", "commit"), ("a6", "commit")]
    assert limbo.len == 1 and limbo.confirmed_lsn == 5
    limbo.txn_limbo_process(ROLLBACK, 1, 7)
    assert decided[-1] == ("s7", "rollback") and limbo.txn_limbo_is_empty()


def test_replica_rollback_undoes_newest_first():
    limbo, decided, _ = replica_limbo()
    master_entries(limbo, ("s", 5), ("a", 6), ("s", 7))
    limbo.txn_limbo_process(ROLLBACK, 1, 5)
    assert decided == [("s7", "rollback"), ("a6", "rollback"), ("s5", "rollback")]


def test_replica_rollback_keeps_what_is_before_its_lsn():
    limbo, decided, _ = replica_limbo()
    master_entries(limbo, ("s", 5), ("a", 6), ("s", 7))
    limbo.txn_limbo_process(ROLLBACK, 1, 7)
    assert decided == [("s7", "rollback")] and limbo.len == 2


def test_foreign_owner_errors():
    limbo, _, _ = replica_limbo(instance_id=2)
    master_entries(limbo, ("s", 5))
    with pytest.raises(ClientError) as err:
        limbo.txn_limbo_append(0, "local", wait_ack=False)      # a local write on replica 2
    assert err.value.code == ErrorCode.ER_UNCOMMITTED_FOREIGN_SYNC_TXNS
    assert err.value.message == "Found uncommitted sync transactions from other instance with id 1"
    with pytest.raises(ClientError) as err:
        limbo.txn_limbo_process(CONFIRM, 3, 5)
    assert err.value.code == ErrorCode.ER_SYNC_MASTER_MISMATCH
    assert err.value.message == "CONFIRM message arrived for an unknown master id 3, expected 1"
    assert limbo.len == 1


def test_foreign_confirm_with_nothing_pending_is_ignored():
    limbo, decided, _ = replica_limbo()
    limbo.txn_limbo_process(CONFIRM, 3, 5)
    assert decided == [] and limbo.owner_id == 0


def test_owner_changes_when_the_queue_is_empty():
    limbo, _, _ = replica_limbo(instance_id=2)
    entry, = master_entries(limbo, ("s", 5))
    limbo.txn_limbo_process(CONFIRM, 1, 5)
    assert entry.is_commit and limbo.confirmed_lsn == 5
    limbo.txn_limbo_append(0, "own", wait_ack=True)
    assert limbo.owner_id == 2 and limbo.confirmed_lsn == 0


def test_an_entry_getting_its_lsn_after_a_confirm_covering_it():
    """Two writes done, the second committer runs first and its CONFIRM is written
    before the first one's fiber assigns its LSN: the CONFIRM covers it."""
    limbo, decided, written = replica_limbo(instance_id=1)
    first = limbo.txn_limbo_append(0, "s1", wait_ack=True)
    second = limbo.txn_limbo_append(0, "s2", wait_ack=True)
    limbo.txn_limbo_assign_local_lsn(second, 2)
    limbo.txn_limbo_ack(1, 2)
    limbo.txn_limbo_ack(2, 2)
    assert written == [(CONFIRM, 1, 2)] and decided == []
    limbo.txn_limbo_assign_local_lsn(first, 1)
    assert decided == [("s1", "commit"), ("s2", "commit")]


def test_force_empty_confirms_the_quorum_part_and_rolls_back_the_rest():
    limbo, decided, written = replica_limbo(instance_id=2)
    master_entries(limbo, ("s", 1), ("s", 2), ("a", 3), ("s", 4))
    limbo.txn_limbo_force_empty(2)
    assert written == [(CONFIRM, 1, 2), (ROLLBACK, 1, 4)]
    assert decided == [("s1", "commit"), ("s2", "commit"), ("a3", "commit"),
                       ("s4", "rollback")]


# ------------------------------------------- own entries after a restart
# 2.6.0 recovers this instance's unconfirmed transactions into the limbo with no
# ACK at all (its own write is not counted) and the restart writes nothing for
# them; ACKs arriving later count as for any entry.

def recovered_world(quorum, lsn=8) -> World:
    """A restarted owner whose xlog ends with its unconfirmed transaction `r<lsn>`."""
    world = make_world(quorum=quorum)
    world.wal.lsn = lsn
    row = XRow(type=2, replica_id=OWNER, lsn=lsn)
    _enter(world.box, FakeTxn(f"r{lsn}", True), [row])
    limbo_after_recovery(world.box)
    return world


@pytest.mark.parametrize("quorum", [1, 2])
def test_a_restart_confirms_nothing(quorum):
    world = recovered_world(quorum)
    run(world, set_cfg(1.0, quorum=1))       # not even a quorum of 1 later on
    assert world.wal.synchro == [] and world.decided == []
    assert world.limbo.info() == {"owner": OWNER, "len": 1}


def test_a_recovered_entry_needs_a_whole_quorum_of_acks():
    world = recovered_world(quorum=2)
    run(world, ack(1.0, 2, 8))
    assert world.wal.synchro == [] and world.limbo.len == 1     # one ACK of two
    run(world, ack(2.0, 3, 8))
    assert world.wal.synchro == [("CONFIRM", OWNER, 8)]
    assert world.decided == [("r8", "commit")] and world.limbo.txn_limbo_is_empty()


def test_a_new_own_write_acks_the_recovered_entry_too():
    """The owner's own write of a new transaction is an ACK of every LSN below it
    (2.6.0 counts it so — and then crashes waking the recovered entry's committer,
    which it no longer has); here both commit."""
    world = recovered_world(quorum=2)
    run(world, ack(1.0, 2, 8), commit(2.0, "s9"), ack(6.0, 2, 9))
    assert world.wal.synchro == [("CONFIRM", OWNER, 8), ("CONFIRM", OWNER, 9)]
    assert world.decided == [("r8", "commit"), ("s9", "commit")]
    assert world.results == {"s9": "ok"}


def test_clear_synchro_queue_leaves_recovered_entries_pending():
    world = recovered_world(quorum=2)
    run(world, clear_synchro_queue(1.0), ack(2.0, 2, 8))
    assert world.wal.synchro == [] and world.limbo.len == 1


@pytest.mark.parametrize("lsns, quorum, expected", [
    ([5], 1, 5), ([5], 2, 0), ([3, 5], 2, 3), ([7, 3, 5], 2, 5), ([7, 3, 5], 3, 3),
    ([], 1, 0),
])
def test_quorum_confirm_lsn(lsns, quorum, expected):
    assert quorum_confirm_lsn(lsns, quorum) == expected


# ------------------------------------------------------- targeted wakeups

def test_a_confirm_wakes_only_the_confirmed_entries_committers(wakeups):
    world = make_world(quorum=2, wal_delay=1.0)
    names = [f"s{i}" for i in range(1, 11)]
    for i, name in enumerate(names):
        commit(0.01 * i, name)(world)
    fibers = {fiber.name: fiber for *_, fiber, _ in world.sim._timers}
    world.sim.run(until=2.0)            # all written, all waiting for the replica
    before = {name: fiber.switches for name, fiber in fibers.items()}
    ack(2.0, 2, 3)(world)
    world.sim.run(until=4.0)            # CONFIRM(3) written and read
    woken = {name for name, fiber in fibers.items() if fiber.switches > before[name]}
    assert world.wal.synchro == [("CONFIRM", OWNER, 3)]
    assert {name for name, result in world.results.items() if result == "ok"} == \
        {"s1", "s2", "s3"}
    if wakeups == "targeted wakeups":
        assert woken == {"s1", "s2", "s3"}
    else:
        assert woken == set(names)     # the fallback: everyone re-checks
    ack(5.0, 2, 10)(world)
    world.sim.run()
    assert all(result == "ok" for result in world.results.values())


def test_a_timeout_rollback_reaches_every_waiting_committer():
    world = run(make_world(timeout=2.0), *[commit(0.01 * i, f"s{i}") for i in range(1, 11)])
    assert world.results == {"s1": TIMEOUT, **{f"s{i}": ROLLED for i in range(2, 11)}}
    assert world.wal.synchro == [("ROLLBACK", OWNER, 1)]
    assert world.limbo.txn_limbo_is_empty()


def test_committers_behind_a_timed_out_one_decide_in_turn():
    # s1 confirmed late; s2 timed out meanwhile (waiting limbo-wide): once first,
    # it rolls back itself and s3 behind it
    world = run(make_world(timeout=5.0), commit(0, "s1"), commit(0.1, "s2"),
                commit(0.2, "s3"), ack(5.95, 2, 1))
    assert world.results == {"s1": "ok", "s2": TIMEOUT, "s3": ROLLED}
    assert world.wal.synchro == [("CONFIRM", OWNER, 1), ("ROLLBACK", OWNER, 2)]


class _FakeFiber:
    cancelled = False


class _FakeSched:
    def __init__(self):
        self.current = _FakeFiber()
        self.woken = []

    def wakeup(self, fiber):
        self.woken.append(fiber)


def test_wake_entry_wakes_its_parked_fiber_once():
    sched = _FakeSched()
    waiters = LimboWaiters(sched)
    parked, idle = LimboEntry("t1", True), LimboEntry("t2", True)
    parked.waiter = fiber = _FakeFiber()
    waiters.wake_entry(parked)
    waiters.wake_entry(parked)          # woken already: not queued twice
    waiters.wake_entry(idle)            # nobody waits on it
    assert sched.woken == [fiber] and parked.waiter is None


def _count_ack_forward(queue, prev_lsn, lsn, quorum):
    """The walk from the oldest entry (as before): the reference."""
    confirm_lsn = -1
    for entry in queue:
        if entry.lsn > lsn:
            break
        if not entry.wait_ack or entry.lsn <= prev_lsn:
            continue
        entry.ack_count += 1
        if entry.ack_count >= quorum:
            confirm_lsn = entry.lsn
    return confirm_lsn


def _random_queue(rng):
    """Entries as the owner's queue has them: LSNs growing, some async or not
    written yet (-1), ACK counts not growing with the LSN."""
    queue, lsn, acks = [], 0, 3
    for i in range(rng.randrange(0, 12)):
        entry = LimboEntry(f"t{i}", wait_ack=rng.random() < 0.8)
        lsn += rng.randrange(1, 3)
        if entry.wait_ack and rng.random() < 0.8:
            entry.lsn = lsn
            acks = rng.randrange(0, acks + 1)
            entry.ack_count = acks
        queue.append(entry)
    return queue, lsn


def _copy(entries):
    copies = []
    for entry in entries:
        copy = LimboEntry(entry.txn, entry.wait_ack)
        copy.lsn, copy.ack_count = entry.lsn, entry.ack_count
        copies.append(copy)
    return copies


def test_ack_counting_from_the_newest_entry_matches_the_walk_from_the_oldest():
    rng = random.Random(5)
    for _ in range(2000):
        queue, top = _random_queue(rng)
        prev_lsn = rng.randrange(0, top + 2)
        lsn = rng.randrange(prev_lsn + 1, top + 3)
        quorum = rng.randrange(1, 4)
        reference = _copy(queue)
        expected = _count_ack_forward(reference, prev_lsn, lsn, quorum)
        limbo, _, _ = replica_limbo()
        limbo.queue.extend(queue)
        assert limbo._count_ack(prev_lsn, lsn, quorum) == expected
        assert [e.ack_count for e in queue] == [e.ack_count for e in reference]


# ------------------------------------------- replicated rows entering the limbo

@dataclass
class _ReplicatedTxn:
    is_sync: bool


def _entered(rows, is_sync=True, pending=False):
    """What `_enter` queues for `rows`: (origin, lsn, wait_ack) or None."""
    limbo, _, _ = replica_limbo(instance_id=3)
    if pending:
        master_entries(limbo, ("s", 1))
    box = FakeBox(limbo, wal=None)
    entry = _enter(box, _ReplicatedTxn(is_sync), rows)
    if entry is None:
        return None
    return limbo.owner_id, entry.lsn, entry.wait_ack


def _row(rtype=2, replica_id=1, lsn=5, group_id=0):
    return XRow(type=rtype, replica_id=replica_id, lsn=lsn, group_id=group_id)


@pytest.mark.parametrize("row", [_row(), _row(group_id=GroupId.LOCAL, replica_id=1, lsn=7)],
                         ids=["global", "local"])
def test_one_row_enters_as_the_general_path_would(row):
    # the one-row path gives what the many-row path gives for the same row twice
    # over (the last row's LSN, the first global row's origin)
    twice = [dataclasses.replace(row, lsn=row.lsn - 1), row]
    assert _entered([row]) == _entered(twice) == (1, row.lsn, True)
    assert _entered([row], is_sync=False, pending=True) == (1, -1, False)
    assert _entered([row], is_sync=False) is None


@pytest.mark.parametrize("rtype", [CONFIRM, ROLLBACK])
def test_synchro_rows_never_enter(rtype):
    assert _entered([_row(rtype)], pending=True) is None
    assert _entered([_row(rtype), _row(rtype, lsn=6)], pending=True) is None
    assert _entered([_row(rtype), _row(lsn=6)]) == (1, 6, True)


def test_many_rows_take_the_owner_from_the_first_global_row():
    rows = [_row(group_id=GroupId.LOCAL, replica_id=3, lsn=2), _row(replica_id=1, lsn=8),
            _row(group_id=GroupId.LOCAL, replica_id=3, lsn=3)]
    assert _entered(rows) == (1, 8, True)


# ------------------------------------------------------ PROMOTE (2.6.3's rows)

def test_promote_finishes_the_old_owner_and_takes_the_limbo():
    # raft.md §9 E: new leader 3 in term 6 took over the pending lsn 25 of owner 1
    limbo, decided, _ = replica_limbo()
    master_entries(limbo, ("s", 25), ("s", 26))
    limbo.txn_limbo_process(PROMOTE, 1, 25, origin=3, term=6)
    assert decided == [("s25", "commit"), ("s26", "rollback")]
    assert limbo.owner_id == 3 and limbo.confirmed_lsn == 0
    assert limbo.promote_term_map == {3: 6} and limbo.promote_greatest_term == 6


def test_promote_naming_another_owner_rolls_everything_back():
    limbo, decided, _ = replica_limbo()
    master_entries(limbo, ("s", 5), ("s", 6))
    limbo.txn_limbo_process(PROMOTE, 2, 5, origin=3, term=4)
    assert decided == [("s6", "rollback"), ("s5", "rollback")] and limbo.owner_id == 3


def test_an_empty_limbo_promote_and_outdated_terms():
    limbo, decided, _ = replica_limbo()
    limbo.txn_limbo_process(PROMOTE, 0, 0, origin=1, term=2)     # the bootstrap leader's
    assert limbo.owner_id == 1
    limbo.txn_limbo_process(PROMOTE, 1, 0, origin=2, term=5)
    assert limbo.owner_id == 2
    # a PROMOTE of an older term than the newest is ignored
    limbo.txn_limbo_process(PROMOTE, 2, 0, origin=3, term=4)
    assert limbo.owner_id == 2 and limbo.promote_term_map[3] == 4
    assert limbo.txn_limbo_is_replica_outdated(3) and not limbo.txn_limbo_is_replica_outdated(2)
    assert decided == []
