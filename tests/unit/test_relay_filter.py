"""relay_filter_tx(): what a relay sends of each WAL transaction (iproto.md §8.4)."""
from __future__ import annotations

import msgpack

from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.xrow import XRow
from spindle.core.replication.relay import relay_filter_tx
from spindle.core.vclock import VClock


def row(replica_id, lsn, tsn=None, commit=True, group_id=0, key=1):
    return XRow(type=IprotoType.INSERT, replica_id=replica_id, lsn=lsn, timestamp=5.0,
                group_id=group_id, tsn=lsn if tsn is None else tsn, is_commit=commit,
                body=encode_dml_body(IprotoType.INSERT, 512, tuple=[key]))


def header(r: XRow) -> dict:
    return msgpack.unpackb(r.encode_header(), strict_map_key=False)


def test_ordinary_rows_go_out_untouched():
    tx = [row(1, 7, 7, False), row(1, 8, 7, False), row(1, 9, 7, True)]
    out = relay_filter_tx(tx)
    assert all(a is b for a, b in zip(out, tx)) and len(out) == 3


def test_local_rows_without_replica_id_are_skipped():
    assert relay_filter_tx([row(0, 3, group_id=GroupId.LOCAL)]) == []


def test_local_rows_with_a_replica_id_become_nop_without_body():
    local = row(2, 4, group_id=GroupId.LOCAL)
    [nop] = relay_filter_tx([local])
    assert nop is not local and local.type == IprotoType.INSERT    # the WAL's row is kept
    assert (nop.type, nop.body, nop.group_id, nop.replica_id, nop.lsn, nop.timestamp) == (
        IprotoType.NOP, None, 0, 2, 4, 5.0)
    assert header(nop) == {0: IprotoType.NOP, 2: 2, 3: 4, 4: 5.0}


def test_id_filter_skips_the_listed_instances():
    tx = [row(3, 1)]
    assert relay_filter_tx(tx, id_filter=frozenset({3})) == []
    assert relay_filter_tx(tx, id_filter=frozenset({2})) == tx


def test_own_rows_go_back_only_if_the_master_had_them_at_subscribe():
    at_subscribe = VClock({2: 10})
    old, new = [row(2, 10)], [row(2, 11)]
    assert relay_filter_tx(old, subscriber_id=2, local_vclock_at_subscribe=at_subscribe) == old
    assert relay_filter_tx(new, subscriber_id=2, local_vclock_at_subscribe=at_subscribe) == []
    # other instances' rows are not affected
    assert relay_filter_tx([row(1, 11)], subscriber_id=2,
                           local_vclock_at_subscribe=at_subscribe) != []


def test_a_filtered_commit_row_moves_the_commit_flag_to_the_last_row_sent():
    # box.begin() global:insert{} local:insert{} box.commit(): the local row closes the
    # transaction (2.6.0's WAL layout); the replica must still see a commit.
    glob = row(1, 7, 7, False)
    tx = [glob, row(0, 1, 7, True, group_id=GroupId.LOCAL)]
    [sent] = relay_filter_tx(tx)
    assert sent.is_commit and not glob.is_commit
    assert 0x08 not in header(sent) and 0x09 not in header(sent)   # a lone row now
    two = [row(1, 7, 7, False), row(1, 8, 7, False),
           row(0, 1, 7, True, group_id=GroupId.LOCAL)]
    out = relay_filter_tx(two)
    assert [(r.lsn, r.is_commit) for r in out] == [(7, False), (8, True)]
    assert header(out[1])[0x08] == 1 and header(out[1])[0x09] == 1


def test_a_transaction_filtered_away_whole_sends_nothing():
    tx = [row(3, 1, 1, False), row(3, 2, 1, True)]
    assert relay_filter_tx(tx, id_filter=frozenset({3})) == []
