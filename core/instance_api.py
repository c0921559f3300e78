"""What the layers below the instance may use of it: the `InstanceApi` protocol.

The instance (core/instance/box.py's Box) sits above the engine, the WAL,
replication and the request executor, and hands itself down to them. They must not
import it (that would be a cycle of packages), so they see it through this
protocol instead: every name here is one the Box defines, in Box.__init__ or as a
method or property of its own, and nothing below the instance sets any of them.

This module names types of core/box, core/wal and core/fiber for the type checker
only; it imports nothing at run time, so any package may import it. The request
executor (core/net) takes an `InstanceApi`; replication, which also needs the
replica set, takes core/replication/instance_api.py's `ReplicationInstanceApi`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Protocol

if TYPE_CHECKING:
    from spindle.core.box.limbo import TxnLimbo
    from spindle.core.box.schema import Schema
    from spindle.core.box.txn import Engine
    from spindle.core.fiber.scheduler import Scheduler
    from spindle.core.vclock import VClock
    from spindle.core.wal.gc import GarbageCollector
    from spindle.core.wal.writer import WalWriter


class InstanceApi(Protocol):
    """One instance, as the executor, relays, appliers and the WAL's users see it."""

    sched: Scheduler
    # box.cfg as configured; dynamic options are read at every use
    cfg: dict[str, Any]
    engine: Engine
    schema: Schema
    # the limbo of synchronous transactions (made with the box, empty when unused)
    limbo: TxnLimbo
    # the WAL and its garbage collector: None until box.cfg has started them
    # (JOIN and bootstrap run before they exist)
    wal: WalWriter | None
    gc: GarbageCollector | None
    # box.info.status: unconfigured, loading, orphan, running
    status: str
    # why writes are refused ("config", "orphan", ...); empty when writable
    read_only_reasons: set[str]
    instance_uuid: str | None

    @property
    def configured(self) -> bool:
        """The first box.cfg has begun (status is not "unconfigured")."""
        ...

    @property
    def read_only(self) -> bool:
        ...

    def check_writable(self, space: Any) -> None:
        """ER_READONLY for a write to `space` (box_process1's rule)."""
        ...

    @property
    def instance_id(self) -> int:
        """This instance's id in `_cluster`, 0 while it has none."""
        ...

    @property
    def greeting_uuid(self) -> str | None:
        """The instance UUID, or the one it will have once started."""
        ...

    @property
    def vclock(self) -> VClock:
        """What the WAL has written (an empty vclock before it runs)."""
        ...

    def read_view(self) -> Iterable:
        """A frozen view of every memtx space's rows, (space_id, tuple, group_id)
        each, for a snapshot or an initial JOIN."""
        ...
