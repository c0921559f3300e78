"""The META stage of JOIN between Spindles (2.7.3/2.8.2+'s protocol): a Spindle
master sends its Raft term/vote and its limbo's state to a joiner that asked for
them (its JOIN carries a version), before the snapshot rows; the joining Spindle
knows the term and the limbo's owner as soon as it has joined, before any Raft
message, and its first snapshot keeps the term. A master whose election was never
used sends term 1 and an empty limbo, and the joiner writes nothing 2.6.0 cannot
read. (A JOIN without a version gets no META: test_relay_master.py's JOIN tests;
real 2.6.0 and 2.6.3 joiners: tests/interop/test_join_meta_oracle.py.)"""
from __future__ import annotations

from spindle.core.iproto import replication as wire
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.request import decode_synchro_body
from spindle.core.xlog.files import dir_rows

from .cluster import Cluster, wait_for
from .election import election
from .fake_replica import INSERT, OK, FakeReplica
from .test_box_executor_inproc import BoxThread

REPLICA = "33333333-3333-4333-8333-333333333333"
RAFT, PROMOTE, JOIN_META, JOIN_SNAPSHOT = 30, 31, 71, 72


def _promote_terms(workdir) -> list[int]:
    return [decode_synchro_body(row.body).term for row in dir_rows(str(workdir), ".xlog")
            if row.type == IprotoType.PROMOTE]


def test_a_join_with_a_version_gets_the_meta_stage_first(tmp_path):
    with BoxThread(tmp_path) as master:
        def lua(code):
            return master.call(master.instance.run_chunk, code, "=test")
        lua("box.schema.user.create('rep', {password = 'pw'}) "
            "box.schema.user.grant('rep', 'replication') "
            "box.schema.space.create('t'):create_index('pk') box.space.t:insert{1} "
            "box.cfg{election_mode = 'candidate', election_timeout = 0.1}")
        wait_for(lambda: master.call(lambda: (master.box.raft.state, master.box.limbo.owner_id,
                                              master.box.limbo.promote_greatest_term))
                 == (3, 1, 2), 30, "the master elected and its PROMOTE processed")
        with FakeReplica(master.port, "rep", "pw") as peer:
            peer.row(wire.encode_join(REPLICA, 0x020802), sync=7)
            start = peer.frame()
            assert (start.type, start.header) == (OK, {0: OK, 1: 7})
            meta = [peer.frame() for _ in range(4)]
            assert [f.header for f in meta] == [
                {0: JOIN_META, 1: 7}, {0: RAFT, 1: 7, 7: 1}, {0: PROMOTE, 1: 7, 2: 1},
                {0: JOIN_SNAPSHOT, 1: 7}]
            assert meta[0].body is None and meta[3].body is None
            assert meta[1].body == {0: 2, 1: 1}              # term 2, its vote for itself
            assert meta[2].body == {2: 1, 3: 0, 0x53: 2}      # owner 1, confirmed 0, term 2
            initial = peer.frames_until(lambda f: f.type == OK)
            assert initial.pop().type == OK
            assert all(f.header == {0: INSERT, 1: 7} for f in initial)


def test_a_spindle_joiner_knows_term_and_limbo_owner_once_joined(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("spindle", "master", {"replication_timeout": 0.25}).start()
        master.eval("box.schema.space.create('t'):create_index('pk') box.space.t:insert{1}")
        # two elections (terms 2 and 3), each ending with the leader's PROMOTE
        for term in (2, 3):
            master.eval("box.cfg{election_mode = 'candidate', election_timeout = 0.5}")
            wait_for(lambda: election(master)["state"] == "leader"
                     and term in _promote_terms(master.workdir), 30, f"the PROMOTE of term {term}")
            if term == 2:
                master.eval("box.cfg{election_mode = 'voter'}")
        # election off again: no Raft message will ever reach the replica, so only
        # the META stage can tell it the term
        master.eval("box.cfg{election_mode = 'off'}")
        assert election(master)["term"] == 3
        replica = cluster.add("spindle", "replica", {"replication_timeout": 0.25,
                                                     "replication": [master.rep_uri]}).start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "the replica to follow")
        assert election(replica) == {"state": "follower", "term": 3, "vote": 1, "leader": 0}
        assert replica.eval("return box.info.synchro.queue.owner") == 1
        assert "RAFT: message" not in replica.output()
        # the snapshot made at the end of the join keeps the term
        snap = [row for row in dir_rows(str(replica.workdir), ".snap") if row.type == RAFT]
        assert [wire.decode_raft(row).term for row in snap] == [3]
        replica.restart()
        assert election(replica)["term"] == 3
        master.eval("box.space.t:insert{2}")
        wait_for(lambda: replica.select("t") == [[1], [2]], 30, "the row on the replica")


def test_without_election_the_joiner_writes_nothing_2_6_0_cannot_read(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("spindle", "master", {"replication_timeout": 0.25}).start()
        master.eval("box.schema.space.create('t'):create_index('pk') box.space.t:insert{1}")
        replica = cluster.add("spindle", "replica", {"replication_timeout": 0.25,
                                                     "replication": [master.rep_uri]}).start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "the replica to follow")
        assert election(replica) == {"state": "follower", "term": 1, "vote": 0, "leader": 0}
        replica.eval("box.snapshot()")
        rows = dir_rows(str(replica.workdir), ".snap") + dir_rows(str(replica.workdir), ".xlog")
        assert rows and not [row for row in rows if row.type in (RAFT, PROMOTE)]
