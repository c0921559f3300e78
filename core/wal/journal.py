"""Journal entries and LSN assignment: what the WAL writer (writer.py) signs and encodes.

LSN assignment is wal_assign_lsn() of 2.6.0: a row that has no LSN yet is a local
write — it gets `replica_id = instance_id` (or 0 with component 0 for GROUP_LOCAL rows of
is_local spaces) and the next LSN of that component; the transaction id (TSN) is the
LSN of the first global row (of the first row when every row is local) and the last row
carries the commit flag. Rows that already have an LSN came from replication: they keep
REPLICA_ID/LSN/TSN/FLAGS and only advance the vclock. Every row gets this instance's
write time as TIMESTAMP.

A batch is signed entry by entry on a copy of the WAL vclock (sign_entry): an entry that
cannot be signed (a broken LSN) is refused alone and never reaches the file.
"""
from __future__ import annotations

from collections.abc import Callable

from spindle.core import log
from spindle.core.iproto.constants import GroupId
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.row_block import encode_local_tx, encode_row_list
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock

_LOCAL = int(GroupId.LOCAL)


class JournalEntry:
    """One transaction on its way to the WAL. `done`, `error` and `vclock` (the WAL
    vclock right after this entry) are set in tx when it completes."""

    __slots__ = ("rows", "instance_id", "on_done", "fiber", "done", "error", "vclock",
                 "failed_in_batch", "encoded")

    def __init__(self, rows: list[XRow], instance_id: int,
                 on_done: Callable[[JournalEntry], None] | None = None):
        self.rows = rows
        self.instance_id = instance_id
        self.on_done = on_done
        self.fiber = None
        self.done = False
        self.error: BaseException | None = None
        self.vclock: VClock | None = None
        self.failed_in_batch = False   # the whole batch failed: part of a rollback
        self.encoded: list[bytes] | None = None   # each row as written to the file

    @property
    def signature(self) -> int:
        """Tarantool's entry->res: the vclock sum after this entry, -1 if it failed."""
        return -1 if self.error is not None or self.vclock is None else self.vclock.signature


class BrokenLsn(ClientError):
    """A replicated row whose LSN does not advance its vclock component."""


def assign_lsn(rows: list[XRow], vclock: VClock, instance_id: int, timestamp: float) -> bool:
    """Sign `rows` (one transaction) in place and advance `vclock` (wal_assign_lsn).
    True when they were signed as the usual local transaction (new rows of this
    instance's id, none GROUP_LOCAL, consecutive LSNs from the TSN): what
    format.encode_local_tx encodes."""
    if len(rows) == 1:
        row = rows[0]
        if row.lsn == 0:    # the usual autocommit statement, as the loop below does it
            row.timestamp = timestamp
            if row.replica_id not in (0, instance_id):
                raise ValueError(f"row of replica {row.replica_id} has no LSN")
            row.replica_id = 0 if row.group_id == _LOCAL else instance_id
            row.lsn = row.tsn = vclock.inc(row.replica_id)
            row.is_commit = True
            return row.replica_id != 0
    if rows[0].lsn:
        if _sign_replicated_tx(rows, vclock, timestamp):
            return False
    elif _sign_local_tx(rows, vclock, instance_id, timestamp):
        return True
    tsn = 0
    first_global = 0
    last = len(rows) - 1
    for i, row in enumerate(rows):
        row.timestamp = timestamp
        if row.lsn == 0:
            if row.replica_id not in (0, instance_id):
                raise ValueError(f"row of replica {row.replica_id} has no LSN")
            row.replica_id = 0 if row.group_id == GroupId.LOCAL else instance_id
            row.lsn = vclock.inc(row.replica_id)
            if row.group_id != GroupId.LOCAL and tsn == 0:
                tsn = row.lsn
                first_global = i
            row.tsn = tsn if tsn else rows[0].lsn
            row.is_commit = i == last
        else:
            prev = vclock.get(row.replica_id)
            if row.lsn <= prev:
                log.say(log.CRIT, "Attempt to write a broken LSN to WAL: replica id: %d, "
                        "confirmed lsn: %d, new lsn %d", row.replica_id, prev, row.lsn)
                raise BrokenLsn(ErrorCode.ER_INVALID_ORDER, row.replica_id, prev, row.lsn)
            vclock.reset(row.replica_id, row.lsn)
    # Local-space rows before the first global one could not know the TSN yet.
    for row in rows[:first_global]:
        row.tsn = tsn
    return False


def _sign_local_tx(rows: list[XRow], vclock: VClock, instance_id: int,
                   timestamp: float) -> bool:
    """assign_lsn() of the usual local transaction: every row new (no LSN, no other
    replica's id) and of a replicated space. They take the next LSNs of this
    instance's component at once; the TSN is the first one. False, with nothing
    changed, for any other transaction."""
    ids = (0, instance_id)
    for row in rows:
        if row.lsn or row.group_id == _LOCAL or row.replica_id not in ids:
            return False
    first = vclock.get(instance_id) + 1
    vclock.reset(instance_id, first + len(rows) - 1)
    for lsn, row in enumerate(rows, first):
        row.timestamp = timestamp
        row.replica_id = instance_id
        row.lsn = lsn
        row.tsn = first
        row.is_commit = False
    rows[-1].is_commit = True
    return True


def _sign_replicated_tx(rows: list[XRow], vclock: VClock, timestamp: float) -> bool:
    """assign_lsn() of the usual replicated transaction: every row signed by one
    replica, the LSNs increasing past its vclock component. The rows keep their
    header and take the write time; the component moves to the last LSN at once.
    False, with nothing changed, for any other transaction."""
    replica_id = rows[0].replica_id
    lsn = vclock.get(replica_id)
    for row in rows:
        if row.lsn <= lsn or row.replica_id != replica_id:
            return False
        lsn = row.lsn
    for row in rows:
        row.timestamp = timestamp
    vclock.reset(replica_id, lsn)
    return True


def sign_entry(entry: JournalEntry, vclock: VClock, now: float) -> bytes | None:
    """Sign the entry's rows after `vclock` and encode them: their bytes, with
    `entry.vclock` the vclock after them and `entry.encoded` each row's bytes.
    `vclock` is not changed (the entry is signed on a copy, never changed after
    this). An entry that cannot be signed gets its error and None: only it is
    refused, it never reaches the file."""
    trial = vclock.copy()
    rows = entry.rows
    try:
        if assign_lsn(rows, trial, entry.instance_id, now):
            encoded = encode_local_tx(rows)
        else:
            encoded = encode_row_list(rows)
        data = encoded[0] if len(encoded) == 1 else b"".join(encoded)
    except BrokenLsn as exc:
        entry.error = exc
        return None
    except ValueError as exc:
        log.error("can't encode a journal entry: %s", exc)
        entry.error = ClientError(ErrorCode.ER_WAL_IO)
        return None
    entry.vclock = trial
    entry.encoded = encoded
    return data
