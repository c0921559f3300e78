"""The memtx tuple arena's accounting: what box.slab.info() shows and memtx_memory
limits (memtx_tuple_new's quota check of 2.6.0).

Spindle has no slab allocator: `used` is the MsgPack bytes of every stored tuple,
kept by Space where it keeps its bsize (one addition per statement); a new tuple
that would take `used` plus its own size, 2.6.0's memtx tuple header included
(`TUPLE_HEADER`, struct memtx_tuple: what makes "Failed to allocate 1021 bytes" of
a 1007-byte tuple), past `quota` is refused with 2.6.0's OutOfMemory, before any
index changes, so nothing stored is lost. (The headers of stored tuples are shown
by box.slab.info(), not charged: the check stays one comparison.) 2.6.0 refuses it everywhere: a recovery that does not fit fails ("can't
initialize storage: Failed to allocate ..."), an applier stops with the error.
Index memory is reported (in 16 KiB extents, as memtx's) but not charged.
"""
from __future__ import annotations

from spindle.core.iproto.errors import BoxError, ErrorCode

TUPLE_HEADER = 14                 # sizeof(struct memtx_tuple) of 2.6.0
UNLIMITED = 1 << 62
SYSTEM_ID_MAX = 512               # BOX_SYSTEM_ID_MAX + 1: user spaces from here


class OutOfMemory(BoxError):
    """diag_set(OutOfMemory, size, "slab allocator", "memtx_tuple"): errno ENOMEM."""

    type = "OutOfMemory"

    def __init__(self, size: int, allocator: str, obj: str):
        super().__init__(f"Failed to allocate {size} bytes in {allocator} for {obj}",
                         ErrorCode.ER_MEMORY_ISSUE)
        self.errno = 12           # ENOMEM, as 2.6.0's error shows it
        self.located("./src/box/memtx_engine.c", 1162)    # memtx_tuple_new


class MemtxArena:
    """One engine's tuple memory: `used` bytes of `quota` (box.cfg.memtx_memory)."""

    __slots__ = ("used", "_quota", "limit")

    def __init__(self, quota: int = UNLIMITED):
        self.used = 0
        self.quota = quota

    @property
    def quota(self) -> int:
        return self._quota

    @quota.setter
    def quota(self, quota: int) -> None:
        self._quota = quota
        # what `used` plus a new tuple's MsgPack size may reach (Space compares)
        self.limit = quota - TUPLE_HEADER

    def check(self, data_size: int, space_id: int) -> None:
        """Refuse a new tuple of `data_size` MsgPack bytes for space `space_id`
        that does not fit. Not a system space's: its small rows (DDL, _truncate)
        are how a full database is emptied, and 2.6.0 finds room for them in
        other slab classes than the big tuples that filled it."""
        size = data_size + TUPLE_HEADER
        if self.used + size > self._quota and space_id >= SYSTEM_ID_MAX:
            raise OutOfMemory(size, "slab allocator", "memtx_tuple")
