"""box.sequence for Lua (lua/box/sequence.lua): the natives of sequence objects over
core/box/sequence.py, and box.sequence kept current.

next(), set() and reset() write `_sequence_data` (as 2.6.0's box_sequence_* do, as
admin), so they may commit and run through wait(), or directly inside an open
transaction where Lua cannot yield; current() only reads. The Schema's
on_sequence_change hook pushes each changed sequence (or None: dropped) into Lua,
from any source: Lua, IPROTO, replication, recovery, rollbacks.
"""
from __future__ import annotations

from typing import Any, Callable

from spindle.core import log
from spindle.core.box.sequence import Sequence
from spindle.core.iproto.errors import read_only_error

from ..runtime import read_source


class SequenceApi:
    def __init__(self, storage, box_table):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        to_lua = runtime.to_lua
        blocking = {"next": lambda seq_id: to_lua(self.next(seq_id)),
                    "set": self.set, "reset": self.reset}
        natives = {"current": self.current,
                   **{name: self._in_txn_only(fn) for name, fn in blocking.items()}}
        lua_natives = {name: runtime.bridge(fn) for name, fn in natives.items()}
        lua_blocking = {name: self._converting(fn) for name, fn in blocking.items()}
        chunk = runtime.load(read_source("box/sequence.lua"), "@box/sequence.lua")
        self.lua = chunk(runtime.table(lua_natives), runtime.table(lua_blocking),
                         runtime.wait, box_table)
        self._refresh = self.lua[b"refresh"]
        self.installed = False

    @property
    def sequences(self):
        return self.storage.box.schema.sequences

    def _converting(self, fn: Callable) -> Callable:
        to_py = self.runtime.to_py
        return lambda *args: fn(*[to_py(a) for a in args])

    def _in_txn_only(self, fn: Callable) -> Callable:
        """`fn` inside a transaction (nothing waits there); outside one False, having
        done nothing (sequence.lua then calls it through wait())."""
        storage = self.storage

        def in_txn_only(*args):
            if storage.box.engine.txns.current is None:
                return False
            return fn(*args)
        return in_txn_only

    # -------------------------------------------------------------- natives

    def _check_writable(self) -> None:
        """box_process1's box_check_writable() for the `_sequence_data` statement."""
        if self.storage.box.read_only_reasons:
            raise read_only_error()

    def next(self, seq_id: Any) -> int:
        return self.sequences.box_next(seq_id, self._check_writable)

    def current(self, seq_id: Any) -> int:
        return self.sequences.box_current(seq_id)

    def set(self, seq_id: Any, value: int) -> None:
        self.sequences.box_set(seq_id, value, self._check_writable)

    def reset(self, seq_id: Any) -> None:
        self.sequences.box_reset(seq_id, self._check_writable)

    # ---------------------------------------------------------- box.sequence

    def install(self) -> None:
        """Build box.sequence from the catalogue (after the first box.cfg)."""
        self.installed = True
        for seq_id in sorted(self.sequences.by_id):
            self.sequence_changed(seq_id)

    def sequence_changed(self, seq_id: int) -> None:
        """Schema hook: push the sequence's definition to Lua. Never raises (it runs
        inside DDL statements and their rollback)."""
        if not self.installed:
            return
        seq = self.sequences.by_id.get(seq_id)
        try:
            self.runtime.invoke(self._refresh, seq_id, None if seq is None else describe(seq))
        except Exception as exc:   # noqa: BLE001 - a broken box.sequence must not break DDL
            log.error("box.sequence update for sequence %s failed: %s", seq_id, exc)


def describe(seq: Sequence) -> dict:
    return {"id": seq.id, "uid": seq.uid, "name": seq.name, "step": seq.step,
            "min": seq.min, "max": seq.max, "start": seq.start, "cache": seq.cache,
            "cycle": seq.cycle}

