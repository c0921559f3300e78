"""Synchronous replication on the replica set's side: ACKs into the limbo
(tx_status_update of seeds/qsync.rst) and box.ctl.clear_synchro_queue().

Relays are fibers of the tx thread here, so a relay's ACK reaches the limbo directly
from its reader fiber; when it completes a quorum, that fiber writes the CONFIRM.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from spindle.core.box.limbo import quorum_confirm_lsn
from spindle.core.replication.replica import RelayState, Replica
from spindle.core.vclock import VClock

from .limbo_txn import synchro_quorum_of, synchro_timeout_of

if TYPE_CHECKING:
    from .box import Box


def limbo_on_relay_ack(box: Box, replica: Replica, vclock: VClock) -> None:
    """ReplicaSet.on_relay_ack: the replica has our rows up to vclock[our id].
    Only the limbo owner collects ACKs. Anonymous replicas (id 0) do not count:
    they are not members of the quorum's replica set."""
    limbo = box.limbo
    own = box.instance_id
    if not own or not replica.id or limbo.owner_id != own or not limbo.queue:
        return
    limbo.txn_limbo_ack(replica.id, vclock.get(own))


def _acked_lsns(box: Box, owner_id: int) -> list[int]:
    """What each registered peer with a live relay has of `owner_id`'s rows, and
    what this instance has."""
    lsns = []
    for replica in box.replicaset.replicas():
        relay = replica.relay
        if (replica.id and not replica.anon and replica.uuid != box.instance_uuid
                and relay is not None and relay.state == RelayState.FOLLOW):
            lsns.append(relay.vclock.get(owner_id))
    lsns.append(box.vclock.get(owner_id))
    return lsns


def box_clear_synchro_queue(box: Box) -> None:
    """box.ctl.clear_synchro_queue(): a new master takes over the limbo. Give the
    former owner's CONFIRM/ROLLBACK 2 × replication_synchro_timeout to arrive, then
    confirm what a quorum of the live peers has and roll back the rest.

    On the limbo's owner it does nothing, as in 2.6.0: the owner's pending
    transactions are decided by their quorum or by their committers' timeouts,
    never by this call — nor are ones recovered after a restart, which stay
    pending until ACKs bring their quorum (2.6.0 leaves them so too)."""
    limbo = box.limbo
    if not box.configured or box.wal is None or limbo.txn_limbo_is_empty():
        return
    former = limbo.owner_id
    if former == box.instance_id:
        return
    if limbo.txn_limbo_wait_empty(2 * synchro_timeout_of(box)):
        return
    if limbo.txn_limbo_is_empty() or limbo.owner_id != former:
        return
    confirm_lsn = quorum_confirm_lsn(_acked_lsns(box, former), synchro_quorum_of(box))
    limbo.txn_limbo_force_empty(confirm_lsn)
