"""A fake replication master for applier tests: it replays the frames a real Tarantool
2.6.0 master sent in the wire captures (fixtures/tarantool-2.6/wire/), on a real
loopback socket, as fibers of the test's own scheduler.

`Capture` cuts a recorded server->client stream into the greeting and its frames and
sorts them by role (ballot, AUTH reply, JOIN stages, SUBSCRIBE reply, stream rows).
`FakeMaster` accepts connections and answers each request of the applier with the
captured frames; a test changes any answer by replacing an entry of `handlers`
(request type -> fn(session, row)) or the `subscribe_stream` script. Every request
and every ACK received is recorded per connection.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from spindle.core.instance.box import Box
from spindle.core.fiber import Cond, Scheduler, coio
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError, FiberIsCancelled
from spindle.core.iproto.replication import decode_vclock_row
from spindle.core.iproto.request import encode_dml_body
from spindle.core.iproto.xrow import XRow, decode_frame_length, decode_row
from spindle.core.net.protocol import FrameReader, encode_error
from spindle.core.wal.writer import WalWriter
from spindle.core.xlog.files import dir_rows

WIRE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6" / "wire"


def split_frames(data: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos < len(data):
        length, size = decode_frame_length(data, pos)
        frames.append(data[pos:pos + size + length])
        pos += size + length
    return frames


def frame_row(frame: bytes) -> XRow:
    length, size = decode_frame_length(frame, 0)
    row, _ = decode_row(frame, size, size + length, exact=True)
    return row


def restamp(frame: bytes, timestamp: float | None = None) -> bytes:
    """The same frame with TIMESTAMP set to now: captured rows are hours old, and
    an applier never syncs with a lag that big."""
    row = frame_row(frame)
    if not row.timestamp:
        return frame
    return dataclasses.replace(row, timestamp=timestamp or time.time()).encode_frame()


class Capture:
    def __init__(self, name: str, conn: int = 1):
        data = (WIRE / name / f"conn{conn}-s2c.bin").read_bytes()
        self.greeting = data[:128]
        self.frames = split_frames(data[128:])
        self.rows = [frame_row(frame) for frame in self.frames]

    def index_of(self, predicate, start: int = 0) -> int:
        for i in range(start, len(self.rows)):
            if predicate(self.rows[i]):
                return i
        raise LookupError("no such frame")

    @property
    def ballot(self) -> bytes:
        return self.frames[0]

    @property
    def auth_ok(self) -> bytes:
        return self.frames[1]

    def subscribe_reply_index(self) -> int:
        return self.index_of(lambda r: r.type == 0 and r.replica_id and not r.lsn
                             and not r.timestamp)

    def stage_frames(self, start: int = 2) -> list[bytes]:
        """JOIN/FETCH_SNAPSHOT/REGISTER answer: everything up to the SUBSCRIBE reply."""
        return self.frames[start:self.subscribe_reply_index()]

    @property
    def subscribe_reply(self) -> bytes:
        return self.frames[self.subscribe_reply_index()]

    def stream_frames(self) -> list[bytes]:
        """Rows with an LSN after the SUBSCRIBE reply (heartbeats left out)."""
        first = self.subscribe_reply_index() + 1
        return [f for f, r in zip(self.frames[first:], self.rows[first:]) if r.lsn]

    def heartbeat(self) -> bytes:
        first = self.subscribe_reply_index() + 1
        return self.frames[self.index_of(lambda r: r.type == 0 and r.timestamp, first)]


def error_frame(code: int, *args) -> bytes:
    return encode_error(ClientError(code, *args), 0, 82)


class Session:
    """One accepted connection."""

    def __init__(self, master: FakeMaster, sock, index: int):
        self.master = master
        self.sched = master.sched
        self.sock = sock
        self.index = index
        self.frames = FrameReader(sock)
        self.requests: list[XRow] = []
        self.acks: list[dict] = []
        self.subscribes = 0

    def send(self, data: bytes) -> None:
        self.sock.write(data, 10.0)

    def read(self) -> XRow | None:
        packet = self.frames.read_packet(None)
        if packet is None:
            return None
        row, _ = decode_row(packet, 0, len(packet), exact=True)
        return row

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def read_acks(self) -> None:
        """After SUBSCRIBE the applier only sends ACKs: record their vclocks."""
        while True:
            row = self.read()
            if row is None:
                return
            self.acks.append(decode_vclock_row(row).to_dict())
            self.master.ack_cond_broadcast()


class FakeMaster:
    def __init__(self, sched, capture: Capture, heartbeat_interval: float = 0.05):
        self.sched = sched
        self.capture = capture
        self.heartbeat_interval = heartbeat_interval
        self.listener = coio.listen(sched, "127.0.0.1", 0)
        self.port = self.listener.name()[1]
        self.sessions: list[Session] = []
        self.greeting = capture.greeting
        self.handlers = {
            IprotoType.VOTE: lambda s, r: s.send(capture.ballot),
            IprotoType.AUTH: lambda s, r: s.send(capture.auth_ok),
            IprotoType.JOIN: self.send_stage,
            IprotoType.FETCH_SNAPSHOT: self.send_stage,
            IprotoType.REGISTER: self.send_stage,
            IprotoType.SUBSCRIBE: self.subscribe,
        }
        # fn(session): what follows the SUBSCRIBE reply; default: the captured rows
        # (restamped), then heartbeats forever
        self.subscribe_stream = self.default_stream
        self._fibers = []
        self.cond = Cond(sched)
        self._fibers.append(sched.spawn(self._accept, name="fake-master", start=False))

    @property
    def uri(self) -> str:
        return f"repl:secret@127.0.0.1:{self.port}"

    def ack_cond_broadcast(self) -> None:
        self.cond.broadcast()

    def wait(self, predicate, timeout: float = 10.0, what: str = "condition"):
        """Wait (in a fiber) until predicate() is true."""
        deadline = self.sched.clock() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - self.sched.clock()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {what}")
            self.cond.wait(min(remaining, 0.02))

    # -------------------------------------------------------------- serving

    def _accept(self) -> None:
        while True:
            sock, _ = self.listener.accept()
            session = Session(self, sock, len(self.sessions))
            self.sessions.append(session)
            self._fibers.append(self.sched.spawn(self._serve, session, name="fake-session",
                                                 start=False))
            self.cond.broadcast()

    def _serve(self, session: Session) -> None:
        try:
            session.send(self.greeting)
            while True:
                row = session.read()
                if row is None:
                    return
                session.requests.append(row)
                self.cond.broadcast()
                handler = self.handlers.get(row.type)
                if handler is None:
                    session.send(error_frame(48, row.type))
                    continue
                if handler(session, row) == "close":
                    return
                if row.type == IprotoType.SUBSCRIBE:
                    return
        except (OSError, coio.SocketError, EOFError, FiberIsCancelled):
            return
        finally:
            session.close()
            self.cond.broadcast()

    def send_stage(self, session: Session, row: XRow) -> None:
        for frame in self.capture.stage_frames():
            session.send(frame)

    def subscribe(self, session: Session, row: XRow) -> None:
        session.subscribes += 1
        session.send(self.capture.subscribe_reply)
        self._fibers.append(self.sched.spawn(session.read_acks, name="fake-acks",
                                             start=False))
        self.subscribe_stream(session)

    def default_stream(self, session: Session) -> None:
        session.send(restamp(self.capture.heartbeat()))
        for frame in self.capture.stream_frames():
            session.send(restamp(frame))
        self.heartbeats(session)

    def heartbeats(self, session: Session, count: int | None = None) -> None:
        sent = 0
        while count is None or sent < count:
            self.sched.sleep(self.heartbeat_interval)
            session.send(restamp(self.capture.heartbeat()))
            sent += 1

    def requests(self, rtype: int) -> list[XRow]:
        return [r for s in self.sessions for r in s.requests if r.type == rtype]

    def close(self) -> None:
        for fiber in self._fibers:
            fiber.cancel()
        for session in self.sessions:
            session.close()
        self.listener.close()


def body(row: XRow) -> dict:
    return row.body_map() if row.body is not None else {}


def row_frame(rtype: int, lsn: int, *, space: int = 512, tuple=None, key=None, ops=None,
              tsn: int = 0, commit: bool = True, replica_id: int = 1) -> bytes:
    """A stream row as a master relays it (its own REPLICA_ID/LSN/TIMESTAMP)."""
    dml = rtype in (IprotoType.INSERT, IprotoType.REPLACE, IprotoType.UPDATE,
                    IprotoType.DELETE, IprotoType.UPSERT)
    row = XRow(type=rtype, replica_id=replica_id, lsn=lsn, timestamp=time.time(),
               tsn=tsn or lsn, is_commit=commit,
               body=encode_dml_body(rtype, space, key=key, tuple=tuple, ops=ops)
               if dml else None)
    return row.encode_frame()


# ------------------------------------------------------------------ test harness

REPLICA_UUID = "22222222-2222-4222-8222-222222222222"
MASTER_UUID = "11111111-1111-4111-8111-111111111111"
CLUSTER_UUID = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"


@pytest.fixture
def real_sched():
    """A real clock: sockets and timeouts on loopback, deadlines everywhere."""
    scheduler = Scheduler()
    yield scheduler
    scheduler.shutdown(timeout=2.0)
    scheduler.close()


def run(sched, fn, timeout: float = 30.0):
    """Run `fn` in a fiber of `sched` and return its result; fail after `timeout`."""
    outcome = {}

    def main():
        try:
            outcome["result"] = fn()
        finally:
            sched.stop()

    def expired():
        outcome["timeout"] = True
        sched.stop()

    timer = sched.call_later(timeout, expired)
    sched.run(main)
    timer.cancel()
    assert not outcome.get("timeout"), "the test body timed out"
    return outcome.get("result")


def new_box(sched, uuid: str = REPLICA_UUID, **cfg) -> Box:
    box = Box(sched)
    box.instance_uuid = uuid
    box.cfg = {"replication_timeout": 0.1, **cfg}
    return box


def start_wal(box, path, io=None) -> WalWriter:
    """What Box.start does after a join: the WAL from the joined vclock."""
    box.wal = WalWriter(box.sched, str(path), box.instance_uuid, box.replicaset.vclock,
                        instance_id=box.instance_id, io=io)
    return box.wal


def select(box, space_id: int) -> list:
    return [list(t) for t in box.engine.space(space_id).select()]


def wait_state(applier, state, timeout: float = 10.0) -> None:
    """Wait for `state` without pausing the applier there."""
    deadline = applier.sched.clock() + timeout
    while applier.state != state:
        assert applier.sched.clock() < deadline, f"still {applier.state}, not {state}"
        applier.sched.sleep(0.005)


def wal_rows(path) -> list:
    return dir_rows(str(path), ".xlog")


def bootstrap(applier) -> None:
    """bootstrap_from_master's steps (the applier paused at `connected` before)."""
    for state in ("ready", "initial_join", "final_join", "joined", "ready"):
        applier.applier_resume_to_state(type(applier.state)(state))
