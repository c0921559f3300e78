"""Starting an instance with replication (box.cc's part of server-startup-with-replication.txt
and replication.rst): bootstrap, bootstrap_master, bootstrap_from_master,
box_sync_replication, box_set_replication, box_set_replication_anon.

Box.start calls `bootstrap` when there is no snapshot and `box_sync_replication(False)`
after a local recovery; then the WAL starts, `replicaset_follow` resumes the appliers
and `replicaset_sync` keeps the instance orphan until a quorum of them is synced.
"""
from __future__ import annotations

import itertools
import uuid as uuid_module
from typing import TYPE_CHECKING, Iterable

from spindle.core import log
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.replication.replica import ApplierState
from spindle.core.replication.replicaset import (
    box_register_replica, replicaset_connect, replicaset_follow, replicaset_leader,
    replicaset_sync,
)
from spindle.core.vclock import VClock
from spindle.core.wal.checkpoint import write_snapshot

from spindle.core.box.schema import CLUSTER_ID, SCHEMA_ID

if TYPE_CHECKING:
    from .box import Box

TIMEOUT_INFINITY = None


def new_appliers(box: Box) -> list:
    uris = list(box.cfg.get("replication") or ())
    if not uris:
        return []
    from spindle.core.replication.applier import Applier   # the applier needs the box
    return [Applier(box.sched, box, uri) for uri in uris]


def box_sync_replication(box: Box, connect_quorum: bool) -> None:
    """Connect to everyone in box.cfg.replication; the connected appliers become
    the replica set's and wait, paused, for replicaset_follow."""
    replicaset_connect(box.replicaset, new_appliers(box), connect_quorum)


# ================================================================== bootstrap

def bootstrap(box: Box, memtx_dir: str) -> tuple[VClock, bool]:
    """No snapshot: become the first instance of a new replica set, or join the
    one the configured peers form (Box.start has taken the instance UUID). Returns
    the vclock the WAL starts from and whether this instance is the bootstrap
    leader; the initial checkpoint is written."""
    box_sync_replication(box, True)
    master = replicaset_leader(box.replicaset)
    if master is not None and master.uuid != box.instance_uuid:
        vclock = bootstrap_from_master(box, master, memtx_dir)
        wanted = box.cfg.get("replicaset_uuid")
        if wanted and wanted != box.schema.replicaset_uuid:
            raise ClientError(ErrorCode.ER_REPLICASET_UUID_MISMATCH, wanted,
                              box.schema.replicaset_uuid)
        return vclock, False
    return bootstrap_master(box, box.cfg.get("replicaset_uuid") or str(uuid_module.uuid4()),
                            memtx_dir), True


def bootstrap_master(box: Box, replicaset_uuid: str, memtx_dir: str) -> VClock:
    """Register self as replica 1 and every connected peer after it in `_cluster`,
    put the replica set UUID into `_schema`, and checkpoint it all at vclock {}."""
    if box.cfg.get("read_only"):
        raise ClientError(ErrorCode.ER_BOOTSTRAP_READONLY)
    log.info("initializing an empty data directory")
    instance_uuid = box.instance_uuid
    assert instance_uuid is not None   # (Box.start chose it before bootstrapping)
    box.load_bootstrap_rows()
    replica_id = 1
    box_register_replica(box, replica_id, instance_uuid)
    if (box.cfg.get("election_mode") or "off") != "off":
        # 2.6.1+ registers only itself ("replication: do not register outgoing
        # connections"): the others register when they join. With election that
        # matters: the election quorum is clamped to the registered count, so the
        # first node elects itself alone and can let the others in.
        return _bootstrap_checkpoint(box, replicaset_uuid, memtx_dir)
    for replica in box.replicaset.replicas():
        if replica.uuid == instance_uuid or replica.applier is None:
            continue
        assert replica.uuid is not None   # (replicas() are those keyed by a UUID)
        replica_id += 1
        box_register_replica(box, replica_id, replica.uuid)
    return _bootstrap_checkpoint(box, replicaset_uuid, memtx_dir)


def _bootstrap_checkpoint(box: Box, replicaset_uuid: str, memtx_dir: str) -> VClock:
    """The replica set UUID into `_schema`, and the first checkpoint at vclock {}."""
    assert box.instance_uuid is not None
    box.engine.space(SCHEMA_ID).replace(["cluster", replicaset_uuid])
    vclock = VClock()
    write_snapshot(memtx_dir, box.instance_uuid, vclock, box.read_view(), sched=box.sched)
    return vclock


def bootstrap_from_master(box: Box, master, memtx_dir: str) -> VClock:
    """Step the leader's applier through JOIN (or FETCH_SNAPSHOT for an anonymous
    replica) with applier_resume_to_state; the joined rows land in the engine
    without the WAL, then the initial checkpoint makes them durable."""
    applier = master.applier
    anon = bool(box.cfg.get("replication_anon"))
    applier.applier_resume_to_state(ApplierState.READY, TIMEOUT_INFINITY)
    log.info("bootstrapping replica from %s at %s", master.uuid, applier.peer_address)
    box.replicaset.vclock = VClock()
    applier.applier_resume_to_state(
        ApplierState.FETCH_SNAPSHOT if anon else ApplierState.INITIAL_JOIN, TIMEOUT_INFINITY)
    applier.applier_resume_to_state(
        ApplierState.FETCHED_SNAPSHOT if anon else ApplierState.FINAL_JOIN, TIMEOUT_INFINITY)
    if not anon:
        applier.applier_resume_to_state(ApplierState.JOINED, TIMEOUT_INFINITY)
    applier.applier_resume_to_state(ApplierState.READY, TIMEOUT_INFINITY)
    vclock = box.replicaset.vclock.copy()
    assert box.instance_uuid is not None   # (Box.start chose it before bootstrapping)
    rows: Iterable = box.read_view()
    raft_row = box.box_raft.checkpoint_row()    # the term a JOIN META stage told
    if raft_row is not None:
        rows = itertools.chain(rows, (raft_row,))
    write_snapshot(memtx_dir, box.instance_uuid, vclock, rows, sched=box.sched)
    return vclock


# ============================================================ reconfiguration

def box_set_replication(box: Box) -> None:
    """A later box.cfg{replication = ...}: connect to the new list (everyone is
    tried, fewer than the quorum is an error), follow, sync."""
    box_sync_replication(box, True)
    replicaset_follow(box.replicaset)
    replicaset_sync(box.replicaset)


def box_set_replication_anon(box: Box, anon: bool) -> None:
    """replication_anon changed after bootstrap: true is refused by cfg checks;
    false turns an anonymous replica into a normal one through REGISTER."""
    if anon:
        raise ClientError(ErrorCode.ER_CFG, "replication_anon",
                          "cannot be turned on after bootstrap has finished")
    box.cfg["replication_anon"] = False
    box_sync_replication(box, False)
    master = replicaset_leader(box.replicaset)
    if master is None or master.applier is None \
            or master.applier.state != ApplierState.CONNECTED:
        raise ClientError(ErrorCode.ER_CANNOT_REGISTER)
    master.applier.applier_resume_to_state(ApplierState.REGISTERED, TIMEOUT_INFINITY)
    master.applier.applier_resume_to_state(ApplierState.READY, TIMEOUT_INFINITY)
    replicaset_follow(box.replicaset)
    replicaset_sync(box.replicaset)


__all__ = ["bootstrap", "bootstrap_master", "bootstrap_from_master", "box_sync_replication",
           "box_set_replication", "box_set_replication_anon", "CLUSTER_ID"]
