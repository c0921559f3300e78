"""The applier's side of the wire: one connection to a master and the row stream on it.

`Connection` turns bytes into rows and every way that can fail into one of two errors:
StreamError when what arrived cannot be read (garbage, a broken length prefix, a row
that does not decode) and SocketError when the connection itself is gone (EOF, reset,
refused; with the errno box.info shows as system_message). `TxAssembler` cuts the row
stream into transactions with applier_read_tx's checks; the frames already buffered
are decoded a batch at a time (take_frames, a few dozen rows ahead of the
transaction being applied) instead of one call chain per row. (The applier's reader
gives the loop back through a TimeSlice of APPLIER_SLICE: core/fiber/timeslice.py.)
"""
from __future__ import annotations

import collections
import os
import socket
import struct
from typing import Any

from spindle.core.iproto.msgpack import ext_hook
from spindle.core.fiber.coio import CoSocket, SocketError, address_text
from spindle.core.iproto.constants import is_error_type
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.replication import decode_error
from spindle.core.iproto.request import (
    DmlRequest, PutRequest, decode_dml_packet, decode_relay_put_frame,
)
from spindle.core.iproto.xrow import XRow, decode_row
from spindle.core.net.protocol import FrameReader, PacketError

from .apply import StreamError
from .replica import VCLOCK_MAX

_unpack_u32 = struct.Struct(">I").unpack_from

# Rows a reader decodes ahead of the transaction it applies (TxAssembler.take_frames):
# enough to save the per-call costs, few enough for the work between two looks at
# the reader's time slice to stay well below APPLIER_SLICE (core/fiber/timeslice.py).
READ_AHEAD_ROWS = 64


# ---------------------------------------------------------------- transactions

def lsn_gap_error(replica_id: int, last: int, lsn: int) -> StreamError:
    """Rows of one origin missing from a stream: a broken stream (the applier
    reconnects and subscribes again from what it has), never a gap to step over.
    (Logged with both LSNs by the applier, as every error that breaks its stream.)"""
    return StreamError(ClientError(
        ErrorCode.ER_PROTOCOL, f"Missing rows of instance {replica_id} in the stream: "
        f"LSN {last} is followed by LSN {lsn}"))


class TxAssembler:
    """Groups stream rows into transactions (applier_read_tx's checks, iproto.md
    §8.6): a transaction starts with the row whose LSN is its TSN and ends with the
    row that carries the commit flag; every row in between has the same TSN.

    With `lsns` (SUBSCRIBE: the vclock the stream starts after, as a dict) it also
    checks that every origin's rows come without a hole: a relay sends every row of
    every origin after that vclock, in order (a local space's rows as NOPs, the
    subscriber's own only up to what the master had of them at SUBSCRIBE, an id of
    ID_FILTER never), so the next row of an origin is its last LSN + 1. A row
    further on means rows were lost on the way; applying it would move the vclock
    past them for good."""

    def __init__(self, box, lsns: dict[int, int] | None = None):
        self.box = box
        self.lsns = lsns
        self.rows: list[XRow] = []
        self.requests: list = []
        self.tsn = 0
        # whole transactions take_frames() read ahead: (rows, requests)
        self.ready: collections.deque[tuple[list[XRow], list]] = collections.deque()
        # the DML requests of the transaction push() returned last, as the reader
        # decoded them (None where it did not), row for row
        self.tx_requests: list = []

    def push(self, row: XRow, request=None) -> list[XRow] | None:
        """Add a row (and its DML request, if the reader decoded it); the whole
        transaction when this row ends it."""
        if row.replica_id >= VCLOCK_MAX:
            raise StreamError(ClientError(ErrorCode.ER_UNKNOWN_REPLICA, str(row.replica_id),
                                          self.box.schema.replicaset_uuid or ""))
        lsns = self.lsns
        if lsns is not None and row.replica_id and row.lsn:     # (lsn 0: a heartbeat)
            last = lsns.get(row.replica_id, 0)
            if row.lsn > last + 1:
                raise lsn_gap_error(row.replica_id, last, row.lsn)
            if row.lsn > last:
                lsns[row.replica_id] = row.lsn
        if not self.rows:
            if row.lsn != row.tsn:
                raise StreamError(ClientError(
                    ErrorCode.ER_PROTOCOL, "Transaction id must be equal to LSN of the "
                    "first row in the transaction."))
            self.tsn = row.tsn
        elif row.tsn != self.tsn:
            raise StreamError(ClientError(ErrorCode.ER_UNSUPPORTED, "replication",
                                          "interleaving transactions"))
        self.rows.append(row)
        self.requests.append(request)
        if not row.is_commit:
            return None
        tx, self.rows = self.rows, []
        self.tx_requests, self.requests = self.requests, []
        return tx

    def pop(self) -> list[XRow] | None:
        """The next whole transaction take_frames() read ahead (its requests then
        in tx_requests), or None."""
        if not self.ready:
            return None
        tx, self.tx_requests = self.ready.popleft()
        return tx

    def take_frames(self, buf: bytearray, pos: int) -> tuple[int, XRow | None]:
        """push() the rows of the whole frames in `buf` from `pos` on, decoded the
        quick way (a relay's usual INSERT/REPLACE frame read whole by
        decode_relay_put_frame, else decode_dml_packet), their transactions going
        to `ready` (pop()); a stream's frames
        are mostly taken this way, many at a time. Stops before a frame that is
        incomplete, is not a DML row decode_dml_packet takes, or would make push()
        raise: the caller reads that one the usual way, so errors come where they
        did, and once a transaction ends READ_AHEAD_ROWS rows after the start: the
        reader still yields in time (its TimeSlice). Returns the position after the
        frames taken and the last row taken."""
        rows, requests, tsn = self.rows, self.requests, self.tsn
        ready = self.ready
        lsns = self.lsns if self.lsns is not None else {}
        checked = self.lsns is not None
        end = len(buf)
        row = None
        taken_rows = 0
        request: DmlRequest | PutRequest
        while end - pos > 5 and buf[pos] == 0xCE:      # the length prefix relays write
            quick = decode_relay_put_frame(buf, pos, ext_hook)
            if quick is not None:       # (its replica ids are all below VCLOCK_MAX)
                taken, request, stop = quick
            else:
                start = pos + 5
                stop = start + _unpack_u32(buf, pos + 1)[0]
                if stop > end:
                    break
                decoded = decode_dml_packet(bytes(buf[start:stop]), ext_hook)
                if decoded is None:
                    break
                taken, request = decoded
                if taken.replica_id >= VCLOCK_MAX:
                    break
            if not rows:
                if taken.lsn != taken.tsn:
                    break
                tsn = taken.tsn
            elif taken.tsn != tsn:
                break
            if checked:
                # the next row of its origin (push() raises for anything else)
                replica_id = taken.replica_id
                if taken.lsn != lsns.get(replica_id, 0) + 1 or not replica_id:
                    break
                lsns[replica_id] = taken.lsn
            row = taken
            rows.append(row)
            requests.append(request)
            pos = stop
            if row.is_commit:
                ready.append((rows, requests))
                taken_rows += len(rows)
                rows, requests = [], []
                if taken_rows >= READ_AHEAD_ROWS:
                    break
        self.rows, self.requests, self.tsn = rows, requests, tsn
        return pos, row


# ---------------------------------------------------------------- the connection

class Connection:
    """One connection to the master: a socket and the frame reader on it. Whatever
    cannot be read as a row is a StreamError; a closed or reset socket a SocketError."""

    def __init__(self, sock: CoSocket):
        self.sock = sock
        self.frames = FrameReader(sock)
        self.closed = False

    def _where(self) -> str:
        try:
            return (f"called on fd {self.sock.fileno()}, aka {address_text(self.sock.name())}, "
                    f"peer of {address_text(self.sock.peer())}")
        except OSError:
            return f"called on fd {self.sock.fileno()}"

    def _socket_error(self, what: str, exc: OSError | None = None) -> SocketError:
        error = SocketError(f"{what}, {self._where()}")
        error.errno = (exc.errno or 0) if exc is not None else 0   # (OSError's may be None)
        return error

    def readn(self, size: int, timeout: float | None) -> bytes:
        try:
            return self.sock.readn(size, timeout)
        except SocketError:
            raise self._socket_error("unexpected EOF when reading from socket") from None
        except OSError as exc:
            raise self._socket_error("read", exc) from None

    def read_packet(self, timeout: float | None) -> bytes:
        try:
            packet = self.frames.read_packet(timeout)
        except EOFError:
            packet = None
        except PacketError as exc:          # a broken length prefix
            raise StreamError(exc.error) from None
        except OSError as exc:
            raise self._socket_error("read", exc) from None
        if packet is None:
            raise self._socket_error("unexpected EOF when reading from socket")
        return packet

    def read_row(self, timeout: float | None) -> XRow:
        return self.decode(self.read_packet(timeout))

    def read_buffered(self, assembler: TxAssembler) -> XRow | None:
        """Hand the rows already buffered to `assembler` (TxAssembler.take_frames);
        the last row it took, None when it took none."""
        frames = self.frames
        buf, pos = frames.peek()
        end, row = assembler.take_frames(buf, pos)
        if row is not None:
            frames.skip(end - pos)
        return row

    def read_stream_row(self, timeout: float | None) -> tuple[XRow, Any]:
        """The next row of a SUBSCRIBE stream and, for the usual DML rows, its
        request (None otherwise: the row is decoded the strict way and its body
        left to whoever needs it). Rows already buffered are taken without a call
        into the socket layer."""
        try:
            packet = self.frames.next_buffered()
        except PacketError as exc:          # a broken length prefix
            raise StreamError(exc.error) from None
        if packet is None:
            packet = self.read_packet(timeout)
        quick = decode_dml_packet(packet, ext_hook)
        if quick is not None:
            return quick
        return self.decode(packet), None

    @staticmethod
    def decode(packet: bytes) -> XRow:
        try:
            row, _ = decode_row(packet, 0, len(packet), exact=True)
        except BoxError as exc:
            raise StreamError(exc) from None
        return row

    def write(self, data: bytes, timeout: float | None) -> None:
        try:
            self.sock.write(data, timeout)
        except OSError as exc:
            raise self._socket_error("write", exc) from None

    def write_row(self, row: XRow, timeout: float | None) -> None:
        self.write(row.encode_frame(), timeout)

    def shutdown(self) -> None:
        """Make the reader's next read fail (from another fiber)."""
        try:
            self.sock.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()


# ---------------------------------------------------------------- replies and errors

def reply_error(row: XRow, what: str) -> BoxError:
    """The error an unexpected reply stands for: the master's own error, or a
    StreamError when it is no reply at all."""
    if is_error_type(row.type):
        return decode_error(row)
    return StreamError(ClientError(ErrorCode.ER_PROTOCOL, f"Invalid response to {what}"))


def decoded(decoder, row: XRow):
    """Decode a reply body; a body that makes no sense is a broken stream."""
    try:
        return decoder(row)
    except ClientError as exc:
        if exc.code in (ErrorCode.ER_INVALID_MSGPACK, ErrorCode.ER_MISSING_REQUEST_FIELD,
                        ErrorCode.ER_PROTOCOL):
            raise StreamError(exc) from exc
        raise


def describe_error(exc: BaseException) -> str:
    """An error as 2.6.0's error_log prints it: `ER_NAME: message` for a ClientError,
    `Type: message[: strerror]` for the others."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    err_type = getattr(exc, "type", None) or type(exc).__name__
    code = getattr(exc, "code", None)
    if err_type == "ClientError" and code is not None:
        try:
            return f"{ErrorCode(code).name}: {message}"
        except ValueError:
            return f"ER_{code}: {message}"
    errno = getattr(exc, "errno", 0)
    if errno:
        return f"{err_type}: {message}: {os.strerror(errno)}"
    return f"{err_type}: {message}"
