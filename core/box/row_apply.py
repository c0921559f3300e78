"""Applying rows that are logged already: a replica's applier and local recovery.

Such a row needs what any statement needs: the format checks and the indexes, a
Statement in its transaction (a failed WAL write, a ROLLBACK of the limbo or a
refused row later in the transaction must be able to undo it), and the space's
before_replace/on_replace triggers. It needs nothing of what only a local statement
needs: no redo row (the row itself is what gets logged, or was), and when the space
has no trigger nothing can observe the statement while it runs, so the nesting
depth, the savepoint position and the trigger dispatch of TxnManager.execute are
skipped. A space with triggers gets the full statement (TxnManager.execute).
"""
from __future__ import annotations

from typing import Any

from spindle.core.box.field_types import ext_hook
from spindle.core.box.txn import Statement
from spindle.core.iproto.constants import is_synchro
from spindle.core.iproto.xrow import DML_WRITE_TYPES, DmlRequest, XRow, decode_dml_body

from . import limbo_txn


def execute_logged(txn, space, request: DmlRequest) -> Any:
    """Run `request` as a statement of `txn`, the running fiber's transaction, whose
    rows are logged already (`txn.replicated`: no redo row for its statements)."""
    if len(space.before_replace) or len(space.on_replace):
        return space.execute_request(request)
    stmt = Statement(space, request)
    # Without triggers a statement changes every index or none: a failure here
    # leaves nothing to undo, so the statement joins the transaction afterwards.
    result = space.execute_stmt(stmt)
    txn.statements.append(stmt)
    return result


def recover_wal_tx(box, rows: list[XRow]) -> None:
    """One transaction read from an xlog at start-up, applied unlogged (the WAL
    does not run yet), then into the limbo as at its first commit.

    Nothing runs beside recovery, so as long as no trigger, no limbo and no
    synchronous space can see the transaction, none is made: the statements
    only keep what undoes them. The first row that needs more adopts them into
    a real transaction, which goes on as a transaction would have from the start."""
    engine = box.engine
    txn = None
    unobserved: list[Statement] = []      # statements run without a transaction
    try:
        for row in rows:
            rtype = row.type
            if rtype in DML_WRITE_TYPES:
                request = decode_dml_body(row.body, rtype, ext_hook)
                space = engine.space(request.space_id)
                if txn is None and _unobserved(box, space):
                    stmt = Statement(space, request)
                    space.execute_stmt(stmt)        # all-or-nothing without triggers
                    unobserved.append(stmt)
                    continue
                if txn is None:
                    txn = _adopt(box, unobserved)
                execute_logged(txn, space, request)
            elif is_synchro(rtype):
                if txn is None:
                    txn = _adopt(box, unobserved)
                limbo_txn.recover_synchro_row(box, row)
            # NOP and anything else: nothing to apply
    except BaseException:
        if txn is None:
            for stmt in reversed(unobserved):
                stmt.undo()
        else:
            engine.txns.rollback()
        raise
    if txn is None:
        return
    engine.txns.commit()
    if box.limbo.queue or txn.is_sync:      # else the limbo has nothing to do with it
        limbo_txn.recover_tx(box, txn, rows)


def _unobserved(box, space) -> bool:
    """Whether a statement of `space` can run outside a transaction in recovery:
    no trigger to see it, no limbo to queue it."""
    return not (space.is_sync or box.limbo.queue or len(space.before_replace)
                or len(space.on_replace))


def _adopt(box, statements: list[Statement]):
    """A transaction holding the statements that ran without one."""
    txn = box.engine.txns.begin()
    txn.replicated = True           # the rows are in the xlog: no redo rows
    txn.statements.extend(statements)
    return txn
