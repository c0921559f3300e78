"""Helpers of the synchronous-replication tests (integration, interop, fault): a master
with an `is_sync` space and its replica, the CONFIRM/ROLLBACK rows a node has in its
xlogs, pausing a process (SIGSTOP keeps its socket open but it neither reads nor
ACKs: the master's quorum waits for it, as for a slow replica)."""
from __future__ import annotations

import os
import signal

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.request import decode_synchro_body
from spindle.core.xlog.files import XlogReader, list_files

from ..integration.cluster import Cluster, Node, wait_for

FAST = {"replication_timeout": 0.1, "replication_connect_timeout": 10}
SYNC_SPACE = ("box.schema.space.create('sync', {is_sync = true, if_not_exists = true}) "
              "box.space.sync:create_index('pk', {if_not_exists = true})")
SYNCHRO_NAMES = {IprotoType.CONFIRM: "CONFIRM", IprotoType.ROLLBACK: "ROLLBACK"}


def sync_cfg(quorum=2, timeout=5.0, **extra) -> dict:
    return {**FAST, "replication_synchro_quorum": quorum,
            "replication_synchro_timeout": timeout, **extra}


def start_master(cluster: Cluster, kind: str, name: str = "master", **cfg) -> Node:
    master = cluster.add(kind, name, sync_cfg(**cfg)).start()
    master.eval(SYNC_SPACE)
    return master


def start_replica(cluster: Cluster, kind: str, master: Node, name: str = "replica",
                  **cfg) -> Node:
    replica = cluster.add(kind, name, {**FAST, "replication": [master.rep_uri],
                                        "read_only": True, **cfg})
    replica.start()
    wait_follow(replica)
    return replica


def wait_follow(replica: Node, master_id: int = 1, timeout: float = 30) -> None:
    wait_for(lambda: replica.upstream_status(master_id) == "follow", timeout,
             f"{replica.name} to follow")


def wait_downstream(master: Node, replica_id: int = 2, timeout: float = 30) -> None:
    wait_for(lambda: master.eval("local r = box.info.replication[...] "
                                 "return r and r.downstream and r.downstream.status",
                                 replica_id) == "follow", timeout, "the downstream")


def synchro_rows(node: Node) -> list[tuple[str, int, int, int, int]]:
    """(kind, header replica_id, header lsn, body owner, body lsn) of every CONFIRM
    and ROLLBACK in the node's xlogs, oldest first."""
    found = []
    for entry in list_files(str(node.workdir), ".xlog"):
        with XlogReader(entry.path, force_recovery=True) as reader:
            for row in reader.rows():
                if row.type in SYNCHRO_NAMES:
                    body = decode_synchro_body(row.body)
                    found.append((SYNCHRO_NAMES[row.type], row.replica_id, row.lsn,
                                  body.replica_id, body.lsn))
    return found


def synchro_queue_len(node: Node) -> int:
    """Spindle's box.info.synchro (Tarantool 2.6.0 has none)."""
    return node.eval("return box.info.synchro.queue.len")


def pause(node: Node) -> None:
    os.kill(node.proc.pid, signal.SIGSTOP)


def resume(node: Node) -> None:
    os.kill(node.proc.pid, signal.SIGCONT)


def insert_error(node: Node, space: str, key) -> tuple[int, str] | None:
    """Insert {key} and return (code, message) of the error, None on success."""
    return node.eval("local ok, err = pcall(box.space[...].insert, box.space[...], {select(2, ...)}) "
                     "if ok then return nil end "
                     "return {err.code, err.message}", space, key)
