"""box.ctl for Lua (lua/box/ctl.lua): wait_ro / wait_rw, replication_restart,
clear_synchro_queue and (2.6.3) promote."""
from __future__ import annotations

from typing import Any

from spindle.core.replication.replica import ApplierState
from spindle.core.instance.synchro import box_clear_synchro_queue

from ..runtime import read_source


class CtlApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        runtime = storage.runtime
        blocking = {"wait_ro": self.wait_ro, "replication_restart": self.replication_restart,
                    "clear_synchro_queue": self.clear_synchro_queue,
                    "promote": self.promote}
        chunk = runtime.load(read_source("box/ctl.lua"), "@box/ctl.lua")
        self.lua = chunk(runtime.table(blocking), runtime.wait, box_table,
                         storage.spaces.trigger_reset, runtime.globals.require(b"log"))
        run_shutdown = self.lua[b"run_shutdown"]
        storage.instance.shutdown_hooks.append(lambda: runtime.call(run_shutdown))

    def wait_ro(self, want_ro: bool, timeout: float | None) -> None:
        self.storage.box.wait_ro(bool(want_ro), timeout)

    def clear_synchro_queue(self) -> None:
        """2.6.0's with election off; with election on, 2.6.3's alias of promote."""
        box = self.storage.box
        if box.box_raft.mode != "off":
            box.box_raft.promoter.promote()
        else:
            box_clear_synchro_queue(box)

    def promote(self) -> None:
        self.storage.box.box_raft.promoter.promote()

    def replication_restart(self, peer: Any = None) -> int:
        """Start again every applier in `stopped` state (or the one to `peer`)."""
        replicaset = self.storage.box.replicaset
        restarted = 0
        for replica in list(replicaset.hash.values()) + list(replicaset.anon):
            applier = replica.applier
            if applier is None:
                continue
            if peer is None:
                if applier.state not in (ApplierState.STOPPED, ApplierState.OFF):
                    continue
            elif not (peer == replica.id or str(peer) == applier.uri_text):
                continue
            applier.restart()
            restarted += 1
        return restarted
