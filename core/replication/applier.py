"""The replica side of one upstream: applier.cc of 2.6.0 as seeds/replication.rst tells it.

A reader fiber `applier/<peer>` runs applier_f: applier_connect (greeting, VOTE,
AUTH), then applier_join (or applier_fetch_snapshot) for a new instance,
applier_register for an anonymous one turning normal, then applier_subscribe and the
row stream, forever. Once subscribed, a writer fiber `applierw/<peer>` sends ACKs
(after each batch is written to the WAL, and in answer to every heartbeat) and
moves `sync` to `follow` (applier_check_sync).

Every state change goes through `applier_set_state`, which runs the `on_state`
triggers with the applier. A trigger may `applier_pause()` the applier: it then
parks at that state until `applier_resume()`. That is how replicaset_connect holds
the appliers at `connected` and bootstrap_from_master steps the leader's one through
JOIN with `applier_resume_to_state`. (The methods carry 2.6.0's function names so
that the seeds' walk-throughs can be followed here; `restart()` has no 2.6.0
counterpart.)

Errors follow iproto.md §9 (`off` on connection to self; `loading` and reconnect on
the retryable codes; `disconnected` and reconnect on socket errors and timeouts;
`stopped` otherwise) with one deliberate difference: a stream that cannot be read
(garbage, a truncated frame, a row that cannot be decoded, broken transaction
boundaries — StreamError) disconnects and subscribes again, where 2.6.0 stops for
good (tarantool#4040). A failed WAL write reconnects too. `restart()` starts a
stopped applier again without touching box.cfg.replication.

Around it: streams.py reads the wire (Connection, TxAssembler), apply.py applies
what arrives to the engine (snapshot rows, replicated transactions).
"""
from __future__ import annotations

import time
import traceback
from typing import TYPE_CHECKING

from spindle.core import log
from spindle.core.fiber import Cond, TriggerList
from spindle.core.fiber.coio import SocketError, connect
from spindle.core.fiber.timeslice import APPLIER_SLICE, TimeSlice
from spindle.core.iproto.auth import encode_auth_request
from spindle.core.iproto.constants import (
    IprotoType, is_dml, is_error_type, is_synchro, version_id,
)
from spindle.core.iproto.errors import (
    ER_TOO_EARLY_SUBSCRIBE, BoxError, ClientError, ErrorCode, FiberIsCancelled, TimedOut,
)
from spindle.core.iproto.greeting import GREETING_SIZE, PROTOCOL_BINARY, decode_greeting
from spindle.core.iproto.replication import (
    Ballot, JoinMeta, decode_ballot, decode_error, decode_join_meta_row, decode_raft,
    decode_subscribe_response, decode_vclock_row, encode_ack, encode_fetch_snapshot, encode_join,
    encode_register, encode_subscribe, encode_vote,
)
from spindle.core.iproto.xrow import XRow
from spindle.core.raft.raft import RaftError
from spindle.core.vclock import VClock
from spindle.core.version import TARANTOOL_VERSION

from .apply import ReplicatedTx, SnapshotRows, StreamError, applier_apply_tx
from .instance_api import ReplicationInstanceApi
from .replica import ApplierState
from .streams import (
    Connection, TxAssembler, decoded, describe_error, reply_error,
)

if TYPE_CHECKING:
    from spindle.core.fiber.fiber import Fiber
from .uri import parse_uri

S = ApplierState
TIMEOUT_INFINITY = 100 * 365 * 86400.0          # Tarantool's TIMEOUT_INFINITY
OWN_VERSION_ID = version_id(*map(int, TARANTOOL_VERSION.split(".")))
# Error codes a 2.6.0 applier retries after replication_timeout in state `loading`.
LOADING_CODES = frozenset((
    ErrorCode.ER_LOADING, ErrorCode.ER_SYNC_QUORUM_TIMEOUT, ErrorCode.ER_SYNC_ROLLBACK,
    ErrorCode.ER_CFG, ErrorCode.ER_ACCESS_DENIED, ErrorCode.ER_NO_SUCH_USER,
    ErrorCode.ER_PASSWORD_MISMATCH,
    ER_TOO_EARLY_SUBSCRIBE,     # (2.6.3's, from a master with election on)
))
# What applier_log_error says first, by the state the error happened in.
_FAILED_WHILE = {
    S.CONNECT: "can't connect to master",
    S.CONNECTED: "can't join/subscribe", S.READY: "can't join/subscribe",
    S.AUTH: "failed to authenticate",
    S.SYNC: "can't read row", S.FOLLOW: "can't read row",
    S.INITIAL_JOIN: "can't read row", S.FINAL_JOIN: "can't read row",
    S.FETCH_SNAPSHOT: "can't read row", S.REGISTER: "can't read row",
}
_ROWS_LOGGED_EVERY = 100000
_SNAPSHOT_ROW_TYPES = (bytes((IprotoType.INSERT,)), bytes((IprotoType.REPLACE,)))
_OK = int(IprotoType.OK)
_RAFT = int(IprotoType.RAFT)      # (read per row: an enum member from its class is slow)
_JOIN_META = int(IprotoType.JOIN_META)


class RaftBoxError(BoxError):
    """2.6.3's RaftError: a peer broke the protocol; the applier stops with it."""

    type = "RaftError"


class Applier:
    def __init__(self, sched, box: ReplicationInstanceApi, uri: str):
        self.sched = sched
        self.box = box
        self.uri = parse_uri(uri)
        self.uri_text = self.uri.text          # as configured (box.ctl matches it)
        self.peer = self.uri.display()         # without the password (box.info)
        self.peer_address = (f"unix/:{self.uri.port}" if self.uri.is_unix
                             else f"{self.uri.host}:{self.uri.port}")
        self.state = S.OFF
        self.on_state = TriggerList()
        self.uuid: str | None = None           # the remote instance, from its greeting
        self.version_id = 0
        self.ballot: Ballot | None = None
        self.remote_vclock_at_subscribe = VClock()
        self.master_id = 0                     # REPLICA_ID of the SUBSCRIBE response
        self.last_row_time = sched.clock()
        self.lag = TIMEOUT_INFINITY
        self.diag: BaseException | None = None
        self.reader: Fiber | None = None
        self.writer: Fiber | None = None
        self._conn: Connection | None = None
        self._paused = False
        self._resume_cond = Cond(sched)
        self._writer_cond = Cond(sched)
        self._ack_wanted = False
        self._in_triggers = 0
        self._last_logged_errcode = 0
        self._interrupt_error: BaseException | None = None
        self._restarting = False

    def __repr__(self) -> str:
        return f"<Applier {self.peer} {self.state.value}>"

    # ------------------------------------------------------------ lifecycle

    def applier_start(self) -> None:
        """applier_start: the reader fiber, run at the caller's next yield."""
        if self.reader is not None and self.reader.status != "dead":
            return
        self._paused = False
        reader = self.reader = self.sched.spawn(self.applier_f, name=f"applier/{self.peer}",
                                                start=False)
        reader.set_joinable(True)

    def applier_stop(self) -> None:
        """applier_stop: cancel the fibers, wait for them, state `off`."""
        fiber, self.reader = self.reader, None
        current = self.sched.current
        if fiber is not None and fiber.status != "dead":
            fiber.cancel()
            # Not from the reader itself, nor from the writer the reader joins.
            if current is not None and current is not fiber and current is not self.writer:
                fiber.join()
        if current is not fiber:
            self._stop_writer()
            self._close_connection()
        if self.state != S.OFF:
            self.applier_set_state(S.OFF)

    def restart(self) -> None:
        """Start a stopped applier again (box.cfg.replication untouched). A running
        one drops its connection, or its wait between attempts, and reconnects now."""
        if self.reader is None or self.reader.status == "dead":
            self.diag = None
            self.applier_start()
            return
        self._restarting = True
        if self._conn is not None:
            self._conn.shutdown()
        elif self.state in (S.DISCONNECTED, S.LOADING):
            self.sched.wakeup(self.reader)

    def applier_pause(self) -> None:
        """applier_pause: park the applier at its current state until applier_resume().
        Called by an on_state trigger, it parks once all triggers have run."""
        self._paused = True
        if self.sched.current is self.reader and not self._in_triggers:
            self._park()

    def applier_resume(self) -> None:
        self._paused = False
        self._resume_cond.broadcast()

    def applier_resume_to_state(self, state: ApplierState, timeout: float | None = None) -> None:
        """applier_resume_to_state: resume, wait until the applier reaches `state`
        and leave it paused there. Raises the applier's error if it ends in `off`
        or `stopped` instead, TimedOut after `timeout` seconds."""
        wakeup = Cond(self.sched)
        reached: list[ApplierState] = []

        def applier_on_state_f(applier: Applier) -> None:
            if applier.state not in (S.OFF, S.STOPPED, state):
                return
            reached.append(applier.state)
            wakeup.signal()
            applier.applier_pause()

        self.on_state.add(applier_on_state_f)
        try:
            self.applier_resume()
            deadline = None if timeout is None else self.sched.clock() + timeout
            while not reached and self.reader is not None and self.reader.status != "dead":
                remaining = None if deadline is None else deadline - self.sched.clock()
                if remaining is not None and remaining <= 0:
                    raise TimedOut()
                wakeup.wait(remaining)
        finally:
            self.on_state.remove(applier_on_state_f)
        if not reached or reached[-1] != state:
            raise self.diag or ClientError(ErrorCode.ER_NO_CONNECTION)

    def applier_set_state(self, state: ApplierState) -> None:
        """applier_set_state: the one place a state changes."""
        self.state = state
        log.verbose("=> %s", state.name)
        self._in_triggers += 1
        try:
            for trigger in self.on_state:
                try:
                    trigger(self)
                except Exception as exc:   # noqa: BLE001 - the others still run
                    log.error("applier on_state trigger failed: %s", exc)
        finally:
            self._in_triggers -= 1
        if self._paused and self.sched.current is self.reader:
            self._park()

    def idle(self) -> float:
        """Seconds since the last row or heartbeat came in (box.info upstream.idle)."""
        return self.sched.clock() - self.last_row_time

    def _park(self) -> None:
        me = self.sched.current
        while self._paused and not me.cancelled:
            self._resume_cond.wait()

    # ------------------------------------------------------------ settings

    def _cfg(self, name: str, default):
        value = self.box.cfg.get(name)
        return default if value is None else value

    def _timeout(self) -> float:
        return float(self._cfg("replication_timeout", 1.0))

    def _disconnect_timeout(self) -> float:
        """replication_disconnect_timeout(): silence after which the master is dead."""
        return 4 * self._timeout()

    def _join_timeout(self) -> float:
        # A master may be quiet for a while before JOIN data flows (it waits for
        # pending synchronous transactions first): be as patient as on connect.
        return max(self._disconnect_timeout(),
                   float(self._cfg("replication_connect_timeout", 30.0)))

    def _anon(self) -> bool:
        return bool(self._cfg("replication_anon", False))

    def is_orphan(self) -> bool:
        """Whether SUBSCRIBE goes without ID_FILTER (an orphan wants its own rows
        back, e.g. after its xlogs were lost). Overridable."""
        return self.box.status == "orphan"

    # ------------------------------------------------------------ applier_f

    def applier_f(self) -> None:
        while True:
            try:
                self.applier_connect()
                if self.box.schema.replicaset_uuid is None:
                    if self._anon():
                        self.applier_fetch_snapshot()
                    else:
                        self.applier_join()
                if self.box.instance_id == 0 and not self._anon():
                    self.applier_register()
                self.applier_subscribe()
            except FiberIsCancelled:
                self.applier_disconnect(S.OFF)
                return
            except Exception as exc:   # noqa: BLE001 - every error has a reaction
                if self._restarting:
                    self._restarting = False
                    self.applier_disconnect(S.DISCONNECTED)
                    continue
                failed_write, self._interrupt_error = self._interrupt_error, None
                if failed_write is not None:
                    # Whatever the WAL said, what is written is consistent: start
                    # again from there.
                    error, reaction = failed_write, S.DISCONNECTED
                else:
                    error, reaction = exc, self._reaction(exc)
                self.diag = error
                if reaction != S.OFF:
                    self.applier_log_error(error, reaction)
                self.applier_disconnect(reaction)
                if reaction in (S.OFF, S.STOPPED):
                    return
            try:
                self.sched.sleep(self._timeout())
            except FiberIsCancelled:
                self.applier_disconnect(S.OFF)
                return
            self._restarting = False

    def _reaction(self, exc: BaseException) -> ApplierState:
        """The state an error leaves the applier in (iproto.md §9, and better)."""
        code = getattr(exc, "code", None)
        if code == ErrorCode.ER_CONNECTION_TO_SELF and self.uuid == self.box.instance_uuid:
            return S.OFF
        if isinstance(exc, (StreamError, SocketError, TimedOut, OSError)):
            return S.DISCONNECTED
        if (getattr(exc, "type", None) == "XlogGapError"
                and self._cfg("election_mode", "off") != "off"):
            # 2.6.1+ ("replication: retry in case of XlogGapError"): normal while
            # a replica set boots — a peer that joined later has only a snapshot
            # where another has the rows — so retry while newer rows come from
            # elsewhere. With election off, 2.6.0's stop stays.
            return S.LOADING
        if isinstance(exc, BoxError):
            if code in LOADING_CODES:
                return S.LOADING
            if code in (ErrorCode.ER_SYSTEM, ErrorCode.ER_WAL_IO):
                return S.DISCONNECTED
        return S.STOPPED

    def applier_log_error(self, exc: BaseException, reaction: ApplierState) -> None:
        """applier_log_error: once per error code in a row."""
        code = getattr(exc, "code", None) or ErrorCode.ER_SYSTEM
        if code == self._last_logged_errcode:
            return
        self._last_logged_errcode = code
        failed = _FAILED_WHILE.get(self.state)
        if failed:
            log.info(failed)
        if isinstance(exc, BoxError):
            log.error("%s", describe_error(exc))
        else:                           # a bug, not a peer's doing: keep the traceback
            log.error("%s", "".join(traceback.format_exception(exc)).rstrip())
        if reaction in (S.LOADING, S.DISCONNECTED):
            log.info("will retry every %.2f second", self._timeout())

    def applier_disconnect(self, state: ApplierState) -> None:
        """applier_disconnect: the writer and the socket go before the state changes,
        so an applier paused in `state` holds no connection."""
        self._stop_writer()
        self._close_connection()
        self.applier_set_state(state)

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------ connect

    def applier_connect(self) -> None:
        """applier_connect: TCP, greeting, VOTE, connection-to-self check, AUTH."""
        if self._conn is not None:
            return
        self.applier_set_state(S.CONNECT)
        timeout = self._disconnect_timeout()
        self._conn = conn = Connection(connect(self.sched, self.uri.host, self.uri.port, timeout))
        try:
            greeting = decode_greeting(conn.readn(GREETING_SIZE, timeout))
        except ClientError as exc:
            raise StreamError(exc) from exc
        self.last_row_time = self.sched.clock()
        if greeting.protocol != PROTOCOL_BINARY:
            raise ClientError(ErrorCode.ER_PROTOCOL, "Unsupported protocol for replication")
        if self.version_id != greeting.version_id:
            log.info("remote master %s at %s running Tarantool %d.%d.%d", greeting.uuid,
                     self.peer_address, *greeting.version)
        self.uuid = greeting.uuid
        self.version_id = greeting.version_id
        self.diag = None      # a new connection: box.info stops showing the old error
        if self.version_id >= version_id(1, 9, 0):
            conn.write_row(encode_vote(), timeout)
            reply = conn.read_row(timeout)
            if reply.type == IprotoType.OK:
                self.ballot = decoded(decode_ballot, reply)
            else:
                error = reply_error(reply, "VOTE")
                if error.code != ErrorCode.ER_UNKNOWN_REQUEST_TYPE:
                    raise error
        self.applier_set_state(S.CONNECTED)
        if self.uuid == self.box.instance_uuid:
            raise ClientError(ErrorCode.ER_CONNECTION_TO_SELF)
        if self.uri.user:
            self.applier_set_state(S.AUTH)
            conn.write(encode_auth_request(self.uri.user, self.uri.password or "",
                                           greeting.salt), timeout)
            reply = conn.read_row(timeout)
            self.last_row_time = self.sched.clock()
            if reply.type != IprotoType.OK:
                raise reply_error(reply, "AUTH")
            log.info("authenticated")
        self.applier_set_state(S.READY)

    # ------------------------------------------------------------ JOIN and friends

    def applier_join(self) -> None:
        """applier_join: the master's snapshot (initial rows, no LSN), then its WAL
        rows up to our registration in `_cluster` (final rows). Nothing is applied
        before the whole JOIN arrived, so a JOIN broken half way leaves no trace and
        the next attempt starts clean."""
        box, conn = self.box, self._connection()
        # with our version: a master of 2.7.3/2.8.2+ (or Spindle) sends the META
        # stage, a 2.6 master skips the key
        conn.write_row(encode_join(self._instance_uuid(), OWN_VERSION_ID), self._timeout())
        box.replicaset.vclock = self._read_vclock_reply("JOIN")
        self.applier_set_state(S.INITIAL_JOIN)
        meta = JoinMeta()
        snapshot = self._read_snapshot_rows(meta)
        log.info("initial data received")
        self.applier_set_state(S.FINAL_JOIN)
        final = self._read_wal_rows(len(snapshot), box.replicaset.vclock)
        applier_apply_join_meta(box, meta)
        snapshot.apply(box)
        for tx in final:
            applier_apply_tx(box, tx)
        log.info("final data received")
        self.applier_set_state(S.JOINED)
        self.applier_set_state(S.READY)

    def applier_fetch_snapshot(self) -> None:
        """applier_fetch_snapshot: JOIN for an anonymous replica (no final stage,
        no id)."""
        self._connection().write_row(encode_fetch_snapshot(), self._timeout())
        self.box.replicaset.vclock = self._read_vclock_reply("FETCH_SNAPSHOT")
        self.applier_set_state(S.FETCH_SNAPSHOT)
        snapshot = self._read_snapshot_rows()
        snapshot.apply(self.box)
        self.applier_set_state(S.FETCHED_SNAPSHOT)
        self.applier_set_state(S.READY)

    def applier_register(self) -> None:
        """applier_register: an anonymous replica asks for an id; the master's WAL
        rows up to the `_cluster` insert come back and are applied (and logged)."""
        box = self.box
        self._connection().write_row(
            encode_register(self._instance_uuid(), box.replicaset.vclock.copy()),
            self._timeout())
        self.applier_set_state(S.REGISTER)
        for tx in self._read_wal_rows(0, box.replicaset.vclock):
            applier_apply_tx(box, tx)
        if box.wal is not None:
            box.wal.sync()      # SUBSCRIBE then asks for what follows the registration
        self.applier_set_state(S.REGISTERED)
        self.applier_set_state(S.READY)

    def _connection(self) -> Connection:
        """The connection to the master: the stages run on what applier_connect made."""
        conn = self._conn
        assert conn is not None
        return conn

    def _instance_uuid(self) -> str:
        """This instance's UUID, which JOIN/REGISTER/SUBSCRIBE send: known by then
        (Box.start chooses it before bootstrapping from a master)."""
        uuid = self.box.instance_uuid
        assert uuid is not None
        return uuid

    def _read_vclock_reply(self, what: str) -> VClock:
        reply = self._connection().read_row(self._join_timeout())
        if reply.type != IprotoType.OK:
            raise reply_error(reply, what)
        return decoded(decode_vclock_row, reply)

    def _read_snapshot_rows(self, meta: JoinMeta | None = None) -> SnapshotRows:
        """Rows until the OK that ends the stage; first the META stage into `meta`,
        when it was asked for and comes."""
        snapshot = SnapshotRows()
        maybe_yield = TimeSlice(self.sched, APPLIER_SLICE).maybe_yield
        conn, timeout = self._connection(), self._join_timeout()
        first = True
        while True:
            maybe_yield()
            packet = conn.read_packet(timeout)
            self.last_row_time = self.sched.clock()
            if packet[:2] == b"\x81\x00" and packet[2:3] in _SNAPSHOT_ROW_TYPES:
                # A snapshot row's header is its REQUEST_TYPE alone: skip decoding it
                snapshot.add_body(packet[2], packet[3:] or None)
            else:
                received = conn.decode(packet)
                if first and meta is not None and received.type == _JOIN_META:
                    self._read_join_meta(meta)
                    first = False
                    continue
                row = self._stage_row(received)
                if row is None:
                    return snapshot
                snapshot.add(row)
            first = False
            if len(snapshot) % _ROWS_LOGGED_EVERY == 0:
                log.info("%.1fM rows received", len(snapshot) / 1e6)

    def _read_join_meta(self, meta: JoinMeta) -> None:
        """The META stage after its JOIN_META: rows until JOIN_SNAPSHOT. A row
        that cannot be read breaks the stream (reconnect, join again)."""
        conn, timeout = self._connection(), self._join_timeout()
        while True:
            row = conn.read_row(timeout)
            self.last_row_time = self.sched.clock()
            try:
                if decoded(lambda row: decode_join_meta_row(meta, row), row):
                    return
            except ClientError as exc:
                if exc.code == ErrorCode.ER_UNKNOWN_REQUEST_TYPE:
                    raise StreamError(exc) from exc
                raise

    def _read_wal_rows(self, counted: int, start: VClock) -> list[list[XRow]]:
        """WAL rows (with LSNs) after `start` until the OK that ends the stage, as
        transactions; every row of every origin after `start`, or a StreamError."""
        assembler = TxAssembler(self.box, dict(start.items()))
        transactions: list[list[XRow]] = []
        maybe_yield = TimeSlice(self.sched, APPLIER_SLICE).maybe_yield
        while True:
            maybe_yield()
            row = self._read_stage_row()
            if row is None:
                if assembler.rows:
                    raise StreamError(ClientError(ErrorCode.ER_PROTOCOL,
                                                  "transaction is not finished"))
                return transactions
            tx = assembler.push(row)
            if tx is not None:
                transactions.append(tx)
            counted += 1
            if counted % _ROWS_LOGGED_EVERY == 0:
                log.info("%.1fM rows received", counted / 1e6)

    def _read_stage_row(self) -> XRow | None:
        """The next data row of a JOIN/FETCH_SNAPSHOT/REGISTER stage, None at its end."""
        row = self._connection().read_row(self._join_timeout())
        self.last_row_time = self.sched.clock()
        return self._stage_row(row)

    @staticmethod
    def _stage_row(row: XRow) -> XRow | None:
        if row.type == _OK:
            return None
        if is_dml(row.type) or is_synchro(row.type):
            return row
        raise reply_error(row, "JOIN")

    # ------------------------------------------------------------ SUBSCRIBE

    def applier_subscribe(self) -> None:
        """applier_subscribe: ask for every row after our vclock, then apply the
        stream transaction by transaction, forever."""
        box, conn = self.box, self._connection()
        replicaset = box.replicaset
        vclock = replicaset.vclock.copy()
        id_filter = None if self.is_orphan() else [box.instance_id]
        conn.write_row(encode_subscribe(box.schema.replicaset_uuid, self._instance_uuid(), vclock,
                                        OWN_VERSION_ID, self._anon(), id_filter),
                       self._timeout())
        reply = conn.read_row(self._disconnect_timeout())
        if reply.type != IprotoType.OK:
            raise reply_error(reply, "SUBSCRIBE")
        response = decoded(decode_subscribe_response, reply)
        self.remote_vclock_at_subscribe = response.vclock
        self.master_id = response.master_id
        own = box.schema.replicaset_uuid
        if response.replicaset_uuid and own and response.replicaset_uuid != own:
            raise ClientError(ErrorCode.ER_REPLICASET_UUID_MISMATCH,
                              response.replicaset_uuid, own)
        log.info("subscribed")
        log.info("remote vclock %s local vclock %s", response.vclock, vclock)
        if self.state == S.READY:
            self.applier_set_state(S.SYNC if self.version_id >= version_id(1, 7, 7) else S.FOLLOW)
        self._last_logged_errcode = 0
        self.lag = TIMEOUT_INFINITY
        self._start_writer()
        counters = replicaset.applier
        on_commit = counters.on_commit.add(self.applier_on_wal_write)
        on_rollback = counters.on_rollback.add(self.applier_on_rollback)
        skip_conflict = bool(self._cfg("replication_skip_conflict", False))
        assembler = TxAssembler(box, dict(vclock.items()))
        apply_tx = ReplicatedTx(box).apply
        maybe_yield = TimeSlice(self.sched, APPLIER_SLICE).maybe_yield
        raft, master_id = box.raft, self.master_id
        try:
            while True:
                if self._paused:
                    self._park()
                maybe_yield()
                rows = self.applier_read_tx(assembler)
                # whatever comes from the leader's connection says it is alive
                raft.process_heartbeat(master_id)
                if rows[0].lsn == 0:
                    if rows[0].type == _RAFT:
                        self.applier_handle_raft(rows[0])
                    self.applier_signal_ack()       # a heartbeat: answer it
                elif raft.is_enabled and raft.leader != master_id:
                    # raft_is_source_allowed: with election on, data only from the
                    # leader (its relay sends again what was dropped once it leads)
                    continue
                elif not apply_tx(rows, skip_conflict, assembler.tx_requests):
                    self.applier_signal_ack()       # applied already (another upstream)
        finally:
            counters.on_commit.remove(on_commit)
            counters.on_rollback.remove(on_rollback)

    def applier_handle_raft(self, row: XRow) -> None:
        """A Raft message of the master: to the state machine, as coming from the
        master's instance id (the SUBSCRIBE response's REPLICA_ID)."""
        if self.master_id == 0:
            raise ClientError(ErrorCode.ER_PROTOCOL,
                              "Can't apply a Raft request from an instance without an ID")
        msg = decode_raft(row)
        try:
            self.box.raft.process_msg(msg, self.master_id)
        except RaftError as exc:
            raise RaftBoxError(str(exc)) from None

    def applier_read_tx(self, assembler: TxAssembler) -> list[XRow]:
        """applier_read_tx: rows until the one that commits their transaction. The
        rows already buffered are taken many at a time (Connection.read_buffered):
        transactions read ahead wait in the assembler."""
        conn, clock = self._connection(), self.sched.clock
        tx = assembler.pop()
        while tx is None:
            row = conn.read_buffered(assembler)
            if row is None:
                row, request = conn.read_stream_row(self._disconnect_timeout())
                if request is None and is_error_type(row.type):   # (a request: DML)
                    raise decode_error(row)
                tx = assembler.push(row, request)
            else:
                tx = assembler.pop()
            if row.timestamp > 0:
                self.lag = time.time() - row.timestamp
            self.last_row_time = clock()
        return tx

    def applier_on_wal_write(self, txn) -> None:
        """applier_on_wal_write (seeds/qsync.rst): something was written, tell the
        master."""
        self.applier_signal_ack()

    def applier_on_rollback(self, txn) -> None:
        """applier_on_rollback: a replicated write failed. 2.6.0 cancels the reader
        and stops; here the reader drops the connection (the rows after the failed
        one are lost) and subscribes again from what is written."""
        self._interrupt_error = self.box.replicaset.applier.diag
        if self._conn is not None:
            self._conn.shutdown()

    # ------------------------------------------------------------ writer

    def _start_writer(self) -> None:
        self._ack_wanted = False
        writer = self.writer = self.sched.spawn(self.applier_writer_f, self._conn,
                                                name=f"applierw/{self.peer}", start=False)
        writer.set_joinable(True)

    def _stop_writer(self) -> None:
        writer, self.writer = self.writer, None
        if writer is None or writer.status == "dead":
            return
        writer.cancel()
        if self.sched.current is not writer and self.sched.current is not None:
            writer.join()

    def applier_signal_ack(self) -> None:
        self._ack_wanted = True
        self._writer_cond.signal()

    def applier_writer_f(self, conn: Connection) -> None:
        """applier_writer_f: wakes up on commits and heartbeats, checks sync, and
        ACKs the written vclock while in sync/follow."""
        while True:
            while not self._ack_wanted:
                self._writer_cond.wait()
            self._ack_wanted = False
            self.applier_check_sync()
            if self.state not in (S.SYNC, S.FOLLOW):
                continue
            try:
                conn.write_row(encode_ack(self.box.replicaset.vclock), self._disconnect_timeout())
            except FiberIsCancelled:
                raise
            except Exception as exc:   # noqa: BLE001 - the reader finds out and reconnects
                log.error("can't send ACK: %s", describe_error(exc))
                conn.shutdown()
                return

    def applier_check_sync(self) -> None:
        """applier_check_sync: `sync` becomes `follow` once everything the master had
        at SUBSCRIBE is written here and the lag is small."""
        if self.state != S.SYNC:
            return
        if self.lag > float(self._cfg("replication_sync_lag", 10.0)):
            return
        target = self.remote_vclock_at_subscribe
        raft = self.box.raft
        if raft.is_enabled and raft.leader != self.master_id and target.get(self.master_id):
            # With election on, data comes only from the leader: what a master that
            # does not lead has of its own beyond us is a deposed leader's tail, rows
            # it wrote and never relayed, which no one will ever send (2.6.3 waits
            # for them, and a node restarted then stayed orphan — read-only even
            # once elected, so nobody could write). Its rows that a quorum had come
            # through the leader.
            target = target.copy()
            target.reset(self.master_id, 0)
        if target.compare(self.box.replicaset.vclock, ignore0=True) in (-1, 0):
            self.applier_set_state(S.FOLLOW)


def applier_apply_join_meta(box: ReplicationInstanceApi, meta: JoinMeta) -> None:
    """What the META stage of a JOIN told, applied with the rest of the JOIN (as
    applier_wait_snapshot of 2.8.2+ does): the Raft core takes the master's term
    and vote as if read from a snapshot (box_raft_recover) — so the joiner knows
    the term before any Raft message, and its first snapshot keeps it — and the
    limbo processes the PROMOTE (txn_limbo_process): the owner, the greatest
    PROMOTE term."""
    if meta.raft is not None:
        box.raft.process_recovery(meta.raft)
    if meta.has_limbo:
        box.limbo.txn_limbo_process(IprotoType.PROMOTE, meta.owner_id, meta.lsn,
                                    origin=meta.origin_id, term=meta.term)
