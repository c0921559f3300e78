"""Transactions for Lua (lua/box/txn.lua) over the engine's TxnManager.

A transaction belongs to the fiber that began it (the engine keys transactions by
the running fiber). A fiber that ends with its transaction still open has it rolled
back, as Tarantool does.
"""
from __future__ import annotations

from typing import Any

from spindle.core.iproto.errors import ClientError, ErrorCode

from ..runtime import Multi, read_source


class TxnApi:
    def __init__(self, storage, box_table, space_lua):
        self.storage = storage
        self.runtime = runtime = storage.runtime
        self.sched = runtime.sched
        natives = {
            "prepare_commit": self.prepare_commit,
            "rollback": lambda: self.txns.rollback(),
            "savepoint": self.savepoint,
            "rollback_to_savepoint": lambda sp: self.txns.rollback_to_savepoint(sp),
            "is_in_txn": lambda: self.txns.current is not None,
            "txn_id": lambda: self.txns.txn_id(),
            "hook_txn": self.hook_txn,
        }
        blocking = {"commit": lambda: self.txns.commit()}
        chunk = runtime.load(read_source("box/txn.lua"), "@box/txn.lua")
        # only rollback_to_savepoint takes an argument (whatever the user passes)
        lua_natives = {name: runtime.bridge(fn, convert_args=name == "rollback_to_savepoint")
                       for name, fn in natives.items()}
        lua_natives["begin"] = self._begin_direct      # called without a bridge
        self.lua = chunk(runtime.table(lua_natives),
                         runtime.table(blocking), runtime.wait, box_table,
                         space_lua[b"trigger_reset"], space_lua[b"bless_for"],
                         space_lua[b"txn_hint"])
        self._run_triggers = self.lua[b"run_triggers"]

    @property
    def txns(self):
        return self.storage.box.engine.txns

    def begin(self) -> None:
        self.txns.begin()
        fiber = self.sched.current
        if fiber is not None and not fiber.storage.get("txn_rollback_on_exit"):
            fiber.storage["txn_rollback_on_exit"] = True
            fiber.on_exit.append(self._rollback_on_exit)

    def _begin_direct(self) -> Any:
        """box.begin() as txn.lua calls it: directly, not through bridge() (every
        explicit transaction starts here, and a bridge costs as much again).
        Nothing, or (False, the Lua error)."""
        try:
            self.begin()
        except Exception as exc:   # noqa: BLE001 - becomes a Lua error
            return False, self.runtime.error_to_lua(exc)
        return None

    def _rollback_on_exit(self, fiber) -> None:
        # A transaction owned by a session (the console's, see core/instance/box.py txn_key)
        # outlives the statement fiber that began it.
        if "txn_key" not in fiber.storage and self.txns.current is not None:
            self.txns.rollback()

    def prepare_commit(self) -> bool:
        """True when there is something to commit (then Lua waits for commit())."""
        txn = self.txns.current
        if txn is None:
            return False
        if txn.depth:
            raise ClientError(ErrorCode.ER_COMMIT_IN_SUB_STMT)
        return True

    def savepoint(self) -> Multi:
        sp = self.txns.savepoint()
        return Multi((sp, sp.txn.id))

    def hook_txn(self) -> int:
        """The current transaction's id, with the dispatchers of its Lua triggers."""
        txn = self.txns.current
        if txn is None:
            raise ClientError(ErrorCode.ER_NO_TRANSACTION)
        if not getattr(txn, "_lua_triggers", False):
            txn._lua_triggers = True
            txn.on_commit.add(lambda t: self._dispatch(t, "commit"))
            txn.on_rollback.add(lambda t: self._dispatch(t, "rollback"))
        return txn.id

    def _dispatch(self, txn: Any, kind: str) -> None:
        tuples = self.storage.tuples

        def side(tup):
            return False if tup is None else tuples.to_lua(tup)
        table = self.runtime.lua.table
        stmts = table(*[table(s.space.id, side(s.old_tuple), side(s.new_tuple))
                        for s in txn.statements])
        self.runtime.invoke(self._run_triggers, txn.id, kind, stmts)
