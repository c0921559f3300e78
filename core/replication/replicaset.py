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
from spindle.core.wal.gc import gc_consumer_unregister

from .instance_api import ReplicationInstanceApi
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
    # replicaset.applier.vclock: what the appliers have handed to the WAL, written or
    # not yet (rows at or below it are skipped); back to replicaset.vclock on rollback
    vclock: VClock = field(default_factory=VClock)


class ReplicaSet:
    def __init__(self, sched, box: ReplicationInstanceApi):
        """replication_init()."""
        self.sched = sched
        self.box = box
        self.hash: dict[str, Replica] = {}
        self.by_id: dict[int, Replica] = {}
        self.anon: list[Replica] = []
        self.applier = ApplierCounters(cond=Cond(sched))
        self.is_joining = False
        # replicaset.vclock while the WAL is not running (JOIN: the joined rows'
        # vclock, handed to the WAL when it starts); the WAL's own vclock after.
        self._vclock = VClock()
        # fn(replica, vclock) when a relay reports what its replica has acked
        # (the qsync limbo hooks in here)
        self.on_relay_ack: list[Callable[[Replica, VClock], None]] = []
        # fn(replica, relay) after a relay's state changed (relay.relay_set_state)
        # hook(replica, relay): replica None for the relay of a JOIN
        self.on_relay_state: list[Callable[[Replica | None, Any], None]] = []

    @property
    def vclock(self) -> VClock:
        wal = self.box.wal
        return wal.vclock if wal is not None else self._vclock

    @vclock.setter
    def vclock(self, value: VClock) -> None:
        self._vclock = value

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
        if replica.uuid is not None and self.hash.get(replica.uuid) is replica:
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
                    if replica.gc is not None and self.box.gc is not None:
                        # replica_clear_id(): the xlogs it kept may go now
                        gc_consumer_unregister(self.box.gc, replica.gc)
                        replica.gc = None
                    if replica.uuid == self.box.instance_uuid:
                        self.box.on_own_id_changed()
                    self.forget_if_unused(replica)
        if new_uuid is not None:
            replica = self.get_or_add(new_uuid)
            replica.id = replica_id
            replica.anon = False
            self.by_id[replica_id] = replica
            log.info("assigned id %d to replica %s", replica_id, new_uuid)
            if new_uuid == self.box.instance_uuid:
                self.box.on_own_id_changed()


def next_replica_id(cluster: dict[int, str]) -> int:
    """The lowest unused id 1..31 (ER_REPLICA_MAX when there is none)."""
    for replica_id in range(1, VCLOCK_MAX):
        if replica_id not in cluster:
            return replica_id
    raise ClientError(ErrorCode.ER_REPLICA_MAX, VCLOCK_MAX)


def box_register_replica(box: ReplicationInstanceApi, replica_id: int, uuid: str) -> None:
    """Insert [id, uuid] into `_cluster` (a normal logged write)."""
    from spindle.core.box.schema import CLUSTER_ID
    box.engine.space(CLUSTER_ID).insert([replica_id, uuid])


def box_on_join(box: ReplicationInstanceApi, uuid: str) -> int:
    """Register `uuid` with the lowest free id unless it already has one; its id."""
    existing = box.schema.replica_id_by_uuid(uuid)
    if existing:
        return existing
    replica_id = next_replica_id(box.schema.cluster)
    box_register_replica(box, replica_id, uuid)
    return replica_id


# ===================================================================== connect

class _ConnectState:
    """replicaset_connect_state: what the on_state triggers counted."""

    def __init__(self, sched):
        self.connected = 0
        self.failed = 0
        self.wakeup = Cond(sched)


def replicaset_quorum(replicaset: ReplicaSet) -> int:
    """min(replication_connect_quorum, number of configured appliers)."""
    cfg_quorum = replicaset.box.cfg.get("replication_connect_quorum")
    total = replicaset.applier.total
    if cfg_quorum is None:
        return total
    return min(int(cfg_quorum), total)


def replicaset_connect(replicaset: ReplicaSet, appliers: list, connect_quorum: bool) -> None:
    """Start `appliers`, wait for them to reach CONNECTED (each is paused there by
    its trigger), stop those that did not, and make the connected ones the
    replica set's (replicaset_update). On bootstrap (`connect_quorum`) everyone is
    tried for replication_connect_timeout and fewer than the quorum is an error;
    on a normal start reaching the quorum is enough."""
    box = replicaset.box
    if not connect_quorum:
        box.set_orphan(True, quiet=True)    # box_do_set_orphan: until replicaset_sync
    if not appliers:
        replicaset_update(replicaset, [])
        return
    count = len(appliers)
    cfg_quorum = box.cfg.get("replication_connect_quorum")
    quorum = count if cfg_quorum is None else min(count, int(cfg_quorum))
    timeout = float(box.cfg.get("replication_connect_timeout") or 30)
    state = _ConnectState(replicaset.sched)
    log.info("connecting to %d replicas", count)

    def applier_on_connect_f(applier) -> None:
        if applier.state in (ApplierState.OFF, ApplierState.STOPPED):
            state.failed += 1
        elif applier.state == ApplierState.CONNECTED:
            state.connected += 1
        else:
            return
        state.wakeup.signal()
        applier.applier_pause()

    triggers = []
    for applier in appliers:
        triggers.append((applier, applier.on_state.add(applier_on_connect_f)))
        applier.applier_start()
    deadline = replicaset.sched.clock() + timeout
    try:
        while state.connected < count:
            if count - state.failed < quorum:
                break          # the quorum can no longer be reached
            if state.connected >= quorum and not connect_quorum:
                break
            remaining = deadline - replicaset.sched.clock()
            if remaining <= 0 or not state.wakeup.wait(remaining):
                if replicaset.sched.clock() >= deadline:
                    break
        if state.connected < count:
            log.crit("failed to connect to %d out of %d replicas",
                     count - state.connected, count)
            if connect_quorum and state.connected < quorum:
                raise ClientError(ErrorCode.ER_CFG, "replication",
                                  "failed to connect to one or more replicas")
        else:
            log.info("connected to %d replicas", state.connected)
    except BaseException:
        for applier, trigger in triggers:
            applier.on_state.remove(trigger)
            applier.applier_stop()
        raise
    for applier, trigger in triggers:
        applier.on_state.remove(trigger)
        if applier.state != ApplierState.CONNECTED:
            applier.applier_stop()
    try:
        replicaset_update(replicaset, appliers)
    except BaseException:
        for applier in appliers:
            applier.applier_stop()
        raise


# ====================================================================== update

def replicaset_update(replicaset: ReplicaSet, appliers: list) -> None:
    """Make `appliers` the replica set's: connected ones go to `hash` by the peer's
    UUID (two appliers to one peer: ER_CFG duplicate connection), the rest to the
    `anon` list to be started again by replicaset_follow. Old appliers stop."""
    uniq: dict[str, Any] = {}
    anon_replicas: list[Replica] = []
    for applier in appliers:
        if applier.state != ApplierState.CONNECTED:
            anon_replicas.append(Replica(applier=applier))
            continue
        if applier.uuid in uniq:
            raise ClientError(ErrorCode.ER_CFG, "replication",
                              "duplicate connection to the same replica")
        uniq[applier.uuid] = applier
    registered = sum(1 for r in replicaset.hash.values() if r.id)
    new_members = sum(1 for uuid in uniq if not (replicaset.hash.get(uuid) or Replica()).id)
    if registered + new_members > VCLOCK_MAX - 1:
        raise ClientError(ErrorCode.ER_REPLICA_MAX, VCLOCK_MAX)

    # Everything checked: replace the old appliers.
    for replica in list(replicaset.hash.values()):
        if replica.applier is not None:
            old = replica.applier
            replica_clear_applier(replicaset, replica)
            old.applier_stop()
            replicaset.forget_if_unused(replica)
    for replica in replicaset.anon:
        replica.applier.applier_stop()
    counters = replicaset.applier
    counters.total = len(appliers)
    counters.connected = counters.loading = counters.synced = 0
    for uuid, applier in uniq.items():
        replica = replicaset.get_or_add(uuid)
        replica_set_applier(replicaset, replica, applier)
        replica.applier_sync_state = ApplierState.CONNECTED
        counters.connected += 1
    for replica in anon_replicas:
        replica_set_applier(replicaset, replica, replica.applier)
        replica.applier_sync_state = ApplierState.DISCONNECTED
    replicaset.anon = anon_replicas
    counters.cond.broadcast()


def replica_set_applier(replicaset: ReplicaSet, replica: Replica, applier) -> None:
    replica.applier = applier

    def on_state(applier_) -> None:
        replica_on_applier_state_f(replicaset, replica)
    replica.extra["on_applier_state"] = applier.on_state.add(on_state)


def replica_clear_applier(replicaset: ReplicaSet, replica: Replica) -> None:
    trigger = replica.extra.pop("on_applier_state", None)
    if trigger is not None and replica.applier is not None:
        try:
            replica.applier.on_state.remove(trigger)
        except ValueError:
            pass
    replica.applier = None


# ------------------------------------------------------- applier state changes

def replica_on_applier_state_f(replicaset: ReplicaSet, replica: Replica) -> None:
    """The permanent trigger of every replica's applier: keep the counters that
    replicaset_sync and the orphan mode depend on."""
    state = replica.applier.state
    if state == ApplierState.INITIAL_JOIN:
        replicaset.is_joining = True
    elif state == ApplierState.JOINED:
        replicaset.is_joining = False
    elif state == ApplierState.CONNECTED:
        if replica.uuid is None:
            replica_on_applier_connect(replicaset, replica)
        else:
            replica_on_applier_reconnect(replicaset, replica)
    elif state in (ApplierState.LOADING, ApplierState.DISCONNECTED, ApplierState.STOPPED):
        replica_on_applier_disconnect(replicaset, replica)
    elif state in (ApplierState.FOLLOW, ApplierState.OFF):
        # OFF: connection to self, or cancelled: counts as synced, as in 2.6.0
        if replica.applier_sync_state == ApplierState.CONNECTED:
            replica_on_applier_sync(replicaset, replica)
    replicaset.applier.cond.broadcast()


def replica_on_applier_connect(replicaset: ReplicaSet, replica: Replica) -> None:
    """An applier from the `anon` list connected at last: hash it by UUID."""
    applier = replica.applier
    uuid = applier.uuid
    if replica in replicaset.anon:
        replicaset.anon.remove(replica)
    existing = replicaset.hash.get(uuid)
    if existing is not None and existing is not replica:
        if existing.applier is not None:
            # A second applier to one peer: 2.6.0 stops the newcomer.
            log.error("duplicate connection to the same replica %s", uuid)
            replica_clear_applier(replicaset, replica)
            applier.diag = ClientError(ErrorCode.ER_CFG, "replication",
                                       "duplicate connection to the same replica")
            replicaset.sched.spawn(applier.applier_stop, name="applier.stop")
            return
        replica_clear_applier(replicaset, replica)
        replica_set_applier(replicaset, existing, applier)
        replica = existing
    else:
        replica.uuid = uuid
        replicaset.hash[uuid] = replica
    replica.applier_sync_state = ApplierState.CONNECTED
    replicaset.applier.connected += 1


def replica_on_applier_reconnect(replicaset: ReplicaSet, replica: Replica) -> None:
    counters = replicaset.applier
    if replica.applier_sync_state == ApplierState.LOADING:
        counters.loading -= 1
    if replica.applier_sync_state in (ApplierState.LOADING, ApplierState.DISCONNECTED,
                                      ApplierState.STOPPED):
        counters.connected += 1
        replica.applier_sync_state = ApplierState.CONNECTED


def replica_on_applier_disconnect(replicaset: ReplicaSet, replica: Replica) -> None:
    counters = replicaset.applier
    previous = replica.applier_sync_state
    if previous == ApplierState.SYNC:
        counters.synced -= 1
        counters.connected -= 1
    elif previous == ApplierState.CONNECTED:
        counters.connected -= 1
    elif previous == ApplierState.LOADING:
        counters.loading -= 1
    replica.applier_sync_state = replica.applier.state
    if replica.applier_sync_state == ApplierState.LOADING:
        counters.loading += 1


def replica_on_applier_sync(replicaset: ReplicaSet, replica: Replica) -> None:
    replica.applier_sync_state = ApplierState.SYNC
    replicaset.applier.synced += 1
    replicaset_check_quorum(replicaset)


def replicaset_check_quorum(replicaset: ReplicaSet) -> None:
    """Leave orphan mode once enough appliers are synced."""
    if replicaset.applier.synced >= replicaset_quorum(replicaset):
        replicaset.box.set_orphan(False)


# ================================================================ leader choice

def replicaset_round(replicaset: ReplicaSet, skip_ro: bool) -> Replica | None:
    """The best bootstrap leader among connected peers by their VOTE ballots:
    not loading first, then the greatest vclock, then the lowest UUID."""
    leader = None
    for replica in replicaset.hash.values():
        applier = replica.applier
        if applier is None or applier.ballot is None:
            continue
        ballot = applier.ballot
        if skip_ro and ballot.is_ro:
            continue
        if leader is None:
            leader = replica
            continue
        best = leader.applier.ballot
        if ballot.is_loading != best.is_loading:
            if not ballot.is_loading:
                leader = replica
            continue
        cmp = ballot.vclock.compare(best.vclock, ignore0=True)
        if cmp is None or cmp < 0:
            continue
        if cmp == 0:
            # (the replicas of `hash` have the UUIDs they are keyed by)
            assert replica.uuid is not None and leader.uuid is not None
            if replica.uuid > leader.uuid:
                continue
        leader = replica
    return leader


def replicaset_leader(replicaset: ReplicaSet) -> Replica | None:
    """Read-only peers are skipped unless every peer is read-only."""
    return replicaset_round(replicaset, True) or replicaset_round(replicaset, False)


# ============================================================== follow and sync

def replicaset_follow(replicaset: ReplicaSet) -> None:
    """Resume the paused appliers; start again those that never connected."""
    for replica in list(replicaset.hash.values()):
        if replica.applier is not None:
            replica.applier.applier_resume()
    for replica in list(replicaset.anon):
        replica.applier.applier_start()


def replicaset_sync(replicaset: ReplicaSet) -> None:
    """Stay orphan (read-only) until `quorum` appliers are synced or
    replication_sync_timeout passes; appliers keep trying afterwards and the
    instance leaves orphan mode when they make it."""
    box = replicaset.box
    quorum = replicaset_quorum(replicaset)
    if quorum == 0:
        box.set_orphan(False)
        return
    counters = replicaset.applier
    log.info("synchronizing with %d replicas", quorum)
    deadline = replicaset.sched.clock() + float(box.cfg.get("replication_sync_timeout") or 300)
    while counters.synced < quorum and counters.connected + counters.loading >= quorum:
        remaining = deadline - replicaset.sched.clock()
        if remaining <= 0:
            break
        counters.cond.wait(remaining)
    if counters.synced < quorum:
        log.crit("failed to synchronize with %d out of %d replicas",
                 counters.total - counters.synced, counters.total)
        box.set_orphan(True)
    else:
        log.info("replica set sync complete")
        box.set_orphan(False)
