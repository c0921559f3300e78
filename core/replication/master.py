"""What a master does with JOIN, SUBSCRIBE, FETCH_SNAPSHOT and REGISTER (box.cc of the
seed: box_process_join, box_process_subscribe, box_process_fetch_snapshot,
box_process_register).

Each handler makes 2.6.0's checks in 2.6.0's order (iproto.md §8.2) and raises
Tarantool's error, which the IPROTO server sends with the request's sync; then it
hands the connection to the relay (relay.py). JOIN, FETCH_SNAPSHOT and REGISTER
return with the connection still open: the replica's SUBSCRIBE follows on it.

A WAL GC consumer "replica <uuid>" keeps the xlogs a registered replica still needs:
made at JOIN or REGISTER (first at the vclock the stage starts from, moved to the
stop vclock at the end) or at the first SUBSCRIBE; anonymous replicas have none.
"""
from __future__ import annotations

from spindle.core import log
from spindle.core.box.access import Priv
from spindle.core.box.schema import CLUSTER_ID
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import (
    ER_TOO_EARLY_SUBSCRIBE, ClientError, ErrorCode, LaterClientError, read_only_error,
)
from spindle.core.iproto.replication import (
    decode_join, decode_register, decode_subscribe, encode_raft, encode_subscribe_response,
    encode_vclock_row,
)
from spindle.core.wal.gc import (
    gc_consumer_advance, gc_consumer_register, gc_consumer_unregister,
)

from .instance_api import ReplicationInstanceApi
from .relay import (
    Relay, relay_set_state, relay_stop, relay_subscribe, replication_disconnect_timeout,
)
from .relay_join import join_write_timeout, relay_final_join, relay_initial_join
from .replica import RelayState
from .replicaset import box_on_join
from .wal_tail import wal_tail_of


def box_process_replication(executor, session, request, stream) -> None:
    """BoxExecutor.replication(): tx_process_replication() of iproto.cc."""
    kind = request.type
    if kind == IprotoType.JOIN:
        box_process_join(executor, session, request, stream)
    elif kind == IprotoType.SUBSCRIBE:
        box_process_subscribe(executor, session, request, stream)
    elif kind == IprotoType.FETCH_SNAPSHOT:
        box_process_fetch_snapshot(executor, session, request, stream)
    elif kind == IprotoType.REGISTER:
        box_process_register(executor, session, request, stream)
    else:
        raise ClientError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, kind)


# ------------------------------------------------------------------ checks

def box_check_writable(box: ReplicationInstanceApi) -> None:
    """ER_READONLY while the instance is read-only (whatever the reason)."""
    if box.read_only:
        raise read_only_error()


def box_check_wal_mode(box: ReplicationInstanceApi) -> None:
    if box.wal is None or box.wal.mode == "none":
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "Replication", "wal_mode = 'none'")


def check_not_self(box: ReplicationInstanceApi, uuid: str) -> None:
    if box.instance_uuid is not None and uuid == box.instance_uuid.lower():
        raise ClientError(ErrorCode.ER_CONNECTION_TO_SELF)


def _registered_id(box: ReplicationInstanceApi, uuid: str) -> int:
    return box.schema.replica_id_by_uuid(uuid) or 0


def _register_consumer(box: ReplicationInstanceApi, uuid: str, vclock):
    assert box.gc is not None       # box_check_wal_mode passed: the WAL and its GC run
    return gc_consumer_register(box.gc, vclock, f"replica {uuid}")


def _hand_consumer(box: ReplicationInstanceApi, uuid: str, consumer) -> None:
    """The stage is done: the consumer becomes the replica's (an older one goes)."""
    replica = box.replicaset.get_or_add(uuid)
    if replica.gc is not None and replica.gc is not consumer:
        assert box.gc is not None   # a consumer was registered: GC runs
        gc_consumer_unregister(box.gc, replica.gc)
    replica.gc = consumer


# -------------------------------------------------------------------- JOIN

def box_process_join(executor, session, request, stream) -> None:
    join = decode_join(request.row)
    box = executor.loaded_box                     # ER_LOADING until box.cfg is done
    uuid = join.instance_uuid
    check_not_self(box, uuid)
    access = executor.access
    access.check_universe(session.euid, Priv.R)
    if not _registered_id(box, uuid):
        box_check_writable(box)
        access.check_space(session.euid, box.engine.space(CLUSTER_ID), Priv.W)
    box_check_wal_mode(box)

    sync = request.sync
    log.info("joining replica %s at %s", uuid, stream.peer)
    wal_tail_of(box.wal, box.sched)               # before any vclock is taken
    consumer = _register_consumer(box, uuid, box.vclock)
    try:
        start = relay_initial_join(box, stream, sync, join.version_id)
        log.info("initial data sent.")
        box_on_join(box, uuid)                    # into _cluster, lowest free id
        stop = box.vclock.copy()
        stream.write_row(encode_vclock_row(stop), sync, join_write_timeout(box))
        send_final_stage(box, stream, sync, start, stop, uuid, consumer)
        consumer = None
    finally:
        if consumer is not None:
            gc_consumer_unregister(box.gc, consumer)


def send_final_stage(box: ReplicationInstanceApi, stream, sync: int, start, stop, uuid: str,
                     consumer) -> None:
    """JOIN's and REGISTER's last stage: the WAL rows (start, stop], OK {vclock}; the
    GC consumer then keeps the WAL from `stop` on for the replica."""
    relay_final_join(box, stream, sync, start, stop)
    log.info("final data sent.")
    stream.write_row(encode_vclock_row(box.vclock), sync, join_write_timeout(box))
    assert box.gc is not None       # the consumer is registered: GC runs
    gc_consumer_advance(box.gc, consumer, stop)
    _hand_consumer(box, uuid, consumer)


# ---------------------------------------------------------- FETCH_SNAPSHOT

def box_process_fetch_snapshot(executor, session, request, stream) -> None:
    box = executor.loaded_box
    executor.access.check_universe(session.euid, Priv.R)
    box_check_wal_mode(box)
    sync = request.sync
    log.info("sending current read-view to replica at %s", stream.peer)
    wal_tail_of(box.wal, box.sched)
    relay_initial_join(box, stream, sync)
    log.info("read-view sent.")
    stream.write_row(encode_vclock_row(box.vclock), sync, join_write_timeout(box))


# ---------------------------------------------------------------- REGISTER

def box_process_register(executor, session, request, stream) -> None:
    register = decode_register(request.row)
    box = executor.loaded_box
    uuid = register.instance_uuid
    check_not_self(box, uuid)
    access = executor.access
    access.check_universe(session.euid, Priv.R)
    if _registered_id(box, uuid):
        raise ClientError(ErrorCode.ER_REPLICA_NOT_ANON, uuid)
    box_check_writable(box)
    access.check_space(session.euid, box.engine.space(CLUSTER_ID), Priv.W)
    box_check_wal_mode(box)

    sync = request.sync
    log.info("registering replica %s at %s", uuid, stream.peer)
    wal_tail_of(box.wal, box.sched)
    consumer = _register_consumer(box, uuid, box.vclock)
    try:
        start = box.vclock.copy()
        box_on_join(box, uuid)
        send_final_stage(box, stream, sync, start, box.vclock.copy(), uuid, consumer)
        consumer = None
    finally:
        if consumer is not None:
            gc_consumer_unregister(box.gc, consumer)


# --------------------------------------------------------------- SUBSCRIBE

def box_process_subscribe(executor, session, request, stream) -> None:
    sub = decode_subscribe(request.row)
    box = executor.loaded_box
    uuid = sub.instance_uuid
    check_not_self(box, uuid)
    if box.cfg.get("replication_anon") and not sub.anon:
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "Anonymous replica",
                          "non-anonymous followers.")
    executor.access.check_universe(session.euid, Priv.R)
    replica_id = _registered_id(box, uuid)
    if not sub.anon and not replica_id:
        if box.raft.is_enabled:
            # 2.6.1+: on a bootstrap with election the leader registers the others
            # one by one, and a _cluster row may reach this node after its
            # subscriber: the applier retries (2.6.0 says ER_UNKNOWN_REPLICA, and
            # with election off so does Spindle)
            raise LaterClientError(ER_TOO_EARLY_SUBSCRIBE, "Can't subscribe non-anonymous "
                                   f"replica {uuid} until join is done")
        raise ClientError(ErrorCode.ER_UNKNOWN_REPLICA, uuid, box.schema.replicaset_uuid)
    # (2.6.0 lets a registered UUID subscribe as anonymous: it is served as the
    # registered replica it is; later versions refuse it.)
    replicaset = box.replicaset
    replica = replicaset.replica_by_uuid(uuid)
    if replica is not None and replica.relay is not None \
            and replica.relay.state == RelayState.FOLLOW:
        raise ClientError(ErrorCode.ER_CFG, "replication",
                          "duplicate connection with the same replica UUID")
    box_check_wal_mode(box)

    if replica is None:
        replica = replicaset.get_or_add(uuid)
    if sub.anon and not replica_id:
        replica.anon = True
    # The relay is FOLLOW from here on, before the first yield: a second SUBSCRIBE
    # with this UUID is refused even while this one is still answering.
    sync = request.sync
    relay = Relay(box.sched, box, replica, stream, sync)
    replica.relay = relay
    relay_set_state(relay, RelayState.FOLLOW)
    # The replica's component 0 counts its own local rows: ours replaces it, so the
    # cursor and the GC consumer start after this instance's local rows.
    replica_clock = sub.vclock.copy()
    replica_clock.reset(0, box.vclock.get(0))
    try:
        if not sub.anon and (replica.gc is None or replica.gc.is_inactive):
            replica.gc = _register_consumer(box, uuid, replica_clock)
        wal_tail_of(box.wal, box.sched)
        vclock = box.vclock.copy()
        stream.write_row(encode_subscribe_response(
            box.instance_id, vclock, box.schema.replicaset_uuid), sync,
            replication_disconnect_timeout(box))
        raft = box.raft
        if raft.is_enabled:
            # 2.6.3: the persisted Raft state right after the response, without a
            # sync; nothing when election is off (a 2.6.0 peer sees no change)
            stream.write_row(encode_raft(raft.checkpoint_remote()), 0,
                             replication_disconnect_timeout(box))
    except BaseException:
        relay_stop(relay)
        raise
    log.info("subscribed replica %s at %s", uuid, stream.peer)
    log.info("remote vclock %s local vclock %s", sub.vclock, vclock)
    relay_subscribe(relay, replica_clock, sub.version_id, sub.id_filter)
