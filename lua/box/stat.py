"""box.runtime, box.stat, box.slab and box.backup for Lua (lua/box/stat.lua).

box.runtime is there before box.cfg (2.6.0 has it from the start); the rest comes
with the first box.cfg. The counters are core/box/stat.py's, the tuple memory
core/box/memtx_arena.py's, the checkpoint pins core/wal/gc.py's.
"""
from __future__ import annotations

import os

from spindle.core.box.cfg_options import QUOTA_MAX
from spindle.core.box.memtx_arena import TUPLE_HEADER
from spindle.core.box.stat import BoxStat
from spindle.core.wal.gc import box_backup_start, box_backup_stop

from ..runtime import read_source

EXTENT_SIZE = 16384            # memtx's index extents (MEMTX_EXTENT_SIZE)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class StatApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        self.stat = BoxStat(runtime.sched)
        natives = {
            "runtime_info": self.runtime_info,
            "stat": self.stat.requests, "stat_net": self.stat_net,
            "stat_reset": self.stat.reset, "stat_sql": self.stat_sql,
            "slab_info": self.slab_info, "slab_stats": self.slab_stats,
            "backup_start": self.backup_start, "backup_stop": self.backup_stop,
        }
        chunk = runtime.load(read_source("box/stat.lua"), "@box/stat.lua")
        self.lua = chunk(runtime.table({k: runtime.bridge(v) for k, v in natives.items()}),
                         box_table)
        self._install = self.lua[b"install"]
        self.lua[b"install_early"]()

    def install(self) -> None:
        """With the first box.cfg: box.stat, box.slab, box.backup; the rps timer."""
        self.stat.start()
        self._install()

    def stop(self) -> None:
        self.stat.stop()

    # ------------------------------------------------------------- box.runtime

    @staticmethod
    def runtime_info(lua_bytes) -> dict:
        """box.runtime.info(): Lua's heap, the runtime's limit (2.6.0's, the quota
        maximum) and what the process holds (its resident memory)."""
        return {"lua": int(lua_bytes or 0), "maxalloc": QUOTA_MAX, "used": _resident()}

    # ---------------------------------------------------------------- box.stat

    def stat_net(self) -> dict:
        iproto = getattr(self.storage.instance, "iproto", None)
        server = iproto.server if iproto is not None else None
        connections = list(server.connections) if server is not None else []
        return self.stat.network(len(connections),
                                 sum(conn.in_flight for conn in connections))

    @staticmethod
    def stat_sql() -> dict:
        """box.stat.sql(): Spindle runs no SQL, so every count stays 0."""
        return {"sql_xfer_count": 0, "sql_sort_count": 0, "sql_search_count": 0,
                "sql_found_count": 0}

    # ---------------------------------------------------------------- box.slab

    def memory(self) -> tuple[int, int, int]:
        """(tuple bytes in use, index bytes in use, the quota)."""
        engine = self.storage.box.engine
        index = count = 0
        for space in engine.spaces.values():
            count += len(space)
            for idx in space.indexes.values():
                index += -(-idx.bsize() // EXTENT_SIZE) * EXTENT_SIZE
        return engine.arena.used + TUPLE_HEADER * count, index, engine.arena.quota

    def slab_info(self) -> dict:
        """box.slab.info(): items are tuples, the arena also holds the indexes; the
        quota is box.cfg.memtx_memory, taken in full as 2.6.0's arena is."""
        items, index, quota = self.memory()
        arena_used = items + index
        return {
            "items_size": items, "items_used": items,
            "items_used_ratio": _ratio(items, items),
            "quota_size": quota, "quota_used": quota,
            "quota_used_ratio": _ratio(quota, quota),
            "arena_size": quota, "arena_used": arena_used,
            "arena_used_ratio": "%.1f%%" % (100.0 * arena_used / quota if quota else 0),
        }

    def slab_stats(self) -> list:
        """box.slab.stats(): 2.6.0 lists its size classes; Spindle's tuples are one
        class of their own (the average tuple), the index extents another."""
        engine = self.storage.box.engine
        count = sum(len(space) for space in engine.spaces.values())
        items, index, _quota = self.memory()
        stats = []
        if count:
            size = -(-items // count)
            stats.append({"item_size": size, "item_count": count, "mem_used": items,
                          "mem_free": 0, "slab_count": 1, "slab_size": items})
        if index:
            stats.append({"item_size": EXTENT_SIZE, "item_count": index // EXTENT_SIZE,
                          "mem_used": index, "mem_free": 0, "slab_count": 1,
                          "slab_size": index})
        return stats

    # -------------------------------------------------------------- box.backup

    def backup_start(self, checkpoint_idx: int = 0) -> list:
        box = self.storage.box
        return box_backup_start(box.gc, int(checkpoint_idx))

    def backup_stop(self) -> None:
        box_backup_stop(self.storage.box.gc)


def _ratio(used: int, size: int) -> str:
    return "%.2f%%" % (100.0 * used / size if size else 0)


def _resident() -> int:
    """The process's resident memory in bytes (Linux), else its peak."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

