"""box.info and box.snapshot() for Lua (lua/box/info.lua).

box.info's fields come from Box.info(), completed with what 2.6.0 also shows
(package, replication, replication_anon); box.session is lua/session.py's.
"""
from __future__ import annotations

from spindle.core.instance.limbo_txn import synchro_info
from spindle.core.replication.replica import ApplierState, RelayState

from ..runtime import read_source


class InfoApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        self.sched = runtime.sched
        natives = {
            "info": self.info, "gc": self.gc, "memory": self.memory,
            "replication_anon": self.replication_anon,
            "sql": lambda: {"cache": {"size": 0, "stmt_count": 0}},
            "vinyl": lambda: {},
        }
        blocking = {"snapshot": self.snapshot}
        helpers = runtime.table({"map_mt": runtime.convert.map_mt})
        chunk = runtime.load(read_source("box/info.lua"), "@box/info.lua")
        self.lua = chunk(runtime.table({k: runtime.bridge(v) for k, v in natives.items()}),
                         runtime.table(blocking), runtime.wait, box_table, helpers)

    # ----------------------------------------------------------------- info

    def info(self) -> dict:
        box = self.storage.box
        info = dict(box.info())
        info.setdefault("package", "Tarantool")
        info["replication"] = replication_info(box)
        info["replication_anon"] = {"count": len(box.replicaset.anon_replicas())}
        info["synchro"] = synchro_info(box)      # the 2.7.3+ field
        iproto = getattr(self.storage.instance, "iproto", None)
        listen = iproto.listen_address() if iproto is not None else None
        if listen is not None:                   # absent (nil) when not listening
            info["listen"] = listen
        return info

    def replication_anon(self) -> dict:
        """box.info.replication_anon(): uuid -> info of anonymous replicas following us."""
        box = self.storage.box
        return {replica.uuid: replica_info(box, replica, 0)
                for replica in box.replicaset.anon_replicas()}

    def gc(self) -> dict:
        gc = self.storage.box.gc
        if gc is None:
            return {"vclock": {}, "signature": 0, "checkpoint_is_in_progress": False,
                    "checkpoints": [], "consumers": []}
        return gc.info()

    def memory(self, lua_bytes) -> dict:
        """box.info.memory(): tuples and indexes as box.slab.info() counts them."""
        data, index, _quota = self.storage.stat.memory()
        return {"cache": 0, "data": data, "index": index, "lua": int(lua_bytes or 0),
                "net": 0, "tx": 0}

    def snapshot(self) -> str:
        self.storage.box.snapshot()
        return "ok"


# ---------------------------------------------------------- box.info.replication

def replication_info(box) -> dict:
    """id -> {id, uuid, lsn, upstream, downstream} for every registered replica, as
    2.6.0 shows it (box_info.md §2); the instance's own entry has neither."""
    replicaset = box.replicaset
    result = {}
    for replica_id, uuid in sorted(box.schema.cluster.items()):
        replica = replicaset.replica_by_id(replica_id) or replicaset.replica_by_uuid(uuid)
        result[replica_id] = replica_info(box, replica, replica_id, uuid)
    return result


def replica_info(box, replica, replica_id: int, uuid: str | None = None) -> dict:
    entry = {"id": replica_id, "uuid": uuid or (replica.uuid if replica else None),
             "lsn": box.vclock.get(replica_id, 0) if replica_id else 0}
    if replica is None:
        return entry
    upstream = upstream_info(replica.applier)
    if upstream is not None:
        entry["upstream"] = upstream
    downstream = downstream_info(replica.relay)
    if downstream is not None:
        entry["downstream"] = downstream
    return entry


def upstream_info(applier) -> dict | None:
    if applier is None or applier.state == ApplierState.OFF:
        return None
    info = {"status": applier.state.value, "idle": applier.idle(), "peer": applier.peer,
            "lag": applier.lag}
    _add_error(info, applier.diag)
    return info


def downstream_info(relay) -> dict | None:
    if relay is None or relay.state == RelayState.OFF:
        return None
    info = {"status": relay.state.value}
    if relay.state == RelayState.FOLLOW:
        info["idle"] = relay.idle()
        info["vclock"] = relay.vclock.to_dict()
        info["lag"] = relay.lag
    else:
        info["message"] = relay.message
        if getattr(relay, "system_message", None):
            info["system_message"] = relay.system_message
    return info


def _add_error(info: dict, error) -> None:
    if error is None:
        return
    info["message"] = getattr(error, "message", None) or str(error)
    errno = getattr(error, "errno", 0)
    if errno:
        import os
        info["system_message"] = os.strerror(errno)
