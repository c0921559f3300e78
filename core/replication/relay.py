"""The relay: the master side of one downstream (relay.cc of seeds/relay.txt).

Names follow the seed, so it can be read beside this file. The JOIN stages
(`relay_initial_join`, `relay_final_join`) are in relay_join.py; here:

* `relay_subscribe` — SUBSCRIBE: `relay_subscribe_f` streams WAL rows after the
  replica's vclock (wal_cursor.py: files while far behind, the in-memory tail when
  close), sends heartbeats when nothing was sent for `replication_timeout` (with
  election on, at the relay's slot of the period: `heartbeat_deadline`), and
  `relay_reader_f`, a second fiber, reads the replica's ACKs.

Per transaction a master with replicas pays little for them: rows written within
COALESCE_WINDOW of the last send wait for the rest of it (`relay_hold_back`; never
while synchronous transactions are pending, a Raft message waits to go out, or
election is on),
so a stream of small transactions goes
out in a few writes and comes back as a few ACKs; the tail's rows are framed from
the bytes the WAL wrote, runs of them at once (wire_tx.WireRun); ACKs read together
are processed as their newest one (`relay_process_acks`).

2.6.0 runs a relay in a thread of its own; here both are fibers of the tx thread (the
GIL would serialize threads anyway), which also lets the reader call the replica
set's ACK hooks (the qsync limbo) and advance the WAL GC consumer directly.

Every wait ends by a deadline: the sender's writes are cut short when the reader
sees no ACK for 4 × replication_timeout (JOIN stages, without a reader, have a write
deadline of their own). A relay never holds the loop: xlog blocks are read and decoded
in a helper thread while the relay fiber waits, and the sender yields after ~10 ms of
work.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import errno as errno_module
import os
import selectors
import time
from typing import Any, Callable

from spindle.core import log
from spindle.core.fiber.coio import SocketError, run_in_thread
from spindle.core.fiber.timeslice import RELAY_SLICE, TimeSlice
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import (
    BoxError, ClientError, ErrorCode, FiberIsCancelled, TimedOut,
)
from spindle.core.iproto.replication import (
    decode_vclock_row, encode_heartbeat, encode_raft,
)
from spindle.core.iproto.row_block import encode_row_list
from spindle.core.iproto.xrow import XRow, frame
from spindle.core.net.protocol import PacketError, decode_packet
from spindle.core.net.session import format_peer
from spindle.core.raft.raft import RaftMsg, RaftState
from spindle.core.vclock import VClock
from spindle.core.wal.gc import gc_consumer_advance

from .instance_api import ReplicationInstanceApi
from .replica import RelayState, Replica
from .wal_cursor import Transaction, WalCursor
from .wal_tail import vclock_covers, wal_tail_of
from .wire_tx import WireTx

DEFAULT_REPLICATION_TIMEOUT = 1.0
SEND_BUFFER = 256 * 1024      # bytes gathered before one socket write
UNACKED_MAX = 65536           # sent transactions remembered for the lag
GC_CHECK_INTERVAL = 0.5       # at most this often an ACK moves the GC consumer
# Rows written this soon after the relay's last send wait for the rest of the window
# (relay_hold_back), unless synchronous transactions are pending. Each window costs
# the master one relay wakeup, one send and one ACK to read (~150-250 µs of its CPU):
# with 5 ms that is ~1 µs per 1-row transaction with a replica following, ~2-2.5
# with 2 ms (scripts/bench/master_commit.py --replica; the history of the choice is
# in docs/PERFORMANCE.md). The price: at most 5 ms more lag of a steady stream of
# asynchronous rows.
COALESCE_WINDOW = 0.005
# read per row (an enum member read from its class costs ~0.1 µs on Python 3.11)
_LOCAL = int(GroupId.LOCAL)


def replication_timeout(box: ReplicationInstanceApi) -> float:
    """box.cfg.replication_timeout, read every time: it is dynamic."""
    value = box.cfg.get("replication_timeout") if box.cfg else None
    if value is None:
        return DEFAULT_REPLICATION_TIMEOUT
    try:
        value = float(value)
    except (TypeError, ValueError):
        return DEFAULT_REPLICATION_TIMEOUT
    return value if value > 0 else DEFAULT_REPLICATION_TIMEOUT


def replication_disconnect_timeout(box: ReplicationInstanceApi) -> float:
    return 4 * replication_timeout(box)


# ------------------------------------------------------------ QSYNC HOOK

def synchro_pending(box: ReplicationInstanceApi) -> Callable[[], int]:
    """What tells whether the limbo holds transactions (a sync one waiting for its
    quorum, one queued behind it, or those a CONFIRM or ROLLBACK being written
    decides): rows written then must reach the replicas at once. A cheap callable:
    the WAL tail asks it after every WAL write."""
    return box.limbo.queue.__len__


# ------------------------------------------------------------------ errors

def socket_name(stream) -> str:
    """sio_socketname(): `fd N, aka <local>, peer of <remote>`. Taken while the
    socket is connected (after a reset the addresses are gone)."""
    try:
        fd = stream.sock.fileno()
        name = f"fd {fd}, aka {format_peer(stream.sock.name())}"
    except OSError:
        return f"fd -1, peer of {stream.peer}"
    return f"{name}, peer of {stream.peer}"


def socket_error(name: str, what: str, system_message: str | None) -> SocketError:
    """Tarantool's SocketError: `<what>, called on <socket name>`, with strerror()
    as the system message."""
    exc = SocketError(f"{what}, called on {name}")
    exc.system_message = system_message
    return exc


def eof_error(name: str) -> SocketError:
    return socket_error(name, "unexpected EOF when reading from socket",
                        os.strerror(errno_module.EPIPE))


def timed_out_error() -> TimedOut:
    exc = TimedOut()
    exc.system_message = os.strerror(errno_module.ETIMEDOUT)
    return exc


# ----------------------------------------------------------------- filters

def relay_filter_tx(tx: list[XRow], *, subscriber_id: int = 0,
                    local_vclock_at_subscribe: VClock | None = None,
                    id_filter: frozenset[int] = frozenset()) -> list[XRow]:
    """relay_send_row()'s decisions for one transaction (iproto.md §8.4):

    * GROUP_LOCAL rows with replica_id 0 are skipped; with another replica_id they
      go out as NOP (no body, group 0) so the replica's vclock still moves;
    * rows of an id in ID_FILTER are skipped;
    * rows of the subscriber itself are skipped unless the master had them when the
      subscription began (lsn <= local_vclock_at_subscribe[id]: the replica may
      have lost them), so a master-master peer never gets its rows back.

    Rows are never changed in place (they are the WAL's and the tail's). When the
    commit row is filtered out, the last row sent carries the commit flag, so the
    replica's applier never waits for the end of a transaction it will not get."""
    out: list[XRow] = []
    for row in tx:
        if row.group_id == _LOCAL:
            if row.replica_id == 0:
                continue
            row = XRow(type=IprotoType.NOP, replica_id=row.replica_id, lsn=row.lsn,
                       timestamp=row.timestamp, tsn=row.tsn, is_commit=row.is_commit)
        if row.replica_id in id_filter:
            continue
        if (subscriber_id and row.replica_id == subscriber_id
                and local_vclock_at_subscribe is not None
                and row.lsn > local_vclock_at_subscribe.get(subscriber_id)):
            continue
        out.append(row)
    if out and tx[-1].is_commit and not out[-1].is_commit:
        out[-1] = dataclasses.replace(out[-1], is_commit=True)
    return out


# ------------------------------------------------------------------- relay

class Relay:
    """struct relay: one replica's downstream. What box.info.replication shows:
    `state`, `vclock` (the last vclock the replica ACKed), `idle()`, `lag`,
    `message` / `system_message` once stopped by an error; `info()` gives the
    `downstream` table."""

    def __init__(self, sched, box: ReplicationInstanceApi, replica: Replica | None, stream,
                 sync: int):
        self.sched = sched
        self.box = box
        self.replica = replica
        self.stream = stream
        self.sync = sync
        self.socket_name = socket_name(stream)
        self.state = RelayState.OFF
        self.vclock = VClock()
        self.error: BaseException | None = None
        self.message: str | None = None
        self.system_message: str | None = None
        self.last_row_time = sched.clock()     # last send: rows or heartbeat
        self.local_vclock_at_subscribe = VClock()
        # Per origin, the last LSN the replica has had from this relay (its vclock at
        # the start, then what was sent): the next row of an origin must be that + 1
        # (relay_check_next). None: not checked.
        self.sent: dict[int, int] | None = None
        self.id_filter: frozenset[int] = frozenset()
        self.version_id = 0
        self.cursor: WalCursor | None = None
        self.fiber = None                      # the sender (relay_subscribe_f)
        self.reader = None                     # relay_reader_f
        self.rows_sent = 0
        # the newest Raft state not sent yet (relay_push_raft): older ones are
        # overwritten, only the newest reaches the replica
        self.raft_msg: RaftMsg | None = None
        # None: a write waits until the reader reports the replica gone (SUBSCRIBE);
        # the JOIN stages have no reader and give up after this many seconds
        self.write_timeout: float | None = None
        self._lag = 0.0
        self._unacked: collections.deque = collections.deque(maxlen=UNACKED_MAX)
        self._gc_checked_at = float("-inf")
        # the sender's run on the CPU (RELAY_SLICE: see core/fiber/timeslice.py)
        self.time_slice = TimeSlice(sched, RELAY_SLICE)

    def __repr__(self) -> str:
        uuid = self.replica.uuid if self.replica is not None else None
        return f"<Relay {uuid} {self.state.value}>"

    # ------------------------------------------------------- introspection

    def idle(self) -> float:
        """Seconds since the relay last sent anything (rows or a heartbeat)."""
        return max(0.0, self.sched.clock() - self.last_row_time)

    @property
    def lag(self) -> float:
        """Downstream lag (tarantool#10029): the time between a row's WAL write and
        the ACK covering it. While rows wait for an ACK it is at least how long the
        oldest of them has waited; once the replica has ACKed everything and sends
        an ACK with nothing new (it is idle), it is 0."""
        if self._unacked:
            return max(self._lag, time.time() - self._unacked[0][2])
        return self._lag

    def info(self) -> dict[str, Any]:
        """The `downstream` table of box.info.replication (nothing when OFF)."""
        if self.state == RelayState.FOLLOW:
            return {"status": "follow", "idle": self.idle(),
                    "vclock": self.vclock.to_dict(), "lag": self.lag}
        if self.state == RelayState.STOPPED:
            info: dict[str, Any] = {"status": "stopped"}
            if self.message is not None:
                info["message"] = self.message
            if self.system_message is not None:
                info["system_message"] = self.system_message
            return info
        return {}

    # --------------------------------------------------------------- errors

    def set_error(self, exc: BaseException) -> None:
        """relay_set_error(): the first error is the one reported."""
        if self.error is not None or isinstance(exc, FiberIsCancelled):
            return
        self.error = exc
        self.message = getattr(exc, "message", None) or str(exc)
        self.system_message = getattr(exc, "system_message", None)
        if self.fiber is not None and self.fiber is not self.sched.current:
            self.sched.wakeup(self.fiber)

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    # --------------------------------------------------------------- output

    def send(self, data: bytes) -> None:
        """relay_send(): write to the replica. The wait for a writable socket ends
        early when the reader reports an error, so a replica that stops reading
        cannot hold the relay past the disconnect timeout."""
        raw = self.stream.sock.sock
        view = memoryview(data)
        sched = self.sched
        me = sched.current
        deadline = None if self.write_timeout is None else sched.clock() + self.write_timeout
        while view:
            self.check()
            try:
                sent = raw.send(view)
            except (BlockingIOError, InterruptedError):
                left = None if deadline is None else deadline - sched.clock()
                if left is not None and left <= 0:
                    raise timed_out_error() from None
                sched.wait_io(raw, selectors.EVENT_WRITE, left)
                me.testcancel()
                continue
            except OSError as exc:
                raise socket_error(self.socket_name, "writev(1)",
                                   exc.strerror or os.strerror(exc.errno or 0)) from None
            view = view[sent:]
        self.last_row_time = self.sched.clock()

    # ----------------------------------------------------------------- ACKs

    def note_sent(self, replica_id: int, lsn: int, timestamp: float) -> None:
        """A transaction went out; its last row had these fields."""
        self._unacked.append((replica_id, lsn, timestamp))

    def process_ack(self, vclock: VClock) -> None:
        """An ACK: the replica has written everything up to `vclock`."""
        self.vclock = vclock
        newest = None
        unacked = self._unacked
        while unacked and vclock.get(unacked[0][0]) >= unacked[0][1]:
            newest = unacked.popleft()[2]
        if newest is not None:
            self._lag = max(0.0, time.time() - newest)
        elif not unacked:
            self._lag = 0.0      # caught up and idle (tarantool#10029)
        if self.replica is not None:
            for hook in list(self.box.replicaset.on_relay_ack):
                try:
                    hook(self.replica, vclock)
                except Exception as exc:   # noqa: BLE001 - one hook must not stop the relay
                    log.error("relay ACK hook %r failed: %s", hook, exc)
        self._advance_gc(vclock)

    def _advance_gc(self, vclock: VClock) -> None:
        """Move the replica's WAL consumer to the start of the oldest xlog the
        replica still needs: the newest file starting at or before what it ACKed
        (box_info.md §4: it moves when an xlog is done with, not on every ACK)."""
        replica = self.replica
        gc, wal = self.box.gc, self.box.wal
        consumer = replica.gc if replica is not None else None
        if gc is None or wal is None or consumer is None or consumer.is_inactive:
            return
        if vclock_covers(consumer.vclock, vclock):
            return                        # nothing new since the consumer's position
        now = self.sched.clock()
        if now - self._gc_checked_at < GC_CHECK_INTERVAL:
            return
        self._gc_checked_at = now
        starts = [clock for clock in wal.xlog_vclocks()
                  if vclock_covers(vclock, clock)]
        if not starts:
            return
        # Component 0 (local rows) never decides what a replica needs; keeping the
        # larger one keeps the consumer's signature from going back.
        target = starts[-1].copy()
        target.reset(0, max(target.get(0), consumer.vclock.get(0)))
        if vclock_covers(target, consumer.vclock) and target.signature > consumer.signature:
            gc_consumer_advance(gc, consumer, target)


def relay_set_state(relay: Relay, state: RelayState) -> None:
    """The one place a relay changes state: logged, and the replica set's
    `on_relay_state` triggers run (box.info watchers, the qsync limbo)."""
    if relay.state == state:
        return
    relay.state = state
    replica = relay.replica
    log.verbose("relay to %s: %s", replica.uuid if replica else "?", state.value)
    for hook in list(relay.box.replicaset.on_relay_state):
        try:
            hook(replica, relay)
        except Exception as exc:   # noqa: BLE001 - a trigger must not break the relay
            log.error("relay state trigger %r failed: %s", hook, exc)


# ------------------------------------------------------------------- output

def relay_send_heartbeat(relay: Relay) -> None:
    """OK with REPLICA_ID = the master's id and TIMESTAMP = now, no body."""
    row = encode_heartbeat(relay.box.instance_id, time.time())
    relay.send(row.encode_frame(relay.sync))


def heartbeat_deadline(relay: Relay) -> float:
    """When an idle relay's next heartbeat is due. 2.6.3: replication_timeout after
    its last send. With election on and more than one replica following, each relay
    has a slot of its own in the period instead (its rank among them, by replica id,
    × period / their count; anonymous replicas, which never vote, are left out)
    and the heartbeat comes at its first slot after the last send: never later
    than 2.6.3's, one heartbeat per period all the same.

    Why: a follower starts an election 4 × replication_timeout after the last
    message it heard from its leader, and the first one to start decides. Relays
    heartbeating from their last send are in step once the leader has written
    anything (a row goes to all of them at once): every follower has heard a dead
    leader equally recently, so the death is noticed as late as by one follower,
    and by all of them at once (split votes). With spread slots, an idle leader's
    oldest message among its n followers is at least (n - 1)/n of a period old at
    any moment: a death is noticed that much sooner at worst (half a period in a
    set of 3, on average a quarter), and the followers' timeouts lie apart."""
    period = replication_timeout(relay.box)
    mine = relay.replica
    if (not relay.box.raft.is_enabled or mine is None or not _has_slot(mine)
            or mine.relay is not relay):
        return relay.last_row_time + period
    count = rank = 0                # (one pass: this runs at every idle turn)
    for replica in relay.box.replicaset.hash.values():
        if _has_slot(replica):
            count += 1
            rank += replica.id < mine.id
    if count < 2:
        return relay.last_row_time + period
    slot = rank * period / count
    wait = (slot - relay.last_row_time) % period
    return relay.last_row_time + (wait or period)


def _has_slot(replica: Replica) -> bool:
    """A registered, non-anonymous replica whose relay follows (heartbeat_deadline)."""
    return (bool(replica.id) and not replica.anon and replica.relay is not None
            and replica.relay.state == RelayState.FOLLOW)


def relay_send_txs(relay: Relay, txs: list[Transaction], *, subscriber: bool = True,
                   stop: VClock | None = None) -> None:
    """Filter and send transactions in as few socket writes as possible. `stop`
    (final join) drops rows past it; `subscriber` applies the per-replica filters."""
    out: list[bytes] = []
    size = 0
    for tx in txs:
        data = relay_tx_frames(relay, tx, subscriber, stop)
        if not data:
            continue
        out.append(data)
        size += len(data)
        if size >= SEND_BUFFER:
            relay.send(b"".join(out))
            out, size = [], 0
            relay.time_slice.maybe_yield()
    if out:
        relay.send(b"".join(out))


def relay_tx_frames(relay: Relay, tx: Transaction, subscriber: bool,
                    stop: VClock | None) -> bytes:
    """The packets the replica gets of one transaction (b"" if none), noted as sent.
    A WireTx the filters take whole or drop whole is decided by its replica id and
    LSN range alone; otherwise its rows go one by one, as XRows do."""
    replica = relay.replica
    subscriber_id = replica.id if subscriber and replica else 0
    id_filter = relay.id_filter if subscriber else frozenset()
    if isinstance(tx, WireTx):
        share = wire_tx_share(tx, stop=stop, subscriber_id=subscriber_id,
                              local_vclock_at_subscribe=relay.local_vclock_at_subscribe,
                              id_filter=id_filter)
        if share is WireShare.NONE:
            return b""
        if share is WireShare.ALL:
            relay_check_next(relay, tx.replica_id, tx.first_lsn, tx.lsn, tx.count)
            relay.note_sent(tx.replica_id, tx.lsn, tx.timestamp)
            relay.rows_sent += tx.count
            return tx.frames
        tx = tx.rows()
    if stop is not None:
        tx = [row for row in tx if row.lsn <= stop.get(row.replica_id)]
        if not tx:
            return b""
    if subscriber:
        rows = relay_filter_tx(tx, subscriber_id=subscriber_id,
                               local_vclock_at_subscribe=relay.local_vclock_at_subscribe,
                               id_filter=id_filter)
    else:
        rows = relay_filter_tx(tx)
    if not rows:
        return b""
    for row in rows:
        if row.replica_id:
            relay_check_next(relay, row.replica_id, row.lsn, row.lsn, 1)
    last = rows[-1]
    relay.note_sent(last.replica_id, last.lsn, last.timestamp)
    relay.rows_sent += len(rows)
    return encode_frames(rows, relay.sync)


class RelayGapError(ClientError):
    """The relay was about to send rows of an origin with some before them missing
    (rows its cursor lost): it refuses. The connection is dropped without a reply,
    so the replica (Spindle or Tarantool) reconnects and subscribes again from its
    vclock, which reads the missing rows from the files."""

    def __init__(self, replica_id: int, what: str):
        super().__init__(ErrorCode.ER_PROTOCOL,
                         f"Relay refused to skip rows of instance {replica_id}: {what}")


def relay_check_next(relay: Relay, replica_id: int, first_lsn: int, lsn: int,
                     count: int) -> None:
    """`count` rows of `replica_id` with LSNs first_lsn..lsn are about to go out:
    they must continue what the replica has of that origin, without a hole before
    or among them (RelayGapError otherwise)."""
    sent = relay.sent
    if sent is None:
        return
    last = sent.get(replica_id, 0)
    if first_lsn > last + 1:
        raise RelayGapError(replica_id, f"LSN {last} would be followed by LSN {first_lsn}")
    if lsn - first_lsn >= count:
        raise RelayGapError(replica_id, f"LSNs {first_lsn}..{lsn} come as {count} rows")
    if lsn > last:
        sent[replica_id] = lsn


def encode_frames(rows: list[XRow], sync: int) -> bytes:
    """The rows as packets with `sync` in their headers. Without a sync a row's
    header is xlog's (format.encode_row_list writes the usual WAL rows straight out)."""
    if sync:
        return b"".join([row.encode_frame(sync) for row in rows])
    return b"".join([frame(row) for row in encode_row_list(rows)])


class WireShare(enum.Enum):
    ALL = "all"
    NONE = "none"
    SOME = "some"       # rows one by one


def wire_tx_share(tx: WireTx, *, stop: VClock | None, subscriber_id: int,
                  local_vclock_at_subscribe: VClock | None,
                  id_filter: frozenset[int]) -> WireShare:
    """What relay_filter_tx (and the final join's `stop`) leave of a WireTx whose
    rows are one replica id's LSNs first_lsn..lsn, none of them GROUP_LOCAL (its
    only other rule): rows of an id in ID_FILTER go, and rows past a limit — the
    stop vclock, or for the subscriber's own rows what the master had of them at
    SUBSCRIBE."""
    replica_id = tx.replica_id
    if not replica_id:
        return WireShare.SOME
    if replica_id in id_filter:
        return WireShare.NONE
    limit = stop.get(replica_id) if stop is not None else None
    if (subscriber_id and replica_id == subscriber_id
            and local_vclock_at_subscribe is not None):
        own = local_vclock_at_subscribe.get(replica_id)
        limit = own if limit is None else min(limit, own)
    if limit is None or tx.lsn <= limit:
        return WireShare.ALL
    return WireShare.NONE if tx.first_lsn > limit else WireShare.SOME


def relay_cursor(box: ReplicationInstanceApi, vclock: VClock, sync: int) -> WalCursor:
    """relay->r: the rows after `vclock`; file blocks are read in a helper thread
    while the relay fiber waits, their rows framed for the wire with `sync`."""
    sched = box.sched
    tail = wal_tail_of(box.wal, sched)
    tail.urgent = synchro_pending(box)
    return WalCursor(box.wal, tail, vclock,
                     offload=lambda fn, *args: run_in_thread(sched, fn, *args),
                     wire_sync=sync)


# ----------------------------------------------------------------- SUBSCRIBE

def relay_subscribe(relay: Relay, replica_clock: VClock, version_id: int,
                    id_filter: frozenset[int]) -> None:
    """Stream to the replica until an error, EOF or cancellation; the relay is
    FOLLOW already (box_process_subscribe set it before answering). Raises the
    error that stopped it, after recording it on the relay (box.info shows it)."""
    box, sched = relay.box, relay.sched
    relay.version_id = version_id
    relay.id_filter = id_filter
    relay.local_vclock_at_subscribe = box.vclock.copy()
    relay.vclock = replica_clock.copy()
    relay.vclock.reset(0, 0)            # what the replica has: its rows, not our local ones
    relay.sent = dict(replica_clock.items())
    relay.fiber = sched.current
    relay.time_slice.restart()          # (the sender's slice: this fiber's)
    relay.cursor = relay_cursor(box, replica_clock, relay.sync)
    try:
        relay.reader = relay.stream.spawn(relay_reader_f, relay, name="relay.reader")
        relay_subscribe_f(relay)
    except FiberIsCancelled:
        raise
    except BaseException as exc:
        relay.set_error(exc)
    finally:
        relay_stop(relay)
    if relay.error is not None:
        log.error("relay to %s stopped: %s", relay.replica.uuid if relay.replica else "?",
                  relay.message)
        if isinstance(relay.error, TimedOut):
            relay_tell_replica(relay)
        if isinstance(relay.error, RelayGapError):
            # no error reply (a 2.6.0 applier would stop for good on it): EOF
            raise ConnectionAbortedError(relay.message)
        raise relay.error


def relay_tell_replica(relay: Relay) -> None:
    """A silent replica is dropped while its socket still works: tell it why, so
    both ends of the link show the same message (tarantool#7465). Best effort:
    a replica that stopped reading must not hold the relay."""
    try:
        relay.stream.write_error(relay.error, relay.sync, timeout=0.5)
    except Exception as exc:   # noqa: BLE001 - the link is being dropped anyway
        log.verbose("relay: could not tell the replica why: %s", exc)


def relay_subscribe_f(relay: Relay) -> None:
    """The sender loop: rows as they come, a heartbeat when idle for
    replication_timeout (read every time: it is dynamic), and the Raft state
    whenever a newer one was pushed."""
    sched, box, cursor = relay.sched, relay.box, relay.cursor
    assert cursor is not None   # (relay_subscribe made it before starting this loop)
    relay_send_heartbeat(relay)
    while True:
        relay.check()
        if relay.raft_msg is not None:
            relay_send_raft(relay)
            cursor = relay.cursor       # (a new leader's relay reads anew)
            assert cursor is not None
            continue
        if relay_send_ready(relay):
            if cursor.caught_up():
                # What comes next waits for the end of the window this send opened
                # (relay_hold_back) whether or not it has come yet: waking for its
                # first row only to hold for the rest cost one more switch per send.
                relay_hold_back(relay)
            elif sched.clock() - relay.last_row_time >= replication_timeout(box):
                # Reading files for a while without a row to send (rows the replica
                # has already, early in a big file; a loop busy with writers): the
                # replica still hears from the master every replication_timeout, or
                # it would give up on the link and start the reading over.
                relay_send_heartbeat(relay)
            continue
        now = sched.clock()
        deadline = heartbeat_deadline(relay)
        if now >= deadline:
            relay_send_heartbeat(relay)
            continue
        if cursor.wait(deadline - now):
            relay_hold_back(relay)


def relay_push_raft(relay: Relay, msg: RaftMsg) -> None:
    """relay_push_raft (relay.txt, "Relay Raft"): the newest Raft state for the
    replica. It replaces one not sent yet; the sender sends it at its next turn
    (a relay whose sender has not started keeps it until it does)."""
    relay.raft_msg = msg
    if relay.fiber is not None and relay.fiber is not relay.sched.current:
        relay.sched.wakeup(relay.fiber)


def relay_send_raft(relay: Relay) -> None:
    """Send the pushed Raft state with the SUBSCRIBE's sync. When it says this
    instance is the leader, the replica may have dropped rows sent while it was
    not (an applier takes data only from the leader): reading starts again from
    what the replica has acked (relay_restart_recovery)."""
    msg, relay.raft_msg = relay.raft_msg, None
    if msg is None:
        return
    relay.send(encode_raft(msg, relay.sync).encode_frame())
    if msg.state == RaftState.LEADER:
        relay_restart_recovery(relay)


def relay_restart_recovery(relay: Relay) -> None:
    """Read again from the vclock the replica last acked; component 0 (this
    instance's local rows, never sent) stays where the reading is."""
    old = relay.cursor
    start = relay.vclock.copy()
    start.reset(0, old.vclock.get(0) if old is not None else relay.box.vclock.get(0))
    if old is not None:
        old.close()
    relay.cursor = relay_cursor(relay.box, start, relay.sync)
    relay.sent = dict(start.items())


def relay_hold_back(relay: Relay) -> bool:
    """Right after a send, or when rows came soon after it: let the WAL write more
    for the rest of COALESCE_WINDOW (True: held), so that a stream of small
    transactions goes out in a few big writes. Each write costs the master a loop
    iteration (the committer yields to the relay), a send and later an ACK to read
    — most of its CPU per 1-row transaction with a replica attached. Rows wait at
    most that long; a trickle of transactions goes out at once, and nothing
    written while synchronous transactions are pending waits (the tail marks such
    batches urgent: one written during the hold ends it).

    Nor does a Raft message wait: relay_push_raft wakes a holding sender, and one
    pushed before the sender got here (its wakeup then finds the sender already
    woken, by the WAL write of the very term or vote the message announces) stops
    the hold from starting. Held, a vote reached its candidate up to a window late,
    and a new leader's state its followers (measured: elections 4-5 ms longer in
    about half of the failovers of scripts/bench/failover.py); 2.6.3's relay sends
    a pushed message at once.

    And with election on nothing is held. Rows a leader wrote but had not sent when
    it died stay on it alone: the others take data only from the leader, so once
    back it holds rows of its own nobody else has, and at a later failover the two
    survivors may each hold rows the other lacks and never vote for each other.
    With the window, a leader killed under a stream of writes kept such rows 19
    times in 20 (scripts/bench/failover.py --scenario load); 2.6.3, whose relay
    sends as soon as the WAL has written, 0 in 20; Spindle without the hold 1 in 20."""
    sched, cursor = relay.sched, relay.cursor
    assert cursor is not None   # (the sender's: see relay_subscribe_f)
    left = relay.last_row_time + COALESCE_WINDOW - sched.clock()
    if (left <= 0 or relay.raft_msg is not None or cursor.urgent_unread()
            or relay.box.raft.is_enabled):
        return False
    cursor.tail.hold(left)
    return True


def relay_send_ready(relay: Relay) -> bool:
    """Send what the cursor has now; False when it has nothing until the WAL
    writes again."""
    cursor = relay.cursor
    assert cursor is not None   # (the sender's: see relay_subscribe_f)
    txs = cursor.read()
    if txs is None:
        return False
    # Reading file blocks and sending their rows each take a few ms: the loop gets
    # the CPU back between them.
    relay.time_slice.maybe_yield()
    if txs:
        relay_send_txs(relay, txs)
        relay.time_slice.maybe_yield()
    return True


def relay_reader_f(relay: Relay) -> None:
    """Read ACKs: only their VCLOCK matters (the type of an OK-ish row is not
    checked, as in 2.6.0; an error reply stops the relay with its error). Silence
    for 4 × replication_timeout, EOF or garbage stop the relay."""
    stream, box = relay.stream, relay.box
    try:
        while True:
            try:
                row = stream.read_row(replication_disconnect_timeout(box))
            except PacketError as exc:
                raise exc.error from None
            except EOFError:
                row = None
            except TimedOut:
                raise timed_out_error() from None
            except OSError as exc:
                readahead = getattr(stream.reader, "readahead", 16320)
                raise socket_error(relay.socket_name, f"read({readahead})",
                                   exc.strerror or os.strerror(exc.errno or 0)) from None
            if row is None:
                raise eof_error(relay.socket_name)
            relay_process_acks(relay, decode_vclock_row(row))
    except FiberIsCancelled:
        return
    except BoxError as exc:
        relay.set_error(exc)
    except Exception as exc:   # noqa: BLE001 - a bug here must stop only this relay
        log.error("relay reader failed: %r", exc)
        relay.set_error(exc)


def relay_process_acks(relay: Relay, vclock: VClock) -> None:
    """Process an ACK, or rather the newest of the ACKs read from the socket with
    it: each one covers what those before it do, so the replica's position, the
    lag, the limbo and the GC consumer get the same from it alone. A bad packet
    among them stops the relay (with the error stream.read_row() would raise) after
    the ACKs before it were processed."""
    next_buffered = getattr(getattr(relay.stream, "reader", None), "next_buffered", None)
    try:
        while next_buffered is not None and (packet := next_buffered()) is not None:
            vclock = decode_vclock_row(decode_packet(packet).row)
    except PacketError as exc:
        raise exc.error from None
    finally:
        relay.process_ack(vclock)


def relay_stop(relay: Relay) -> None:
    """relay_stop() + replica_on_relay_stop(): the reader goes, the state is
    STOPPED, and a replica nothing else refers to (an anonymous one) is forgotten."""
    sched = relay.sched
    reader = relay.reader
    if reader is not None and reader.status != "dead" and reader is not sched.current:
        sched.cancel(reader)
    if relay.cursor is not None:
        relay.cursor.close()
    relay_set_state(relay, RelayState.STOPPED)
    relay.fiber = None
    replica = relay.replica
    if replica is not None and not replica.id:
        replica.anon = False
        relay.box.replicaset.forget_if_unused(replica)
