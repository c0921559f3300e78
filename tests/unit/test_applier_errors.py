"""The applier when things go wrong: broken streams reconnect and resubscribe (where
2.6.0 stops for good), error replies land in the states of iproto.md §9, a silent
master is dropped after 4 x replication_timeout, conflicts, WAL failures, a JOIN
broken half way."""
from __future__ import annotations

import errno
import os

import pytest

from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.iproto.errors import ErrorCode
from spindle.core.iproto.replication import encode_subscribe_response
from spindle.core.iproto.xrow import XRow
from spindle.core.replication.applier import Applier, TxAssembler
from spindle.core.replication.apply import StreamError
from spindle.core.replication import streams
from spindle.core.replication.replica import ApplierState as S
from spindle.core.vclock import VClock
from spindle.core.wal.wal_dir import WalIO
from spindle.core.xlog.format import EOF_MARKER_BYTES

from .applier_fake_master import (
    CLUSTER_UUID, Capture, FakeMaster, body, bootstrap, error_frame, new_box, real_sched,
    restamp, row_frame, run, select, start_wal, wait_state, wal_rows,
)

sched = real_sched
FULL_512 = [[1, "a1"], [3, "c"], [10, "x"], [11, "y"]]


def joined(sched, tmp_path, master, io=None, **cfg):
    box = new_box(sched, **cfg)
    applier = Applier(sched, box, master.uri)
    applier.applier_start()
    applier.applier_resume_to_state(S.CONNECTED)
    bootstrap(applier)
    start_wal(box, tmp_path, io)
    return box, applier


def record_states(applier, box=None, at=None):
    """States in order; with `at`, the rows of space 512 when that state came."""
    seen = {"states": [], "rows_at": []}

    def on_state(a):
        seen["states"].append(a.state)
        if a.state == at:
            seen["rows_at"].append(select(box, 512))
    applier.on_state.add(on_state)
    return seen


def finish(box, applier, *masters):
    applier.applier_stop()
    if box.wal is not None:
        box.wal.stop()
    for master in masters:
        master.close()


# ------------------------------------------------------------------ broken streams

GARBAGE = {
    "bad header": b"\xce\x00\x00\x00\x04\x81\x00\xc1\x02",
    "bad length prefix": b"\xc1\x00\x00\x00\x00",
    "truncated frame": "truncated",
    "interleaved transactions": "interleaved",
    "undecodable body": "bad body",
    "replica id above 31": "replica 40",
    # rows 21 and 22 never come (a relay that lost them): LSN 23 must not be applied
    # over the hole, however well it ends the open transaction
    "a gap in the LSNs": "gap",
}


def garbage_frames(kind: str, capture: Capture) -> list[bytes]:
    value = GARBAGE[kind]
    if isinstance(value, bytes):
        return [value]
    if value == "truncated":
        return [restamp(capture.stream_frames()[6])[:20], "close"]
    if value == "interleaved":
        # the next LSN, but a transaction of its own while 19..21 is open
        return [row_frame(IprotoType.INSERT, 21, tuple=[99, "z"], tsn=21, commit=True)]
    if value == "gap":
        return [row_frame(IprotoType.INSERT, 23, tuple=[99, "z"], tsn=19, commit=True)]
    if value == "bad body":
        row = XRow(type=IprotoType.UPDATE, replica_id=1, lsn=21, tsn=19, is_commit=True,
                   timestamp=1.0, body=b"\x92\x01\x02")
        return [row.encode_frame()]
    return [row_frame(IprotoType.INSERT, 22, tuple=[99, "z"], replica_id=40)]


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_broken_stream_reconnects_and_resubscribes_without_partial_data(sched, tmp_path,
                                                                       kind):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    stream = capture.stream_frames()

    def first_then_default(session):
        if session.subscribes and master.requests(IprotoType.SUBSCRIBE).__len__() > 1:
            return master.default_stream(session)
        session.send(restamp(capture.heartbeat()))
        for frame in stream[:6]:             # LSN 15..18, then 19 and 20 of 19..21
            session.send(restamp(frame))
        for frame in garbage_frames(kind, capture):
            if frame == "close":
                session.close()
                return
            session.send(frame)
        sched.sleep(10)

    master.subscribe_stream = first_then_default

    def body_():
        box, applier = joined(sched, tmp_path, master)
        seen = record_states(applier, box, at=S.DISCONNECTED)
        applier.applier_resume()
        wait_state(applier, S.DISCONNECTED)
        diag = applier.diag
        master.wait(lambda: box.replicaset.vclock == {1: 23}, what="vclock {1: 23}")
        wait_state(applier, S.FOLLOW)
        finish(box, applier, master)
        return box, seen, diag

    box, seen, diag = run(sched, body_)
    assert seen["states"][:3] == [S.SYNC, S.FOLLOW, S.DISCONNECTED] or \
        seen["states"][:2] == [S.SYNC, S.DISCONNECTED]
    # the half-received transaction 19..21 was not applied when the stream broke
    assert seen["rows_at"][0] == [[1, "aa"], [3, "c"]]
    assert [body(r)[IprotoKey.VCLOCK] for r in master.requests(IprotoType.SUBSCRIBE)] == \
        [{1: 14}, {1: 18}]
    assert select(box, 512) == FULL_512
    assert [r.lsn for r in wal_rows(tmp_path)] == list(range(15, 24))
    assert diag is not None
    if kind == "replica id above 31":
        assert diag.code == ErrorCode.ER_UNKNOWN_REPLICA
    elif kind == "interleaved transactions":
        assert str(diag) == "replication does not support interleaving transactions"
    elif kind == "truncated frame":
        assert "unexpected EOF" in str(diag)
    elif kind == "a gap in the LSNs":
        assert diag.code == ErrorCode.ER_PROTOCOL and str(diag) == \
            "Missing rows of instance 1 in the stream: LSN 20 is followed by LSN 23"
    else:
        assert diag.code == ErrorCode.ER_INVALID_MSGPACK


def test_silent_master_is_dropped_after_four_timeouts(sched, tmp_path, monkeypatch):
    """The stream read that gives up on a silent master waits 4 x replication_timeout
    (0.1 s): the timeout it is given is checked, not the wall time a busy machine
    stretches."""
    master = FakeMaster(sched, Capture("join-subscribe"))
    master.subscribe_stream = lambda session: sched.sleep(10)
    given = []
    read_stream_row = streams.Connection.read_stream_row

    def recorded(self, timeout):
        given.append(timeout)
        return read_stream_row(self, timeout)
    monkeypatch.setattr(streams.Connection, "read_stream_row", recorded)

    def body_():
        box, applier = joined(sched, tmp_path, master)
        applier.applier_resume()
        wait_state(applier, S.SYNC)
        wait_state(applier, S.DISCONNECTED)
        diag = applier.diag
        master.wait(lambda: len(master.requests(IprotoType.SUBSCRIBE)) == 2,
                    what="a second SUBSCRIBE")
        finish(box, applier, master)
        return diag

    diag = run(sched, body_)
    assert diag.type == "TimedOut"
    assert given and all(timeout == pytest.approx(4 * 0.1) for timeout in given), given


# ------------------------------------------------------------------ error replies

def fail_once(master, rtype, frame):
    """The master answers the first `rtype` request with `frame`, later ones normally."""
    normal = master.handlers[rtype]
    calls = []

    def handler(session, row):
        calls.append(row)
        if len(calls) == 1:
            session.send(frame)
            return "close" if rtype != IprotoType.VOTE else None
        return normal(session, row)
    master.handlers[rtype] = handler


ERROR_REPLIES = [
    # request, error, state it leaves the applier in
    (IprotoType.JOIN, (ErrorCode.ER_LOADING,), S.LOADING),
    (IprotoType.AUTH, (ErrorCode.ER_PASSWORD_MISMATCH, "repl"), S.LOADING),
    (IprotoType.AUTH, (ErrorCode.ER_NO_SUCH_USER, "repl"), S.LOADING),
    (IprotoType.JOIN, (ErrorCode.ER_ACCESS_DENIED, "Read", "universe", "", "repl"), S.LOADING),
    (IprotoType.JOIN, (ErrorCode.ER_SYNC_ROLLBACK,), S.LOADING),
    (IprotoType.JOIN, (ErrorCode.ER_SYNC_QUORUM_TIMEOUT,), S.LOADING),
    (IprotoType.SUBSCRIBE, (ErrorCode.ER_CFG, "replication", "duplicate connection with "
                            "the same replica UUID"), S.LOADING),
    (IprotoType.JOIN, (ErrorCode.ER_SYSTEM, "Broken pipe"), S.DISCONNECTED),
    (IprotoType.JOIN, (ErrorCode.ER_READONLY,), S.STOPPED),
    (IprotoType.SUBSCRIBE, (ErrorCode.ER_UNKNOWN_REPLICA, "x", "y"), S.STOPPED),
]


@pytest.mark.parametrize("rtype,error,state", ERROR_REPLIES,
                         ids=lambda v: getattr(v, "name", None) or
                         (ErrorCode(v[0]).name if isinstance(v, tuple) else str(v)))
def test_error_replies_map_to_the_states_of_2_6_0(sched, rtype, error, state):
    master = FakeMaster(sched, Capture("join-subscribe"))
    fail_once(master, rtype, error_frame(*error))
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)
    seen = record_states(applier)

    def body_():
        applier.applier_start()
        master.wait(lambda: state in seen["states"], what=str(state))
        diag = applier.diag
        if state == S.STOPPED:
            master.wait(lambda: applier.reader.status == "dead", what="the reader to end")
            sched.sleep(0.3)
            assert len(master.sessions) == 1          # stopped: no retry
            applier.restart()                         # until asked to
        wait_state(applier, S.FOLLOW)
        finish(box, applier, master)
        return diag

    diag = run(sched, body_)
    assert diag.code == error[0]
    assert len(master.sessions) == 2
    assert select(box, 512) == FULL_512


def test_vote_refused_by_an_old_master_is_tolerated(sched):
    master = FakeMaster(sched, Capture("join-subscribe"))
    fail_once(master, IprotoType.VOTE, error_frame(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, 68))
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)

    def body_():
        applier.applier_start()
        wait_state(applier, S.FOLLOW)
        finish(box, applier, master)

    run(sched, body_)
    assert applier.ballot is None and len(master.sessions) == 1


def test_replicaset_uuid_mismatch_stops(sched, tmp_path):
    master = FakeMaster(sched, Capture("join-subscribe"))
    other = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
    reply = encode_subscribe_response(1, VClock({1: 14}), other).encode_frame()
    normal = master.handlers[IprotoType.SUBSCRIBE]
    master.handlers[IprotoType.SUBSCRIBE] = lambda s, r: (s.send(reply), s.close()) \
        if len(master.requests(IprotoType.SUBSCRIBE)) == 1 else normal(s, r)

    def body_():
        box, applier = joined(sched, tmp_path, master)
        applier.applier_resume()
        master.wait(lambda: applier.reader.status == "dead", what="the reader to end")
        state, diag = applier.state, applier.diag
        finish(box, applier, master)
        return state, diag

    state, diag = run(sched, body_)
    assert state == S.STOPPED
    assert str(diag) == f"Replica set UUID mismatch: expected {other}, got {CLUSTER_UUID}"


# ------------------------------------------------------------------ applying

@pytest.mark.parametrize("skip", [False, True])
def test_duplicate_key_stops_unless_replication_skip_conflict(sched, tmp_path, skip):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)

    def stream(session):
        session.send(row_frame(IprotoType.INSERT, 15, tuple=[1, "dup"]))
        session.send(row_frame(IprotoType.REPLACE, 16, tuple=[5, "e"]))
        master.heartbeats(session)
    master.subscribe_stream = stream

    def body_():
        box, applier = joined(sched, tmp_path, master, replication_skip_conflict=skip)
        applier.applier_resume()
        if skip:
            master.wait(lambda: box.replicaset.vclock == {1: 16}, what="vclock {1: 16}")
        else:
            master.wait(lambda: applier.reader.status == "dead", what="the reader to end")
        state, diag = applier.state, applier.diag
        finish(box, applier, master)
        return box, state, diag

    box, state, diag = run(sched, body_)
    if skip:
        assert select(box, 512) == [[1, "a"], [2, "b"], [5, "e"]]
        assert [(r.lsn, r.type, r.body) for r in wal_rows(tmp_path)][0] == \
            (15, IprotoType.NOP, None)
        assert state != S.STOPPED
    else:
        assert state == S.STOPPED and diag.code == ErrorCode.ER_TUPLE_FOUND
        assert select(box, 512) == [[1, "a"], [2, "b"]]
        assert wal_rows(tmp_path) == []


class FailingIO(WalIO):
    def __init__(self):
        self.fail = False

    def write(self, fd, data):
        if self.fail and data != EOF_MARKER_BYTES:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().write(fd, data)


def test_failed_wal_write_rolls_back_and_resubscribes(sched, tmp_path):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    io = FailingIO()

    def body_():
        box, applier = joined(sched, tmp_path, master, io=io)
        seen = record_states(applier, box, at=S.DISCONNECTED)
        io.fail = True
        applier.applier_resume()
        wait_state(applier, S.DISCONNECTED)
        shared, diag = box.replicaset.applier.diag, applier.diag
        io.fail = False
        master.wait(lambda: box.replicaset.vclock == {1: 23}, what="vclock {1: 23}")
        finish(box, applier, master)
        return box, seen, shared, diag

    box, seen, shared, diag = run(sched, body_)
    assert shared.code == ErrorCode.ER_WAL_IO and diag is shared
    assert seen["rows_at"][0] == [[1, "a"], [2, "b"]]      # the failed rows undone
    assert select(box, 512) == FULL_512
    assert [r.lsn for r in wal_rows(tmp_path)] == list(range(15, 24))


# ------------------------------------------------------------------ JOIN broken half way

def test_join_broken_half_way_is_retried_from_a_clean_engine(sched):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    stage = capture.stage_frames()

    def join(session, row):
        if len(master.requests(IprotoType.JOIN)) == 1:
            for frame in stage[:200]:
                session.send(frame)
            return "close"
        for frame in stage:
            session.send(frame)
    master.handlers[IprotoType.JOIN] = join
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)
    counted = []

    def count_rows(a):
        if a.state == S.DISCONNECTED:
            counted.append(total_rows(box))
    applier.on_state.add(count_rows)
    seen = record_states(applier)

    def body_():
        applier.applier_start()
        applier.applier_resume_to_state(S.CONNECTED)
        bootstrap(applier)
        finish(box, applier, master)

    run(sched, body_)
    assert counted == [0]
    assert seen["states"].count(S.INITIAL_JOIN) == 2
    assert seen["states"][-2:] == [S.READY, S.OFF]
    assert select(box, 512) == [[1, "a"], [2, "b"]]
    assert total_rows(box) == 525
    assert box.replicaset.vclock == {1: 14}


def total_rows(box) -> int:
    return sum(space.len() for space in box.engine.spaces.values() if space.primary)


# ------------------------------------------------------------------ transaction boundaries

def _row(lsn, tsn=None, commit=True, replica_id=1):
    return XRow(type=IprotoType.INSERT, replica_id=replica_id, lsn=lsn,
                tsn=lsn if tsn is None else tsn, is_commit=commit)


class _Box:
    class schema:
        replicaset_uuid = CLUSTER_UUID


def test_tx_assembler_groups_by_tsn_and_checks_boundaries():
    assembler = TxAssembler(_Box)
    assert [r.lsn for r in assembler.push(_row(5))] == [5]
    assert assembler.push(_row(6, 6, False)) is None
    assert assembler.push(_row(7, 6, False)) is None
    assert [r.lsn for r in assembler.push(_row(8, 6, True))] == [6, 7, 8]
    with pytest.raises(StreamError, match="Transaction id must be equal to LSN"):
        TxAssembler(_Box).push(_row(9, 8, False))
    half = TxAssembler(_Box)
    half.push(_row(10, 10, False))
    with pytest.raises(StreamError, match="interleaving transactions"):
        half.push(_row(11))
    with pytest.raises(StreamError, match=f"Replica 32 is not registered with replica set "
                                          f"{CLUSTER_UUID}"):
        TxAssembler(_Box).push(_row(1, replica_id=32))


# ------------------------------------------------------------------ NOPs and local triggers

def test_nop_rows_are_logged_and_move_the_vclock(sched, tmp_path):
    master = FakeMaster(sched, Capture("join-subscribe"))

    def stream(session):
        session.send(row_frame(IprotoType.NOP, 15))
        session.send(row_frame(IprotoType.REPLACE, 16, tuple=[7, "g"]))
        master.heartbeats(session)
    master.subscribe_stream = stream

    def body_():
        box, applier = joined(sched, tmp_path, master)
        applier.applier_resume()
        master.wait(lambda: box.replicaset.vclock == {1: 16}, what="vclock {1: 16}")
        finish(box, applier, master)

    run(sched, body_)
    assert [(r.replica_id, r.lsn, r.type) for r in wal_rows(tmp_path)] == \
        [(1, 15, IprotoType.NOP), (1, 16, IprotoType.REPLACE)]


@pytest.mark.parametrize("target", ["local", "global"])
def test_rows_of_replica_triggers(sched, tmp_path, target):
    """A replica's on_replace trigger that writes to an is_local space: its rows are
    logged after the master's, with the local component. Into a replicated space:
    refused (2.6.0: "Replication does not support distributed transactions")."""
    from spindle.core.box.index import IndexDef
    master = FakeMaster(sched, Capture("join-subscribe"))

    def stream(session):
        session.send(row_frame(IprotoType.REPLACE, 15, tuple=[7, "g"]))
        master.heartbeats(session)
    master.subscribe_stream = stream

    def body_():
        box, applier = joined(sched, tmp_path, master)
        flags = {"group_id": 1} if target == "local" else {}
        audit = box.engine.create_space(9000, "audit", flags=flags)
        audit.create_index(IndexDef(0, "pk"))
        box.engine.space(512).on_replace.add(
            lambda old, new, *_: audit.replace([new[0]]) if new else None)
        applier.applier_resume()
        if target == "local":
            master.wait(lambda: box.replicaset.vclock == {0: 1, 1: 15}, what="the rows")
        else:
            master.wait(lambda: applier.reader.status == "dead", what="the reader to end")
        state, diag = applier.state, applier.diag
        finish(box, applier, master)
        return box, state, diag

    box, state, diag = run(sched, body_)
    if target == "local":
        rows = wal_rows(tmp_path)
        assert [(r.replica_id, r.lsn, r.group_id) for r in rows] == [(1, 15, 0), (0, 1, 1)]
        assert select(box, 9000) == [[7]]
    else:
        assert state == S.STOPPED
        assert str(diag) == "Replication does not support distributed transactions"
        assert select(box, 512) == [[1, "a"], [2, "b"]] and select(box, 9000) == []
