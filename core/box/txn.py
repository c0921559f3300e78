"""Transactions of the in-memory engine, and the small `Engine` glue.

Facts from src/box/txn.c and box.cc of 2.6.0:

* Every DML statement runs inside a transaction: an explicit one (`begin`) or an
  automatic one that commits right after the statement. A failed statement is rolled
  back alone (its index changes and those of statements nested in its triggers); the
  explicit transaction stays open.
* After a statement executes, its redo row is built (unless the space is temporary) and
  the space's on_replace triggers run (if the statement changed anything); a trigger
  error rolls the statement back.
* The row logs the request as it arrived (UPDATE with key and operations, UPSERT with
  tuple and operations...); UPDATE/DELETE through a secondary index are rebound to the
  primary key once the tuple is found; a before_replace trigger that changed the result
  turns the request into REPLACE/DELETE, or NOP when nothing is left to do. Rows of
  `is_local` spaces carry GROUP_ID 1; when such a row ends a transaction that also has
  replicated rows, a NOP row (group 0) is appended to keep the boundary replicable.
* Commit detaches the transaction from the fiber, hands the rows to the journal (which
  may block the fiber, or raise: then everything is undone and the error propagates),
  then runs on_commit triggers. Rollback undoes every statement in reverse order and runs
  on_rollback triggers.
* A memtx transaction interrupted by a fiber yield is aborted: `abort_on_yield()` undoes
  it, and its next statement or commit fails with ER_TRANSACTION_YIELD.

Not modelled: cascading rollback of later transactions that read uncommitted data of a
transaction whose journal write failed (2.6.0 rolls those back too).
"""
from __future__ import annotations

import itertools
from spindle.core import log
from typing import Any, Callable, Hashable

from spindle.core.iproto.msgpack import MsgpackRaw, packb
from spindle.core.fiber.trigger import TriggerList
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import DmlRequest, PutRequest, encode_dml_body
from spindle.core.iproto.xrow import XRow


Journal = Callable[[list[XRow]], None]
_NO_KEY = object()     # "not looked up yet" (None is a valid fiber key)
# submit(rows, done): queue a journal write and return at once; done(error or None)
# runs later, in tx, when the write is over (txn_commit_async's journal)
AsyncJournal = Callable[[list[XRow], Callable[[BaseException | None], None]], None]

OP_NAMES: dict[int, str] = {IprotoType.INSERT: "INSERT", IprotoType.REPLACE: "REPLACE",
            IprotoType.UPDATE: "UPDATE", IprotoType.DELETE: "DELETE",
            IprotoType.UPSERT: "UPSERT", IprotoType.NOP: "NOP"}


def _raw(value: Any) -> MsgpackRaw | None:
    return None if value is None else MsgpackRaw(packb(value))


_INSERT, _REPLACE = int(IprotoType.INSERT), int(IprotoType.REPLACE)
_LOCAL = int(GroupId.LOCAL)
# space id -> the body of an INSERT/REPLACE up to its tuple: {SPACE_ID: id, TUPLE: ...
_TUPLE_BODY_PREFIX: dict[int, bytes] = {}


def _tuple_body_prefix(space_id: int) -> bytes:
    # encode_dml_body itself lays it out, with an empty stand-in for the tuple
    prefix = _TUPLE_BODY_PREFIX[space_id] = encode_dml_body(
        IprotoType.INSERT, space_id, tuple=MsgpackRaw(b""))
    return prefix


def request_row(request: DmlRequest | PutRequest, group_id: int = 0,
                tuple_data: bytes | None = None) -> XRow:
    """The redo row of a DML request (no LSN: the journal assigns it). `tuple_data`:
    the request's tuple already packed (INSERT/REPLACE), spares packing it again."""
    rtype = request.type
    if tuple_data is not None and (type(request) is PutRequest or (
            (rtype == _INSERT or rtype == _REPLACE) and not request.index_id
            and not request.index_base and request.key is None and request.ops is None)):
        return put_row(rtype, request.space_id, tuple_data, group_id)
    if rtype == IprotoType.NOP:
        return XRow(type=IprotoType.NOP, group_id=group_id)
    body = encode_dml_body(request.type, request.space_id, index_id=request.index_id,
                           index_base=request.index_base, key=_raw(request.key),
                           tuple=_raw(request.tuple), ops=_raw(request.ops))
    return XRow(type=request.type, body=body, group_id=group_id)


def put_row(rtype: int, space_id: int, tuple_data: bytes, group_id: int = 0) -> XRow:
    """The redo row of an INSERT/REPLACE (`rtype`) of a tuple packed as `tuple_data`."""
    prefix = _TUPLE_BODY_PREFIX.get(space_id) or _tuple_body_prefix(space_id)
    # positional (type, body, replica_id, lsn, timestamp, group_id): quicker
    return XRow(rtype, prefix + tuple_data, 0, 0, 0.0, group_id)


class Statement:
    """One statement: the tuples it removed/added (for undo) and the request to log."""

    __slots__ = ("space", "old_tuple", "new_tuple", "request", "row", "tuple_data")

    def __init__(self, space: Any, request: DmlRequest | PutRequest | None,
                 old_tuple: Any = None,
                 new_tuple: Any = None, tuple_data: bytes | None = None,
                 row: XRow | None = None):
        self.space = space
        self.request = request
        self.old_tuple = old_tuple
        self.new_tuple = new_tuple
        self.row = row
        # MsgPack of request.tuple when the space packed it (INSERT/REPLACE): the
        # redo row reuses it
        self.tuple_data = tuple_data

    def __repr__(self) -> str:
        # (no request: Space.put_in_txn's, whose row says what it did)
        rtype = self.request.type if self.request is not None else getattr(self.row, "type", 0)
        return (f"Statement({OP_NAMES.get(rtype, rtype)} "
                f"{getattr(self.space, 'name', '?')}: {self.old_tuple!r} -> {self.new_tuple!r})")

    def undo(self) -> None:
        self.space.undo(self.old_tuple, self.new_tuple)


class Savepoint:
    __slots__ = ("txn", "position")

    def __init__(self, txn: "Txn", position: int):
        self.txn = txn
        self.position = position


def _lazy_triggers(slot: str) -> property:
    """A TriggerList attribute made on first use: most transactions never get one."""
    def get(txn: "Txn") -> TriggerList:
        triggers = getattr(txn, slot)
        if triggers is None:
            triggers = TriggerList()
            setattr(txn, slot, triggers)
        return triggers
    return property(get)


class Txn:
    _ids = itertools.count(1)

    # Defaults kept on the class (an instance sets its own when one changes): a
    # transaction is made per autocommit statement, and most never change these.
    _on_commit: TriggerList | None = None
    _on_rollback: TriggerList | None = None
    aborted_by_yield = False
    journal_error: BaseException | None = None   # why an async commit failed
    # The applier's transactions log the rows their master sent, not rebuilt ones:
    # no redo row is made for their own statements (those of triggers still are).
    replicated = False
    # Undone by the synchronous-replication limbo (a ROLLBACK, a quorum timeout)
    # after or during its journal write: a normal outcome, not a failed write.
    sync_rollback = False

    def __init__(self, autocommit: bool = False):
        self.id = next(Txn._ids)
        self.autocommit = autocommit
        self.statements: list[Statement] = []
        self.savepoints: list[Savepoint] = []
        self.depth = 0                  # statements being executed (nested via triggers)
        self.status = "active"          # active, committing, committed, rolled back

    on_commit = _lazy_triggers("_on_commit")
    on_rollback = _lazy_triggers("_on_rollback")

    def __repr__(self) -> str:
        return f"<Txn {self.id} {self.status} {len(self.statements)} stmts>"

    @property
    def is_sync(self) -> bool:
        checked = None      # statements come in runs of one space: check each run once
        for stmt in self.statements:
            space = stmt.space
            if space is not checked:
                if getattr(space, "is_sync", False):
                    return True
                checked = space
        return False

    def rows(self) -> list[XRow]:
        """The journal entry: rows of the statements in order (+ the NOP that closes a
        transaction ending with local rows but having replicated ones)."""
        statements = self.statements
        if len(statements) == 1:     # one row: no boundary to keep
            row = statements[0].row
            return [] if row is None else [row]
        rows = [row for s in statements if (row := s.row) is not None]
        if (rows and rows[-1].group_id == _LOCAL
                and any(r.group_id != _LOCAL for r in rows)):
            rows.append(XRow(type=IprotoType.NOP, group_id=GroupId.DEFAULT))
        return rows

    def rollback_to(self, position: int) -> None:
        """Undo statements from `position` on, newest first."""
        while len(self.statements) > position:
            self.statements.pop().undo()
        self.savepoints = [sp for sp in self.savepoints if sp.position <= position]


class TxnManager:
    """Per-fiber transactions. `fiber_key()` names the running fiber (default: one
    context); `journal(rows)` persists a commit."""

    def __init__(self, journal: Journal | None = None,
                 fiber_key: Callable[[], Hashable] | None = None):
        self.journal = journal
        self.fiber_key = fiber_key or (lambda: None)
        # fiber key -> its open transaction (Space.put reads it; only this class
        # changes it)
        self.open: dict[Hashable, Txn] = {}
        # limbo_commit(txn, rows): the commit path of synchronous replication
        # (core/instance/limbo_txn.py) — writes the rows through `journal` and waits in
        # the limbo when it must; None: the journal alone
        self.limbo_commit: Callable[[Txn, list[XRow]], None] | None = None

    # -- lookup ---------------------------------------------------------------

    @property
    def current(self) -> Txn | None:
        return self.open.get(self.fiber_key())

    def is_in_txn(self) -> bool:
        return self.current is not None

    def txn_id(self) -> int | None:
        txn = self.current
        return None if txn is None else txn.id

    def _require(self) -> Txn:
        txn = self.current
        if txn is None:
            raise ClientError(ErrorCode.ER_NO_TRANSACTION)
        return txn

    # -- explicit transactions ------------------------------------------------

    def begin(self) -> Txn:
        key = self.fiber_key()
        if key in self.open:
            raise ClientError(ErrorCode.ER_ACTIVE_TRANSACTION)
        txn = self.open[key] = Txn()
        return txn

    def commit(self) -> None:
        key = self.fiber_key()
        txn = self.open.get(key)
        if txn is None:
            return
        if txn.depth:
            raise ClientError(ErrorCode.ER_COMMIT_IN_SUB_STMT)
        self._commit(txn, key)

    def rollback(self) -> None:
        txn = self.current
        if txn is None:
            return
        if txn.depth:
            raise ClientError(ErrorCode.ER_ROLLBACK_IN_SUB_STMT)
        self._rollback(txn)

    def savepoint(self) -> Savepoint:
        txn = self._require()
        sp = Savepoint(txn, len(txn.statements))
        txn.savepoints.append(sp)
        return sp

    def rollback_to_savepoint(self, sp: Savepoint) -> None:
        txn = self.current
        if txn is None or sp.txn is not txn or sp not in txn.savepoints:
            raise ClientError(ErrorCode.ER_NO_SUCH_SAVEPOINT)
        if txn.depth:
            raise ClientError(ErrorCode.ER_ROLLBACK_IN_SUB_STMT)
        txn.rollback_to(sp.position)
        # Savepoints made after `sp` are gone; `sp` itself stays usable.
        txn.savepoints = txn.savepoints[:txn.savepoints.index(sp) + 1]

    def on_commit(self, trigger: Callable, old: Callable | None = None) -> Callable | None:
        return self._require().on_commit.replace(old, trigger)

    def on_rollback(self, trigger: Callable, old: Callable | None = None) -> Callable | None:
        return self._require().on_rollback.replace(old, trigger)

    def atomic(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """box.atomic(): run `fn` in a transaction, commit it or roll it back."""
        self.begin()
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            self.rollback()
            raise
        self.commit()
        return result

    def abort_on_yield(self, fiber: Any = None) -> None:
        """The running fiber yields: an active memtx transaction is aborted. (Called
        on every yield: with no transaction open anywhere, it returns at once.)"""
        if not self.open:
            return
        txn = self.current
        if txn is None or txn.status != "active" or txn.autocommit or txn.aborted_by_yield:
            return
        txn.rollback_to(0)
        txn.aborted_by_yield = True

    # -- statements -----------------------------------------------------------

    def execute(self, space: Any, request: DmlRequest | PutRequest) -> Any:
        """Run one DML statement of `space` (called by Space)."""
        key = self.fiber_key()
        txn = self.open.get(key)
        autocommit = txn is None
        if txn is None:
            txn = Txn(autocommit=True)
            self.open[key] = txn
        # A transaction aborted by a yield still takes statements in 2.6.0 (checked
        # against the binary); only its commit fails, with ER_TRANSACTION_YIELD.
        position = len(txn.statements)
        stmt = Statement(space, request)
        txn.statements.append(stmt)
        txn.depth += 1
        try:
            result = space.execute_stmt(stmt)
            # (stmt.request: a before_replace trigger may have changed it)
            done = stmt.request
            assert done is not None
            # done: the statement's redo row (none for the rows a replicated
            # transaction applies: they are logged as they came), then on_replace
            if not space.is_temporary and not (txn.replicated and txn.depth == 1):
                stmt.row = request_row(done, space.group_id, stmt.tuple_data)
            if len(space.on_replace) and (stmt.old_tuple is not None
                                          or stmt.new_tuple is not None):
                op = OP_NAMES.get(done.type, str(done.type))
                space.on_replace.run(stmt.old_tuple, stmt.new_tuple, space.name, op)
        except BaseException:
            txn.depth -= 1
            txn.rollback_to(position)
            if autocommit:
                self._rollback(txn)
            raise
        txn.depth -= 1
        if autocommit:
            self._commit(txn, key)
        return result

    # -- completion -----------------------------------------------------------

    def _detach(self, txn: Txn, key: Hashable = _NO_KEY) -> None:
        """Take `txn` from its fiber (`key`: fiber_key(), when the caller has it)."""
        if key is _NO_KEY:
            key = self.fiber_key()
        if self.open.get(key) is txn:
            del self.open[key]

    def _commit(self, txn: Txn, key: Hashable = _NO_KEY) -> None:
        if txn.aborted_by_yield:
            self._rollback(txn)
            raise ClientError(ErrorCode.ER_TRANSACTION_YIELD)
        self._detach(txn, key)
        txn.status = "committing"
        rows = txn.rows()
        if rows and self.journal is not None:
            try:
                if self.limbo_commit is not None:
                    self.limbo_commit(txn, rows)
                else:
                    self.journal(rows)
            except BaseException:
                if txn.status == "committing":   # the limbo may have undone it already
                    self._finish_rollback(txn)
                raise
        txn.status = "committed"
        if txn._on_commit is not None:
            self._run_triggers(txn._on_commit, txn, "on_commit")

    def commit_async(self, submit: AsyncJournal, rows: list[XRow] | None = None) -> Txn:
        """txn_commit_async(): hand the current transaction's rows (or `rows`, e.g. the
        replicated rows it applies, with their original LSNs) to `submit` and return
        without waiting. Its changes stay visible meanwhile (memtx has no isolation);
        when the write completes the transaction runs its on_commit triggers, or is
        undone and runs on_rollback. If `submit` refuses at once, the rollback happens
        before the error propagates."""
        txn = self._require()
        if txn.depth:
            raise ClientError(ErrorCode.ER_COMMIT_IN_SUB_STMT)
        if txn.aborted_by_yield:
            self._rollback(txn)
            raise ClientError(ErrorCode.ER_TRANSACTION_YIELD)
        self._detach(txn)
        txn.status = "committing"
        rows = txn.rows() if rows is None else rows

        def done(error: BaseException | None) -> None:
            if txn.status != "committing":
                return                  # completed already (a late duplicate callback)
            if error is None:
                txn.status = "committed"
                self._run_triggers(txn._on_commit, txn, "on_commit")
            else:
                txn.journal_error = error
                self._finish_rollback(txn)

        if not rows:
            done(None)
            return txn
        try:
            submit(rows, done)
        except BaseException as exc:
            done(exc)
            raise
        return txn

    def _rollback(self, txn: Txn) -> None:
        self._detach(txn)
        self._finish_rollback(txn)

    def rollback_sync(self, txn: Txn) -> None:
        """The limbo rolls back a transaction whose journal write is done or under
        way (a ROLLBACK row, a quorum timeout): undo it and run its on_rollback
        triggers, with `txn.sync_rollback` telling them it is no write failure."""
        if txn.status == "rolled back":
            return
        txn.sync_rollback = True
        self._finish_rollback(txn)

    def _finish_rollback(self, txn: Txn) -> None:
        txn.rollback_to(0)
        txn.status = "rolled back"
        self._run_triggers(txn._on_rollback, txn, "on_rollback")

    @staticmethod
    def _run_triggers(triggers: TriggerList | None, txn: Txn, what: str) -> None:
        # 2.6.0 cannot undo a commit or a rollback: a failing trigger is only logged.
        if triggers is None or not len(triggers):
            return
        for trigger in triggers:
            try:
                trigger(txn)
            except Exception as exc:
                log.error("%s trigger failed: %s", what, exc)


class Engine:
    """The memtx engine of one instance: spaces by id and name, and their transactions."""

    def __init__(self, journal: Journal | None = None,
                 fiber_key: Callable[[], Hashable] | None = None):
        from spindle.core.box.memtx_arena import MemtxArena
        self.txns = TxnManager(journal, fiber_key)
        self.spaces: dict[int, Any] = {}
        self.arena = MemtxArena(self.spaces)   # their tuples (box.cfg.memtx_memory)
        self._by_name: dict[str, Any] = {}
        # persistent functions as functional indexes call them (index_func.py)
        from spindle.core.box.index_func import Functions
        self.functions = Functions(self.spaces)

    def create_space(self, id: int, name: str, **options: Any) -> Any:
        from spindle.core.box.space import Space
        if id in self.spaces or name in self._by_name:
            raise ClientError(ErrorCode.ER_SPACE_EXISTS, name)
        space = Space(id, name, txns=self.txns, **options)
        space.arena = self.arena
        space.functions = self.functions
        self.spaces[id] = space
        self._by_name[name] = space
        return space

    def drop_space(self, id_or_name: int | str) -> None:
        space = self.space(id_or_name)
        del self.spaces[space.id]
        del self._by_name[space.name]
        space._free_all()                # its tuples go with it

    def rename_space(self, id_or_name: int | str, new_name: str) -> None:
        space = self.space(id_or_name)
        del self._by_name[space.name]
        space.name = new_name
        self._by_name[new_name] = space

    def space(self, id_or_name: int | str) -> Any:
        space = (self._by_name.get(id_or_name) if isinstance(id_or_name, str)
                 else self.spaces.get(id_or_name))
        if space is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_SPACE, str(id_or_name))
        return space

    def find_space(self, id_or_name: int | str) -> Any | None:
        if isinstance(id_or_name, str):
            return self._by_name.get(id_or_name)
        return self.spaces.get(id_or_name)
