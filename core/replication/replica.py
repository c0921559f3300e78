"""One peer of the replica set, and the applier and relay state machines' states.

State values are Tarantool's status strings (box_info.md §3), so `box.info.replication`
shows `state.value` verbatim.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ApplierState(enum.Enum):
    OFF = "off"
    CONNECT = "connect"
    CONNECTED = "connected"
    AUTH = "auth"
    READY = "ready"
    INITIAL_JOIN = "initial_join"
    FINAL_JOIN = "final_join"
    JOINED = "joined"
    SYNC = "sync"
    FOLLOW = "follow"
    STOPPED = "stopped"
    DISCONNECTED = "disconnected"
    LOADING = "loading"
    FETCH_SNAPSHOT = "fetch_snapshot"
    FETCHED_SNAPSHOT = "fetched_snapshot"
    REGISTER = "register"
    REGISTERED = "registered"


class RelayState(enum.Enum):
    OFF = "off"            # never subscribed: no `downstream` in box.info
    FOLLOW = "follow"
    STOPPED = "stopped"


REPLICA_ID_NIL = 0
VCLOCK_MAX = 32            # at most 32 members: ids 1..31 (ER_REPLICA_MAX)


@dataclass(eq=False)
class Replica:
    """struct replica: what this instance knows of one peer. `id` comes from
    `_cluster` (0 while unregistered or anonymous); `applier` pulls from the peer,
    `relay` feeds it. The replica set keeps it while any of them is set."""

    uuid: str | None = None
    id: int = REPLICA_ID_NIL
    anon: bool = False
    applier: Any = None                       # applier.Applier
    relay: Any = None                         # relay.Relay (last subscribe's)
    gc: Any = None                            # wal.gc.Consumer of a non-anonymous replica
    applier_sync_state: ApplierState = ApplierState.DISCONNECTED
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<Replica id={self.id} uuid={self.uuid} anon={self.anon}>"
