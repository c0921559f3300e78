"""Replicated rows holding values 2.6.0 takes as they came — strings that are not
UTF-8, extensions whose payload it cannot read, unknown and negative extension types,
timestamps — are applied and logged byte for byte; a row holding a value no index can
order (a decimal 2.6.0 cannot read, where a 2.6.0 replica crashes) gives 2.6.0's later
error, rolls its whole transaction back and makes the applier reconnect, never stop
for good. The fake master is tests/unit/applier_fake_master.py; a real 2.6.0 master
is in tests/interop/test_bad_input_replication.py."""
from __future__ import annotations

import decimal

from spindle.core.iproto.msgpack import MsgpackRaw, packb, raw_ext
from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.iproto.errors import ErrorCode
from spindle.core.replication.applier import Applier
from spindle.core.replication.replica import ApplierState as S

from .applier_fake_master import (
    Capture, FakeMaster, body, bootstrap, new_box, real_sched, restamp, row_frame, run,
    select, start_wal, wait_state, wal_rows,
)

sched = real_sched
BAD = "\udcff\udcfe"                   # the str the bytes ff fe decode to
ODD_VALUES = [
    BAD, raw_ext(1, b""), raw_ext(1, b"\x00\x1a"), raw_ext(1, b"\x27\x1c"),
    raw_ext(2, b"\x01" * 15), raw_ext(3, b"zz"), raw_ext(42, b"abc"), raw_ext(-5, b"ab"),
    raw_ext(-1, b"\x00\x00\x00\x01"), raw_ext(-1, b"\x00" * 7 + b"\x01"),
    raw_ext(-1, b"\x01\x02\x03"),
    decimal.Decimal("1.5"),
]


def put(lsn: int, tup: list, **kwargs) -> bytes:
    return row_frame(IprotoType.REPLACE, lsn, tuple=MsgpackRaw(packb(tup)), **kwargs)


def joined(sched, tmp_path, master):
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)
    applier.applier_start()
    applier.applier_resume_to_state(S.CONNECTED)
    bootstrap(applier)
    start_wal(box, tmp_path)
    return box, applier


def finish(box, applier, master):
    applier.applier_stop()
    box.wal.stop()
    master.close()


def test_odd_values_are_applied_and_logged_as_they_came(sched, tmp_path):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    # (field 2 of space 512 is a string in the captured schema)
    sent = {100 + i: [100 + i, BAD, value, [value], {"k": value}]
            for i, value in enumerate(ODD_VALUES)}
    frames = [put(15 + i, tup) for i, tup in enumerate(sent.values())]
    last = 15 + len(ODD_VALUES) - 1

    def stream(session):
        session.send(restamp(capture.heartbeat()))
        for frame in frames:
            session.send(frame)
        master.heartbeats(session)
    master.subscribe_stream = stream

    def body_():
        box, applier = joined(sched, tmp_path, master)
        applier.applier_resume()
        master.wait(lambda: box.replicaset.vclock.get(1) == last, what="every row")
        wait_state(applier, S.FOLLOW)
        rows = select(box, 512)
        finish(box, applier, master)
        return rows

    rows = run(sched, body_)
    for row in rows:
        if row[0] in sent:
            assert packb(row) == packb(sent[row[0]])
    assert {row[0] for row in rows} >= set(sent)
    logged = [r for r in wal_rows(tmp_path) if r.lsn >= 15]
    assert [r.lsn for r in logged] == list(range(15, last + 1))
    for row, frame in zip(logged, frames):
        assert frame.endswith(row.body)           # the body as the master sent it


def test_a_value_no_index_can_order_reconnects_and_applies_nothing_of_its_transaction(
        sched, tmp_path):
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    good = put(15, [20, "ok", decimal.Decimal("1.5")])
    txn = [put(16, [21, "x", decimal.Decimal(2)], tsn=16, commit=False),
           put(17, [22, "bad", raw_ext(1, b"")], tsn=16, commit=True)]
    states = []

    def stream(session):
        session.send(restamp(capture.heartbeat()))
        vclock = body(session.requests[-1])[IprotoKey.VCLOCK]
        if vclock.get(1, 0) < 15:
            session.send(good)
        for frame in txn:
            session.send(frame)
        master.heartbeats(session)
    master.subscribe_stream = stream

    def body_():
        box, applier = joined(sched, tmp_path, master)
        applier.on_state.add(lambda a: states.append(a.state))
        # an index of this replica alone, over the field the bad value is in
        space = box.engine.space(512)
        space.create_index(IndexDef(1, "n", parts=[KeyPart(2, "number", is_nullable=True)],
                                    unique=False))
        applier.applier_resume()
        wait_state(applier, S.DISCONNECTED)
        diag = applier.diag
        rows_then = select(box, 512)
        master.wait(lambda: len(master.requests(IprotoType.SUBSCRIBE)) >= 3,
                    what="subscribing again, and again")
        assert applier.state != S.STOPPED and box.replicaset.vclock.get(1) == 15
        space.drop_index(1)                       # now the row can be applied
        master.wait(lambda: box.replicaset.vclock.get(1) == 17, what="the transaction")
        wait_state(applier, S.FOLLOW)
        rows = select(box, 512)
        finish(box, applier, master)
        return diag, rows_then, rows

    diag, rows_then, rows = run(sched, body_)
    assert diag.code == ErrorCode.ER_INVALID_MSGPACK
    assert str(diag) == "Invalid MsgPack - packet body"
    assert S.STOPPED not in states
    assert [20, "ok", decimal.Decimal("1.5")] in rows_then
    assert not any(row[0] in (21, 22) for row in rows_then)     # none of its transaction
    assert [21, "x", decimal.Decimal(2)] in rows and [22, "bad", raw_ext(1, b"")] in rows
    assert [r.lsn for r in wal_rows(tmp_path)] == [15, 16, 17]


def _joined_rows(count: int, bad_at: int) -> list[tuple[int, list]]:
    rows = [(600, [i, i]) for i in range(count)]
    rows[bad_at] = (600, [bad_at, raw_ext(1, b"")])      # no number index orders it
    return rows


def test_a_snapshot_row_no_index_can_order_retries_the_join_only_while_nothing_is_in(sched):
    """The first batch of an initial JOIN's rows refused: nothing of the stage is in,
    the stream is at fault, the JOIN is tried again (StreamError). A later batch
    refused: earlier ones are in and a retry would meet them, so the error stops
    the applier (and the bootstrap), as 2.6.0's does."""
    from spindle.core.replication.apply import SNAPSHOT_BATCH, SnapshotRows, StreamError
    from spindle.core.iproto.errors import ClientError

    def attempt(bad_at):
        box = new_box(sched)
        space = box.engine.create_space(600, "numbers")
        space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
        space.create_index(IndexDef(1, "n", parts=[KeyPart(1, "number")]))
        snapshot = SnapshotRows()
        snapshot.items = _joined_rows(2 * SNAPSHOT_BATCH, bad_at)
        try:
            snapshot.apply(box)
        except (StreamError, ClientError) as exc:
            return type(exc), space.len()
        return None, space.len()

    first = run(sched, lambda: attempt(SNAPSHOT_BATCH // 2))
    later = run(sched, lambda: attempt(SNAPSHOT_BATCH + 5))
    assert first == (StreamError, 0)
    assert later == (ClientError, SNAPSHOT_BATCH)
