"""Leader election between Spindle nodes (real processes on loopback): a replica
set of candidates elects one leader all of them name, a new one when the leader is
killed, and the old leader comes back as a follower; a voter is never elected; with
election off, nothing of it reaches a Tarantool 2.6.0 replica."""
from __future__ import annotations

from .cluster import Cluster, wait_caught_up, wait_for
from .election import add_nodes, agreed_leader, election, start_all, wait_leader


def _writes_through(leader, followers, key):
    leader.eval("box.schema.space.create('t', {if_not_exists = true})"
                ":create_index('pk', {if_not_exists = true})")
    leader.eval("box.space.t:replace{...}", key)
    for follower in followers:
        wait_caught_up(follower, leader)
        assert follower.eval("return box.space.t:get(...) ~= nil", key)
        assert follower.eval("return box.info.ro") is True


def test_three_candidates_elect_one_leader_and_fail_over(tmp_path):
    with Cluster(tmp_path) as cluster:
        nodes = add_nodes(cluster, ["spindle"] * 3)
        start_all(nodes)
        leader = wait_leader(nodes)
        assert leader.eval("return box.info.ro") is False
        followers = [node for node in nodes if node is not leader]
        for follower in followers:
            assert election(follower)["state"] == "follower"
        _writes_through(leader, followers, 1)
        old_term = election(leader)["term"]

        leader.kill()
        new_leader = wait_leader(followers)
        assert election(new_leader)["term"] > old_term
        others = [node for node in followers if node is not new_leader]
        _writes_through(new_leader, others, 2)

        leader.start(wait=False)
        leader.wait_ready()
        wait_for(lambda: agreed_leader(nodes) is new_leader, 60,
                 "the old leader to follow the new one")
        assert election(leader)["state"] == "follower"
        _writes_through(new_leader, [leader] + others, 3)


def test_a_voter_is_never_elected(tmp_path):
    with Cluster(tmp_path) as cluster:
        nodes = add_nodes(cluster, ["spindle"] * 3)
        start_all(nodes)
        leader = wait_leader(nodes)
        voters = [node for node in nodes if node is not leader]
        for node in voters:
            node.eval("box.cfg{election_mode = 'voter'}")
        leader_id = leader.info("id")
        leader.kill()
        # without a candidate nobody is elected (a voter keeps no death timer:
        # the leader it knows stays known until someone starts a term)
        wait_for(lambda: all(node.upstream_status(leader_id) != "follow" for node in voters),
                 60, "the voters to lose the leader's connection")
        for node in voters:
            state = election(node)
            assert state["state"] == "follower" and state["leader"] == leader_id
            assert node.eval("return box.info.ro") is True
        # one of them a candidate again: it is elected, with the other's vote
        voters[0].eval("box.cfg{election_mode = 'candidate'}")
        assert wait_leader(voters) is voters[0]


def test_a_replica_is_read_only_while_the_masters_sync_rows_are_pending(tmp_path):
    """2.6.2's rule, with election on: the limbo holding another instance's
    entries makes the instance read-only (box.info.ro_reason 'synchro', before
    'election') until they are decided. (With election off Spindle stays 2.6.0:
    test_qsync_tarantool.py.)"""
    from ..fault.qsync_support import start_master, start_replica, wait_downstream

    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=3, timeout=60)
        replica = start_replica(cluster, "spindle", master, read_only=False)
        wait_downstream(master)
        replica.eval("box.cfg{election_mode = 'manual'}")
        # (the replica's vote cannot reach the master, which does not replicate
        # from it: a quorum of 1 elects the master alone, 3 is set back after)
        master.eval("box.cfg{replication_synchro_quorum = 1, election_mode = 'candidate'}")
        wait_for(lambda: election(master)["state"] == "leader"
                 and election(replica)["leader"] == 1, 30, "the master to lead")
        master.eval("box.cfg{replication_synchro_quorum = 3}")
        assert replica.eval("return box.info.ro_reason") == "election"
        master.eval("require('fiber').create(function() box.space.sync:insert{1} end)")
        wait_for(lambda: replica.eval("return box.info.ro_reason") == "synchro", 30,
                 "the replica to be read-only for the master's pending row")
        assert replica.eval("local ok, err = pcall(box.space._schema.replace, "
                            "box.space._schema, {'x'}) return err.code") == 7   # ER_READONLY
        master.eval("box.cfg{replication_synchro_quorum = 2}")          # confirmed now
        wait_for(lambda: replica.eval("return box.info.ro_reason") == "election", 30,
                 "the master's row to be confirmed on the replica")
        assert replica.eval("return box.space.sync:get{1}") == [1]


def test_promote_in_manual_mode_makes_the_caller_leader(tmp_path):
    """gh-3055 of 2.6.3: with every node manual, box.ctl.promote() on a follower
    makes it the leader in a bigger term, writable; then on another one too."""
    with Cluster(tmp_path) as cluster:
        nodes = add_nodes(cluster, ["spindle"] * 3)
        start_all(nodes)
        leader = wait_leader(nodes)
        for node in nodes:
            node.eval("box.cfg{election_mode = 'manual'}")
        # a leader switched to manual resigns at once
        wait_for(lambda: all(election(node)["leader"] == 0 for node in nodes), 30,
                 "the leader to resign")
        for caller in [node for node in nodes if node is not leader]:
            term = election(caller)["term"]
            caller.eval("box.ctl.promote()")
            assert election(caller)["state"] == "leader"
            assert election(caller)["term"] > term
            assert wait_leader(nodes) is caller
            _writes_through(caller, [node for node in nodes if node is not caller],
                            caller.info("id"))


def test_a_new_leader_finishes_the_old_leaders_pending_sync_row(tmp_path):
    """election_qsync of 2.6.3: a synchronous row that could not get its quorum
    on the killed leader is confirmed by the new leader (PROMOTE), not lost."""
    with Cluster(tmp_path) as cluster:
        nodes = add_nodes(cluster, ["spindle"] * 3, replication_synchro_timeout=1000)
        start_all(nodes)
        leader = wait_leader(nodes)
        leader.eval("box.schema.space.create('sync', {is_sync = true})"
                    ":create_index('pk')")
        followers = [node for node in nodes if node is not leader]
        for follower in followers:
            wait_caught_up(follower, leader)
        # a quorum no one can give: the row stays pending on every node
        leader.eval("box.cfg{replication_synchro_quorum = 4}")
        leader.eval("require('fiber').create(function() box.space.sync:insert{1} end)")
        for follower in followers:
            wait_for(lambda: follower.eval("return box.space.sync:get{1} ~= nil"), 30,
                     "the pending row on the followers")
        leader.kill()
        new_leader = wait_leader(followers)
        wait_for(lambda: new_leader.eval("return box.info.synchro.queue.len") == 0, 30,
                 "the new leader to finish the queue")
        wait_for(lambda: new_leader.eval("return box.info.ro") is False, 30,
                 "the new leader to be writable")
        new_leader.eval("box.space.sync:insert{2}")
        for node in followers:
            wait_for(lambda: node.eval("return box.space.sync:count()") == 2, 30,
                     "both rows everywhere")
