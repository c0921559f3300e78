"""The JOIN stages of the relay (relay.cc of seeds/relay.txt): what a master sends
a joining replica before it subscribes.

* `relay_initial_join` — JOIN/FETCH_SNAPSHOT stage one: a read view of the data,
  OK {start vclock} first (after a WAL sync, and after pending synchronous
  transactions are confirmed), then — only for a JOIN that carries the joiner's
  version, as 2.7.3/2.8.2+ send it — the META stage (`relay_join_meta`: the Raft
  term and vote, the limbo's state), then one INSERT per tuple with only
  REQUEST_TYPE in the header (iproto.md §8.3).
* `relay_final_join` — the WAL rows (start, stop] with their original headers,
  sent by a Relay (relay.py) without a reader: a JOIN has no ACKs.
"""
from __future__ import annotations

import struct

from spindle.core.fiber.timeslice import RELAY_SLICE, TimeSlice
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.msgpack import packb
from spindle.core.iproto.replication import encode_join_meta, encode_vclock_row
from spindle.core.iproto.xrow import XRow, frame
from spindle.core.vclock import VClock

from .instance_api import ReplicationInstanceApi
from .relay import (
    SEND_BUFFER, Relay, relay_cursor, relay_send_txs, replication_disconnect_timeout,
    replication_timeout,
)
from .wal_tail import vclock_covers

# A JOIN has no ACKs to watch: a write that cannot go on for this long (or for the
# disconnect timeout, if longer) means the joining replica is gone.
JOIN_WRITE_TIMEOUT = 30.0
_LOCAL = int(GroupId.LOCAL)
_pack_u32 = struct.Struct(">I").pack


def join_write_timeout(box: ReplicationInstanceApi) -> float:
    return max(JOIN_WRITE_TIMEOUT, replication_disconnect_timeout(box))


def relay_wait_sync_confirm(box: ReplicationInstanceApi) -> None:
    """txn_limbo_wait_confirm() of 2.6.0's relay_initial_join: a JOIN sends its
    start vclock only after the pending synchronous transactions are confirmed
    (ER_SYNC_ROLLBACK / ER_SYNC_QUORUM_TIMEOUT otherwise; core/box/limbo.py)."""
    box.limbo.txn_limbo_wait_confirm()


def relay_initial_join(box: ReplicationInstanceApi, stream, sync: int,
                       replica_version_id: int = 0) -> VClock:
    """Send OK {vclock}, the META stage when the joiner asked for it (its JOIN had
    a version: `replica_version_id`), and the data of a read view; returns that
    vclock (the replica's starting point). Temporary and GROUP_LOCAL spaces are
    not sent."""
    sched = box.sched
    view = box.read_view()        # frozen first: writes may go on while it is sent
    try:
        # Everything the view shows is in the WAL once this returns.
        wal = box.wal
        assert wal is not None   # (a master serving JOIN has started its WAL)
        vclock = wal.sync()
        relay_wait_sync_confirm(box)
        # taken with the limbo empty, before anything is sent (2.8.2's order)
        meta = relay_join_meta(box) if replica_version_id > 0 else []
        timeout = join_write_timeout(box)
        stream.write_row(encode_vclock_row(vclock), sync, timeout)
        if meta:
            stream.write(b"".join([row.encode_frame(sync) for row in meta]), timeout)
        head = XRow(type=IprotoType.INSERT).encode_header(sync)
        out: list[bytes] = []
        size = 0
        prefixes: dict[int, bytes] = {}
        time_slice = TimeSlice(sched, RELAY_SLICE)
        count = 0
        for space_id, tup, group_id in view:
            if group_id == _LOCAL:
                continue
            prefix = prefixes.get(space_id)
            if prefix is None:
                # SPACE_ID always as a 5-byte uint, as 2.6.0's snapshot rows
                prefix = prefixes[space_id] = head + b"\x82\x10\xce" + _pack_u32(space_id) \
                    + b"\x21"
            data = tup if isinstance(tup, (bytes, bytearray)) else packb(tup)
            packet = prefix + data
            out.append(frame(packet))
            size += len(packet) + 5
            count += 1
            if size >= SEND_BUFFER:
                stream.write(b"".join(out), timeout)
                out, size = [], 0
            if count & 1023 == 0:           # (a clock read per tuple costs more)
                time_slice.maybe_yield()
        if out:
            stream.write(b"".join(out), timeout)
    finally:
        close = getattr(view, "close", None)
        if close is not None:
            close()
    return vclock


def relay_join_meta(box: ReplicationInstanceApi) -> list[XRow]:
    """The META stage's rows: the persisted Raft term and vote
    (box_raft_checkpoint_local) and the limbo as txn_limbo_checkpoint makes it
    (owner, confirmed LSN, greatest PROMOTE term). Only a joiner that announced
    a version gets them: 2.6.0 and 2.6.3 send none, and would stop on type 71."""
    limbo = box.limbo
    return encode_join_meta(box.raft.checkpoint_local(), limbo.owner_id,
                            limbo.confirmed_lsn, limbo.promote_greatest_term)


def relay_final_join(box: ReplicationInstanceApi, stream, sync: int, start: VClock,
                     stop: VClock) -> None:
    """Send the WAL rows (start, stop] as they are in the WAL (with the JOIN's sync).
    No per-replica filter: on a re-bootstrap even the replica's own rows go back."""
    sched = box.sched
    relay = Relay(sched, box, None, stream, sync)
    relay.write_timeout = join_write_timeout(box)
    relay.sent = dict(start.items())
    cursor = relay_cursor(box, start, sync)
    try:
        while not vclock_covers(cursor.vclock, stop):
            txs = cursor.read()
            if txs is None:
                # Rows up to `stop` are written: the cursor only waits for a batch
                # that completes right now.
                cursor.wait(replication_timeout(box))
                continue
            relay.time_slice.maybe_yield()
            if txs:
                relay_send_txs(relay, txs, subscriber=False, stop=stop)
                relay.time_slice.maybe_yield()
    finally:
        cursor.close()
