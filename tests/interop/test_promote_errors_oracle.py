"""box.ctl.promote's own refusals, each played on a replica set of Spindles and on
one of Tarantool 2.6.3 (the release that has them), outputs compared:
ER_QUORUM_WAIT (the former owner's entry cannot reach its quorum in time),
ER_INTERFERING_PROMOTE (another instance's PROMOTE came while this one waited for
the former owner's CONFIRM) and ER_RAFT_DISABLED (election turned off while a
manual promote waited for a leader). Every wait is a condition with a deadline;
the promotes' own timeouts only decide which answer comes, never asserted on."""
from __future__ import annotations

from pathlib import Path

import pytest

from ..integration.cluster import Cluster, Node, wait_for
from ..integration.election import add_node

KINDS = ["spindle", "tarantool-2.6.3"]

SYNC_SPACE = "box.schema.space.create('sync', {is_sync = true}):create_index('pk')"
# a synchronous row whose quorum nobody gives: it stays in every limbo
PENDING_ROW = ("box.cfg{replication_synchro_quorum = 4} "
               "require('fiber').create(function() pcall(box.space.sync.insert, "
               "box.space.sync, {1}) end)")
PROMOTE = "local ok, err = pcall(box.ctl.promote) return {ok, tostring(err)}"


def _add(cluster: Cluster, kind: str, name: str, cfg: dict) -> Node:
    return add_node(cluster, kind, name, {"replication_timeout": 0.1, **cfg})


def _has_rows_of(node: Node, master_id: int, lsn: int) -> bool:
    return node.vclock().get(master_id, 0) >= lsn


def _pending_row_everywhere(master: Node, replicas: list[Node]) -> None:
    master.eval(SYNC_SPACE)
    master.eval(PENDING_ROW)
    master_id, lsn = master.info("id"), master.vclock()[master.info("id")]
    for node in replicas:
        wait_for(lambda: _has_rows_of(node, master_id, lsn), 60,
                 f"{node.name} to have the pending row")


def _quorum_wait(tmp_path: Path, kind: str) -> list:
    """A replica that has the killed master's pending row promotes itself with
    election off: after waiting for the master's CONFIRM it waits for a quorum
    of 2 that it alone cannot make (ER_QUORUM_WAIT); with quorum 1 the promote
    goes through and the row is confirmed."""
    with Cluster(tmp_path / kind) as cluster:
        master = _add(cluster, kind, "master", {}).start()
        replica = _add(cluster, kind, "replica", {
            "replication": [master.rep_uri], "replication_synchro_quorum": 2,
            "replication_synchro_timeout": 0.2}).start()
        _pending_row_everywhere(master, [replica])
        master.kill()
        failed = replica.eval(PROMOTE)
        pending = replica.eval("return box.space.sync:get{1} ~= nil")
        replica.eval("box.cfg{replication_synchro_quorum = 1}")
        promoted = replica.eval(PROMOTE)
        rows = replica.eval("return box.space.sync:select()")
        return [failed, pending, promoted, rows]


def _cancelled(tmp_path: Path, kind: str) -> list:
    """The same replica's promote, cancelled while it waits for the quorum (its
    wait for the master's CONFIRM took 2 x 0.1 s, the quorum wait may take 30 s):
    ER_QUORUM_WAIT "fiber is canceled", the row still pending."""
    with Cluster(tmp_path / kind) as cluster:
        master = _add(cluster, kind, "master", {}).start()
        replica = _add(cluster, kind, "replica", {
            "replication": [master.rep_uri], "replication_synchro_quorum": 2}).start()
        _pending_row_everywhere(master, [replica])
        master.kill()
        # the CONFIRM wait's deadline is taken before the fiber first yields,
        # the quorum wait's timeout after it
        replica.eval("local fiber = require('fiber') _G.result = nil "
                     "box.cfg{replication_synchro_timeout = 0.1} "
                     "_G.started = fiber.clock() "
                     "_G.promote = fiber.create(function() "
                     "_G.result = {pcall(box.ctl.promote)} end) "
                     "box.cfg{replication_synchro_timeout = 30}")
        wait_for(lambda: replica.eval("return require('fiber').clock() - _G.started > 0.5"),
                 60, "the wait for the CONFIRM to be over")
        replica.eval("_G.promote:cancel()")
        wait_for(lambda: replica.eval("return _G.result ~= nil"), 60, "the promote to end")
        return [replica.eval("return {_G.result[1], tostring(_G.result[2])}"),
                replica.eval("return box.space.sync:get{1} ~= nil")]


def _interfering(tmp_path: Path, kind: str) -> list:
    """Two replicas of a killed master both promote with election off. The
    first waits long for the master's CONFIRM; the second, waiting briefly,
    gets its quorum (both have the row) and writes its PROMOTE, which reaches
    the first while it still waits: ER_INTERFERING_PROMOTE naming the second. A
    second promote on the first meanwhile is refused (not re-entrant)."""
    with Cluster(tmp_path / kind) as cluster:
        master = _add(cluster, kind, "master", {}).start()
        first = _add(cluster, kind, "first", {"replication_synchro_timeout": 60})
        second = _add(cluster, kind, "second", {"replication_synchro_quorum": 2,
                                                "replication_synchro_timeout": 0.2})
        for node in (first, second):
            # both join the master; then each follows the other too (joining
            # with each other listed, one may take the other, still loading and
            # read-only, for its bootstrap leader: 2.6.3 then fails to start)
            node.cfg["replication"] = [master.rep_uri]
            node.start()
        first.eval("box.cfg{replication = {...}}", master.rep_uri, second.rep_uri)
        second.eval("box.cfg{replication = {...}}", master.rep_uri, first.rep_uri)
        for node, peer in ((first, second), (second, first)):
            wait_for(lambda: node.eval("return box.info.replication[...] ~= nil",
                                       peer.info("id")), 60, "every replica registered")
            wait_for(lambda: node.upstream_status(peer.info("id")) == "follow", 60,
                     f"{node.name} to follow {peer.name}")
        _pending_row_everywhere(master, [first, second])
        master.kill()
        first.eval("_G.result = nil require('fiber').create(function() "
                   "_G.result = {pcall(box.ctl.promote)} end)")
        again = first.eval(PROMOTE)             # while the first one waits
        promoted = second.eval(PROMOTE)
        wait_for(lambda: first.eval("return _G.result ~= nil"), 60,
                 "the first replica's promote to end")
        interfered = first.eval("return {_G.result[1], tostring(_G.result[2])}")
        second_id = second.info("id")
        return [again, promoted,
                [interfered[0], interfered[1].replace(str(second_id), "<second>")],
                first.eval("return box.space.sync:select()")]


def _raft_disabled(tmp_path: Path, kind: str) -> list:
    """A manual promote on a node that cannot win (its replica set has two
    members, the other one is gone: the election quorum is 2) waits for a
    leader; election turned off meanwhile ends it with ER_RAFT_DISABLED."""
    with Cluster(tmp_path / kind) as cluster:
        master = _add(cluster, kind, "master", {}).start()
        replica = _add(cluster, kind, "replica", {"replication": [master.rep_uri]}).start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 60, "the replica to follow")
        replica.stop()
        master.eval("box.cfg{replication_synchro_quorum = 2, election_mode = 'manual', "
                    "election_timeout = 0.2}")
        master.eval("_G.result = nil require('fiber').create(function() "
                    "_G.result = {pcall(box.ctl.promote)} end)")
        wait_for(lambda: master.eval("return box.info.election.state") == "candidate", 60,
                 "the manual promote to run an election")
        master.eval("box.cfg{election_mode = 'off'}")
        wait_for(lambda: master.eval("return _G.result ~= nil"), 60,
                 "the promote to end")
        return [master.eval("return {_G.result[1], tostring(_G.result[2])}"),
                master.eval("return box.info.election.state"), master.eval("return box.info.ro")]


@pytest.mark.parametrize("scenario, expected", [
    (_quorum_wait, [[False, "Couldn't wait for quorum 2: timeout after 0.20 seconds, "
                            "collected 1 acks"], True, [True, "nil"], [[1]]]),
    (_cancelled, [[False, "Couldn't wait for quorum 2: fiber is canceled"], True]),
    (_interfering, [[False, "box.ctl.promote does not support simultaneous invocations"],
                    [True, "nil"],
                    [False, "Instance with replica id <second> was promoted first"], [[1]]]),
    (_raft_disabled, [[False, "Elections were turned off while running box.ctl.promote()"],
                      "follower", False]),
], ids=["quorum-wait", "cancelled", "interfering-promote", "raft-disabled"])
def test_promote_refusals_as_2_6_3(tmp_path, scenario, expected):
    results = {kind: scenario(tmp_path, kind) for kind in KINDS}
    assert results["tarantool-2.6.3"] == expected
    assert results["spindle"] == results["tarantool-2.6.3"]
