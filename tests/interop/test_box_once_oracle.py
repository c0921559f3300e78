"""box.once (issue 23 item 1): the same script on 2.6.0 and Spindle, and the canonical
replication startup script of Tarantool's documentation — every member runs
box.cfg{replication = <all three>} and then box.once('schema', ...) — in a Spindle-only
and in mixed replica sets."""
from __future__ import annotations

import pytest

from tests.integration.cluster import Cluster, Node, lua_value, same_vclocks, wait_for

from .oracle import SPINDLE, both, run_script, tarantool_binary

ONCE = """
box.cfg{log_level = 1}
print(pcall(box.once))
print(pcall(box.once, 1, print))
print(pcall(box.once, 'k', 'notfn'))
print(box.once('a', function(...) print('run a', ...) return 1, 2 end, 'p', 'q'))
print(box.once('a', function() print('run a again') end))
print(pcall(box.once, 'b', function() error('fail b', 0) end))
print(pcall(box.once, 'b', function() print('run b again') end))
print(box.space._schema:get{'oncea'})
print(box.space._schema:get{'onceb'})
box.cfg{read_only = true}
local fiber = require('fiber')
local done = false
fiber.create(function() box.once('c', function() print('run c') end) done = true end)
fiber.sleep(0)
print('c done while read-only', done)
box.cfg{read_only = false}
while not done do fiber.sleep(0.01) end
print('c done when writable', done)
print(box.once('d', function() return box.space._schema:get{'onced'} end))
os.exit(0)
"""


def test_box_once_as_2_6_0(tmp_path):
    real, ours = both(ONCE, tmp_path)
    assert real.returncode == 0, real.stderr
    assert (ours.returncode, ours.stdout) == (0, real.stdout), ours.stderr


def test_box_once_survives_a_restart(tmp_path):
    script = ("box.cfg{log_level = 1} box.once('x', function() print('ran') end) "
              "print(box.space._schema:get{'oncex'}) os.exit(0)")
    first_real, first_ours = both(script, tmp_path)
    for result in (first_real, first_ours):
        assert result.stdout == "ran\n['oncex']\n", result.stderr
    # the same directories again: the mark was recovered, fn does not run
    assert run_script(tarantool_binary(), script, tmp_path / "tarantool").stdout == "['oncex']\n"
    assert run_script(SPINDLE, script, tmp_path / "spindle").stdout == "['oncex']\n"


class CanonicalNode(Node):
    """A member started by the documentation's script: no grants but box.once's."""

    peers: list[str] = []

    def script(self) -> str:
        return (f"box.cfg{{listen = '{self.uri}', replication = {lua_value(self.peers)}, "
                "replication_connect_timeout = 60, replication_timeout = 0.5}\n"
                "box.once('schema', function()\n"
                "    box.schema.user.create('rep', {password = 'pw'})\n"
                "    box.schema.user.grant('rep', 'replication')\n"
                "    box.schema.user.grant('guest', 'super')\n"
                "    box.schema.space.create('test'):create_index('pk')\n"
                "    box.space.test:insert{1, box.info.uuid}\n"
                "end)\n")


@pytest.mark.parametrize("kinds", [
    ("spindle", "spindle", "spindle"),
    ("tarantool", "spindle", "spindle"),
    ("spindle", "tarantool", "tarantool"),
], ids=["spindle-only", "one-tarantool", "two-tarantool"])
def test_the_canonical_autobootstrap_script(kinds, tmp_path):
    with Cluster(tmp_path) as cluster:
        nodes = []
        for number, kind in enumerate(kinds, 1):
            node = CanonicalNode(kind, tmp_path, f"m{number}")
            cluster.nodes.append(node)
            nodes.append(node)
        peers = [node.rep_uri for node in nodes]
        for node in nodes:
            node.peers = peers
            node.start(wait=False)
        for node in nodes:
            node.wait_ready(timeout=120)
        wait_for(lambda: all(n.eval("return box.space.test ~= nil and "
                                    "box.space.test:count() == 1") for n in nodes),
                 120, "the schema on every member")
        wait_for(lambda: same_vclocks(*nodes), 60, "equal vclocks")
        # box.once ran on one member only: one tuple, one mark, the same everywhere
        rows = [n.select("test") for n in nodes]
        assert rows[0] == rows[1] == rows[2] and len(rows[0]) == 1
        assert all(n.eval("return box.space._schema:get{'onceschema'} ~= nil") for n in nodes)
        for node in nodes:
            for peer in range(1, 4):
                if peer != node.eval("return box.info.id"):
                    wait_for(lambda: node.upstream_status(peer) == "follow", 60,
                             f"{node.name} following {peer}")
        # and it keeps replicating both ways
        nodes[2].eval("box.space.test:insert{2, 'from m3'}")
        wait_for(lambda: all(n.eval("return box.space.test:get{2} ~= nil") for n in nodes),
                 60, "a later row everywhere")
