"""The applier against a fake master replaying real Tarantool 2.6.0 wire captures
(applier_fake_master.py): JOIN and SUBSCRIBE as bootstrap_from_master steps them,
anonymous FETCH_SNAPSHOT and REGISTER, transactions, heartbeats and ACKs."""
from __future__ import annotations

import time

import pytest

from spindle.core.fiber import Scheduler
from spindle.core.fiber.timeslice import APPLIER_SLICE, TimeSlice
from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.replication.applier import Applier
from spindle.core.replication.replica import ApplierState as S

from .applier_fake_master import (
    CLUSTER_UUID, MASTER_UUID, REPLICA_UUID, Capture, FakeMaster, body, bootstrap, new_box,
    real_sched, restamp, run, select, start_wal, wait_state, wal_rows,
)

pytestmark = pytest.mark.usefixtures("collector_paused")   # see tests/conftest.py

JOIN_PATH = [S.CONNECT, S.CONNECTED, S.AUTH, S.READY, S.INITIAL_JOIN, S.FINAL_JOIN,
             S.JOINED, S.READY, S.SYNC, S.FOLLOW]
sched = real_sched


# ------------------------------------------------------------ giving up the CPU

def test_a_busy_reader_yields_once_it_worked_its_time_slice(clock):
    """What keeps an applier's reader from holding the loop while its socket buffer
    stays full: its TimeSlice (APPLIER_SLICE), asked before each read, yields once
    that long passed since the fiber last switched, and not before. Counted in the
    fiber's switches on a fake clock."""
    fake = Scheduler(clock=clock)
    seen = []

    def reader():
        me = fake.current
        busy = TimeSlice(fake, APPLIER_SLICE).maybe_yield
        start = me.csw
        for _ in range(100):
            busy()                              # no time went by: no yield
        seen.append(me.csw - start)
        clock.advance(APPLIER_SLICE / 2)
        busy()
        seen.append(me.csw - start)
        clock.advance(APPLIER_SLICE)            # past APPLIER_SLICE since the start
        busy()
        seen.append(me.csw - start)
        busy()                                  # a new slice began at that yield
        seen.append(me.csw - start)
        clock.advance(APPLIER_SLICE * 2)
        busy()
        seen.append(me.csw - start)

    fake.run(reader)
    fake.close()
    assert seen == [0, 0, 1, 1, 2]


# ------------------------------------------------------------------ JOIN, SUBSCRIBE

def test_join_then_subscribe_replays_the_capture(sched, tmp_path):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)
    states = []
    applier.on_state.add(lambda a: states.append(a.state))
    seen_at = {}

    def body_():
        applier.applier_start()
        applier.applier_resume_to_state(S.CONNECTED)
        assert applier.uuid == MASTER_UUID and applier.ballot.vclock == {1: 13}
        applier.applier_resume_to_state(S.READY)
        applier.applier_resume_to_state(S.INITIAL_JOIN)
        assert box.replicaset.vclock == {1: 13}
        applier.applier_resume_to_state(S.FINAL_JOIN)
        applier.applier_resume_to_state(S.JOINED)
        seen_at["joined"] = (select(box, 512), box.replicaset.vclock.copy(), box.instance_id)
        applier.applier_resume_to_state(S.READY)
        start_wal(box, tmp_path)
        applier.applier_resume()
        wait_state(applier, S.FOLLOW)
        master.wait(lambda: box.replicaset.vclock == {1: 23}, what="vclock {1: 23}")
        session = master.sessions[0]
        master.wait(lambda: {1: 23} in session.acks, what="ACK {1: 23}")
        applier.applier_stop()
        box.wal.stop()
        master.close()

    run(sched, body_)
    assert states[:len(JOIN_PATH)] == JOIN_PATH
    rows, vclock, own_id = seen_at["joined"]
    assert rows == [[1, "a"], [2, "b"]] and vclock == {1: 14} and own_id == 2
    assert box.schema.replicaset_uuid == CLUSTER_UUID
    assert box.schema.cluster == {1: MASTER_UUID, 2: REPLICA_UUID}
    # the 524 snapshot rows: every system space filled as on the master
    assert len(box.engine.space(280).select()) > 20          # _space
    assert select(box, 512) == [[1, "a1"], [3, "c"], [10, "x"], [11, "y"]]
    assert select(box, 513) == [[1, "confirmed"]]
    # one connection, JOIN then SUBSCRIBE on it, as 2.6.0 does
    session = master.sessions[0]
    assert [r.type for r in session.requests] == [
        IprotoType.VOTE, IprotoType.AUTH, IprotoType.JOIN, IprotoType.SUBSCRIBE]
    subscribe = body(session.requests[3])
    assert subscribe[IprotoKey.VCLOCK] == {1: 14}
    assert subscribe[IprotoKey.CLUSTER_UUID] == CLUSTER_UUID
    assert subscribe[IprotoKey.INSTANCE_UUID] == REPLICA_UUID
    assert subscribe[IprotoKey.ID_FILTER] == [2]
    assert subscribe[IprotoKey.REPLICA_ANON] is False
    assert subscribe[IprotoKey.SERVER_VERSION] == 132608
    # the stream is in the local WAL with the master's ids, LSNs and transaction marks
    logged = [(r.replica_id, r.lsn, r.type) for r in wal_rows(tmp_path)]
    assert logged == [(1, 15, 3), (1, 16, 4), (1, 17, 9), (1, 18, 5), (1, 19, 2), (1, 20, 2),
                      (1, 21, 4), (1, 22, 2), (1, 23, 40)]
    multi = [r for r in wal_rows(tmp_path) if 19 <= r.lsn <= 21]
    assert [(r.tsn, r.is_commit) for r in multi] == [(19, False), (19, False), (19, True)]


def joined_replica(sched, tmp_path, master):
    """A replica bootstrapped from `master` whose applier is paused at `ready`, the
    WAL started: where Box.start leaves it before replicaset_follow."""
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)
    applier.applier_start()
    applier.applier_resume_to_state(S.CONNECTED)
    bootstrap(applier)
    start_wal(box, tmp_path)
    return box, applier


def test_restart_resubscribes_from_the_written_vclock(sched, tmp_path):
    """A bootstrapped replica connects straight to SUBSCRIBE (no JOIN), from its vclock."""
    master = FakeMaster(sched, Capture("join-subscribe"))
    states = []

    def body_():
        box, applier = joined_replica(sched, tmp_path, master)
        applier.applier_resume()
        master.wait(lambda: box.replicaset.vclock == {1: 23}, what="vclock {1: 23}")
        applier.applier_stop()
        assert applier.state == S.OFF and applier.reader is None and applier.writer is None
        applier.on_state.add(lambda a: states.append(a.state))
        applier.restart()
        wait_state(applier, S.FOLLOW)
        applier.applier_stop()
        box.wal.stop()
        master.close()
        return box

    box = run(sched, body_)
    assert states == [S.CONNECT, S.CONNECTED, S.AUTH, S.READY, S.SYNC, S.FOLLOW, S.OFF]
    subscribes = master.requests(IprotoType.SUBSCRIBE)
    assert [body(r)[IprotoKey.VCLOCK] for r in subscribes] == [{1: 14}, {1: 23}]
    assert len(master.requests(IprotoType.JOIN)) == 1
    # the resent rows (the fake master always streams from LSN 15) were skipped
    assert [r.lsn for r in wal_rows(tmp_path)] == list(range(15, 24))
    assert select(box, 512) == [[1, "a1"], [3, "c"], [10, "x"], [11, "y"]]


def test_every_heartbeat_gets_an_ack(sched, tmp_path):
    master = FakeMaster(sched, Capture("join-subscribe"))
    stamps = []

    def one_by_one(session):
        for sent in range(1, 21):
            stamps.append(time.time())
            session.send(restamp(master.capture.heartbeat(), stamps[-1]))
            master.wait(lambda: len(session.acks) >= sent, what=f"ACK {sent}")
        sched.sleep(10)
    master.subscribe_stream = one_by_one

    def body_():
        box, applier = joined_replica(sched, tmp_path, master)
        applier.applier_resume()
        session = master.wait(lambda: master.sessions and master.sessions[-1].subscribes
                              and master.sessions[-1], what="SUBSCRIBE")
        master.wait(lambda: len(session.acks) >= 20, what="20 ACKs")
        sched.sleep(0.1)
        applier.applier_stop()
        box.wal.stop()
        master.close()
        return session.acks, applier.lag

    acks, lag = run(sched, body_)
    assert acks == [{1: 14}] * 20
    # the lag is measured from the last heartbeat's TIMESTAMP (not the capture's,
    # hours old): at most the time since that heartbeat was stamped, however long
    # a loaded machine took
    assert 0 <= lag <= time.time() - stamps[-1]


def test_multi_row_transaction_is_applied_and_logged_as_one(sched, tmp_path):
    master = FakeMaster(sched, Capture("join-subscribe"))
    entries = []

    def body_():
        box, applier = joined_replica(sched, tmp_path, master)
        submit = box.submit_replicated
        box.submit_replicated = lambda rows, done: (entries.append([r.lsn for r in rows]),
                                                    submit(rows, done))
        applier.applier_resume()
        master.wait(lambda: box.replicaset.vclock == {1: 23}, what="vclock {1: 23}")
        applier.applier_stop()
        box.wal.stop()
        master.close()

    run(sched, body_)
    assert entries == [[15], [16], [17], [18], [19, 20, 21], [22], [23]]


def test_connection_to_self_turns_the_applier_off(sched):
    master = FakeMaster(sched, Capture("join-subscribe"))
    box = new_box(sched, uuid=MASTER_UUID)
    applier = Applier(sched, box, master.uri)
    states = []
    applier.on_state.add(lambda a: states.append(a.state))

    def body_():
        applier.applier_start()
        master.wait(lambda: applier.reader.status == "dead", what="the reader to end")
        master.close()

    run(sched, body_)
    assert states == [S.CONNECT, S.CONNECTED, S.OFF]
    assert applier.diag.code == 117 and str(applier.diag) == "Connection to self"
    assert [r.type for r in master.requests(IprotoType.AUTH)] == []
    assert len(master.sessions) == 1


def test_stop_while_paused_and_while_reconnecting(sched):
    master = FakeMaster(sched, Capture("join-subscribe"))
    box = new_box(sched)

    def body_():
        paused = Applier(sched, box, master.uri)
        paused.applier_start()
        paused.applier_resume_to_state(S.CONNECTED)
        paused.applier_stop()
        assert paused.state == S.OFF and paused.reader is None
        port = master.port
        master.close()
        dead = Applier(sched, box, f"127.0.0.1:{port}")
        dead.applier_start()
        wait_state(dead, S.DISCONNECTED)
        assert "connect" in str(dead.diag) and dead.diag.errno == 111
        dead.applier_stop()
        assert dead.state == S.OFF
        with_timeout = Applier(sched, box, f"127.0.0.1:{port}")
        with_timeout.applier_start()
        try:
            with_timeout.applier_resume_to_state(S.READY, timeout=0.3)
        except Exception as exc:      # noqa: BLE001
            return type(exc).__name__, with_timeout
        finally:
            with_timeout.applier_stop()

    name, applier = run(sched, body_)
    assert name == "TimedOut"
    assert applier.state == S.OFF


# ------------------------------------------------------------------ anonymous replicas

def test_anonymous_fetch_snapshot_then_register(sched, tmp_path):
    anon_uuid = "33333333-3333-4333-8333-333333333333"
    fetch = FakeMaster(sched, Capture("anon-fetch-register", 1))
    register = FakeMaster(sched, Capture("anon-fetch-register", 2))
    box = new_box(sched, uuid=anon_uuid, replication_anon=True)
    states = []

    def body_():
        applier = Applier(sched, box, fetch.uri)
        applier.on_state.add(lambda a: states.append(a.state))
        applier.applier_start()
        applier.applier_resume_to_state(S.CONNECTED)
        applier.applier_resume_to_state(S.READY)
        applier.applier_resume_to_state(S.FETCH_SNAPSHOT)
        applier.applier_resume_to_state(S.FETCHED_SNAPSHOT)
        applier.applier_resume_to_state(S.READY)
        assert box.instance_id == 0 and box.replicaset.vclock == {1: 26}
        start_wal(box, tmp_path)
        applier.applier_resume()
        fetch.wait(lambda: box.replicaset.vclock == {1: 27}, what="vclock {1: 27}")
        applier.applier_stop()
        states.append("-")
        # replication_anon = false: a new applier registers (the instance is orphan
        # meanwhile, so its SUBSCRIBE has no ID_FILTER)
        box.cfg["replication_anon"] = False
        box.status = "orphan"
        applier = Applier(sched, box, register.uri)
        applier.on_state.add(lambda a: states.append(a.state))
        applier.applier_start()
        applier.applier_resume_to_state(S.CONNECTED)
        applier.applier_resume_to_state(S.REGISTERED)
        applier.applier_resume_to_state(S.READY)
        assert box.instance_id == 3
        applier.applier_resume()
        wait_state(applier, S.FOLLOW)
        register.wait(lambda: box.replicaset.vclock == {1: 28}, what="vclock {1: 28}")
        applier.applier_stop()
        box.wal.stop()
        fetch.close()
        register.close()

    run(sched, body_)
    assert states == [S.CONNECT, S.CONNECTED, S.AUTH, S.READY, S.FETCH_SNAPSHOT,
                      S.FETCHED_SNAPSHOT, S.READY, S.SYNC, S.FOLLOW, S.OFF, "-",
                      S.CONNECT, S.CONNECTED, S.AUTH, S.READY, S.REGISTER, S.REGISTERED,
                      S.READY, S.SYNC, S.FOLLOW, S.OFF]
    assert select(box, 512)[-1] == [30, "to-anon"]
    anon_subscribe = body(fetch.requests(IprotoType.SUBSCRIBE)[0])
    assert anon_subscribe[IprotoKey.REPLICA_ANON] is True
    assert anon_subscribe[IprotoKey.ID_FILTER] == [0]
    assert anon_subscribe[IprotoKey.VCLOCK] == {1: 26}
    reg = body(register.requests(IprotoType.REGISTER)[0])
    assert reg == {IprotoKey.INSTANCE_UUID: anon_uuid, IprotoKey.VCLOCK: {1: 27}}
    normal_subscribe = body(register.requests(IprotoType.SUBSCRIBE)[0])
    assert normal_subscribe[IprotoKey.REPLICA_ANON] is False
    assert normal_subscribe[IprotoKey.VCLOCK] == {1: 28}
    assert IprotoKey.ID_FILTER not in normal_subscribe
    assert box.schema.cluster[3] == anon_uuid
    assert [(r.replica_id, r.lsn) for r in wal_rows(tmp_path)] == [(1, 27), (1, 28)]
