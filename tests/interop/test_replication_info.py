"""box.info.replication shaped like 2.6.0's: the same pairs of a master and its replica,
once all Tarantool and once all Spindle, show the same keys and statuses on both ends,
while following and after the replica stopped. Spindle's downstream also has `lag`
(tarantool#10029); that is the only addition."""
from __future__ import annotations

from ..integration.cluster import Cluster, wait_for

FAST = {"replication_timeout": 0.2}
ADDED_BY_SPINDLE = {"lag"}


def shape(value):
    """Keys and statuses, without the numbers that differ run to run."""
    if isinstance(value, dict):
        return {k: (v if k == "status" else shape(v)) for k, v in value.items()
                if k not in ("idle", "lsn", "uuid", "peer", "message", "system_message")
                or isinstance(v, dict)} | {k: type(v).__name__ for k, v in value.items()
                                           if k in ("idle", "lsn", "uuid", "peer",
                                                    "message", "system_message")}
    return type(value).__name__


def without_additions(info):
    for entry in info.values():
        downstream = entry.get("downstream")
        if downstream is not None:
            for key in ADDED_BY_SPINDLE:
                downstream.pop(key, None)
    return info


def pair(cluster, kind):
    master = cluster.add(kind, f"{kind}-master", FAST).start()
    replica = cluster.add(kind, f"{kind}-replica", {**FAST, "replication": [master.rep_uri]})
    replica.start()
    wait_for(lambda: replica.upstream_status(1) == "follow", 30, f"{kind} replica to follow")
    wait_for(lambda: (master.eval("local r = box.info.replication[2] "
                                  "return r and r.downstream and r.downstream.status")
                      == "follow"), 30, f"{kind} downstream")
    return master, replica


def info(node):
    return {int(k): v for k, v in node.eval("return box.info.replication").items()}


def test_box_info_replication_has_2_6_0_shape(tmp_path):
    with Cluster(tmp_path) as cluster:
        views = {}
        for kind in ("tarantool", "spindle"):
            master, replica = pair(cluster, kind)
            following = (info(master), info(replica))
            replica.stop()
            wait_for(lambda: (master.eval("return box.info.replication[2].downstream.status")
                              == "stopped"), 30, f"{kind} downstream to stop")
            stopped = info(master)
            views[kind] = [following[0], following[1], stopped]
            master.stop()
        assert isinstance(views["spindle"][0][2]["downstream"]["lag"], (int, float))
        ours = [shape(without_additions(view)) for view in views["spindle"]]
        theirs = [shape(view) for view in views["tarantool"]]
        assert ours == theirs
        assert views["spindle"][2][2]["downstream"]["message"]
