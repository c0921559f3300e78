"""The instance as replication uses it: `ReplicationInstanceApi`.

Relays, appliers, the master's JOIN/SUBSCRIBE/REGISTER and the replica set take the
instance (core/instance/box.py's Box) as this protocol: core/instance_api.py's
`InstanceApi` and, besides, the replica set and the journal of replicated
transactions. Replication never imports core/instance; the instance hands itself
down (ReplicaSet(sched, box), Applier(sched, box, uri), the executor's box).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from spindle.core.instance_api import InstanceApi

if TYPE_CHECKING:
    from spindle.core.box.txn import Txn
    from spindle.core.iproto.xrow import XRow
    from spindle.core.raft.raft import Raft

    from .replicaset import ReplicaSet


class ReplicationInstanceApi(InstanceApi, Protocol):
    replicaset: ReplicaSet
    # the leader election's state machine (the instance's worker carries out what
    # it asks for): relays announce its state, appliers feed it messages
    raft: Raft

    def set_orphan(self, orphan: bool, quiet: bool = False) -> None:
        """box_set_orphan: read-only (and box.info.status "orphan") until synced."""
        ...

    def on_own_id_changed(self) -> None:
        """`_cluster` gave this instance an id or took it away."""
        ...

    # ---- the applier's transactions (core/replication/apply.py)

    def submit_replicated(self, rows: list[XRow],
                          done: Callable[[BaseException | None], None]) -> None:
        """The journal of replicated rows: to the WAL as they are (their master's
        REPLICA_ID/LSN), `done(error)` once written; no read-only check."""
        ...

    def apply_synchro_row(self, row: XRow) -> None:
        """A CONFIRM/ROLLBACK from the master decides the limbo's entries now (must
        not yield; may raise to refuse the row)."""
        ...

    def limbo_enter_replicated(self, txn: Txn, rows: list[XRow]) -> None:
        """A replicated transaction that is synchronous, or behind pending ones,
        enters the limbo with its master's LSN before its asynchronous write."""
        ...
