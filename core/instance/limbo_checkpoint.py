"""Checkpoints and the limbo.

A snapshot holds no limbo (2.6.0's format has no place for it), so it must not hold
changes that are still waiting for a quorum: a ROLLBACK written after the snapshot
could not undo them after a restart. So a checkpoint is taken only with an empty
limbo:

* box.snapshot() first waits for the pending transactions, as 2.6.0's
  gc_do_checkpoint does (txn_limbo_wait_confirm: ER_SYNC_ROLLBACK or
  ER_SYNC_QUORUM_TIMEOUT when the newest of them does not commit). On the limbo's
  owner the checkpoint gate is closed meanwhile: new transactions that would enter
  the limbo wait before their WAL write, so the queue drains even under constant
  load (for about one CONFIRM round trip).
* A replica cannot hold its master's stream (the CONFIRM it waits for comes behind
  newer transactions): it waits up to 2 × replication_synchro_timeout for an empty
  moment, then the snapshot is refused.
* The read view refuses a non-empty limbo. When that happens to the checkpoint
  daemon on the limbo's owner, a fiber closes the gate, lets the limbo drain and
  makes the scheduled checkpoint then, instead of skipping it for a whole interval.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

from spindle.core import log
from spindle.core.iproto.errors import ClientError, ErrorCode

from .limbo_txn import LimboWaiters, synchro_timeout_of

if TYPE_CHECKING:
    from .box import Box


class CheckpointGate:
    """Closed while a checkpoint drains the limbo; transactions that would enter
    the limbo wait in `pass_()` (cancellable: nothing of theirs is written yet)."""

    def __init__(self, sched):
        self.sched = sched
        self.closed = False
        self._waiters = LimboWaiters(sched)

    def close(self) -> None:
        self.closed = True

    def open(self) -> None:
        if self.closed:
            self.closed = False
            self._waiters.broadcast()

    def pass_(self) -> None:
        me = self.sched.current
        while self.closed:
            me.testcancel()
            self._waiters.wait(None)


def _own_limbo(box: Box) -> bool:
    return bool(box.limbo.queue) and box.limbo.owner_id == box.instance_id


def drain(box: Box) -> None:
    """Wait until the limbo is empty (2.6.0's errors when the pending transactions
    do not commit); gives up after 2 × replication_synchro_timeout."""
    limbo = box.limbo
    deadline = box.sched.clock() + 2 * synchro_timeout_of(box)
    while limbo.queue and box.sched.clock() < deadline:
        limbo.txn_limbo_wait_confirm()


@contextlib.contextmanager
def checkpoint_gate(box: Box) -> Iterator[None]:
    """box.snapshot(): drain the limbo, keep it empty until the read view is made
    (checkpoint_read_view opens the gate then), open the gate whatever happens."""
    gate = box.checkpoint_gate
    if _own_limbo(box):
        gate.close()
    try:
        drain(box)
        yield
    finally:
        gate.open()


def checkpoint_read_view(box: Box):
    """The checkpointer's read view: only of an empty limbo."""
    if box.limbo.queue:
        if _own_limbo(box) and not box.checkpoint_gate.closed:
            box.sched.spawn(_drain_then_checkpoint, box, name="checkpoint_gate")
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "Checkpoint",
                          "unconfirmed synchronous transactions")
    view = box.read_view()
    box.checkpoint_gate.open()
    return view


def _drain_then_checkpoint(box: Box) -> None:
    """The daemon's checkpoint met pending transactions: drain them behind the
    closed gate and make the checkpoint now."""
    try:
        checkpointer = box.checkpointer
        assert checkpointer is not None   # (its daemon is who comes here)
        with checkpoint_gate(box):
            checkpointer.checkpoint(is_scheduled=True)
    except Exception as exc:   # noqa: BLE001 - logged as the daemon logs its failures
        log.error("checkpoint after draining the limbo failed: %s", exc)
