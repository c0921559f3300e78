"""Applying what an upstream sends: the engine side of the applier (applier_apply_tx,
apply_row and the join streams of replication.rst).

* Snapshot rows (initial JOIN, FETCH_SNAPSHOT) carry no LSN: they go straight into the
  spaces, unlogged (the checkpoint written after the join makes them durable), the
  system spaces' triggers building the catalogue as they arrive.
* Every other row carries its master's REPLICA_ID/LSN. The rows of one transaction are
  applied as one local transaction and committed asynchronously (TxnManager.commit_async
  through Box.submit_replicated): the reader goes on reading while the WAL writes, and
  the original rows, not rebuilt ones, reach the local WAL. `replicaset.applier.vclock`
  runs ahead of the written vclock by what is in flight, so nothing is applied twice,
  even when two appliers bring the same rows (full mesh). The requests come decoded
  by the reader where it could (streams.py), and every row is a statement of
  core/box/row_apply.py: no redo row, and no TxnManager.execute bookkeeping for a
  space without triggers. As long as nothing can observe the transaction (no
  trigger on its spaces, no synchronous space, an empty limbo, no CONFIRM/ROLLBACK
  row) no Txn is made at all: its statements go straight to the journal with a
  completion that does what the Txn's triggers would (_commit_unobserved); the
  first row that needs one gets a Txn adopting the statements so far.
* Completion follows the seed: a commit runs `replicaset.applier.on_commit` (the
  writers send ACKs); a failed write sets the shared diag, runs
  `replicaset.applier.on_rollback` (the appliers reconnect) and puts the applier vclock
  back to what is written.

A row that cannot be decoded raises StreamError: the stream, not the data, is broken,
and the applier reconnects instead of stopping for good. So does a row holding a value
no index can order (ER_INVALID_MSGPACK: a decimal 2.6.0 cannot read, where a 2.6.0
replica would crash); its transaction is rolled back whole.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable

from spindle.core import log
from spindle.core.box.row_apply import (
    abandon, adopt, execute_logged, execute_unobserved, undo, unobserved,
)
from spindle.core.box.txn import Statement
from spindle.core.iproto.constants import GroupId, IprotoKey, IprotoType, is_synchro
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.msgpack import ext_hook, unpack
from spindle.core.iproto.request import (
    DML_WRITE_TYPES, DmlRequest, PutRequest, decode_dml_body, decode_synchro_body,
)
from spindle.core.iproto.xrow import XRow

from .instance_api import ReplicationInstanceApi

SNAPSHOT_BATCH = 1000      # snapshot rows per transaction (and per yield)
# per-row constants (an enum member read from its class costs ~0.1 µs on Python 3.11)
_NOP = int(IprotoType.NOP)
_PUT_TYPES = (int(IprotoType.INSERT), int(IprotoType.REPLACE))
_CONFIRM_ROLLBACK = (int(IprotoType.CONFIRM), int(IprotoType.ROLLBACK))
_SPACE_ID, _TUPLE = int(IprotoKey.SPACE_ID), int(IprotoKey.TUPLE)


class StreamError(BoxError):
    """The replication stream is unreadable or makes no sense: garbage, a truncated
    frame, broken transaction boundaries, a row that cannot be decoded. 2.6.0 stops
    the applier for good on some of these (tarantool#4040); Spindle disconnects and
    subscribes again. Carries the error that showed it, with its code and message."""

    def __init__(self, cause: BaseException):
        if isinstance(cause, BoxError):
            super().__init__(cause.message, cause.code)
            self.type = cause.type
        else:
            super().__init__(str(cause) or type(cause).__name__, ErrorCode.ER_PROTOCOL)
        self.cause = cause


def decode_request(row: XRow) -> DmlRequest | PutRequest:
    """The DML request of a replicated row; StreamError if its body is bad."""
    try:
        return decode_dml_body(row.body, row.type, ext_hook)
    except BoxError as exc:
        raise StreamError(exc) from exc


# ------------------------------------------------------------------ snapshot rows

class SnapshotRows:
    """Rows of an initial JOIN / FETCH_SNAPSHOT, decoded as they arrive and kept until
    the stage is over: a connection lost half way through then leaves the engine
    untouched and the retry starts clean (2.6.0 would keep half a snapshot)."""

    def __init__(self):
        self.items: list[tuple[int, Any]] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, row: XRow) -> None:
        if row.type == _NOP:
            return
        if row.type not in _PUT_TYPES:
            raise StreamError(ClientError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, row.type))
        self.add_body(row.type, row.body)

    def add_body(self, rtype: int, body: bytes | None) -> None:
        """The body of an INSERT/REPLACE row. The usual {SPACE_ID: uint, TUPLE: array}
        is taken the quick way (a million rows pass here); anything else gets
        decode_dml_body's verdict."""
        try:
            decoded = unpack(body, "packet body", ext_hook) if body is not None else None
        except BoxError as exc:
            raise StreamError(exc) from exc
        if type(decoded) is dict and len(decoded) == 2:
            space_id = decoded.get(_SPACE_ID)
            tup = decoded.get(_TUPLE)
            if type(space_id) is int and space_id >= 0 and type(tup) is list:
                self.items.append((space_id, tup))
                return
        request = decode_request(XRow(type=rtype, body=body))
        self.items.append((request.space_id, request.tuple))

    def apply(self, box: ReplicationInstanceApi) -> None:
        """Insert every row, unlogged, in batches with a yield between them (a
        million rows must not freeze the loop)."""
        txns = box.engine.txns
        engine = box.engine
        items, self.items = self.items, []
        for start in range(0, len(items), SNAPSHOT_BATCH):
            txn = txns.begin()
            txn.replicated = True            # nothing is logged: no redo rows
            try:
                space = None
                for space_id, tup in items[start:start + SNAPSHOT_BATCH]:
                    if space is None or space.id != space_id:
                        space = engine.space(space_id)
                    space.insert(tup)
            except ClientError as exc:
                txns.rollback()
                if exc.code == ErrorCode.ER_INVALID_MSGPACK and start == 0:
                    # as in _apply_rows: the stream is at fault, and with nothing of
                    # the stage applied yet the JOIN is tried again on a clean engine
                    raise StreamError(exc) from exc
                # earlier batches are in: a retry would meet them (ER_TUPLE_FOUND),
                # so the applier stops and the bootstrap fails, as 2.6.0's does
                raise
            except BaseException:
                txns.rollback()
                raise
            txns.commit_async(_unlogged, [])
            if start + SNAPSHOT_BATCH < len(items):
                box.sched.sleep(0)


def _unlogged(rows: list[XRow], done) -> None:
    done(None)


# ------------------------------------------------------------ replicated rows

def known_lsn(replicaset, replica_id: int) -> int:
    """The newest LSN of `replica_id` already applied here, written or in flight."""
    return max(replicaset.applier.vclock.get(replica_id),
               replicaset.vclock.get(replica_id))


def applier_apply_tx(box: ReplicationInstanceApi, rows: list[XRow],
                     skip_conflict: bool = False) -> bool:
    """Apply one transaction of replicated rows (see ReplicatedTx.apply)."""
    return ReplicatedTx(box).apply(rows, skip_conflict)


class ReplicatedTx:
    """applier_apply_tx for one box, with what every transaction takes looked up
    once: an applier makes one per subscription and applies the stream with it."""

    def __init__(self, box: ReplicationInstanceApi):
        self.box = box
        self.replicaset = box.replicaset
        self.txns = box.engine.txns
        # the same triggers for every transaction: they get it as their argument
        self.on_commit = functools.partial(_on_txn_commit, box.replicaset)
        self.on_rollback = functools.partial(_on_txn_rollback, box)

    def apply(self, rows: list[XRow], skip_conflict: bool = False,
              requests: list | None = None) -> bool:
        """Apply one transaction and hand it to the journal without waiting for
        the write. Returns False when everything in it is applied already. Raises
        what applying raised (the local transaction is rolled back: no part of a
        transaction is ever left applied). `requests`: the rows' DML requests as
        the reader decoded them, row for row (None where it did not)."""
        box, replicaset = self.box, self.replicaset
        last = rows[-1]
        applied = known_lsn(replicaset, last.replica_id)
        if applied >= last.lsn:
            return False
        if applied >= rows[0].lsn or rows[0].replica_id != last.replica_id:
            # Part of it came through another upstream already (a master switch
            # in the middle of a transaction): keep only the rows not applied yet.
            rows = [row for row in rows if row.lsn > known_lsn(replicaset, row.replica_id)]
            requests = None
        nopped = False
        if box.limbo.promote_greatest_term and box.raft.is_enabled:
            filtered = applier_synchro_filter_tx(box, rows)
            nopped, rows = filtered is not rows, filtered     # (NOPs whole or not at all)
        statements: list[Statement] = []    # while no transaction is made
        # A deposed leader's rows made NOPs change nothing: they do not queue in
        # the limbo behind its owner's entries (a transaction of another origin
        # would be refused there: ER_UNCOMMITTED_FOREIGN_SYNC_TXNS).
        txn = adopt(box.engine, statements) if box.limbo.queue and not nopped else None
        journal_rows, txn = _apply_rows(box, txn, statements, rows, requests, skip_conflict)
        if txn is None:
            self._commit_unobserved(statements, journal_rows)
        else:
            self._commit(txn, rows, journal_rows)
        # In the journal now: later rows up to here are duplicates. (A failed
        # write puts the vclock back, see _write_failed.)
        vclock = replicaset.applier.vclock
        if len(rows) == 1 or _one_replica_rising(rows):
            # known_lsn() was below the first LSN (checked above), the last is
            # the highest: no comparison needed
            vclock.reset(last.replica_id, last.lsn)
            return True
        for row in rows:
            if row.lsn > vclock.get(row.replica_id):
                vclock.reset(row.replica_id, row.lsn)
        return True

    def _commit(self, txn, rows: list[XRow], journal_rows: list[XRow]) -> None:
        """txn_commit_try_async of a transaction that was made: through the limbo
        when it must, its triggers doing the applier's part on completion."""
        box = self.box
        if box.limbo.queue or txn.is_sync:
            # synchronous, or behind pending synchronous ones: into the limbo
            # with the master's LSN (txn_commit_try_async)
            try:
                box.limbo_enter_replicated(txn, rows)
            except BaseException:
                self.txns.rollback()
                raise
        txn.on_rollback.add(self.on_rollback)
        txn.on_commit.add(self.on_commit)
        self.txns.commit_async(box.submit_replicated, journal_rows)

    def _commit_unobserved(self, statements: list[Statement],
                           journal_rows: list[XRow]) -> None:
        """commit_async for a transaction that was never made (see _apply_rows):
        the same outcomes — the appliers' on_commit after the write, or the
        statements undone and _write_failed — without a Txn to carry them."""
        def done(error: BaseException | None) -> None:
            if error is None:
                _run(self.replicaset.applier.on_commit, None, "on_commit")
            else:
                undo(statements)
                _write_failed(self.box, error, None)

        try:
            self.box.submit_replicated(journal_rows, done)
        except BaseException as exc:
            done(exc)
            raise


def _apply_rows(box: ReplicationInstanceApi, txn, statements: list[Statement],
                rows: list[XRow], requests: list | None,
                skip_conflict: bool) -> tuple[list[XRow], Any]:
    """Apply the rows. Returns the rows to log — the rows themselves (a skipped
    conflict as a NOP), then what triggers wrote to local spaces — and the local
    transaction. That is `txn` if given; else, as long as nothing can observe the
    statements (no trigger, no synchronous space, no limbo: see row_apply), none
    is made and they go to `statements`, until a row that needs one has them
    adopted by a new transaction (None: none was needed). On an error,
    whichever it is is rolled back."""
    journal_rows = rows
    engine = box.engine
    spaces = engine.spaces
    unobserved_space = None     # the last space found unobserved
    if requests is None:
        requests = [None] * len(rows)
    try:
        for i, row in enumerate(rows):
            rtype = row.type
            if rtype in DML_WRITE_TYPES:
                request = requests[i]
                if request is None:
                    request = decode_request(row)
                space = spaces.get(request.space_id)
                if space is None:
                    space = engine.space(request.space_id)      # raises ER_NO_SUCH_SPACE
                if txn is None and space is not unobserved_space:
                    if not unobserved(box.limbo, space):
                        txn = adopt(engine, statements)
                    # (no trigger, flag or limbo entry can appear while the rows
                    # are applied: the answer holds for the space's next rows)
                    unobserved_space = space
                try:
                    if txn is None:
                        execute_unobserved(statements, space, request)
                    else:
                        execute_logged(txn, space, request)
                except ClientError as exc:
                    if exc.code == ErrorCode.ER_INVALID_MSGPACK:
                        # a value no index can order (a decimal 2.6.0 cannot
                        # read): the row cannot be read, the stream is at fault
                        raise StreamError(exc) from exc
                    if exc.code != ErrorCode.ER_TUPLE_FOUND or not skip_conflict:
                        raise
                    journal_rows = _skip_conflict(rows, journal_rows, i, exc)
            elif rtype == _NOP:
                continue
            elif is_synchro(rtype):
                try:
                    decode_synchro_body(row.body)
                except BoxError as exc:
                    raise StreamError(exc) from exc
                if txn is None:
                    txn = adopt(engine, statements)
                box.apply_synchro_row(row)
            else:
                raise StreamError(ClientError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, rtype))
        if txn is not None:
            extra = _local_trigger_rows(txn)
            if extra:
                journal_rows = journal_rows + extra
    except BaseException:
        abandon(engine, txn, statements)
        raise
    return journal_rows, txn


def _one_replica_rising(rows: list[XRow]) -> bool:
    """Whether the rows are of one replica, their LSNs rising (the usual case)."""
    replica_id = rows[0].replica_id
    lsn = 0
    for row in rows:
        if row.replica_id != replica_id or row.lsn <= lsn:
            return False
        lsn = row.lsn
    return True


def applier_synchro_filter_tx(box: ReplicationInstanceApi, rows: list[XRow]) -> list[XRow]:
    """2.6.3's filter (election on): a CONFIRM/ROLLBACK of an instance whose last
    PROMOTE term is behind the newest one comes from a deposed leader — it is
    logged as a NOP, so that it decides nothing (a PROMOTE always passes: it
    says who owns the limbo).

    2.6.3 also NOPs such an instance's synchronous transactions, which it tells
    by IPROTO_FLAGS WAIT_SYNC on the last row; 2.6.3 itself does not set that
    bit right (raft.md §5.6) and 2.6.0's rows never have it, so here a
    transaction is synchronous when it changes an is_sync space, as its author
    decided. Such a transaction is a deposed leader's tail: rows it wrote but
    did not relay before it died, resent when it leads again (its relay starts
    over from the follower's vclock). The PROMOTE that deposed it rolled them
    back on it; applied here they would enter the limbo behind another owner's
    entries and stop the applier (ER_UNCOMMITTED_FOREIGN_SYNC_TXNS). Every row
    of the deposed leader that a quorum had came before the new leader's
    PROMOTE in the stream, while its term was not outdated yet."""
    first = rows[0]
    if not box.limbo.txn_limbo_is_replica_outdated(first.replica_id):
        return rows
    if first.type in _CONFIRM_ROLLBACK:
        what = "synchro row"
    elif _changes_a_sync_space(box, rows):
        what = "synchronous transaction"
    else:
        return rows
    log.info("RAFT: %s {%d: %d} of an outdated term: NOP", what, first.replica_id,
             first.lsn)
    return [dataclasses.replace(row, type=IprotoType.NOP, body=None) for row in rows]


def _changes_a_sync_space(box: ReplicationInstanceApi, rows: list[XRow]) -> bool:
    spaces = box.engine.spaces
    for row in rows:
        if row.type not in DML_WRITE_TYPES or not row.body:
            continue
        try:
            body = unpack(row.body)
        except BoxError:
            continue        # garbage: the rows are applied as they came, and refused there
        space_id = body.get(_SPACE_ID) if isinstance(body, dict) else None
        space = spaces.get(space_id) if type(space_id) is int else None
        if space is not None and space.is_sync:
            return True
    return False


def _skip_conflict(rows: list[XRow], journal_rows: list[XRow], i: int,
                   exc: ClientError) -> list[XRow]:
    """replication_skip_conflict: the duplicate rows[i] is logged as a NOP with
    its own header, so the vclock still moves past it. Returns the rows to log."""
    row = rows[i]
    log.info("skipping row {%d: %d}: %s", row.replica_id, row.lsn, exc)
    if journal_rows is rows:
        journal_rows = list(rows)
    journal_rows[i] = dataclasses.replace(row, type=IprotoType.NOP, body=None)
    return journal_rows


def _local_trigger_rows(txn) -> list[XRow]:
    """Rows that local on_replace triggers added to the transaction (the replicated
    statements themselves have no redo row: txn.replicated). Those of is_local
    spaces are logged after the replicated rows (2.6.0 does the same); anything else
    would have to be replicated back: refused."""
    extra = []
    for stmt in txn.statements:
        if stmt.row is None:
            continue
        if stmt.row.group_id != GroupId.LOCAL:
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "Replication",
                              "distributed transactions")
        extra.append(stmt.row)
    return extra


def _on_txn_commit(replicaset, txn) -> None:
    _run(replicaset.applier.on_commit, txn, "on_commit")


def _on_txn_rollback(box: ReplicationInstanceApi, txn) -> None:
    if txn.sync_rollback:
        return      # a ROLLBACK from the master undid it: normal, nothing failed
    _write_failed(box, txn.journal_error, txn)


def _write_failed(box: ReplicationInstanceApi, error: BaseException | None, txn) -> None:
    """applier_txn_rollback_cb: the write failed (`txn`: the transaction undone,
    None when none was made). Share the error, let every applier know (they
    reconnect), forget the rows that were in flight."""
    replicaset = box.replicaset
    if not isinstance(error, BoxError):
        error = ClientError(ErrorCode.ER_WAL_IO)
    replicaset.applier.diag = error
    _run(replicaset.applier.on_rollback, txn, "on_rollback")
    replicaset.applier.vclock = replicaset.vclock.copy()


def _run(triggers: Iterable, txn, what: str) -> None:
    for trigger in triggers:
        try:
            trigger(txn)
        except Exception as exc:   # one applier's trigger must not starve the others
            log.error("replicaset.applier.%s trigger failed: %s", what, exc)
