"""Leader election with Tarantool 2.6.3 (the last 2.6 release; election came in
2.6.1): Spindle and 2.6.3 nodes in one replica set elect one leader together, a
new one when it is killed, and agree on it (box.info.election on each); box.cfg's
election options are refused with 2.6.3's messages."""
from __future__ import annotations

import re
import subprocess

import pytest

from ..integration.cluster import Cluster, same_vclocks, wait_for
from ..integration.election import (
    add_nodes, agreed_leader, election, start_all, tarantool_2_6_3, wait_leader,
)
from .oracle import SPINDLE, run_script, tarantool_binary


@pytest.mark.parametrize("kinds", [
    ["spindle", "spindle", "tarantool-2.6.3"],
    ["spindle", "tarantool-2.6.3", "tarantool-2.6.3"],
], ids=["2-spindle-1-tarantool", "1-spindle-2-tarantool"])
def test_mixed_replica_set_elects_and_fails_over(tmp_path, kinds):
    with Cluster(tmp_path) as cluster:
        nodes = add_nodes(cluster, kinds)
        start_all(nodes)
        leader = wait_leader(nodes)
        _write_through(leader, nodes, 1)
        term = election(leader)["term"]
        leader.kill()
        rest = [node for node in nodes if node is not leader]
        new_leader = wait_leader(rest)
        assert election(new_leader)["term"] > term
        _write_through(new_leader, rest, 2)
        leader.start(wait=False)
        leader.wait_ready()
        wait_for(lambda: agreed_leader(nodes) is new_leader, 60,
                 "the old leader to follow the new one")
        for node in nodes:
            state = election(node)
            assert state["state"] == ("leader" if node is new_leader else "follower")
        _write_through(new_leader, nodes, 3)
        assert same_vclocks(*nodes)


def _write_through(leader, nodes, key):
    """A row written on the leader (writable once elected; 2.6.3 once its PROMOTE
    is written too) reaches every node; the others refuse writes."""
    wait_for(lambda: leader.eval("return box.info.ro") is False, 30,
             f"the leader {leader.name} to be writable")
    leader.eval("box.schema.space.create('t', {if_not_exists = true})"
                ":create_index('pk', {if_not_exists = true}) box.space.t:replace{...}", key)
    target = leader.vclock()
    for node in nodes:
        wait_for(lambda: all(node.vclock().get(i, 0) >= lsn for i, lsn in target.items()), 30,
                 f"{node.name} to have the leader's rows")
        assert node.eval("return box.space.t:get(...) ~= nil", key)
        if node is not leader:
            assert node.eval("return box.info.ro") is True


_CFG_PROBES = """
local probes = {
    {election_mode = 'on'}, {election_mode = 1}, {election_mode = ''},
    {election_mode = 'Candidate'}, {election_timeout = 0}, {election_timeout = -1},
    {election_timeout = '1'}, {election_timeout = 0.5, election_mode = 'bad'},
}
for _, probe in ipairs(probes) do
    probe.sql_cache_size = -1      -- so that a probe that passes fails last
    local ok, err = pcall(box.cfg, probe)
    print(ok, tostring(err))
end
box.cfg{election_mode = 'voter', election_timeout = 3}
print(box.cfg.election_mode, box.cfg.election_timeout)
for _, probe in ipairs({{election_mode = 'x'}, {election_timeout = 0},
                        {election_mode = 'manual'}, {election_mode = 'off'}}) do
    local ok, err = pcall(box.cfg, probe)
    print(ok, tostring(err), box.cfg.election_mode)
end
print(box.info.election.state, box.info.election.term, box.info.ro)
os.exit(0)
"""


def test_cfg_election_options_as_2_6_3(tmp_path):
    (tmp_path / "tarantool").mkdir()
    (tmp_path / "spindle").mkdir()
    real = run_script(tarantool_2_6_3(), _CFG_PROBES, tmp_path / "tarantool")
    ours = run_script(SPINDLE, _CFG_PROBES, tmp_path / "spindle")
    assert real.returncode == 0, real.stderr
    assert ours.stdout == real.stdout, ours.stderr


_NO_RAFT_ROWS = """
local fio, xlog = require('fio'), require('xlog')
local found = 0
for _, pattern in ipairs({'*.snap', '*.xlog'}) do
    for _, path in ipairs(fio.glob(fio.pathjoin(..., pattern))) do
        for _, row in xlog.pairs(path) do
            if row.HEADER.type == 30 or row.HEADER.type == 31 then found = found + 1 end
        end
    end
end
print(found)
os.exit(0)
"""


def test_election_off_keeps_2_6_0_replicas_following(tmp_path):
    """election_mode = 'off' (set explicitly): a real 2.6.0 replica joins and
    follows as before, and nothing on disk is of a type 2.6.0 does not know."""
    with Cluster(tmp_path) as cluster:
        master = cluster.add("spindle", "master", {"replication_timeout": 0.1,
                                                   "election_mode": "off"}).start()
        master.eval("box.schema.space.create('t'):create_index('pk') box.space.t:insert{1}")
        replica = cluster.add("tarantool", "replica", {"replication_timeout": 0.1,
                                                       "replication": [master.rep_uri]})
        replica.start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 30, "the 2.6.0 replica to follow")
        master.eval("box.space.t:insert{2} box.snapshot() box.space.t:insert{3}")
        wait_for(lambda: replica.select("t") == [[1], [2], [3]], 30, "the rows on the replica")
        assert replica.upstream_status(1) == "follow"
        assert master.eval("return box.info.election") == {
            "state": "follower", "term": 1, "vote": 0, "leader": 0}
        scan = subprocess.run([tarantool_binary(), "-e", _NO_RAFT_ROWS.replace(
            "...", repr(str(master.workdir)))], capture_output=True, text=True, timeout=60)
        assert scan.stdout.strip() == "0", scan.stderr


_PROMOTE_SCRIPT = """
box.cfg{election_mode = 'voter', election_timeout = 0.5}
local function show(...) print(...) end
local ok, err = pcall(box.ctl.promote) show('voter', ok, tostring(err))
ok, err = pcall(box.ctl.clear_synchro_queue) show('voter clear', ok, tostring(err))
box.cfg{election_mode = 'manual'}
show('manual before', box.info.election.state, box.info.ro)
ok, err = pcall(box.ctl.promote) show('manual', ok, tostring(err))
show('manual after', box.info.election.state, box.info.election.leader, box.info.ro)
ok, err = pcall(box.ctl.promote) show('manual again', ok, tostring(err))
box.cfg{election_mode = 'candidate'}
show('candidate', box.info.election.state, box.info.ro)
ok, err = pcall(box.ctl.promote) show('candidate leader', ok, tostring(err))
box.cfg{election_mode = 'voter'}
show('voter again', box.info.election.state, box.info.election.leader, box.info.ro)
box.cfg{election_mode = 'candidate'}
require('fiber').sleep(0)
ok, err = pcall(box.ctl.promote) show('candidate follower', ok, tostring(err))
box.cfg{election_mode = 'off'}
ok, err = pcall(box.ctl.promote) show('off', ok, tostring(err), box.info.ro)
os.exit(0)
"""


def test_promote_by_mode_as_2_6_3(tmp_path):
    """box.ctl.promote (and clear_synchro_queue, its alias with election on) on a
    lone instance in every mode: the same refusals and states as 2.6.3."""
    (tmp_path / "tarantool").mkdir()
    (tmp_path / "spindle").mkdir()
    real = run_script(tarantool_2_6_3(), _PROMOTE_SCRIPT, tmp_path / "tarantool")
    ours = run_script(SPINDLE, _PROMOTE_SCRIPT, tmp_path / "spindle")
    assert real.returncode == 0, real.stderr
    assert "manual after\tleader" in real.stdout
    assert ours.stdout == real.stdout, ours.stderr


_LONE_ELECTION = """
box.cfg{log = 'node.log', election_mode = 'candidate', election_timeout = 0.3}
box.ctl.wait_rw(30)
os.exit(0)
"""
_ELECTION_LOG_LINE = re.compile(r"(RAFT: .*|ready to accept requests)$", re.MULTILINE)


def test_the_log_of_a_lone_election_as_2_6_3(tmp_path):
    """A new instance that elects itself: the same RAFT lines as 2.6.3, in the same
    order around "ready to accept requests" (the state machine starts before it,
    the bootstrap leader's first term after it)."""
    logs = {}
    for kind, binary in (("tarantool", tarantool_2_6_3()), ("spindle", SPINDLE)):
        (tmp_path / kind).mkdir()
        result = run_script(binary, _LONE_ELECTION, tmp_path / kind)
        assert result.returncode == 0, result.stderr
        logs[kind] = _ELECTION_LOG_LINE.findall((tmp_path / kind / "node.log").read_text())
    assert logs["tarantool"][:3] == ["RAFT: start state machine", "ready to accept requests",
                                     "RAFT: bump term to 2, follow"]
    assert logs["spindle"] == logs["tarantool"]


_MAKE_2_6_3_DIR = """
box.cfg{election_mode = 'candidate', election_timeout = 0.3}
box.ctl.wait_rw(30)
box.schema.space.create('s'):create_index('pk')
box.space.s:insert{1}
box.snapshot()
box.space.s:insert{2}
print(box.info.election.term, box.info.election.vote)
os.exit(0)
"""

_READ_DIR = """
box.cfg{}
local e = box.info.election
print(e.state, e.term, e.vote, e.leader, box.space.s:count(), box.info.ro)
os.exit(0)
"""


def test_spindle_starts_on_a_2_6_3_data_dir(tmp_path):
    """2.6.3 ends every snapshot with a raft row and logs raft and PROMOTE rows:
    Spindle recovers its term and vote and the data from them."""
    made = run_script(tarantool_2_6_3(), _MAKE_2_6_3_DIR, tmp_path)
    assert made.returncode == 0, made.stderr
    term, vote = made.stdout.split()
    ours = run_script(SPINDLE, _READ_DIR, tmp_path, name="read.lua")
    assert ours.stdout.split() == ["follower", term, vote, "0", "2", "false"], ours.stderr
