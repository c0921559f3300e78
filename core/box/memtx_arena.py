"""The memtx tuple arena's accounting: what box.slab.info() shows and memtx_memory
limits (memtx_tuple_new's quota check of 2.6.0).

Spindle has no slab allocator: the arena's `used` is the MsgPack bytes of every
stored tuple, the sum of the spaces' bsize. A new tuple that would take `used`
plus its own size, 2.6.0's memtx tuple header included (`TUPLE_HEADER`, struct
memtx_tuple: what makes "Failed to allocate 1021 bytes" of a 1007-byte tuple),
past `quota` is refused with 2.6.0's OutOfMemory, before any index changes, so
nothing stored is lost. 2.6.0 refuses it everywhere: a recovery that does not fit
fails ("can't initialize storage: Failed to allocate ..."), an applier stops with
the error. (The headers of stored tuples are shown by box.slab.info(), not charged.)

So that a statement pays one comparison and no shared counter, each space holds a
grant: the bsize it may reach (`Space._bsize_granted`) without asking. A space
past its grant asks `grant()`, which sums the spaces, takes back what the others
were granted if that is what stands in the way, and hands out half of what is
free. The grants never add up to more than the quota leaves, so a tuple inside
one always fits.
"""
from __future__ import annotations

from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode

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
    """One engine's tuple memory: the bytes of the spaces in `spaces` (the engine's
    dict, by id) against `quota` (box.cfg.memtx_memory)."""

    def __init__(self, spaces: dict | None = None, quota: int = UNLIMITED):
        self.spaces = spaces if spaces is not None else {}
        self._quota = quota
        # box.cfg.memtx_max_tuple_size less the tuple header: the MsgPack bytes a
        # tuple may have (a statement compares its size with it, then asks grant())
        self.max_data = UNLIMITED

    def set_max_tuple_size(self, max_tuple_size: int) -> None:
        self.max_data = int(max_tuple_size) - TUPLE_HEADER

    @property
    def used(self) -> int:
        return sum(space._bsize for space in self.spaces.values())

    @property
    def quota(self) -> int:
        return self._quota

    @quota.setter
    def quota(self, quota: int) -> None:
        self._quota = quota
        self._revoke(None)        # grants made under another quota

    def _revoke(self, keep) -> None:
        for space in self.spaces.values():
            if space is not keep:
                space._bsize_granted = space._bsize

    def grant(self, space, size: int) -> None:
        """`space` needs `size` more MsgPack bytes than its grant (or a tuple that
        big is past memtx_max_tuple_size): grant them and half of what stays free,
        or refuse the tuple as 2.6.0's memtx_tuple_new would."""
        if size > self.max_data:
            raise ClientError(ErrorCode.ER_MEMTX_MAX_TUPLE_SIZE, size + TUPLE_HEADER)
        spaces = self.spaces.values()
        used = sum(other._bsize for other in spaces)
        if space not in spaces:
            used += space._bsize              # a space of no engine (tests)
        reserved = sum(max(other._bsize_granted - other._bsize, 0)
                       for other in spaces if other is not space)
        free = self._quota - TUPLE_HEADER - used - reserved
        if size > free:
            self._revoke(space)               # unused grants must not refuse it
            free = self._quota - TUPLE_HEADER - used
            if size > free and space.id >= SYSTEM_ID_MAX:
                raise OutOfMemory(size + TUPLE_HEADER, "slab allocator", "memtx_tuple")
            # Not a system space's row: its small rows (DDL, _truncate) are how a
            # full database is emptied, and 2.6.0 finds room for them in other slab
            # classes than the big tuples that filled it.
        space._bsize_granted = space._bsize + size + max(free - size, 0) // 2
