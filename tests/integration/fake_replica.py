"""A replica made of a raw socket: it sends JOIN / SUBSCRIBE / FETCH_SNAPSHOT / REGISTER
and ACKs exactly as a 2.6.0 applier would (or, on purpose, not), and reads the master's
frames one by one. Tests use it against Spindle and against real Tarantool masters to
pin the master side of replication frame by frame."""
from __future__ import annotations

import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

from spindle.core.iproto import replication as wire
from spindle.core.vclock import VClock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from iproto_fake_executor import RawClient  # noqa: E402

VERSION_2_6_0 = 0x020600
OK, INSERT, NOP = 0, 2, 12


class Frame:
    """One frame from the master: header and body as decoded maps."""

    def __init__(self, header: dict, body: Any, raw: bytes):
        self.header, self.body, self.raw = header, body, raw

    @property
    def type(self) -> int:
        return self.header.get(0)

    @property
    def is_error(self) -> bool:
        return bool(self.type & 0x8000)

    @property
    def code(self) -> int:
        return self.type & 0x7FFF

    @property
    def message(self) -> str:
        return self.body.get(0x31) if isinstance(self.body, dict) else None

    @property
    def vclock(self) -> dict:
        return self.body.get(0x26) if isinstance(self.body, dict) else None

    @property
    def is_heartbeat(self) -> bool:
        return self.type == OK and self.body is None and 3 not in self.header

    def __repr__(self) -> str:
        return f"Frame({self.header}, {self.body})"


class FakeReplica(RawClient):
    def __init__(self, port: int, user: str | None = None, password: str = "",
                 timeout: float = 5.0):
        super().__init__(port, timeout)
        self.master_uuid = self.greeting[25:61].decode()
        if user is not None:
            header, body, _ = self.auth(user, password, sync=0)
            assert header[0] == 0, body

    def frame(self, timeout: float | None = None) -> Frame:
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            header, body, raw = self.read()
        finally:
            self.sock.settimeout(self.timeout)
        return Frame(header, body, raw)

    def frames_until(self, predicate, timeout: float = 5.0) -> list[Frame]:
        """Frames up to and including the first one `predicate` accepts."""
        deadline = time.monotonic() + timeout
        out = []
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no matching frame within {timeout} s; got {out[-5:]}"
            out.append(self.frame(left))
            if predicate(out[-1]):
                return out

    def row(self, row, sync: int = 0) -> None:
        self.send(row.encode_frame(sync))

    # -- requests a 2.6.0 applier sends

    def join(self, uuid: str, sync: int = 0) -> None:
        self.row(wire.encode_join(uuid), sync)

    def fetch_snapshot(self, sync: int = 0) -> None:
        self.row(wire.encode_fetch_snapshot(), sync)

    def register(self, uuid: str, vclock: dict, sync: int = 0) -> None:
        self.row(wire.encode_register(uuid, VClock(vclock)), sync)

    def subscribe(self, cluster_uuid: str | None, uuid: str, vclock: dict, *,
                  anon: bool = False, id_filter: list[int] | None = None,
                  sync: int = 0) -> None:
        self.row(wire.encode_subscribe(cluster_uuid, uuid, VClock(vclock), VERSION_2_6_0,
                                       anon, id_filter), sync)

    def ack(self, vclock: dict) -> None:
        self.row(wire.encode_ack(VClock(vclock)))

    def follow(self, seconds: float, vclock: dict) -> list[Frame]:
        """Behave for `seconds` as a live replica does (ACK every heartbeat with
        `vclock`); the frames other than heartbeats."""
        deadline = time.monotonic() + seconds
        out = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                frame = self.frame(left)
            except socket.timeout:
                break
            if frame.is_heartbeat:
                self.ack(vclock)
            else:
                out.append(frame)
        return out

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def eof_within(self, timeout: float) -> bool:
        """True when the master closes the connection within `timeout` (frames it
        sends meanwhile are read and dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except socket.timeout:
                continue
            finally:
                self.sock.settimeout(self.timeout)
            if not data:
                return True
        return False


def frame_bytes(header: dict, body: Any = None) -> bytes:
    packed = msgpack.packb(header) + (b"" if body is None else msgpack.packb(body))
    return b"\xce" + struct.pack(">I", len(packed)) + packed
