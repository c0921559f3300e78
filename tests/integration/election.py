"""Replica sets that elect their leader (election_mode = 'candidate'), for the
integration and interop tests: Spindle nodes, and Tarantool 2.6.3 nodes (the
first release line with leader election) from ../shared/oracle/tarantool-2.6.3 or
$TARANTOOL_2_6_3.

The nodes replicate as guest, as Tarantool's own election tests do: whoever is
elected first grants guest `super` in a box.once (a node that is not the leader
waits in it until it is writable, as box.once does), and the grant replicates.
Every wait is a condition with a deadline; nothing is asserted on time.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .cluster import Cluster, Node, wait_for

ORACLE_2_6_3 = Path(__file__).resolve().parents[3] / "shared" / "oracle" / "tarantool-2.6.3"

_GRANT = ("box.once('election_test', function() "
          "box.schema.user.grant('guest', 'super', nil, nil, {if_not_exists = true}) end)")


def tarantool_2_6_3() -> str:
    path = os.environ.get("TARANTOOL_2_6_3") or str(ORACLE_2_6_3)
    if not os.access(path, os.X_OK):
        pytest.skip(f"Tarantool 2.6.3 is not at {path} (set TARANTOOL_2_6_3)")
    return path


def election_cfg(uris: list[str], mode: str = "candidate", **extra) -> dict:
    cfg = {
        "replication": uris,
        "replication_timeout": 0.25,
        "replication_connect_quorum": len(uris),
        # every node must be up to bootstrap: on a busy machine the last one may bind
        # its port later than the default 30 s ("failed to connect to 1 out of 3")
        "replication_connect_timeout": 120,
        "replication_synchro_quorum": 2,
        "replication_synchro_timeout": 5,
        "election_mode": mode,
        "election_timeout": 1,
    }
    cfg.update(extra)
    return cfg


def add_node(cluster: Cluster, kind: str, name: str, cfg: dict | None = None,
             **kwargs) -> Node:
    """A node of kind 'spindle', 'tarantool-2.6.3' or 'tarantool-2.6.0'."""
    node = cluster.add("spindle" if kind == "spindle" else "tarantool", name, cfg, **kwargs)
    if kind == "tarantool-2.6.3":
        node.binary = tarantool_2_6_3()
    return node


def add_nodes(cluster: Cluster, kinds: list[str], modes: list[str] | None = None,
              **extra) -> list[Node]:
    """One node per kind ('spindle' or 'tarantool-2.6.3'), in a full mesh."""
    nodes = [add_node(cluster, kind, f"n{i + 1}", extra_lua=_GRANT)
             for i, kind in enumerate(kinds)]
    uris = [node.uri for node in nodes]
    for node, mode in zip(nodes, modes or ["candidate"] * len(nodes)):
        node.cfg = election_cfg(uris, mode, **extra)
    return nodes


def election(node: Node) -> dict:
    return node.eval("return box.info.election")


def agreed_leader(nodes: list[Node]) -> Node | None:
    """The node every one of `nodes` names as the leader of one same term, that
    itself is in state leader; None while they do not agree."""
    states = [election(node) for node in nodes]
    leaders = {state["leader"] for state in states}
    terms = {state["term"] for state in states}
    if len(leaders) != 1 or len(terms) != 1 or 0 in leaders:
        return None
    leader_id = leaders.pop()
    for node, state in zip(nodes, states):
        if node.info("id") == leader_id:
            return node if state["state"] == "leader" else None
    return None


def wait_leader(nodes: list[Node], timeout: float = 60.0) -> Node:
    return wait_for(lambda: agreed_leader(nodes), timeout, "one leader agreed by all")


def start_all(nodes: list[Node]) -> None:
    """Start them together; return once each runs (not orphan) and is connected
    to all the others (a leader killed before that would leave one orphan for
    good). 'sync' counts as connected: with election on, an upstream that is
    not the leader may stay there (its data is dropped, as in 2.6.3)."""
    for node in nodes:
        node.start(wait=False)
    for node in nodes:
        node.wait_ready()
    wait_for(lambda: all(full_mesh(node, len(nodes)) for node in nodes), 60,
             "every node running and following every other")


def full_mesh(node: Node, count: int) -> bool:
    return node.eval("""
        if box.info.status ~= 'running' then return false end
        local n = 0
        for _, r in pairs(box.info.replication) do
            local status = r.upstream and r.upstream.status
            if status == 'follow' or status == 'sync' then n = n + 1 end
        end
        return n >= ...""", count - 1)
