"""The META stage of JOIN against real Tarantool: a Spindle master offers it only to
a joiner whose JOIN has a version, so real 2.6.0 and 2.6.3 replicas (whose JOIN
has none, and which would stop on request type 71) join a Spindle master with
election on and a PROMOTE made, and follow; and a Spindle joins a 2.6.3 master
(its JOIN's version is a key 2.6.3 skips; no META comes) and follows it."""
from __future__ import annotations

from ..integration.cluster import Cluster, wait_for
from ..integration.election import election, tarantool_2_6_3

_SPACE = "box.schema.space.create('t'):create_index('pk') box.space.t:insert{1}"


def _elect_alone(master) -> int:
    """Election on for a lone node: it elects itself and writes its PROMOTE; the term."""
    master.eval("box.cfg{election_mode = 'candidate', election_timeout = 0.5}")
    wait_for(lambda: election(master)["state"] == "leader"
             and master.eval("return box.info.ro") is False, 30,
             f"{master.name} elected and writable")
    return election(master)["term"]


def _follows(replica, master, rows) -> None:
    wait_for(lambda: replica.upstream_status(1) == "follow", 30, f"{replica.name} to follow")
    wait_for(lambda: replica.select("t") == rows, 30, f"the rows on {replica.name}")
    assert replica.upstream_status(1) == "follow"


def test_real_2_6_0_and_2_6_3_replicas_join_a_spindle_master_with_election(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("spindle", "master", {"replication_timeout": 0.25}).start()
        master.eval(_SPACE)
        term = _elect_alone(master)
        assert term >= 2
        cfg = {"replication_timeout": 0.25, "replication": [master.rep_uri]}
        old = cluster.add("tarantool", "r260", dict(cfg))
        new = cluster.add("tarantool", "r263", dict(cfg))
        new.binary = tarantool_2_6_3()
        for replica in (old, new):
            replica.start()
        master.eval("box.space.t:insert{2}")
        for replica in (old, new):
            _follows(replica, master, [[1], [2]])
        # the 2.6.3 replica learns the term from the Raft row after SUBSCRIBE
        wait_for(lambda: election(new)["term"] == term, 30, "the 2.6.3 replica to know the term")
        for replica in (old, new):
            assert "Unknown request type" not in replica.output()


def test_a_spindle_joins_a_2_6_3_master_with_election(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("tarantool", "master", {"replication_timeout": 0.25})
        master.binary = tarantool_2_6_3()
        master.start()
        master.eval(_SPACE)
        term = _elect_alone(master)
        replica = cluster.add("spindle", "replica", {"replication_timeout": 0.25,
                                                     "replication": [master.rep_uri]}).start()
        master.eval("box.space.t:insert{2}")
        _follows(replica, master, [[1], [2]])
        # (from the Raft row after SUBSCRIBE: 2.6.3 has no META stage)
        wait_for(lambda: election(replica)["term"] == term, 30, "the replica to know the term")
