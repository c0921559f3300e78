"""Transactions: begin/commit/rollback, savepoints, triggers, the journal hand-off,
per-fiber isolation and abort on yield (semantics measured on 2.6.0)."""
from __future__ import annotations

import pytest

from spindle.core.box.index import IndexDef
from spindle.core.box.txn import Engine, Txn, request_row
from spindle.core.iproto.constants import GroupId, IprotoKey, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import DmlRequest


class Journal:
    def __init__(self, fail_with=None):
        self.batches = []
        self.fail_with = fail_with

    def __call__(self, rows):
        if self.fail_with is not None:
            raise self.fail_with
        self.batches.append(rows)


@pytest.fixture
def journal():
    return Journal()


@pytest.fixture
def engine(journal):
    return Engine(journal=journal)


@pytest.fixture
def space(engine):
    s = engine.create_space(512, "t")
    s.create_index(IndexDef(0, "pk"))
    return s


def err(fn, *args) -> ClientError:
    with pytest.raises(ClientError) as e:
        fn(*args)
    return e.value


def test_autocommit_writes_one_batch_per_statement(engine, space, journal):
    space.insert([1])
    space.replace([2])
    space.delete([3])                     # a miss is still logged
    assert [[r.type for r in b] for b in journal.batches] == [
        [IprotoType.INSERT], [IprotoType.REPLACE], [IprotoType.DELETE]]
    assert not engine.txns.is_in_txn()


def test_explicit_transaction(engine, space, journal):
    txns = engine.txns
    txn = txns.begin()
    assert txns.is_in_txn() and txns.txn_id() == txn.id
    e = err(txns.begin)
    assert e.code == ErrorCode.ER_ACTIVE_TRANSACTION
    assert str(e) == "Operation is not permitted when there is an active transaction "
    space.insert([1])
    with pytest.raises(ClientError, match="Duplicate key"):
        space.insert([1])                 # the statement fails, the transaction stays
    space.insert([2])
    assert journal.batches == []          # nothing written before commit
    txns.commit()
    assert [[r.type for r in b] for b in journal.batches] == [[IprotoType.INSERT] * 2]
    assert txn.status == "committed" and not txns.is_in_txn()
    txns.commit()                         # no transaction: no-op, as box.commit()
    txns.rollback()


def test_rollback_undoes_everything(engine, space, journal):
    space.insert([1, "a"])
    space.insert([2, "b"])
    txns = engine.txns
    txns.begin()
    space.replace([1, "A"])
    space.delete([2])
    space.insert([3])
    space.update([1], [["=", 2, "AA"]])
    txns.rollback()
    assert space.select() == [(1, "a"), (2, "b")]
    assert len(journal.batches) == 2


def test_savepoints(engine, space):
    txns = engine.txns
    assert str(err(txns.savepoint)) == "No active transaction"
    txns.begin()
    empty = txns.savepoint()             # allowed in an empty transaction in 2.6.0
    space.insert([1])
    sp = txns.savepoint()
    space.insert([2])
    sp2 = txns.savepoint()
    space.insert([3])
    txns.rollback_to_savepoint(sp)
    assert space.select() == [(1,)]
    e = err(txns.rollback_to_savepoint, sp2)
    assert e.code == ErrorCode.ER_NO_SUCH_SAVEPOINT
    assert str(e) == "Can not rollback to savepoint: the savepoint does not exist"
    space.insert([4])
    txns.rollback_to_savepoint(sp)        # still valid
    txns.rollback_to_savepoint(empty)
    assert space.select() == []
    space.insert([5])
    txns.commit()
    assert space.select() == [(5,)]
    assert err(txns.rollback_to_savepoint, sp).code == ErrorCode.ER_NO_SUCH_SAVEPOINT


def test_on_commit_and_on_rollback(engine, space):
    txns = engine.txns
    events = []
    assert err(txns.on_commit, lambda t: None).code == ErrorCode.ER_NO_TRANSACTION
    txns.begin()
    txns.on_commit(lambda t: events.append(("commit", [s.new_tuple for s in t.statements])))
    txns.on_rollback(lambda t: events.append(("rollback", t.id)))
    space.insert([1])
    txns.commit()
    txn = txns.begin()
    txns.on_commit(lambda t: events.append(("commit", None)))
    txns.on_rollback(lambda t: events.append(("rollback", t.id)))
    space.insert([2])
    txns.rollback()
    assert events == [("commit", [(1,)]), ("rollback", txn.id)]


def test_failing_trigger_is_only_logged(engine, space, capsys):
    txns = engine.txns
    txns.begin()
    txns.on_commit(lambda t: 1 / 0)
    space.insert([1])
    txns.commit()
    assert space.select() == [(1,)]
    assert "on_commit trigger failed" in capsys.readouterr().err


def test_journal_failure_rolls_back_and_propagates(space):
    engine = space.txns
    failing = Journal(fail_with=ClientError(ErrorCode.ER_WAL_IO))
    engine.journal = failing
    rolled = []
    with pytest.raises(ClientError, match="Failed to write to disk"):
        space.insert([1])
    assert space.select() == []
    engine.begin()
    engine.on_rollback(lambda t: rolled.append(t.status))
    space.insert([2])
    space.insert([3])
    with pytest.raises(ClientError, match="Failed to write to disk"):
        engine.commit()
    assert space.select() == [] and rolled == ["rolled back"] and not engine.is_in_txn()


def test_journal_sees_detached_transaction(engine, space):
    txns = engine.txns
    states = []
    txns.journal = lambda rows: states.append((txns.is_in_txn(), len(rows)))
    txns.begin()
    space.insert([1])
    txns.commit()
    assert states == [(False, 1)]


def test_commit_and_rollback_inside_a_statement(engine, space):
    txns = engine.txns
    caught = []

    def trigger(old, new, name, op):
        for fn in (txns.commit, txns.rollback, txns.begin):
            try:
                fn()
            except ClientError as e:
                caught.append(str(e))

    space.on_replace.add(trigger)
    space.insert([1])
    assert caught == ["Can not commit transaction in a nested statement",
                      "Rollback called in a nested statement",
                      "Operation is not permitted when there is an active transaction "]
    assert space.select() == [(1,)]


def test_atomic(engine, space):
    txns = engine.txns
    assert txns.atomic(lambda: space.insert([1])) == (1,)

    def failing():
        space.insert([2])
        raise ClientError(ErrorCode.ER_PROC_LUA, "stop")

    with pytest.raises(ClientError, match="stop"):
        txns.atomic(failing)
    assert space.select() == [(1,)] and not txns.is_in_txn()


def test_per_fiber_transactions(journal):
    current = ["f1"]
    engine = Engine(journal=journal, fiber_key=lambda: current[0])
    space = engine.create_space(1, "s")
    space.create_index(IndexDef(0, "pk"))
    engine.txns.begin()
    space.insert([1])
    current[0] = "f2"
    assert not engine.txns.is_in_txn()
    space.insert([2])                     # autocommit in the other fiber
    assert len(journal.batches) == 1
    assert space.select() == [(1,), (2,)]  # memtx 2.6 reads uncommitted data
    current[0] = "f1"
    engine.txns.rollback()
    assert space.select() == [(2,)]


def test_abort_on_yield(engine, space, journal):
    txns = engine.txns
    space.insert([1])
    txns.begin()
    space.insert([2])
    txns.abort_on_yield()
    assert space.select() == [(1,)]
    space.insert([3])                     # 2.6.0 still takes statements...
    e = err(txns.commit)                  # ...but the commit fails and undoes them
    assert e.code == ErrorCode.ER_TRANSACTION_YIELD
    assert str(e) == "Transaction has been aborted by a fiber yield"
    assert space.select() == [(1,)]
    assert not txns.is_in_txn() and len(journal.batches) == 1
    txns.abort_on_yield()                 # no transaction: nothing happens


def test_rows_of_a_transaction(engine, journal):
    glob = engine.create_space(10, "g", flags={"is_sync": True})
    glob.create_index(IndexDef(0, "pk"))
    loc = engine.create_space(11, "l", flags={"is_local": True})
    loc.create_index(IndexDef(0, "pk"))
    txns = engine.txns
    txn = txns.begin()
    loc.insert([1])
    glob.insert([1])
    assert txn.is_sync
    txns.commit()
    assert [(r.type, r.group_id) for r in journal.batches[0]] == [
        (IprotoType.INSERT, GroupId.LOCAL), (IprotoType.INSERT, GroupId.DEFAULT)]
    txns.begin()
    loc.insert([2])
    loc.insert([3])
    txns.commit()                         # only local rows: no closing NOP
    assert [r.type for r in journal.batches[1]] == [IprotoType.INSERT] * 2


@pytest.mark.parametrize("rtype", [IprotoType.INSERT, IprotoType.REPLACE])
@pytest.mark.parametrize("space_id", [0, 5, 512, 70000])
def test_request_row_of_a_packed_tuple_equals_the_general_one(rtype, space_id):
    from spindle.core.iproto.msgpack import packb
    tup = [1, "a", None, 2.5, [1, {"k": b"v"}]]
    request = DmlRequest(type=rtype, space_id=space_id, tuple=tup)
    fast = request_row(request, GroupId.LOCAL, packb(tuple(tup)))
    assert fast == request_row(request, GroupId.LOCAL)
    assert fast.group_id == GroupId.LOCAL


def test_the_redo_row_and_bsize_reuse_one_packing_of_the_tuple(engine, space, journal):
    space.insert([1, "a"])
    space.replace([1, "bb"])
    (first,), (second,) = journal.batches
    assert first == request_row(DmlRequest(IprotoType.INSERT, 512, tuple=[1, "a"]))
    assert second == request_row(DmlRequest(IprotoType.REPLACE, 512, tuple=[1, "bb"]))
    assert space.bsize() == len(b"\x92\x01\xa2bb")
    # A value MsgPack cannot hold passes the format check of an `any` field and
    # fails where it always did: building the redo row, which undoes the statement.
    with pytest.raises(TypeError):
        space.insert([2, 2 ** 70])
    assert space.get([2]) is None and space.bsize() == len(b"\x92\x01\xa2bb")


def test_abort_on_yield_with_no_transaction_open_anywhere(engine, space):
    txns = engine.txns
    txns.abort_on_yield()                         # nothing open: returns at once
    txn = txns.begin()
    space.insert([1])
    txns.abort_on_yield(object())                 # the scheduler passes the fiber
    assert txn.aborted_by_yield and space.get([1]) is None
    assert err(txns.commit).code == ErrorCode.ER_TRANSACTION_YIELD


def test_space_options_follow_an_alter_of_flags(engine):
    s = engine.create_space(600, "opts")
    assert (s.is_temporary, s.is_local, s.is_sync, s.group_id) == (
        False, False, False, GroupId.DEFAULT)
    s.flags = {"temporary": True, "group_id": 1, "is_sync": True}
    assert (s.is_temporary, s.is_local, s.is_sync, s.group_id) == (
        True, True, True, GroupId.LOCAL)
    s.flags = {"is_local": True}
    assert (s.is_temporary, s.is_local, s.is_sync, s.group_id) == (
        False, True, False, GroupId.LOCAL)


def test_request_row_bodies():
    row = request_row(DmlRequest(type=IprotoType.UPDATE, space_id=512, index_id=1,
                                 index_base=1, key=[5], ops=[["+", 2, 1]]))
    assert row.body_map() == {IprotoKey.SPACE_ID: 512, IprotoKey.INDEX_ID: 1,
                              IprotoKey.INDEX_BASE: 1, IprotoKey.KEY: [5],
                              IprotoKey.TUPLE: [["+", 2, 1]]}
    # keys in xrow_encode_dml order: SPACE_ID, INDEX_ID, INDEX_BASE, KEY, OPS, TUPLE
    assert row.body == bytes.fromhex("85 10 cd 0200 11 01 15 01 20 91 05 21 91 93 a1 2b 02 01")
    nop = request_row(DmlRequest(type=IprotoType.NOP, space_id=512), GroupId.LOCAL)
    assert nop.body is None and nop.group_id == GroupId.LOCAL


def test_txn_ids_increase():
    assert Txn().id < Txn().id
