"""box.info and box.snapshot() for Lua (lua/box/info.lua).

box.info's fields come from Box.info(), completed with what 2.6.0 also shows
(package, replication, replication_anon); box.session is lua/session.py's.
"""
from __future__ import annotations

from ..runtime import read_source


class InfoApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        self.sched = runtime.sched
        natives = {
            "info": self.info, "gc": self.gc, "memory": self.memory,
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
        vclock = info.get("vclock") or {}
        if "replication" not in info:
            info["replication"] = {
                rid: {"id": rid, "uuid": uuid, "lsn": vclock.get(rid, 0)}
                for rid, uuid in sorted(box.schema.cluster.items())}
        info.setdefault("replication_anon", {"count": 0})
        return info

    def gc(self) -> dict:
        gc = self.storage.box.gc
        if gc is None:
            return {"vclock": {}, "signature": 0, "checkpoint_is_in_progress": False,
                    "checkpoints": [], "consumers": []}
        return gc.info()

    def memory(self, lua_bytes) -> dict:
        engine = self.storage.box.engine
        data = index = 0
        for space in engine.spaces.values():
            data += space.bsize()
            index += sum(idx.bsize() for idx in space.indexes.values())
        return {"cache": 0, "data": data, "index": index, "lua": int(lua_bytes or 0),
                "net": 0, "tx": 0}

    def snapshot(self) -> str:
        self.storage.box.snapshot()
        return "ok"
