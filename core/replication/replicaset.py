"""The replica set (replication.cc of the seed): every peer this instance knows.

`hash` holds replicas by UUID (registered ones from `_cluster`, connected appliers,
subscribed anonymous replicas); `replica_by_id` those with an id; `anon` the appliers
that did not connect yet (the seed's name: they have no UUID to be hashed by).
`applier` counts what replicaset_sync waits for.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from spindle.core import log
from spindle.core.fiber import Cond
from spindle.core.fiber.trigger import TriggerList
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.vclock import VClock

from .replica import REPLICA_ID_NIL, VCLOCK_MAX, ApplierState, RelayState, Replica


@dataclass
class ApplierCounters:
    """replicaset.applier of the seed."""

    cond: Any
    total: int = 0
    connected: int = 0
    loading: int = 0
    synced: int = 0
    on_commit: TriggerList = field(default_factory=TriggerList)
    on_rollback: TriggerList = field(default_factory=TriggerList)
    diag: BaseException | None = None        # the shared diag of a failed apply


class ReplicaSet:
    def __init__(self, sched, box):
        """replication_init()."""
        self.sched = sched
        self.box = box
        self.hash: dict[str, Replica] = {}
        self.by_id: dict[int, Replica] = {}
        self.anon: list[Replica] = []
        self.applier = ApplierCounters(cond=Cond(sched))
        self.is_joining = False
        # fn(replica, vclock) when a relay reports what its replica has acked
        # (the qsync limbo hooks in here)
        self.on_relay_ack: list[Callable[[Replica, VClock], None]] = []

    # ------------------------------------------------------------- lookup

    def replica_by_uuid(self, uuid: str | None) -> Replica | None:
        return self.hash.get(uuid) if uuid else None

    def replica_by_id(self, replica_id: int) -> Replica | None:
        return self.by_id.get(replica_id)

    def replicas(self) -> list[Replica]:
        """Every replica with a UUID, registered ones by id first."""
        return sorted(self.hash.values(), key=lambda r: (r.id == 0, r.id, r.uuid or ""))

    def anon_replicas(self) -> list[Replica]:
        """Anonymous replicas following this instance (box.info.replication_anon)."""
        return [r for r in self.hash.values()
                if r.anon and r.relay is not None and r.relay.state != RelayState.OFF]

    def get_or_add(self, uuid: str) -> Replica:
        """The replica with `uuid`, created (without an id) when unknown."""
        replica = self.hash.get(uuid)
        if replica is None:
            replica = self.hash[uuid] = Replica(uuid=uuid)
        return replica

    def forget_if_unused(self, replica: Replica) -> None:
        """replica_delete() when nothing refers to the replica any more."""
        if replica.id or replica.applier is not None:
            return
        if replica.relay is not None and replica.relay.state == RelayState.FOLLOW:
            return
        if self.hash.get(replica.uuid) is replica:
            del self.hash[replica.uuid]

    # ------------------------------------------------------- _cluster triggers

    def on_cluster_change(self, replica_id: int, old_uuid: str | None,
                          new_uuid: str | None) -> None:
        """`_cluster` changed: replica_set_id() / replica_clear_id()."""
        if old_uuid is not None:
            replica = self.by_id.pop(replica_id, None)
            if replica is not None:
                replica.id = REPLICA_ID_NIL
                if new_uuid is None:
                    log.info("removed replica %s", replica.uuid)
                    if replica.uuid == self.box.instance_uuid:
                        self.box.on_own_id_changed()
                    self.forget_if_unused(replica)
        if new_uuid is not None:
            replica = self.get_or_add(new_uuid)
            replica.id = replica_id
            replica.anon = False
            self.by_id[replica_id] = replica
            if new_uuid == self.box.instance_uuid:
                self.box.on_own_id_changed()
            else:
                log.info("assigned id %d to replica %s", replica_id, new_uuid)


def next_replica_id(cluster: dict[int, str]) -> int:
    """The lowest unused id 1..31 (ER_REPLICA_MAX when there is none)."""
    for replica_id in range(1, VCLOCK_MAX):
        if replica_id not in cluster:
            return replica_id
    raise ClientError(ErrorCode.ER_REPLICA_MAX, VCLOCK_MAX)


def box_register_replica(box, replica_id: int, uuid: str) -> None:
    """Insert [id, uuid] into `_cluster` (a normal logged write)."""
    from spindle.core.box.schema import CLUSTER_ID
    box.engine.space(CLUSTER_ID).insert([replica_id, uuid])


def box_on_join(box, uuid: str) -> int:
    """Register `uuid` with the lowest free id unless it already has one; its id."""
    existing = box.schema.replica_id_by_uuid(uuid)
    if existing:
        return existing
    replica_id = next_replica_id(box.schema.cluster)
    box_register_replica(box, replica_id, uuid)
    return replica_id
