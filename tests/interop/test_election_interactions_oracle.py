"""Election meeting the rest of box, played on the real binaries (2.6.3, and 2.6.0
where the behaviour is older than election) and on Spindle, outputs compared.
Found by an audit; each case failed on Spindle before its fix.

* The first box.cfg. 2.6.x's box_cfg_xc (src/box/box.cc) ends with the instance
  read-only ("box.cfg.read_only is not read yet"), `fiber_cond_broadcast(&ro_cond)`
  and `fiber_sleep(0)` ("if anyone is waiting for ro mode"): a fiber already in
  box.ctl.wait_ro() returns during the first box.cfg, and a fresh instance with
  election_mode = 'candidate' (the bootstrap leader, quorum clamped to 1) has
  usually persisted its term and vote and become leader by the time box.cfg
  returns: a write right after it goes through.
* Every write refused as read-only is logged by 2.6.0 and 2.6.3 (box_check_writable:
  diag_set + diag_log, "E> ER_READONLY: Can't modify data because this instance is
  in read-only mode."): with election on, on every follower a client writes to.
* A transaction begun while writable commits after box.cfg{read_only = true} (2.6
  checks read-only per statement, never at commit). After its leader resigned,
  2.6.3 commits it too; Spindle refuses it on purpose (docs/ELECTION.md): pinned.
* An anonymous replica refuses box.cfg{read_only = false} (box_check_ro: "the
  value may be set to false only when replication_anon is false").

Every wait is a condition with a deadline; nothing is asserted on time.
"""
from __future__ import annotations

from pathlib import Path

from ..integration.cluster import SPINDLE, Cluster, Node, wait_for
from ..integration.election import add_node, tarantool_2_6_3
from .oracle import run_script, tarantool_binary

READONLY = "Can't modify data because this instance is in read-only mode."


def _binary(kind: str) -> str:
    if kind == "spindle":
        return SPINDLE
    if kind == "tarantool-2.6.0":
        return tarantool_binary()
    return tarantool_2_6_3()


def _run(kind: str, script: str, workdir: Path) -> str:
    workdir.mkdir(parents=True)
    result = run_script(_binary(kind), script, workdir, timeout=120)
    assert result.returncode == 0, f"{kind}: {result.stdout}\n{result.stderr}"
    return result.stdout


# ------------------------------------------------------------ the first box.cfg

_WAIT_RO_BEFORE_CFG = """
local fiber = require('fiber')
local events = {}
fiber.create(function()
    local ok = pcall(box.ctl.wait_ro, 30)
    table.insert(events, 'wait_ro ' .. tostring(ok))
end)
box.cfg{log = 'node.log'}
table.insert(events, 'cfg returned')
-- the waiter has returned by now, or it never will: the instance stays writable
local deadline = fiber.clock() + 5
while #events < 2 and fiber.clock() < deadline do fiber.sleep(0.01) end
print(table.concat(events, '\\n'))
os.exit(0)
"""


def test_a_wait_ro_begun_before_the_first_box_cfg_returns_during_it(tmp_path):
    real = {kind: _run(kind, _WAIT_RO_BEFORE_CFG, tmp_path / kind)
            for kind in ("tarantool-2.6.0", "tarantool-2.6.3")}
    assert real["tarantool-2.6.0"] == "wait_ro true\ncfg returned\n"
    assert real["tarantool-2.6.3"] == real["tarantool-2.6.0"]
    ours = _run("spindle", _WAIT_RO_BEFORE_CFG, tmp_path / "spindle")
    assert ours == real["tarantool-2.6.0"]


_FRESH_CANDIDATE = """
box.cfg{log = 'node.log', election_mode = 'candidate'}
local e = box.info.election
print(e.state, e.term, e.vote, e.leader, box.info.ro, (pcall(box.schema.space.create, 't')))
os.exit(0)
"""
ELECTED_WHEN_CFG_RETURNS = "leader\t2\t1\t1\tfalse\ttrue\n"


def _fresh_candidate(kind: str, tmp_path: Path, attempts: int = 5) -> list[str]:
    """The state when the first box.cfg returns, over a few fresh instances: 2.6.3
    races its own raft worker there (a slow WAL, e.g. wal_mode = 'fsync', loses),
    and wins it nearly always; stop at the first win."""
    outputs = []
    for attempt in range(attempts):
        outputs.append(_run(kind, _FRESH_CANDIDATE, tmp_path / kind / str(attempt)))
        if outputs[-1] == ELECTED_WHEN_CFG_RETURNS:
            break
    return outputs


def test_a_fresh_candidate_is_elected_and_writable_when_box_cfg_returns(tmp_path):
    real = _fresh_candidate("tarantool-2.6.3", tmp_path)
    assert real[-1] == ELECTED_WHEN_CFG_RETURNS, real
    ours = _fresh_candidate("spindle", tmp_path)
    assert ours[-1] == ELECTED_WHEN_CFG_RETURNS, ours


# ------------------------------------------------------- refused writes, logged

_REFUSED_WRITES = """
box.cfg{log = 'node.log'}
box.schema.space.create('t'):create_index('pk')
if box.cfg.election_mode ~= nil then          -- 2.6.3 and Spindle: a follower
    box.cfg{election_mode = 'voter'}
else                                          -- 2.6.0: no election
    box.cfg{read_only = true}
end
print(pcall(box.space.t.insert, box.space.t, {1}))
print(pcall(box.schema.space.create, 'x'))
os.exit(0)
"""


def _logged_refusals(kind: str, tmp_path: Path) -> tuple[str, int]:
    output = _run(kind, _REFUSED_WRITES, tmp_path / kind)
    log = (tmp_path / kind / "node.log").read_text()
    return output, sum(1 for line in log.splitlines()
                       if line.endswith("E> ER_READONLY: " + READONLY))


def test_each_write_refused_as_read_only_is_logged(tmp_path):
    refused = f"false\t{READONLY}\n" * 2
    for kind in ("tarantool-2.6.0", "tarantool-2.6.3"):
        assert _logged_refusals(kind, tmp_path) == (refused, 2), kind
    assert _logged_refusals("spindle", tmp_path) == (refused, 2)


# ------------------------------------- a transaction open when read-only begins

_COMMIT_AFTER_READ_ONLY = """
local fiber = require('fiber')
box.cfg{log = 'node.log', replication_timeout = 0.1}
box.schema.space.create('t'):create_index('pk')
box.begin()
box.space.t:insert{1}
box.cfg{read_only = true}
print('commit after read_only', pcall(box.commit))
print('rows', box.space.t:count(), box.info.ro)
box.cfg{read_only = false}
if box.cfg.election_mode ~= nil then
    box.cfg{election_mode = 'candidate'}
    local deadline = fiber.clock() + 60
    while box.info.ro and fiber.clock() < deadline do fiber.sleep(0.01) end
    print('leader', box.info.election.state, box.info.ro)
    box.begin()
    box.space.t:insert{2}
    box.cfg{election_mode = 'voter'}          -- the leader resigns
    print('read-only in the transaction', box.info.ro)
    print('commit after resigning', pcall(box.commit))
    print('rows', box.space.t:count())
end
os.exit(0)
"""
COMMITTED_2_6_0 = "commit after read_only\ttrue\nrows\t1\ttrue\n"
COMMITTED_2_6_3 = COMMITTED_2_6_0 + (
    "leader\tleader\tfalse\n"
    "read-only in the transaction\ttrue\n"
    "commit after resigning\ttrue\n"
    "rows\t2\n")


def test_a_transaction_begun_while_writable_commits_after_read_only_begins(tmp_path):
    assert _run("tarantool-2.6.0", _COMMIT_AFTER_READ_ONLY,
                tmp_path / "tarantool-2.6.0") == COMMITTED_2_6_0
    assert _run("tarantool-2.6.3", _COMMIT_AFTER_READ_ONLY,
                tmp_path / "tarantool-2.6.3") == COMMITTED_2_6_3
    # Spindle as 2.6 after read_only = true; after resigning, refused on purpose
    assert _run("spindle", _COMMIT_AFTER_READ_ONLY, tmp_path / "spindle") == COMMITTED_2_6_3.replace(
        "commit after resigning\ttrue\nrows\t2\n",
        f"commit after resigning\tfalse\t{READONLY}\nrows\t1\n")


# ------------------------------------------------------------ anonymous replicas

def _add(cluster: Cluster, kind: str, name: str, cfg: dict) -> Node:
    return add_node(cluster, kind, name, {"replication_timeout": 0.1, **cfg})


def _anonymous_replica_read_only(tmp_path: Path, kind: str) -> list:
    """(2.6.0 has no election: its anonymous replica has none to turn off.)"""
    election = kind != "tarantool-2.6.0"
    with Cluster(tmp_path / kind) as cluster:
        master = _add(cluster, kind, "master", {}).start()
        master.wait_replication_user()
        anon = _add(cluster, kind, "anon", {
            "replication": [master.rep_uri], "replication_anon": True, "read_only": True,
            **({"election_mode": "voter"} if election else {})}).start()
        wait_for(lambda: anon.upstream_status(1) == "follow", 60,
                 "the anonymous replica to follow")
        refused = anon.eval("local ok, err = pcall(box.cfg, {read_only = false}) "
                            "return {ok, tostring(err)}")
        if election:
            anon.eval("box.cfg{election_mode = 'off'}")
        return [refused, anon.eval("return {box.cfg.read_only, box.info.ro}")]


def test_an_anonymous_replica_refuses_read_only_false(tmp_path):
    """[box.cfg{read_only = false}; box.cfg.read_only and box.info.ro once
    election is off too]"""
    expected = [[False, "Incorrect value for option 'read_only': the value may be set "
                        "to false only when replication_anon is false"], [True, True]]
    for kind in ("tarantool-2.6.0", "tarantool-2.6.3", "spindle"):
        assert _anonymous_replica_read_only(tmp_path, kind) == expected, kind
