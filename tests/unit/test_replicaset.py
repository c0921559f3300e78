"""The replica set's pure logic with scripted appliers: replicaset_connect's quorum
rules, replicaset_update, bootstrap-leader choice, and the sync/orphan counters."""
from __future__ import annotations

import pytest

from spindle.core.fiber.trigger import TriggerList
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.replication import Ballot
from spindle.core.replication.replica import ApplierState
from spindle.core.replication.replicaset import (
    ReplicaSet, replicaset_connect, replicaset_follow, replicaset_leader, replicaset_sync,
)
from spindle.core.vclock import VClock


class FakeBox:
    def __init__(self, **cfg):
        self.cfg = {"replication_connect_timeout": 30, "replication_connect_quorum": None,
                    "replication_sync_timeout": 300, **cfg}
        self.instance_uuid = "00000000-0000-4000-8000-000000000000"
        self.wal = None
        self.orphan = True
        self.orphan_calls: list[bool] = []

    def set_orphan(self, orphan: bool, quiet: bool = False) -> None:
        self.orphan = orphan
        self.orphan_calls.append(orphan)

    def on_own_id_changed(self) -> None:
        pass


class ScriptedApplier:
    """Goes through `script` (state, delay) when started; applier_pause() holds it."""

    def __init__(self, sched, uuid, script, ballot=None):
        self.sched = sched
        self.uuid = uuid
        self.script = script
        self.ballot = ballot or Ballot()
        self.state = ApplierState.OFF
        self.on_state = TriggerList()
        self.paused = False
        self.started = self.stopped = self.resumed = 0
        self.fiber = None

    def applier_set_state(self, state):
        self.state = state
        self.on_state.run(self)

    def applier_start(self):
        self.started += 1
        self.fiber = self.sched.spawn(self._run, name="applier")

    def _run(self):
        for state, delay in self.script:
            if delay:
                self.sched.sleep(delay)
            if self.state == ApplierState.OFF and self.stopped:
                return
            self.applier_set_state(state)
            if self.paused:
                return

    def applier_pause(self):
        self.paused = True

    def applier_resume(self):
        self.paused = False
        self.resumed += 1

    def applier_stop(self):
        self.stopped += 1
        self.state = ApplierState.OFF


def uuid(n: int) -> str:
    return f"{n:08d}-0000-4000-8000-000000000000"


CONNECT = [(ApplierState.CONNECT, 0), (ApplierState.CONNECTED, 0.1)]


def make(sched, **cfg):
    box = FakeBox(**cfg)
    return box, ReplicaSet(sched, box)


def test_bootstrap_connects_everyone_within_the_timeout(sched, run):
    box, rs = make(sched)
    appliers = [ScriptedApplier(sched, uuid(i), CONNECT) for i in (1, 2, 3)]
    run(replicaset_connect, rs, appliers, True)
    assert all(a.paused and a.state == ApplierState.CONNECTED for a in appliers)
    assert rs.applier.total == 3 and rs.applier.connected == 3
    assert sorted(rs.hash) == [uuid(1), uuid(2), uuid(3)]


def test_bootstrap_below_quorum_is_an_error_and_stops_everyone(sched, run):
    box, rs = make(sched, replication_connect_timeout=5, replication_connect_quorum=2)
    never = [(ApplierState.CONNECT, 0), (ApplierState.DISCONNECTED, 0.1)]
    appliers = [ScriptedApplier(sched, uuid(1), CONNECT),
                ScriptedApplier(sched, uuid(2), never), ScriptedApplier(sched, uuid(3), never)]
    with pytest.raises(ClientError) as exc:
        run(replicaset_connect, rs, appliers, True)
    assert exc.value.code == ErrorCode.ER_CFG
    assert "failed to connect to one or more replicas" in str(exc.value)
    assert all(a.stopped for a in appliers)


def test_bootstrap_with_quorum_reached_goes_on_after_the_timeout(sched, run, clock):
    box, rs = make(sched, replication_connect_timeout=5, replication_connect_quorum=1)
    never = [(ApplierState.CONNECT, 0), (ApplierState.DISCONNECTED, 0.1)]
    ok = ScriptedApplier(sched, uuid(1), CONNECT)
    bad = ScriptedApplier(sched, uuid(2), never)
    start = clock()
    run(replicaset_connect, rs, [ok, bad], True)
    assert clock() - start >= 5          # everyone was tried for the whole timeout
    assert bad.stopped and rs.applier.connected == 1
    assert [r.applier for r in rs.anon] == [bad]


def test_normal_start_passes_on_quorum(sched, run, clock):
    box, rs = make(sched, replication_connect_quorum=1)
    slow = [(ApplierState.CONNECT, 0), (ApplierState.CONNECTED, 20)]
    fast = ScriptedApplier(sched, uuid(1), CONNECT)
    start = clock()

    def connect():
        replicaset_connect(rs, [fast, ScriptedApplier(sched, uuid(2), slow)], False)
        return clock() - start
    assert run(connect) < 1


def test_failed_appliers_end_the_wait_when_quorum_is_unreachable(sched, run, clock):
    box, rs = make(sched)
    off = [(ApplierState.CONNECT, 0), (ApplierState.STOPPED, 0.1)]
    start = clock()
    with pytest.raises(ClientError):
        run(replicaset_connect, rs, [ScriptedApplier(sched, uuid(1), CONNECT),
                                     ScriptedApplier(sched, uuid(2), off)], True)
    assert clock() - start < 1      # no waiting for the connect timeout


def test_two_appliers_to_one_peer_are_refused(sched, run):
    box, rs = make(sched)
    appliers = [ScriptedApplier(sched, uuid(1), CONNECT), ScriptedApplier(sched, uuid(1), CONNECT)]
    with pytest.raises(ClientError) as exc:
        run(replicaset_connect, rs, appliers, True)
    assert "duplicate connection to the same replica" in str(exc.value)


@pytest.mark.parametrize("ballots, expected", [
    # greatest vclock wins
    ([(1, {}, False, False), (2, {1: 5}, False, False), (3, {1: 3}, False, False)], 2),
    # equal vclocks: the lowest UUID
    ([(3, {1: 5}, False, False), (2, {1: 5}, False, False)], 2),
    # read-only peers are skipped...
    ([(1, {1: 9}, True, False), (2, {}, False, False)], 2),
    # ...unless everyone is read-only
    ([(1, {1: 9}, True, False), (2, {}, True, False)], 1),
    # a loaded peer beats a loading one with a greater vclock
    ([(1, {1: 9}, False, True), (2, {}, False, False)], 2),
])
def test_bootstrap_leader_choice(sched, ballots, expected):
    box, rs = make(sched)
    for n, vclock, ro, loading in ballots:
        replica = rs.get_or_add(uuid(n))
        replica.applier = ScriptedApplier(sched, uuid(n), [],
                                          Ballot(is_ro=ro, is_loading=loading,
                                                 vclock=VClock(vclock)))
    assert replicaset_leader(rs).uuid == uuid(expected)


def test_sync_leaves_orphan_when_quorum_follows(sched, run):
    box, rs = make(sched)
    appliers = [ScriptedApplier(sched, uuid(i), CONNECT) for i in (1, 2)]

    def catch_up(applier, delay):
        sched.sleep(delay)
        applier.applier_set_state(ApplierState.SYNC)
        applier.applier_set_state(ApplierState.FOLLOW)

    def scenario():
        replicaset_connect(rs, appliers, True)
        replicaset_follow(rs)
        for i, applier in enumerate(appliers):
            sched.spawn(catch_up, applier, 0.1 * (i + 1))
        replicaset_sync(rs)
    run(scenario)
    assert rs.applier.synced == 2
    assert box.orphan is False
    assert all(applier.resumed for applier in appliers)


def test_sync_timeout_stays_orphan_and_leaves_later(sched, run):
    box, rs = make(sched, replication_sync_timeout=1)
    applier = ScriptedApplier(sched, uuid(1), CONNECT)

    def scenario():
        replicaset_connect(rs, [applier], True)
        replicaset_follow(rs)
        applier.applier_set_state(ApplierState.SYNC)
        replicaset_sync(rs)
        assert box.orphan is True
        applier.applier_set_state(ApplierState.FOLLOW)     # catches up later
        assert box.orphan is False
    run(scenario)


def test_disconnect_and_reconnect_keep_counters_right(sched, run):
    box, rs = make(sched)
    applier = ScriptedApplier(sched, uuid(1), CONNECT)

    def scenario():
        replicaset_connect(rs, [applier], True)
        applier.applier_set_state(ApplierState.FOLLOW)
        assert (rs.applier.connected, rs.applier.synced) == (1, 1)
        applier.applier_set_state(ApplierState.DISCONNECTED)
        assert (rs.applier.connected, rs.applier.synced) == (0, 0)
        applier.applier_set_state(ApplierState.LOADING)
        assert rs.applier.loading == 1
        applier.applier_set_state(ApplierState.CONNECTED)
        assert (rs.applier.connected, rs.applier.loading) == (1, 0)
    run(scenario)
