"""Bugs of the reference, Tarantool 2.6.0, that the fault scenarios meet, told apart
from everything else so that the interop runs can hold 2.6.0 to every other
invariant (and Spindle to all of them: nothing here applies to a Spindle master).

gh-5185, "txn_limbo: handle ROLLBACK during CONFIRM" (fixed in 2.6.1 by 849ba7dc73):
a sync transaction's waiter on a 2.6.0 master can time out while the CONFIRM that
covers it is being written. It then writes a ROLLBACK anyway (seen with body LSN 0),
rolls the transaction back in memory and fails its client, though the master's WAL
holds the row and a CONFIRM for it — so every replica commits it. Afterwards the
replicas hold rows (or, for a register, newer values) the master's memory lacks,
with equal vclocks and equal xlogs.

`gh_5185_rows` finds, in a master's xlogs, the rows that pattern leaves: a row at
LSN L, a CONFIRM of LSN >= L, and after that CONFIRM a ROLLBACK whose LSN is <= L. A difference
between the master and a replica is put down to gh-5185 only when the replica holds
exactly the newest such row of that key and the master does not.
"""
from __future__ import annotations

from pathlib import Path

import msgpack

from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.xlog.files import XlogReader, list_files

GH_5185 = "tarantool gh-5185 (2.6.0: ROLLBACK during CONFIRM)"
_DML = (IprotoType.INSERT, IprotoType.REPLACE)


def gh_5185_rows(workdir: Path, replica_id: int) -> dict[tuple[int, object], tuple]:
    """{(space id, key): tuple} of the rows of `replica_id` that a CONFIRM covers
    and a later ROLLBACK names too, each key's newest row only."""
    newest: dict[tuple[int, object], tuple[int, tuple]] = {}
    confirms: list[tuple[int, int]] = []     # (row LSN, body LSN)
    rollbacks: list[tuple[int, int]] = []    # (row LSN, body LSN)
    for entry in list_files(str(workdir), ".xlog"):
        with XlogReader(entry.path, force_recovery=True) as reader:
            for row in reader.rows():
                if row.replica_id != replica_id or not row.body:
                    continue
                body = msgpack.unpackb(row.body, strict_map_key=False)
                if row.type in _DML:
                    tuple_ = tuple(body[IprotoKey.TUPLE])
                    key = (body[IprotoKey.SPACE_ID], tuple_[0])
                    if key not in newest or newest[key][0] < row.lsn:
                        newest[key] = (row.lsn, tuple_)
                elif row.type == IprotoType.CONFIRM:
                    confirms.append((row.lsn, body.get(IprotoKey.LSN, 0)))
                elif row.type == IprotoType.ROLLBACK:
                    rollbacks.append((row.lsn, body.get(IprotoKey.LSN, 0)))
    found = {}
    for key, (lsn, tuple_) in newest.items():
        for at, target in rollbacks:
            if at > lsn and target <= lsn and any(
                    written < at and covered >= lsn for written, covered in confirms):
                found[key] = tuple_
                break
    return found


def explained_by_gh_5185(pattern: dict[tuple[int, object], tuple], space_id: int, key,
                         master_tuple: tuple | None, replica_tuple: tuple | None) -> bool:
    expected = pattern.get((space_id, key))
    return expected is not None and replica_tuple == expected and master_tuple != expected
