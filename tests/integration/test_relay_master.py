"""The master side of replication in one process: a Spindle box listening on loopback,
fake replicas on raw sockets (fake_replica.py), and the relay's state read from the
box itself. JOIN, FETCH_SNAPSHOT, REGISTER and SUBSCRIBE frame by frame, the checks and
their errors, ACKs, heartbeats, lag, the GC consumer, and bad input from a replica.

The same sequences against real Tarantool, and real Tarantool replicas of a Spindle
master, are in tests/interop/test_relay_oracle.py and
tests/interop/test_replication_tarantool_replica.py.
"""
from __future__ import annotations

import socket
import uuid as uuid_module

import pytest

from spindle.core.replication import relay as relay_module
from spindle.core.wal.gc import gc_consumer_unregister

from .cluster import wait_for
from .fake_replica import INSERT, NOP, OK, FakeReplica, frame_bytes
from .test_box_executor_inproc import BoxThread

SETUP = """
box.cfg{replication_timeout = 0.1}
box.schema.user.create('rep', {password = 'pw'})
box.schema.user.grant('rep', 'replication')
box.schema.user.create('noperm', {password = 'x'})
local s = box.schema.space.create('test')
s:create_index('pk')
s:create_index('by_name', {parts = {2, 'string'}, unique = false})
box.schema.space.create('loc', {is_local = true}):create_index('pk')
box.schema.space.create('tmp', {temporary = true}):create_index('pk')
for i = 1, 5 do s:insert{i, 'v' .. i} end
box.space.loc:insert{1}
box.space.tmp:insert{1}
"""

REPLICA = "22222222-2222-4222-8222-222222222222"


@pytest.fixture
def master(tmp_path):
    with BoxThread(tmp_path) as node:
        node.call(node.instance.run_chunk, SETUP, "=setup")
        yield node


def lua(node, code: str):
    return node.call(node.instance.run_chunk, code, "=test")


def replica_of(node, uuid: str):
    return node.call(lambda: node.box.replicaset.replica_by_uuid(uuid))


def relay_info(node, uuid: str) -> dict:
    def info():
        replica = node.box.replicaset.replica_by_uuid(uuid)
        return replica.relay.info() if replica is not None and replica.relay else None
    return node.call(info)


def master_vclock(node) -> dict:
    return node.call(lambda: node.box.vclock.to_wire())


def joined(node, uuid: str = REPLICA) -> tuple[FakeReplica, dict]:
    """A fake replica that went through JOIN; returns it and its vclock."""
    peer = FakeReplica(node.port, "rep", "pw")
    peer.join(uuid)
    frames = peer.frames_until(lambda f: f.type == OK and f.vclock is not None)
    frames = peer.frames_until(lambda f: f.type == OK)          # stop vclock
    frames = peer.frames_until(lambda f: f.type == OK)          # end of JOIN
    return peer, frames[-1].vclock


def subscribed(node, uuid: str = REPLICA, **kwargs) -> FakeReplica:
    peer, vclock = joined(node, uuid)
    peer.subscribe(peer_cluster(node), uuid, vclock, **kwargs)
    response = peer.frame()
    assert response.type == OK and response.header.get(2) == 1, response
    return peer


def peer_cluster(node) -> str:
    return node.call(lambda: node.box.schema.replicaset_uuid)


# ------------------------------------------------------------------- JOIN

def test_join_sends_the_read_view_then_the_final_rows(master):
    before = master_vclock(master)
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.join(REPLICA, sync=7)
        start = peer.frame()
        assert (start.type, start.header, start.vclock) == (OK, {0: 0, 1: 7}, before)
        initial = peer.frames_until(lambda f: f.type == OK)
        stop = initial.pop()
        assert all(f.header == {0: INSERT, 1: 7} for f in initial)
        # SPACE_ID as a 5-byte uint, as 2.6.0 writes snapshot rows
        assert all(f.raw[5 + len(b"\x82\x00\x02\x01\x07"):][:3] == b"\x82\x10\xce"
                   for f in initial)
        data = [(f.body[0x10], f.body[0x21]) for f in initial]
        space_ids = [space for space, _ in data]
        assert space_ids == sorted(space_ids)
        test_id = master.call(lambda: master.box.engine.space("test").id)
        local_id = master.call(lambda: master.box.engine.space("loc").id)
        temp_id = master.call(lambda: master.box.engine.space("tmp").id)
        assert [t for s, t in data if s == test_id] == [[i, f"v{i}"] for i in range(1, 6)]
        assert local_id not in space_ids and temp_id not in space_ids
        assert (272, ["cluster", peer_cluster(master)]) in data
        # the new replica is in _cluster, written after the initial stage
        assert stop.vclock == {1: before[1] + 1}
        final = peer.frames_until(lambda f: f.type == OK)
        end = final.pop()
        [cluster_row] = final
        assert cluster_row.header[0] == INSERT and cluster_row.header[1] == 7
        assert (cluster_row.header[2], cluster_row.header[3]) == (1, before[1] + 1)
        assert cluster_row.body == {0x10: 320, 0x21: [2, REPLICA]}
        assert end.vclock == stop.vclock
        assert master.call(lambda: master.box.schema.replica_id_by_uuid(REPLICA)) == 2
        # the consumer is at the stop vclock, component 0 (local rows) included
        full = master.call(lambda: master.box.vclock)
        assert full.to_wire() == stop.vclock and full.get(0) > 0
        consumers = master.call(lambda: master.box.gc.info()["consumers"])
        assert consumers == [{"name": f"replica {REPLICA}", "vclock": full.to_dict(),
                              "signature": full.signature}]


def test_join_checks_and_errors_in_2_6_0_order(master):
    own = master.call(lambda: master.box.instance_uuid)
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.join(own, sync=3)
        error = peer.frame()
        assert (error.code, error.message, error.header[1]) == (117, "Connection to self", 3)
        # the connection goes on serving
        peer.join(own, sync=4)
        assert peer.frame().code == 117
    with FakeReplica(master.port, "noperm", "x") as peer:
        peer.join(REPLICA, sync=5)
        error = peer.frame()
        assert (error.code, error.message) == (
            42, "Read access to universe '' is denied for user 'noperm'")
        peer.subscribe(peer_cluster(master), REPLICA, {})
        error = peer.frame()
        assert (error.code, error.message) == (
            42, "Read access to universe '' is denied for user 'noperm'")
    with FakeReplica(master.port) as guest:
        guest.join(REPLICA)
        assert guest.frame().message == "Read access to universe '' is denied for user 'guest'"
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.send_raw(frame_bytes({0: 65, 1: 9}))            # JOIN without a body
        error = peer.frame()
        assert (error.code, error.message) == (20, "Invalid MsgPack - request body")
    lua(master, "box.cfg{read_only = true}")
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.join(REPLICA)
        assert peer.frame().code == 7
        peer.register(REPLICA, {})
        assert peer.frame().code == 7
    assert master.call(lambda: master.box.gc.info()["consumers"]) == []


def test_subscribe_checks(master):
    cluster = peer_cluster(master)
    with FakeReplica(master.port, "rep", "pw") as peer:
        unknown = "55555555-5555-4555-8555-555555555555"
        peer.subscribe(cluster, unknown, {}, sync=11)
        error = peer.frame()
        assert (error.code, error.header[1]) == (62, 11)
        assert error.message == f"Replica {unknown} is not registered with replica set {cluster}"
        assert peer.eof_within(5)               # 2.6.0 closes after any SUBSCRIBE
    with FakeReplica(master.port, "rep", "pw") as peer:
        own = master.call(lambda: master.box.instance_uuid)
        peer.subscribe(cluster, own, {})
        assert peer.frame().code == 117


# -------------------------------------------------------------- SUBSCRIBE

def test_subscribe_streams_rows_heartbeats_and_reads_acks(master):
    peer = subscribed(master)
    try:
        first = peer.frame()
        assert first.is_heartbeat and first.header[2] == 1 and first.header[4] > 0
        info = relay_info(master, REPLICA)
        assert info["status"] == "follow"
        # single-statement, multi-statement with a local-space row, a temporary one
        lua(master, "box.space.test:insert{10, 'x'}")
        lua(master, "box.begin() box.space.test:insert{11, 'y'} box.space.loc:insert{2} "
                    "box.space.test:update({1}, {{'=', 2, 'z'}}) box.commit()")
        lua(master, "box.space.tmp:insert{2} box.space.loc:insert{3}")
        lua(master, "box.begin() box.space.test:insert{12, 'w'} box.space.loc:insert{4} "
                    "box.commit()")
        lsn = master_vclock(master)[1]
        rows = [f for f in peer.frames_until(lambda f: f.header.get(3) == lsn)
                if not f.is_heartbeat]
        # (2.6.0 closes a transaction whose last row is local with a NOP)
        assert [(f.header[0], f.header[3]) for f in rows] == [
            (INSERT, lsn - 4), (INSERT, lsn - 3), (4, lsn - 2), (INSERT, lsn - 1),
            (NOP, lsn)]
        assert 8 not in rows[0].header and 9 not in rows[0].header
        assert (rows[1].header[8], rows[2].header[8], rows[2].header[9]) == (0, 1, 1)
        assert (rows[3].header[8], rows[4].header[8], rows[4].header[9]) == (0, 1, 1)
        assert rows[4].body is None
        assert all(f.header[2] == 1 and f.header[4] > 0 for f in rows)
        assert rows[0].body == {0x10: 512, 0x21: [10, "x"]}
        # ACKs: the relay's vclock, then the lag goes back to 0 once idle
        peer.ack({1: lsn})
        wait_for(lambda: relay_info(master, REPLICA)["vclock"] == {1: lsn}, 5, "the ACK")
        assert relay_info(master, REPLICA)["lag"] >= 0
        peer.frames_until(lambda f: f.is_heartbeat)
        peer.ack({1: lsn})
        wait_for(lambda: relay_info(master, REPLICA)["lag"] == 0, 5, "lag 0 when idle")
        # heartbeats keep coming while idle, and nothing else (their period, and the
        # idle time each one starts over, are checked on a fake clock in
        # tests/unit/test_relay_coalesce.py: a loaded machine stretches real ones)
        beats = [peer.frames_until(lambda f: f.is_heartbeat) for _ in range(3)]
        assert all(len(frames) == 1 for frames in beats), beats
        assert relay_info(master, REPLICA)["idle"] >= 0
    finally:
        peer.close()


def test_on_relay_ack_hooks_see_every_ack(master):
    seen = []
    master.call(lambda: master.box.replicaset.on_relay_ack.append(
        lambda replica, vclock: seen.append((replica.uuid, vclock.to_wire()))))
    peer = subscribed(master)
    try:
        peer.ack({1: 3})
        wait_for(lambda: (REPLICA, {1: 3}) in seen, 5, "the hook")
    finally:
        peer.close()


def test_a_second_subscribe_of_a_following_replica_is_refused(master):
    peer = subscribed(master)
    try:
        with FakeReplica(master.port, "rep", "pw") as second:
            second.subscribe(peer_cluster(master), REPLICA, {})
            error = second.frame()
            assert (error.code, error.message) == (
                59, "Incorrect value for option 'replication': duplicate connection "
                    "with the same replica UUID")
        assert relay_info(master, REPLICA)["status"] == "follow"
    finally:
        peer.close()


def test_id_filter_skips_the_listed_instances(master):
    peer = subscribed(master, id_filter=[1])
    try:
        lua(master, "box.space.test:insert{20, 'filtered'}")
        assert peer.follow(0.5, {}) == []
        assert relay_info(master, REPLICA)["status"] == "follow"
    finally:
        peer.close()


def small_tail(node, rows: int = 3) -> None:
    """Make the in-memory WAL tail tiny, so relays read the xlog files."""
    from spindle.core.replication.wal_tail import wal_tail_of

    def shrink():
        tail = wal_tail_of(node.box.wal, node.sched)
        tail.max_rows = rows
    node.call(shrink)


def test_resubscribe_from_files_after_rotation_and_a_gap_after_gc(master):
    peer, vclock = joined(master)
    peer.close()
    small_tail(master)
    lua(master, "for i = 30, 39 do box.space.test:insert{i, 'a'} end box.snapshot()")
    lua(master, "for i = 40, 44 do box.space.test:insert{i, 'b'} end box.snapshot()")
    lua(master, "box.space.test:insert{45, 'c'}")
    # The consumer kept the files the replica needs: it gets every row from its vclock.
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.subscribe(peer_cluster(master), REPLICA, vclock)
        assert peer.frame().type == OK
        last = master_vclock(master)[1]
        rows = [f for f in peer.frames_until(lambda f: f.header.get(3) == last)
                if not f.is_heartbeat]
        assert [f.header[3] for f in rows] == list(range(vclock[1] + 1, last + 1))
        relay = replica_of(master, REPLICA).relay
        assert master.call(lambda: relay.cursor.files_read) >= 3
        peer.ack({1: last})
    # Without a consumer the files go: an old vclock is a gap, told to the replica.
    wait_for(lambda: relay_info(master, REPLICA)["status"] == "stopped", 5, "stop")
    master.call(lambda: gc_consumer_unregister(
        master.box.gc, master.box.replicaset.replica_by_uuid(REPLICA).gc))
    lua(master, "box.space.test:insert{46, 'd'} box.snapshot()")
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.subscribe(peer_cluster(master), REPLICA, vclock)
        assert peer.frame().type == OK
        error = peer.frames_until(lambda f: f.is_error)[-1]
        # the replica's vclock with this instance's component 0, as 2.6.0 shows it
        assert error.message.startswith("Missing .xlog file between LSN ")
        assert f"{{0: 1, 1: {vclock[1]}}} and " in error.message
    info = relay_info(master, REPLICA)
    assert info["status"] == "stopped" and info["message"].startswith("Missing .xlog")


# ----------------------------------------------------------- bad replicas

def assert_master_serves(master):
    import tarantool
    conn = tarantool.Connection("127.0.0.1", master.port, user="rep", password="pw")
    try:
        assert conn.ping() is not None
    finally:
        conn.close()
    assert master.call(lambda: len(master.box.engine.space("test").select([]))) >= 5


@pytest.mark.parametrize("garbage, message", [
    (b"\xa5hello", "Invalid MsgPack - packet length"),
    (frame_bytes({0: 0}, {0x26: "not a vclock"}), "Invalid MsgPack - invalid vclock"),
    (frame_bytes({0: 0}, [1, 2]), "Invalid MsgPack - packet body"),
    (frame_bytes({0: 0}), "Invalid MsgPack - packet body"),
    (frame_bytes({0: 0, 0x53: 1}, {0x26: {}}), "Invalid MsgPack - packet header"),
], ids=["length", "vclock-type", "body-type", "no-body", "header-key"])
def test_garbage_acks_stop_the_relay_and_nothing_else(master, garbage, message):
    before = master.call(lambda: master.box.engine.space("test").select([]))
    peer = subscribed(master)
    try:
        peer.send_raw(garbage)
        wait_for(lambda: relay_info(master, REPLICA)["status"] == "stopped", 5, "stop")
        info = relay_info(master, REPLICA)
        assert info["message"] == message
        assert peer.eof_within(5)
    finally:
        peer.close()
    assert_master_serves(master)
    assert master.call(lambda: master.box.engine.space("test").select([])) == before
    assert master.call(lambda: master.box.replicaset.replica_by_uuid(REPLICA).id) == 2
    # the replica may come back
    with FakeReplica(master.port, "rep", "pw") as again:
        again.subscribe(peer_cluster(master), REPLICA, master_vclock(master))
        assert again.frame().type == OK


def test_eof_in_the_middle_of_an_ack_is_an_unexpected_eof(master):
    peer = subscribed(master)
    local = peer.sock.getsockname()
    peer.send_raw(frame_bytes({0: 0}, {0x26: {1: 1}})[:7])
    peer.sock.shutdown(socket.SHUT_WR)
    wait_for(lambda: relay_info(master, REPLICA)["status"] == "stopped", 5, "stop")
    info = relay_info(master, REPLICA)
    assert info["message"].startswith("unexpected EOF when reading from socket, called on fd ")
    assert info["message"].endswith(f", aka 127.0.0.1:{master.port}, "
                                    f"peer of 127.0.0.1:{local[1]}")
    assert info["system_message"] == "Broken pipe"
    peer.close()
    assert_master_serves(master)


def test_a_silent_replica_is_dropped_after_four_timeouts(master, monkeypatch):
    # The read that timed out waited 4 x replication_timeout (the timeout it was
    # given, not the wall time the test saw, which a loaded machine stretches).
    given = []
    disconnect_timeout = relay_module.replication_disconnect_timeout

    def recorded(box):
        given.append(disconnect_timeout(box))
        return given[-1]
    monkeypatch.setattr(relay_module, "replication_disconnect_timeout", recorded)
    peer = subscribed(master)
    try:
        error = peer.frames_until(lambda f: f.is_error)[-1]
        assert given and all(timeout == pytest.approx(4 * 0.1) for timeout in given)
        assert peer.eof_within(5)
        info = relay_info(master, REPLICA)
        assert (info["status"], info["message"], info["system_message"]) == (
            "stopped", "timed out", "Connection timed out")
        # the replica is told, in the same words (tarantool#7465)
        assert error.message == info["message"]
    finally:
        peer.close()


def test_a_replica_that_stops_reading_is_dropped(master):
    peer = subscribed(master)
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    relay = replica_of(master, REPLICA).relay
    master.call(lambda: relay.stream.sock.sock.setsockopt(
        socket.SOL_SOCKET, socket.SO_SNDBUF, 4096))
    try:
        # a lot of data the replica never reads, and no ACK: the relay stops after
        # the disconnect timeout even though its writes block
        lua(master, "for i = 100, 3000 do box.space.test:insert{i, string.rep('x', 500)} end")
        wait_for(lambda: relay_info(master, REPLICA)["status"] == "stopped", 10, "stop")
        assert relay_info(master, REPLICA)["message"] == "timed out"
        assert master.call(lambda: relay.rows_sent) < 2901       # it was stuck writing
    finally:
        peer.close()
    assert_master_serves(master)


# ------------------------------------------------------------- anonymous

def test_fetch_snapshot_anonymous_subscribe_and_register(master):
    anon = "33333333-3333-4333-8333-333333333333"
    cluster = peer_cluster(master)
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.fetch_snapshot(sync=5)
        start = peer.frame()
        assert start.type == OK and start.header[1] == 5
        initial = peer.frames_until(lambda f: f.type == OK)
        end = initial.pop()
        assert end.vclock == start.vclock and all(f.type == INSERT for f in initial)
        # no final stage, no registration
        assert master.call(lambda: master.box.schema.replica_id_by_uuid(anon)) is None
        peer.subscribe(cluster, anon, end.vclock, anon=True, id_filter=[0])
        response = peer.frame()
        assert response.type == OK and response.body[0x25] == cluster
        assert peer.frame().is_heartbeat
        listed = master.call(lambda: [r.uuid for r in master.box.replicaset.anon_replicas()])
        assert listed == [anon]
        assert relay_info(master, anon)["status"] == "follow"
        assert master.call(lambda: master.box.gc.info()["consumers"]) == []
        lua(master, "box.space.test:insert{50, 'to-anon'}")
        row = peer.frames_until(lambda f: f.type == INSERT)[-1]
        assert row.body[0x21] == [50, "to-anon"]
        vclock = {1: row.header[3]}
        peer.ack(vclock)
    wait_for(lambda: master.call(lambda: master.box.replicaset.anon_replicas()) == [],
             5, "the anonymous replica to go")
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.register(anon, vclock, sync=8)
        frames = peer.frames_until(lambda f: f.type == OK)
        [cluster_row, end] = frames
        assert cluster_row.header[0] == INSERT and cluster_row.body[0x21] == [3, anon] \
            or cluster_row.body[0x21][1] == anon
        assert end.vclock == {1: cluster_row.header[3]} and end.header[1] == 8
        registered_id = cluster_row.body[0x21][0]
        assert master.call(lambda: master.box.schema.replica_id_by_uuid(anon)) == registered_id
        names = [c["name"] for c in master.call(lambda: master.box.gc.info()["consumers"])]
        assert names == [f"replica {anon}"]
        peer.subscribe(cluster, anon, end.vclock)
        assert peer.frame().type == OK
        assert relay_info(master, anon)["status"] == "follow"
        peer.register(anon, end.vclock)   # the connection is the relay's now: ignored
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.register(anon, {})
        error = peer.frame()
        assert (error.code, error.message) == (
            207, f"Replica '{anon}' is not anonymous and cannot register.")


def test_anonymous_subscribe_of_a_registered_uuid_serves_the_registered_replica(master):
    # what 2.6.0 does (later versions refuse): a downstream of replica 2, not anonymous
    peer, vclock = joined(master)
    peer.subscribe(peer_cluster(master), REPLICA, vclock, anon=True)
    try:
        assert peer.frame().type == OK
        assert relay_info(master, REPLICA)["status"] == "follow"
        assert master.call(lambda: master.box.replicaset.anon_replicas()) == []
    finally:
        peer.close()


def test_many_joins_take_the_lowest_free_ids(master):
    ids = []
    for _ in range(3):
        uuid = str(uuid_module.uuid4())
        peer, _ = joined(master, uuid)
        peer.close()
        ids.append(master.call(lambda uuid=uuid: master.box.schema.replica_id_by_uuid(uuid)))
    assert ids == [2, 3, 4]
    assert replica_of(master, uuid) is not None
    assert relay_info(master, uuid) is None          # JOIN alone makes no downstream


def test_a_full_replica_set_refuses_one_more_replica(master):
    # ids 2..31 taken: the 32nd instance cannot join (ER_REPLICA_MAX after the
    # initial stage, as 2.6.0 registers the replica only then)
    lua(master, "for id = 2, 31 do box.space._cluster:insert{id, "
                "string.format('00000000-0000-4000-8000-%012d', id)} end")
    with FakeReplica(master.port, "rep", "pw") as peer:
        peer.join(REPLICA, sync=3)
        frames = peer.frames_until(lambda f: f.is_error)
        assert frames[0].type == OK
        assert (frames[-1].code, frames[-1].message, frames[-1].header[1]) == (
            73, "Replica count limit reached: 32", 3)
    assert master.call(lambda: master.box.gc.info()["consumers"]) == []
    assert_master_serves(master)


def test_the_gc_consumer_moves_to_the_xlog_the_replica_reads(master):
    """box_info.md §4: the consumer stays at the JOIN's vclock while the replica reads
    the first xlog, and moves to the start of a later xlog once the replica has
    ACKed past it — so box.snapshot() can then delete the older files."""
    peer = subscribed(master)
    try:
        joined_at = master.call(lambda: master.box.gc.info()["consumers"][0]["signature"])
        lua(master, "box.space.test:insert{60, 'a'}")
        last = master_vclock(master)
        peer.frames_until(lambda f: f.header.get(3) == last[1])
        peer.ack(last)
        wait_for(lambda: relay_info(master, REPLICA)["vclock"] == last, 5, "the ACK")
        # still in the first xlog: the consumer does not move
        assert master.call(lambda: master.box.gc.info()["consumers"][0]["signature"]) \
            == joined_at
        lua(master, "box.snapshot() box.space.test:insert{61, 'b'}")
        rotated_at = master.call(lambda: master.box.wal.xlog_vclocks()[-1].signature)
        last = master_vclock(master)
        peer.frames_until(lambda f: f.header.get(3) == last[1])

        def consumer_moved():
            peer.ack(last)
            peer.frame(1)
            return master.call(
                lambda: master.box.gc.info()["consumers"][0]["signature"]) == rotated_at
        wait_for(consumer_moved, 5, "the consumer to move to the new xlog")
    finally:
        peer.close()


def test_deleting_a_replica_from_cluster_lets_its_xlogs_go(master):
    peer, _ = joined(master)
    peer.close()
    assert len(master.call(lambda: master.box.gc.info()["consumers"])) == 1
    lua(master, "box.space._cluster:delete{2}")
    assert master.call(lambda: master.box.gc.info()["consumers"]) == []
