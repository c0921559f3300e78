"""The META stage of an initial JOIN (2.7.3, 2.8.2+): the JOIN request with the
joiner's SERVER_VERSION, the rows a master sends between OK {vclock} and the
snapshot (JOIN_META 71, the Raft row, a PROMOTE with the limbo's state,
JOIN_SNAPSHOT 72) against the bytes 2.8.2's encoders make, malformed META rows,
and the applier reading and applying the stage from a fake master."""
from __future__ import annotations

import pytest

from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.replication import (
    JoinMeta, decode_join, decode_join_meta_row, encode_join, encode_join_meta,
)
from spindle.core.iproto.xrow import XRow
from spindle.core.raft.raft import RaftMsg
from spindle.core.replication.applier import OWN_VERSION_ID, Applier
from spindle.core.replication.replica import ApplierState as S

from .applier_fake_master import (
    Capture, FakeMaster, bootstrap, error_frame, frame_row, new_box, real_sched, run, select,
)

sched = real_sched
UUID = "11111111-1111-4111-8111-111111111111"


# ------------------------------------------------------------------ JOIN request

def test_join_carries_the_version_only_when_given():
    # 2.6.0 / 2.6.3: {INSTANCE_UUID}; 2.8.2 (xrow_encode_join): {INSTANCE_UUID, SERVER_VERSION}
    assert encode_join(UUID).body == b"\x81\x24\xd9\x24" + UUID.encode()
    assert encode_join(UUID, 0x020600).body == (b"\x82\x24\xd9\x24" + UUID.encode()
                                                + b"\x06\xce\x00\x02\x06\x00")
    assert decode_join(encode_join(UUID)).version_id == 0
    assert decode_join(encode_join(UUID, 0x020803)).version_id == 0x020803


@pytest.mark.parametrize("version", [True, -1, "2.8.2", 1.5, None])
def test_a_version_that_is_no_unsigned_integer_asks_for_no_meta(version):
    import msgpack
    row = XRow(type=IprotoType.JOIN, body=msgpack.packb({0x24: UUID, 0x06: version}))
    assert decode_join(row).version_id == 0


# ------------------------------------------------------------------ the META rows

def test_meta_rows_are_encoded_as_2_8_2_sends_them():
    rows = encode_join_meta(RaftMsg(term=5, vote=2), owner_id=2, lsn=7, term=4)
    frames = [row.encode(sync=9) for row in rows]
    assert frames == [
        b"\x82\x00\x47\x01\x09",                                  # JOIN_META, no body
        b"\x83\x00\x1e\x01\x09\x07\x01" + b"\x82\x00\x05\x01\x02",  # RAFT, GROUP_ID LOCAL
        # PROMOTE with REPLICA_ID = the owner in the header, as relay_initial_join sets it
        b"\x83\x00\x1f\x01\x09\x02\x02" + b"\x83\x02\x02\x03\x07\x53\x04",
        b"\x82\x00\x48\x01\x09",                                  # JOIN_SNAPSHOT
    ]


def test_meta_rows_decode_to_what_was_sent():
    meta = JoinMeta()
    rows = encode_join_meta(RaftMsg(term=5, vote=2), owner_id=2, lsn=7, term=4)
    assert [decode_join_meta_row(meta, row) for row in rows[1:]] == [False, False, True]
    assert (meta.raft.term, meta.raft.vote) == (5, 2)
    assert (meta.owner_id, meta.lsn, meta.term, meta.origin_id, meta.has_limbo) == \
        (2, 7, 4, 2, True)


def test_a_master_without_election_sends_term_1_and_an_empty_limbo():
    rows = encode_join_meta(RaftMsg(term=1), owner_id=0, lsn=0, term=0)
    assert rows[1].body == b"\x81\x00\x01"
    assert rows[2].replica_id == 0 and rows[2].body == b"\x83\x02\x00\x03\x00\x53\x00"


@pytest.mark.parametrize("row, code, message", [
    (XRow(type=IprotoType.PROMOTE, body=b"\x83\x02"), ErrorCode.ER_INVALID_MSGPACK,
     "Invalid MsgPack - request body"),
    (XRow(type=IprotoType.PROMOTE, body=b"\x93\x01\x02\x03"), ErrorCode.ER_INVALID_MSGPACK,
     "Invalid MsgPack - request body"),
    (XRow(type=IprotoType.PROMOTE), ErrorCode.ER_INVALID_MSGPACK,
     "Invalid MsgPack - request body"),
    (XRow(type=IprotoType.RAFT, group_id=GroupId.LOCAL, body=b"\x82\x00"),
     ErrorCode.ER_INVALID_MSGPACK, "Invalid MsgPack - raft body"),
    (XRow(type=IprotoType.RAFT, body=b"\x81\x00\x05"), ErrorCode.ER_INVALID_MSGPACK,
     "Invalid MsgPack - malformed raft request"),
    # the data stage's end or a snapshot row while META is not over
    (XRow(type=IprotoType.OK, body=b"\x81\x26\x80"), ErrorCode.ER_UNKNOWN_REQUEST_TYPE,
     "Unknown request type 0"),
    (XRow(type=IprotoType.INSERT, body=b"\x82\x10\x01\x21\x90"),
     ErrorCode.ER_UNKNOWN_REQUEST_TYPE, "Unknown request type 2"),
    (XRow(type=IprotoType.JOIN_META), ErrorCode.ER_UNKNOWN_REQUEST_TYPE,
     "Unknown request type 71"),
])
def test_malformed_meta_rows_are_refused(row, code, message):
    with pytest.raises(ClientError) as info:
        decode_join_meta_row(JoinMeta(), row)
    assert (info.value.code, info.value.message) == (code, message)


def test_an_error_row_in_meta_is_the_masters_error():
    row = frame_row(error_frame(ErrorCode.ER_READONLY))
    with pytest.raises(BoxError) as info:
        decode_join_meta_row(JoinMeta(), row)
    assert info.value.code == ErrorCode.ER_READONLY


# ------------------------------------------------------------------ the applier

def meta_frames(term=5, vote=2, owner=2, lsn=7, promote_term=4) -> list[bytes]:
    return [row.encode_frame(0) for row in encode_join_meta(
        RaftMsg(term=term, vote=vote), owner_id=owner, lsn=lsn, term=promote_term)]


def join_with(sched, answers):
    """A box joined from a fake master whose n-th JOIN is answered by
    answers[n](session, stage frames): the captured 2.6.0 JOIN stream, changed."""
    capture = Capture("join-subscribe")
    master = FakeMaster(sched, capture)
    stage = capture.stage_frames()

    def join(session, row):
        answer = answers[min(len(master.requests(IprotoType.JOIN)), len(answers)) - 1]
        frames = answer(stage)
        for frame in frames:
            session.send(frame)
        return "close" if frames is not stage and frames[-1] is not stage[-1] else None
    master.handlers[IprotoType.JOIN] = join
    box = new_box(sched)
    applier = Applier(sched, box, master.uri)
    states = []
    applier.on_state.add(lambda a: states.append(a.state))

    def body_():
        applier.applier_start()
        applier.applier_resume_to_state(S.CONNECTED)
        bootstrap(applier)
        applier.applier_stop()
        master.close()

    run(sched, body_)
    return box, master, states


def test_the_joiner_asks_for_meta_and_applies_it(sched):
    box, master, _ = join_with(sched, [lambda stage: stage[:1] + meta_frames() + stage[1:]])
    join = master.requests(IprotoType.JOIN)[0]
    assert decode_join(join).version_id == OWN_VERSION_ID
    # the term and vote as if recovered from a snapshot; the limbo's owner and term
    assert (box.raft.volatile_term, box.raft.term, box.raft.vote) == (5, 5, 2)
    assert (box.limbo.owner_id, box.limbo.promote_greatest_term,
            box.limbo.promote_term_map) == (2, 4, {2: 4})
    assert select(box, 512) == [[1, "a"], [2, "b"]]       # and the data as before
    assert box.replicaset.vclock == {1: 14}


def test_a_2_6_master_sends_no_meta_and_nothing_changes(sched):
    box, _, _ = join_with(sched, [lambda stage: stage])
    assert (box.raft.volatile_term, box.raft.vote) == (1, 0)
    assert (box.limbo.owner_id, box.limbo.promote_greatest_term) == (0, 0)
    assert select(box, 512) == [[1, "a"], [2, "b"]]


@pytest.mark.parametrize("broken", [
    pytest.param(lambda stage: stage[:1] + meta_frames()[:2], id="cut after the raft row"),
    pytest.param(lambda stage: stage[:1] + meta_frames()[:1] + [
        XRow(type=IprotoType.PROMOTE, body=b"\x83\x02").encode_frame()], id="garbage PROMOTE"),
    pytest.param(lambda stage: stage[:1] + meta_frames()[:3] + stage[1:2], id="no JOIN_SNAPSHOT"),
])
def test_a_broken_meta_stage_joins_again_from_scratch(sched, broken):
    box, master, states = join_with(sched, [
        broken, lambda stage: stage[:1] + meta_frames(term=6) + stage[1:]])
    assert len(master.requests(IprotoType.JOIN)) == 2
    assert states.count(S.INITIAL_JOIN) == 2 and S.STOPPED not in states
    assert box.raft.volatile_term == 6         # nothing of the broken attempt was applied
    assert select(box, 512) == [[1, "a"], [2, "b"]]
