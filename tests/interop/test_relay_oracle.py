"""A Spindle master and a real Tarantool 2.6.0 master answer the same replication
requests the same way: the `tarantool` connector's JOIN/SUBSCRIBE probe, and the
refusals (access, unknown replica, connection to self, read-only, not anonymous,
duplicate connection) with their codes and messages.

The `tarantool` connector 1.3.0 no longer has the `join()`/`subscribe()` methods of its
0.x series; `connector_join`/`connector_subscribe` below are those methods again, built
on the connector's own Request/Response classes and socket reader.
"""
from __future__ import annotations

import pytest
import tarantool
from tarantool.const import (
    IPROTO_CLUSTER_UUID, IPROTO_SERVER_UUID, IPROTO_VCLOCK, REQUEST_TYPE_ERROR,
    REQUEST_TYPE_JOIN, REQUEST_TYPE_OK, REQUEST_TYPE_SUBSCRIBE,
)
from tarantool.request import Request
from tarantool.response import Response

from ..integration.cluster import Cluster, Node
from ..integration.fake_replica import FakeReplica, frame_bytes

FAST = {"replication_timeout": 0.1}
SETUP = """
box.schema.user.create('noperm', {password = 'x', if_not_exists = true})
box.schema.space.create('test', {if_not_exists = true}):create_index('pk', {if_not_exists = true})
for i = 1, 10 do box.space.test:replace{i} end
"""
JOINER = "44444444-4444-4444-8444-444444444444"
FOLLOWER = "66666666-6666-4666-8666-666666666666"
STRANGER = "55555555-5555-4555-8555-555555555555"


class RequestJoin(Request):
    request_type = REQUEST_TYPE_JOIN

    def __init__(self, conn, server_uuid):
        super().__init__(conn)
        self._body = self._dumps({IPROTO_SERVER_UUID: server_uuid})


class RequestSubscribe(Request):
    request_type = REQUEST_TYPE_SUBSCRIBE

    def __init__(self, conn, cluster_uuid, server_uuid, vclock):
        super().__init__(conn)
        self._body = self._dumps({IPROTO_CLUSTER_UUID: cluster_uuid,
                                  IPROTO_SERVER_UUID: server_uuid,
                                  IPROTO_VCLOCK: vclock})


def connector_join(conn, server_uuid):
    """Connection.join() of tarantool-python 0.x: responses until the third OK."""
    request = RequestJoin(conn, server_uuid)
    conn._socket.sendall(bytes(request))
    oks = 0
    while True:
        resp = Response(conn, conn._read_response())
        yield request, resp
        if resp.code >= REQUEST_TYPE_ERROR:
            return
        if resp.code == REQUEST_TYPE_OK:
            oks += 1
            if oks == 3:
                return


def connector_subscribe(conn, cluster_uuid, server_uuid, vclock):
    """Connection.subscribe() of tarantool-python 0.x: responses forever."""
    request = RequestSubscribe(conn, cluster_uuid, server_uuid, vclock)
    conn._socket.sendall(bytes(request))
    while True:
        yield request, Response(conn, conn._read_response())


def collapsed(codes: list[int]) -> list[int]:
    out: list[int] = []
    for code in codes:
        if not out or out[-1] != code:
            out.append(code)
    return out


def connector_probe(node: Node) -> dict:
    conn = tarantool.Connection("127.0.0.1", node.port, user="rep", password="pw")
    try:
        responses = list(connector_join(conn, JOINER))
        syncs = {resp.sync for request, resp in responses}
        assert syncs == {responses[0][0].sync}
        codes = [resp.code for _, resp in responses]
        vclock = responses[-1][1].body[IPROTO_VCLOCK]
        cluster = node.eval("return box.info.cluster.uuid")
        stream = connector_subscribe(conn, cluster, JOINER, vclock)
        first = [next(stream)[1] for _ in range(2)]
        return {
            "join": collapsed(codes),
            "initial_rows": codes.count(2) > 100,
            "cluster_row": responses[-2][1].body[0x21][1],
            "subscribe": [resp.code for resp in first],
            "subscribe_keys": sorted(first[0].body),
            "heartbeat_body": first[1].body,
        }
    finally:
        conn.close()


@pytest.fixture
def masters(tmp_path):
    with Cluster(tmp_path) as cluster:
        nodes = {}
        for kind in ("spindle", "tarantool"):
            node = cluster.add(kind, kind, dict(FAST))
            node.start()
            node.eval(SETUP)
            nodes[kind] = node
        yield nodes


def test_the_connector_probe_sees_the_same_join_and_subscribe(masters):
    results = {kind: connector_probe(node) for kind, node in masters.items()}
    assert results["spindle"] == results["tarantool"]
    assert results["spindle"]["join"] == [0, 2, 0, 2, 0]
    assert results["spindle"]["cluster_row"] == JOINER
    assert results["spindle"]["subscribe"] == [0, 0]


def refusals(node: Node) -> list[tuple[str, int, str]]:
    own = node.info("uuid")
    cluster = node.eval("return box.info.cluster.uuid")
    out = []

    def record(label, frame):
        message = (frame.message or "").replace(own, "<master>").replace(cluster, "<cluster>")
        out.append((label, frame.code if frame.is_error else 0, message))

    with FakeReplica(node.port, "noperm", "x") as peer:
        peer.join(JOINER, sync=1)
        record("join noperm", peer.frame())
        peer.fetch_snapshot(sync=3)
        record("fetch_snapshot noperm", peer.frame())
        peer.register(JOINER, {}, sync=3)
        record("register noperm", peer.frame())
        peer.subscribe(cluster, JOINER, {}, sync=2)
        record("subscribe noperm", peer.frame())
    with FakeReplica(node.port, "rep", "pw") as peer:
        peer.join(own, sync=4)
        record("join self", peer.frame())
        peer.send_raw(frame_bytes({0: 65, 1: 5}))
        record("join without body", peer.frame())
        peer.subscribe(cluster, STRANGER, {}, sync=6)
        record("subscribe unknown", peer.frame())
    with FakeReplica(node.port, "rep", "pw") as peer:
        peer.subscribe(cluster, own, {}, sync=7)
        record("subscribe self", peer.frame())
    with FakeReplica(node.port, "rep", "pw") as peer:
        peer.join(FOLLOWER)
        peer.frames_until(lambda f: f.type == 0)
        peer.frames_until(lambda f: f.type == 0)
        vclock = peer.frames_until(lambda f: f.type == 0)[-1].vclock
        peer.subscribe(cluster, FOLLOWER, vclock)
        record("subscribe", peer.frame())
        with FakeReplica(node.port, "rep", "pw") as second:
            second.subscribe(cluster, FOLLOWER, vclock, sync=8)
            record("subscribe twice", second.frame())
        with FakeReplica(node.port, "rep", "pw") as third:
            third.register(FOLLOWER, vclock, sync=9)
            record("register registered", third.frame())
        with FakeReplica(node.port, "rep", "pw") as fourth:
            fourth.subscribe(cluster, FOLLOWER, vclock, anon=True, sync=10)
            record("anonymous subscribe of a following uuid", fourth.frame())
    node.eval("box.cfg{read_only = true}")
    with FakeReplica(node.port, "rep", "pw") as peer:
        peer.join(STRANGER, sync=11)
        record("join read-only", peer.frame())
        peer.register(STRANGER, {}, sync=12)
        record("register read-only", peer.frame())
    node.eval("box.cfg{read_only = false}")
    return out


def test_refusals_are_the_same_as_tarantool(masters):
    ours = refusals(masters["spindle"])
    theirs = refusals(masters["tarantool"])
    assert ours == theirs
    assert dict((label, code) for label, code, _ in ours) == {
        "join noperm": 42, "subscribe noperm": 42, "fetch_snapshot noperm": 42,
        "register noperm": 42,
        "join self": 117, "join without body": 20, "subscribe unknown": 62,
        "subscribe self": 117, "subscribe": 0, "subscribe twice": 59,
        "register registered": 207, "anonymous subscribe of a following uuid": 59,
        "join read-only": 7, "register read-only": 7,
    }
