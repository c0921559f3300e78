"""The instance: one Tarantool process's database and replication, tied together.

This is the layer above the engine (core/box), the WAL (core/wal) and replication
(core/replication): each of those stays usable without the others, and only this
package knows all of them. Lua (lua/box) and the request executor reach the
instance through `Box`.

    box.py               Box, the facade: box.cfg's start (local recovery or
                         bootstrap, the WAL, GC, checkpoints), the journal, read-only
                         and orphan state, box.info, box.snapshot
    startup.py           bootstrap paths of server-startup-with-replication.txt:
                         bootstrap, bootstrap_master, bootstrap_from_master,
                         box_sync_replication, box_set_replication(_anon)
    limbo_txn.py         the limbo (core/box/limbo.py) wired into the box: fibers,
                         the WAL, local commits, replicated and recovered
                         transactions, box.info.synchro
    limbo_checkpoint.py  checkpoints only of an empty limbo (the checkpoint gate)
    synchro.py           the replica set's side of the limbo: relays' ACKs,
                         box.ctl.clear_synchro_queue()

The pure limbo (core/box/limbo.py, limbo_quorum.py) stays in the engine's package:
it touches no fiber, file or socket, replication reads it without a cycle, and
box.cfg's checks (core/box/cfg.py) need its quorum formula.
"""
