"""Applying rows that are logged already: a replica's applier and local recovery.

Such a row needs what any statement needs: the format checks and the indexes, a
Statement in its transaction (a failed WAL write, a ROLLBACK of the limbo or a
refused row later in the transaction must be able to undo it), and the space's
before_replace/on_replace triggers. It needs nothing of what only a local statement
needs: no redo row (the row itself is what gets logged, or was), and when the space
has no trigger nothing can observe the statement while it runs, so the nesting
depth, the savepoint position and the trigger dispatch of TxnManager.execute are
skipped. A space with triggers gets the full statement (TxnManager.execute).

Recovery and the applier go further while no trigger, no synchronous space and no
limbo entry can see a transaction: no transaction is made, the statements alone
are kept (to undo them), until a row that needs one has them adopted.
"""
from __future__ import annotations

from typing import Any

from spindle.core.box.limbo import TxnLimbo
from spindle.core.box.txn import Engine, Statement, Txn
from spindle.core.iproto.request import DmlRequest, PutRequest


def execute_logged(txn, space, request: DmlRequest | PutRequest) -> Any:
    """Run `request` as a statement of `txn`, the running fiber's transaction, whose
    rows are logged already (`txn.replicated`: no redo row for its statements)."""
    if has_triggers(space):
        return space.txns.execute(space, request)   # (not a client's: box.stat skips it)
    stmt = Statement(space, request)
    # Without triggers a statement changes every index or none: a failure here
    # leaves nothing to undo, so the statement joins the transaction afterwards.
    result = space.execute_stmt(stmt)
    txn.statements.append(stmt)
    return result


def has_triggers(space) -> bool:
    """Whether a before_replace or on_replace trigger sees the space's statements."""
    return bool(len(space.before_replace) or len(space.on_replace))


# ------------------------------------------- statements without a transaction
# Recovery (core/instance/box.py) and the applier (core/replication/apply.py) run
# a transaction's rows this way until one of them needs a real transaction.

def unobserved(limbo: TxnLimbo, space) -> bool:
    """Whether a logged statement of `space` can run outside a transaction: no
    trigger to see it, no limbo to queue it."""
    return not (space.is_sync or limbo.queue or has_triggers(space))


def execute_unobserved(statements: list[Statement], space,
                       request: DmlRequest | PutRequest) -> None:
    """Run `request` without a transaction; its statement joins `statements`."""
    stmt = Statement(space, request)
    space.execute_stmt(stmt)        # all-or-nothing without triggers
    statements.append(stmt)


def undo(statements: list[Statement]) -> None:
    """Undo statements run without a transaction, newest first."""
    for stmt in reversed(statements):
        stmt.undo()


def abandon(engine, txn, statements: list[Statement]) -> None:
    """A failed transaction of logged rows: undo what ran without a Txn, or roll the
    Txn back once one adopted the statements."""
    if txn is None:
        undo(statements)
    else:
        engine.txns.rollback()


def adopt(engine: Engine, statements: list[Statement]) -> Txn:
    """A transaction of logged rows (no redo rows) holding the statements that
    ran without one."""
    txn = engine.txns.begin()
    txn.replicated = True
    txn.statements.extend(statements)
    return txn
