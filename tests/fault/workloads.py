"""Client workloads against a replica set: threads in the test process, each with its
own `tarantool.Connection` (the official connector, as the users of issue 21 had).

Every write's outcome is what its client saw:
* acknowledged — the server answered OK: the key must be on every node at the end;
* unknown — an error reply, a timeout or a lost connection: it may or may not be
  there (a sync write that timed out was rolled back; one whose connection broke
  may have been committed). Such a key is never reused.

* `SetWorkload`: N writers inserting unique keys (writer w's keys are
  w * KEY_STRIDE + 1, + 2, ...) into one space, each writer bound to one target node
  (writers are spread over the targets: one target is a set on a master, two are
  master-master writers, each master its own keys).
  With `follow_leader`, the writers instead write through whichever of the
  targets is the elected leader (box.info.election) and writable: after any error
  (ER_READONLY from a node that is no longer leader, a lost connection) a writer
  looks for the leader again.
* `RegisterWorkload`: one key of a sync space written with increasing values by one
  writer while a reader reads it back: a read never returns less than the value
  acknowledged before the read began, and at the end every node holds a value no
  less than the last acknowledged one.

Connections are remade after any network error (with a pause, until stopped), so
the workload goes on through kills and restarts of its target.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

import tarantool

from ..integration.cluster import Node

KEY_STRIDE = 10**9
SOCKET_TIMEOUT = 5.0
RECONNECT_PAUSE = 0.05


def connect(node: Node) -> tarantool.Connection:
    """A fresh connection, remade after every network error."""
    return tarantool.Connection("127.0.0.1", node.port, socket_timeout=SOCKET_TIMEOUT,
                                connection_timeout=SOCKET_TIMEOUT, reconnect_max_attempts=0,
                                connect_now=True)


def close_quietly(conn: tarantool.Connection | None) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:      # noqa: BLE001 - the connection is dead anyway
            pass


def error_name(exc: BaseException) -> str:
    if type(exc) is tarantool.error.DatabaseError and exc.args:
        return f"ER {exc.args[0]}"
    return type(exc).__name__


class _Client(threading.Thread):
    """A thread that keeps one connection to `node` open while it is not stopped."""

    def __init__(self, node: Node, stop: threading.Event, name: str):
        super().__init__(name=name, daemon=True)
        self.node = node
        self.stop = stop
        self.conn: tarantool.Connection | None = None
        self.errors: collections.Counter = collections.Counter()
        self.crash: BaseException | None = None

    def connection(self) -> tarantool.Connection | None:
        if self.conn is None:
            try:
                self.conn = connect(self.node)
            except Exception as exc:     # noqa: BLE001 - the node is down: retried
                self.errors["connect " + error_name(exc)] += 1
                self.stop.wait(RECONNECT_PAUSE)
        return self.conn

    def failed(self, exc: BaseException) -> None:
        """Count an error reply or a network failure (which drops the connection);
        anything else is a bug of the test and ends the thread."""
        if isinstance(exc, (tarantool.error.NetworkError, tarantool.error.SchemaError,
                            OSError)):
            close_quietly(self.conn)
            self.conn = None
        elif not (type(exc) is tarantool.error.DatabaseError and exc.args
                  and isinstance(exc.args[0], int)):
            raise exc
        self.errors[error_name(exc)] += 1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.connection() is not None:
                    self.step()
        except BaseException as exc:   # noqa: BLE001 - reported by the workload
            self.crash = exc
        finally:
            close_quietly(self.conn)

    def step(self) -> None:
        raise NotImplementedError


@dataclass
class SetOutcome:
    acked: set[int] = field(default_factory=set)
    unknown: set[int] = field(default_factory=set)
    errors: collections.Counter = field(default_factory=collections.Counter)

    def describe(self) -> str:
        errors = ", ".join(f"{name} x{count}" for name, count in self.errors.most_common())
        return (f"{len(self.acked)} acknowledged, {len(self.unknown)} unknown"
                + (f" ({errors})" if errors else ""))


class _SetWriter(_Client):
    def __init__(self, node: Node, stop: threading.Event, space_id: int, number: int,
                 rate: float):
        super().__init__(node, stop, f"set-writer-{number}")
        self.space_id = space_id
        self.next_key = number * KEY_STRIDE + 1
        self.acked: list[int] = []
        self.unknown: list[int] = []
        self.interval = 1.0 / rate if rate else 0.0
        self.due = time.monotonic()

    def step(self) -> None:
        if self.interval:
            # paced: a bounded amount of data whatever the speed of the nodes
            self.due = max(self.due + self.interval, time.monotonic() - 1.0)
            if self.stop.wait(max(0.0, self.due - time.monotonic())):
                return
        key = self.next_key
        self.next_key += 1
        try:
            self.conn.insert(self.space_id, (key, self.node.name))
        except Exception as exc:       # noqa: BLE001 - any failure: outcome unknown
            self.unknown.append(key)
            self.failed(exc)
        else:
            self.acked.append(key)


_WRITABLE_LEADER = "return box.info.election.state == 'leader' and not box.info.ro"


class _LeaderSetWriter(_SetWriter):
    """A set writer whose target is whichever of `nodes` is the writable leader
    (2.6.3 has no "not the leader" error: a follower answers ER_READONLY)."""

    def __init__(self, nodes: list[Node], stop: threading.Event, space_id: int, number: int,
                 rate: float):
        super().__init__(nodes[0], stop, space_id, number, rate)
        self.nodes = nodes

    def connection(self) -> tarantool.Connection | None:
        if self.conn is None:
            self.conn = self.find_leader()
            if self.conn is None:
                self.stop.wait(RECONNECT_PAUSE)    # no leader yet: an election runs
        return self.conn

    def find_leader(self) -> tarantool.Connection | None:
        for node in self.nodes:
            try:
                conn = connect(node)
            except Exception as exc:     # noqa: BLE001 - a killed node: the next one
                self.errors["connect " + error_name(exc)] += 1
                continue
            try:
                writable = conn.eval(_WRITABLE_LEADER).data[0]
            except Exception as exc:     # noqa: BLE001 - it died meanwhile
                self.errors["find " + error_name(exc)] += 1
                writable = False
            if writable:
                self.node = node
                return conn
            close_quietly(conn)
        return None

    def failed(self, exc: BaseException) -> None:
        """Any error: the leader may have changed (or died), look for it again."""
        super().failed(exc)
        close_quietly(self.conn)
        self.conn = None


class SetWorkload:
    """`writers` threads inserting unique keys into `space` on the `targets`
    (writer i writes to targets[i % len(targets)], or with `follow_leader` to
    whichever target is the leader); each at most `rate` writes a second when
    `rate` is set, else as fast as its target answers."""

    def __init__(self, targets: list[Node], space: str, writers: int, rate: float = 0,
                 follow_leader: bool = False):
        self.targets = targets
        self.space = space
        self.stop_event = threading.Event()
        space_id = targets[0].eval("return box.space[...].id", space)
        if follow_leader:
            self.writers = [_LeaderSetWriter(targets, self.stop_event, space_id, i + 1, rate)
                            for i in range(writers)]
        else:
            self.writers = [_SetWriter(targets[i % len(targets)], self.stop_event, space_id,
                                       i + 1, rate)
                            for i in range(writers)]

    def start(self) -> "SetWorkload":
        for writer in self.writers:
            writer.start()
        return self

    def acked_count(self) -> int:
        return sum(len(writer.acked) for writer in self.writers)

    def stop(self, timeout: float = 60) -> SetOutcome:
        self.stop_event.set()
        outcome = SetOutcome()
        for writer in self.writers:
            writer.join(timeout)
            assert not writer.is_alive(), f"{writer.name} did not stop"
            if writer.crash is not None:
                raise writer.crash
            outcome.acked.update(writer.acked)
            outcome.unknown.update(writer.unknown)
            outcome.errors.update(writer.errors)
        return outcome


# ----------------------------------------------------------------- register

@dataclass
class RegisterOutcome:
    last_acked: int = 0
    attempted: int = 0                 # the highest value sent
    writes_acked: int = 0
    reads: int = 0
    stale_reads: list[tuple[int, int]] = field(default_factory=list)  # (floor, read)
    errors: collections.Counter = field(default_factory=collections.Counter)

    def describe(self) -> str:
        errors = ", ".join(f"{name} x{count}" for name, count in self.errors.most_common())
        return (f"{self.writes_acked} of {self.attempted} writes acknowledged (last "
                f"{self.last_acked}), {self.reads} reads, {len(self.stale_reads)} stale"
                + (f" ({errors})" if errors else ""))


class _RegisterWriter(_Client):
    def __init__(self, node: Node, stop: threading.Event, space_id: int, key: int):
        super().__init__(node, stop, "register-writer")
        self.space_id = space_id
        self.key = key
        self.attempted = 0
        self.last_acked = 0            # read by the reader thread (an int: atomic)
        self.writes_acked = 0

    def step(self) -> None:
        self.attempted += 1
        value = self.attempted
        try:
            self.conn.replace(self.space_id, (self.key, value))
        except Exception as exc:       # noqa: BLE001 - outcome unknown
            self.failed(exc)
        else:
            self.last_acked = value
            self.writes_acked += 1


class _RegisterReader(_Client):
    def __init__(self, node: Node, stop: threading.Event, space_id: int, key: int,
                 writer: _RegisterWriter):
        super().__init__(node, stop, "register-reader")
        self.space_id = space_id
        self.key = key
        self.writer = writer
        self.reads = 0
        self.stale: list[tuple[int, int]] = []

    def step(self) -> None:
        floor = self.writer.last_acked
        try:
            data = self.conn.select(self.space_id, [self.key]).data
        except Exception as exc:       # noqa: BLE001 - retried
            self.failed(exc)
            return
        value = data[0][1] if data else 0
        self.reads += 1
        if value < floor:
            self.stale.append((floor, value))


class RegisterWorkload:
    def __init__(self, node: Node, space: str = "reg", key: int = 1):
        self.stop_event = threading.Event()
        space_id = node.eval("return box.space[...].id", space)
        self.writer = _RegisterWriter(node, self.stop_event, space_id, key)
        self.reader = _RegisterReader(node, self.stop_event, space_id, key, self.writer)
        self.space = space
        self.key = key

    def start(self) -> "RegisterWorkload":
        self.writer.start()
        self.reader.start()
        return self

    def acked_count(self) -> int:
        return self.writer.writes_acked

    def stop(self, timeout: float = 60) -> RegisterOutcome:
        self.stop_event.set()
        for client in (self.writer, self.reader):
            client.join(timeout)
            assert not client.is_alive(), f"{client.name} did not stop"
            if client.crash is not None:
                raise client.crash
        outcome = RegisterOutcome(self.writer.last_acked, self.writer.attempted,
                                  self.writer.writes_acked, self.reader.reads,
                                  list(self.reader.stale))
        outcome.errors.update(self.writer.errors)
        outcome.errors.update({f"read {k}": v for k, v in self.reader.errors.items()})
        return outcome
