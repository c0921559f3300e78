"""The relay's per-transaction savings on a master with replicas attached:

* the WAL hands each row's bytes as written to the in-memory tail, and the relay
  frames them with its sync instead of encoding the rows again (the bytes must be
  those of the general path, whatever the rows);
* rows written soon after a send wait for the rest of COALESCE_WINDOW (not while
  synchronous transactions are pending, and a Raft message never waits);
* the ACKs read from the socket together are processed as their newest one.
"""
from __future__ import annotations

import pytest

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError
from spindle.core.iproto.replication import encode_promote, encode_vclock_row
from spindle.core.iproto.request import encode_dml_body, synchro_row
from spindle.core.iproto.row_block import decode_rows, encode_row
from spindle.core.iproto.xrow import XRow
from spindle.core.raft.raft import RaftMsg, RaftState
from spindle.core.xlog.format import decode_file
from spindle.core.replication import relay as relay_module
from spindle.core.replication.relay import (
    Relay, relay_filter_tx, relay_hold_back, relay_process_acks, relay_push_raft,
    relay_tx_frames,
)
from spindle.core.replication.replica import RelayState, Replica
from spindle.core.replication.wal_cursor import WalCursor
from spindle.core.replication.wal_tail import WalTail
from spindle.core.replication.wire_tx import WireRun, WireTx, frame_rows, plain_tx
from spindle.core.vclock import VClock
from spindle.core.wal.writer import wal_set_watcher

from .test_relay_wire import (
    TS, Box, FileWal, Stream, both_paths, insert, local, tx,
)
from .test_wal_writer import make_writer  # noqa: F401 - a fixture

REPLICA_UUID = "22222222-2222-4222-8222-222222222222"
ODD = XRow(type=IprotoType.DELETE, replica_id=31, lsn=1, timestamp=0.0,
           body=encode_dml_body(IprotoType.DELETE, 512, key=[1]))
BIG = insert(1, 40, key=1, timestamp=TS)
BIG.body = encode_dml_body(IprotoType.INSERT, 512, tuple=[1, "x" * 5000])


# ----------------------------------------------------------------- framing

@pytest.mark.parametrize("sync", [0, 5, 300, 70000, 1 << 40])
@pytest.mark.parametrize("rows", [
    tx(1, 1, 1), tx(1, 2, 3), tx(1, 200, 130), [BIG], [ODD], [local(0, 1)],
    [local(1, 5, tsn=4)], [XRow(type=IprotoType.NOP, replica_id=1, lsn=6, timestamp=TS)],
    [synchro_row(IprotoType.CONFIRM, 1, 3, replica_id=1, lsn=7, timestamp=TS)],
], ids=["one", "three", "many", "big", "odd", "local", "local-tsn", "nop", "confirm"])
def test_framed_wal_bytes_are_the_re_encoded_rows(rows, sync):
    assert frame_rows([encode_row(row) for row in rows], sync) == \
        b"".join(row.encode_frame(sync) for row in rows)


def test_plain_transactions_are_one_ids_growing_lsns_without_local_rows():
    assert plain_tx(tx(1, 1, 1)) and plain_tx(tx(2, 7, 4))
    assert not plain_tx([local(0, 1)])                        # replica id 0
    assert not plain_tx([insert(1, 4, tsn=4, is_commit=False), local(1, 5, tsn=4)])
    assert not plain_tx([insert(1, 4, tsn=4, is_commit=False), insert(2, 1, tsn=4)])
    assert not plain_tx([insert(1, 5, tsn=5, is_commit=False), insert(1, 4, tsn=5)])
    assert not plain_tx([XRow(type=0x80, replica_id=1, lsn=3, timestamp=TS)])


# ------------------------------------------------------- the tail's bytes

@pytest.fixture
def encoded_tail(monkeypatch):
    """Tail batches appended as the WalWriter hands them over: with each row's
    bytes as written."""
    append = WalTail.append

    def append_encoded(self, rows, vclock_after, encoded=None):
        append(self, rows, vclock_after, [encode_row(row) for row in rows])
    monkeypatch.setattr(WalTail, "append", append_encoded)


BATCHES = [
    (tx(1, 1, 3) + tx(1, 4, 1) + tx(1, 5, 2), VClock({1: 6})),
    ([local(0, 1), insert(2, 1)], VClock({0: 1, 1: 6, 2: 1})),
    ([insert(1, 7, tsn=7, is_commit=False), local(1, 8, tsn=7)], VClock({0: 1, 1: 8, 2: 1})),
    ([ODD, XRow(type=IprotoType.NOP, replica_id=1, lsn=9, timestamp=TS)],
     VClock({0: 1, 1: 9, 2: 1, 31: 1})),
    (tx(2, 2, 3) + tx(1, 10, 1) + [BIG], VClock({0: 1, 1: 40, 2: 4, 31: 1})),
    ([synchro_row(IprotoType.CONFIRM, 1, 3, replica_id=1, lsn=41, timestamp=TS)],
     VClock({0: 1, 1: 41, 2: 4, 31: 1})),
]


@pytest.mark.parametrize("sync", [0, 9, 100000])
@pytest.mark.parametrize("start", [{}, {1: 2}, {1: 5, 2: 3}, {1: 10, 2: 4}])
def test_tail_rows_sent_from_their_wal_bytes_are_those_of_the_general_path(
        run, sched, tmp_path, encoded_tail, sync, start):
    wal = FileWal(tmp_path, VClock())

    def main():
        for kwargs in ({}, {"subscriber_id": 2, "at_subscribe": VClock({1: 41, 2: 3}),
                            "id_filter": {31}},
                       {"subscriber_id": 2, "at_subscribe": VClock({1: 41}),
                        "id_filter": {1}}):
            sent = both_paths(sched, wal, VClock(start), sync=sync, tail_batches=BATCHES,
                              **kwargs)
            assert sent
    run(main)


def test_plain_tail_transactions_come_as_wire_txs(run, sched, tmp_path, encoded_tail):
    wal = FileWal(tmp_path, VClock())

    def main():
        tail = WalTail(sched, wal)
        for rows, vclock_after in BATCHES[:2]:
            tail.append(rows, vclock_after)
        # {1: 2}: the cursor has part of the first transaction
        cursor = WalCursor(wal, tail, VClock({1: 2}), wire_sync=7)
        txs = cursor.read()
        # the transactions of one id in a row (and across batches) as one WireTx
        assert [type(one) for one in txs] == [list, WireTx, list, WireTx]
        assert [row.lsn for row in txs[0]] == [3]
        run = tx(1, 4, 1) + tx(1, 5, 2)
        assert (txs[1].replica_id, txs[1].first_lsn, txs[1].lsn, txs[1].count) == (1, 4, 6, 3)
        assert txs[1].rows() == run
        assert txs[1].frames == b"".join(row.encode_frame(7) for row in run)
        assert cursor.vclock == VClock({0: 1, 1: 6, 2: 1})
        tail.detach()
    run(main)


def test_the_wal_hands_over_the_bytes_it_wrote(run, make_writer, tmp_path):  # noqa: F811
    writer = make_writer({1: 1})
    seen = []
    wal_set_watcher(writer, lambda rows, encoded: seen.append((list(rows), encoded)))

    def main():
        writer.write([insert(1, 0, key=1), insert(1, 0, key=2)])
        writer.write([insert(1, 0, key=3)])
    run(main)
    writer.stop()
    assert [[row.lsn for row in rows] for rows, _ in seen] == [[2, 3], [4]]
    assert all(encoded == [encode_row(row) for row in rows] for rows, encoded in seen)
    stored = b"".join(encode_row(row) for row in decode_file(
        (tmp_path / "00000000000000000001.xlog").read_bytes()).rows)
    assert stored == b"".join(b"".join(encoded) for _, encoded in seen)


def test_without_a_file_the_wal_hands_over_no_bytes(run, make_writer):  # noqa: F811
    writer = make_writer({1: 1}, mode="none")
    seen = []
    wal_set_watcher(writer, lambda rows, encoded: seen.append(encoded))
    run(lambda: writer.write([insert(1, 0, key=1)]))
    assert seen == [None]


RUN = [tx(1, 1, 3), tx(1, 4, 1), tx(1, 5, 2), tx(1, 7, 1)]


@pytest.mark.parametrize("limit", [0, 1, 3, 4, 5, 7, 9])
@pytest.mark.parametrize("subscriber", [False, True])
def test_filters_leave_of_a_run_what_they_leave_of_its_transactions(sched, tmp_path,
                                                                    limit, subscriber):
    """A stop vclock (final join), or the subscriber's own rows past what the master
    had at SUBSCRIBE, cutting a run anywhere."""
    relay = make_relay(sched, tmp_path, replica_id=1, sync=4)
    relay.local_vclock_at_subscribe = VClock({1: limit})
    stop = None if subscriber else VClock({1: limit})
    run, out = WireRun(4), []
    for one in RUN:
        run.add(one, [encode_row(row) for row in one], out)
    run.flush(out)
    assert len(out) == 1
    sent = relay_tx_frames(relay, out[0], subscriber, stop)
    expected = b""
    for one in RUN:      # the general path, transaction by transaction
        if subscriber:
            kept = relay_filter_tx(one, subscriber_id=1,
                                   local_vclock_at_subscribe=VClock({1: limit}))
        else:
            kept = relay_filter_tx([row for row in one if row.lsn <= limit])
        expected += b"".join(row.encode_frame(4) for row in kept)
    assert sent == expected
    assert relay.rows_sent == min(limit, 7)
    assert [entry[1] for entry in relay._unacked] == ([min(limit, 7)] if limit else [])
    relay.cursor.tail.detach()


# ------------------------------------------------------------- holding back

def test_a_hold_ends_early_only_for_an_urgent_batch(run, sched, tmp_path, clock):
    wal = FileWal(tmp_path, VClock())
    tail = WalTail(sched, wal)
    urgent = []
    tail.urgent = urgent.__len__
    woke = []

    def holder():
        start = clock()
        tail.hold(0.5)
        woke.append(clock() - start)

    def main():
        sched.spawn(holder)
        sched.yield_()
        tail.append(tx(1, 1, 1), VClock({1: 1}))
        sched.yield_()
        assert not woke and tail.urgent_seq == -1
        sched.sleep(0.6)
        assert woke == [0.5]
        sched.spawn(holder)
        sched.yield_()
        urgent.append(True)
        tail.append(tx(1, 2, 1), VClock({1: 2}))
        sched.yield_()
        assert woke == [0.5, 0.0] and tail.urgent_seq == 1
        tail.detach()
    run(main)


class Limbo:
    def __init__(self):
        self.queue = []


def make_relay(sched, tmp_path, limbo=None, *, replica_id=2, sync=0) -> Relay:
    wal = FileWal(tmp_path, VClock())
    box = Box(sched, wal)
    if limbo is not None:
        box.limbo = limbo
    relay = Relay(sched, box, Replica(REPLICA_UUID, replica_id), Stream(), sync)
    relay.cursor = relay_module.relay_cursor(box, VClock(), sync)
    return relay


@pytest.mark.parametrize("since_send, pending, election, held", [
    (0.0001, False, False, relay_module.COALESCE_WINDOW - 0.0001),
    # written while synchronous transactions were pending (a sync transaction waits
    # for its quorum; a CONFIRM: the limbo is empty once the relay looks)
    (0.0001, True, False, 0.0),
    (relay_module.COALESCE_WINDOW, False, False, 0.0),  # a trickle goes out at once
    # election on: a leader's rows held when it dies stay on it alone
    (0.0001, False, True, 0.0),
])
def test_rows_soon_after_a_send_wait_for_the_window(run, sched, tmp_path, clock,
                                                    since_send, pending, election, held):
    limbo = Limbo()
    relay = make_relay(sched, tmp_path, limbo)
    relay.box.raft.is_enabled = election

    def main():
        limbo.queue += ["entry"] if pending else []
        relay.cursor.tail.append(tx(1, 1, 1), VClock({1: 1}))
        limbo.queue.clear()
        relay.last_row_time = clock() - since_send
        start = clock()
        assert relay_hold_back(relay) == bool(held)
        assert clock() - start == pytest.approx(held)
        relay.cursor.tail.detach()
    run(main)


def test_a_cursor_reading_files_never_holds(sched, tmp_path):
    wal = FileWal(tmp_path, VClock({1: 5}))
    tail = WalTail(sched, wal)
    cursor = WalCursor(wal, tail, VClock(), wire_sync=0)
    assert cursor.mode == "files" and cursor.urgent_unread()
    tail.detach()


def test_a_sync_transaction_written_while_holding_ends_the_hold(run, sched, tmp_path,
                                                               clock):
    limbo = Limbo()
    relay = make_relay(sched, tmp_path, limbo)
    held = []

    def holder():
        start = clock()
        relay_hold_back(relay)
        held.append(clock() - start)

    def main():
        relay.last_row_time = clock()
        sched.spawn(holder)
        sched.yield_()
        limbo.queue.append("entry")
        relay.cursor.tail.append(tx(1, 1, 1), VClock({1: 1}))
        sched.yield_()
        assert held == [0.0]
        relay.cursor.tail.detach()
    run(main)


def start_sender(relay: Relay, sched, clock) -> float:
    """The relay's sender fiber started and run to its first wait; the time it
    started at."""
    start = clock()
    relay.fiber = sched.spawn(relay_module.relay_subscribe_f, relay)
    sched.yield_()
    return start


def on_send(relay: Relay, note) -> None:
    """note(data) at each of the relay's socket writes, from now on."""
    socket = relay.stream.sock.sock
    plain_send = socket.send

    def send(data):
        note(data)
        return plain_send(data)
    socket.send = send


def send_times(relay: Relay, clock) -> list[float]:
    """The (fake) clock's time of each of the relay's socket writes, from now on."""
    sends: list[float] = []
    on_send(relay, lambda data: sends.append(clock()))
    return sends


def test_the_sender_wakes_once_per_send_while_rows_keep_coming(run, sched, tmp_path,
                                                               clock):
    """Rows written right after a send go out at the end of the window it opened,
    the sender parked for it in one wait (not woken by the first row only to hold
    for the rest); a row after an idle window goes out at once."""
    relay = make_relay(sched, tmp_path, Limbo())
    window = relay_module.COALESCE_WINDOW
    sends = send_times(relay, clock)

    def main():
        start = start_sender(relay, sched, clock)
        assert sends == [start]                     # the first heartbeat
        tail = relay.cursor.tail
        tail.append(tx(1, 1, 1), VClock({1: 1}))    # right after a send: waits
        sched.sleep(window / 4)
        switches = relay.fiber.csw
        tail.append(tx(1, 2, 1), VClock({1: 2}))
        sched.sleep(window)
        assert sends == pytest.approx([start, start + window])
        tail.append(tx(1, 3, 1), VClock({1: 3}))    # written right after that send
        sched.sleep(1.5 * window)
        assert sends == pytest.approx([start, start + window, start + 2 * window])
        # one wakeup per send: the end of the window each one opened
        assert relay.fiber.csw - switches == 2
        sched.sleep(1.5 * window)                   # idle for a window: at once
        tail.append(tx(1, 4, 1), VClock({1: 4}))
        sched.yield_()
        sched.yield_()
        assert sends[-1] == clock() and len(sends) == 4
        sched.cancel(relay.fiber)
        tail.detach()
    run(main)


def sent_frames(relay: Relay, clock) -> list[tuple[float, list[int]]]:
    """Each socket write of the relay from now on: the (fake) clock's time and the
    request types of the rows it carried."""
    writes: list[tuple[float, list[int]]] = []
    on_send(relay, lambda data: writes.append(
        (clock(), [row.type for row in decode_frames(bytes(data))])))
    return writes


def decode_frames(data: bytes) -> list[XRow]:
    rows = []
    while data:
        size = 5 + int.from_bytes(data[1:5], "big")       # 0xce + uint32 length
        rows += decode_rows(data[5:size])
        data = data[size:]
    return rows


VOTE = RaftMsg(term=3, vote=2, state=RaftState.FOLLOWER)


def test_a_raft_message_pushed_as_the_wal_wakes_the_sender_is_not_held(
        run, sched, tmp_path, clock):
    """A voter's raft worker writes the vote (a local row: the sender wakes for
    it, has nothing to send) and pushes the state announcing it before the sender
    runs: the push's wakeup finds the sender awake already, and the sender, a send
    having gone out less than a window ago, would hold the message for the rest of
    the window (up to COALESCE_WINDOW later at the candidate). It goes out at once."""
    relay = make_relay(sched, tmp_path, Limbo())
    window = relay_module.COALESCE_WINDOW
    writes = sent_frames(relay, clock)

    def main():
        start = start_sender(relay, sched, clock)
        assert writes == [(start, [IprotoType.OK])]        # the first heartbeat
        sched.sleep(window / 4)
        relay.cursor.tail.append([local(0, 1)], VClock({0: 1}))   # the vote's row
        relay_push_raft(relay, VOTE)
        sched.yield_()
        sched.yield_()
        assert writes == [(start, [IprotoType.OK]),
                          (start + window / 4, [IprotoType.RAFT])]
        sched.cancel(relay.fiber)
        relay.cursor.tail.detach()
    run(main)


def test_a_raft_message_pushed_during_a_hold_ends_it(run, sched, tmp_path, clock):
    """Rows right after a send are held; a Raft message pushed meanwhile goes out
    at once, and the rows with it."""
    relay = make_relay(sched, tmp_path, Limbo())
    window = relay_module.COALESCE_WINDOW
    writes = sent_frames(relay, clock)

    def main():
        start = start_sender(relay, sched, clock)
        relay.cursor.tail.append(tx(1, 1, 1), VClock({1: 1}))
        sched.sleep(window / 4)
        assert len(writes) == 1                             # held
        relay_push_raft(relay, VOTE)
        sched.yield_()
        sched.yield_()
        assert writes == [(start, [IprotoType.OK]),
                          (start + window / 4, [IprotoType.RAFT]),
                          (start + window / 4, [IprotoType.INSERT])]
        sched.cancel(relay.fiber)
        relay.cursor.tail.detach()
    run(main)


def test_a_new_leaders_state_goes_before_its_promote_written_meanwhile(
        run, sched, tmp_path, clock):
    """A new leader pushes its state to the relays, then writes its PROMOTE at
    once (promote.py), before the relays run: each sends the state first, then
    the row (a replica takes rows only from the leader it knows)."""
    relay = make_relay(sched, tmp_path, Limbo())
    writes = sent_frames(relay, clock)

    def main():
        relay.fiber = sched.spawn(relay_module.relay_subscribe_f, relay)
        sched.yield_()
        sched.sleep(relay_module.COALESCE_WINDOW / 4)
        relay_push_raft(relay, RaftMsg(term=3, vote=1, state=RaftState.LEADER))
        promote = encode_promote(0, 0, 3, replica_id=1, timestamp=TS)
        promote.lsn = 1
        relay.cursor.tail.append([promote], VClock({1: 1}))
        sched.yield_()
        sched.yield_()
        assert [types for _, types in writes] == [
            [IprotoType.OK], [IprotoType.RAFT], [IprotoType.PROMOTE]]
        sched.cancel(relay.fiber)
        relay.cursor.tail.detach()
    run(main)


class FilesWithNothingToSend:
    """A cursor reading files whose rows the replica has (or that a busy loop
    reads slowly): every read() takes a while and is "call again", nothing to send."""

    def __init__(self, clock):
        self.clock = clock

    def read(self):
        self.clock.advance(0.1)
        return []

    def caught_up(self):
        return False

    def urgent_unread(self):
        return True

    def close(self):
        pass


def test_a_relay_reading_files_with_nothing_to_send_still_sends_heartbeats(
        run, sched, tmp_path, clock):
    """Heartbeats go out every replication_timeout while the relay reads files
    without a row to send: without them the replica gives up on the link after 4 ×
    replication_timeout and subscribes again, and a relay that needs longer than
    that to reach its first row never sends one (seen under overload: a replica
    that fell off the in-memory tail reconnected every 4 s for good)."""
    relay = make_relay(sched, tmp_path, Limbo())
    relay.cursor = FilesWithNothingToSend(clock)
    timeout = relay.box.cfg["replication_timeout"]
    sends = send_times(relay, clock)

    def main():
        start = clock()
        relay.fiber = sched.spawn(relay_module.relay_subscribe_f, relay)
        while clock() < start + 3.5 * timeout:
            sched.yield_()
        sched.cancel(relay.fiber)
        return start
    start = run(main)
    assert sends[0] == start and len(sends) == 4
    assert all(timeout <= b - a <= timeout + 0.1 for a, b in zip(sends, sends[1:]))


def test_an_idle_relay_sends_a_heartbeat_every_replication_timeout(run, sched, tmp_path,
                                                                   clock):
    """Nothing to send (the cursor has read everything): a heartbeat at once, then
    one every replication_timeout, each one starting the relay's idle time over.
    On the fake clock, so the period is exact."""
    relay = make_relay(sched, tmp_path, Limbo())
    timeout = relay.box.cfg["replication_timeout"]
    sends = send_times(relay, clock)
    idle_after_send = []
    socket = relay.stream.sock.sock
    counted_send = socket.send

    def send(data):
        sent = counted_send(data)
        sched.call_soon(lambda: idle_after_send.append(relay.idle()))
        return sent
    socket.send = send

    def main():
        start = clock()
        relay.fiber = sched.spawn(relay_module.relay_subscribe_f, relay)
        sched.sleep(3.5 * timeout)
        sched.cancel(relay.fiber)
        relay.cursor.tail.detach()
        return start
    start = run(main)
    assert sends == pytest.approx([start + n * timeout for n in range(4)])
    assert idle_after_send == [0.0] * 4


def relays_of_one_box(sched, tmp_path, count: int, election: bool) -> list[Relay]:
    """`count` relays of one master (replica ids 2, 3, ...), subscribed and in the
    replica set, over one WAL; election on or off."""
    first = make_relay(sched, tmp_path, Limbo(), replica_id=2)
    box = first.box
    box.raft.is_enabled = election
    relays = [first] + [Relay(sched, box, Replica(f"{n:08d}-2222-4222-8222-222222222222", n),
                              Stream(), 0) for n in range(3, 2 + count)]
    for relay in relays:
        relay.cursor = relay.cursor or relay_module.relay_cursor(box, VClock(), 0)
        relay.state = RelayState.FOLLOW
        relay.replica.relay = relay
        box.replicaset.hash[relay.replica.uuid] = relay.replica
    return relays


def heartbeats_of(run, sched, clock, relays, periods: float, *, row_at=None):
    """Each relay's send times over `periods` × replication_timeout from a start
    in step (the relays start together, as after a row sent to all); `row_at`: a
    row written then (seconds after the start)."""
    timeout = relays[0].box.cfg["replication_timeout"]
    sends = [send_times(relay, clock) for relay in relays]

    def main():
        start = clock()
        for relay in relays:
            relay.fiber = sched.spawn(relay_module.relay_subscribe_f, relay)
        if row_at is not None:
            sched.sleep(row_at)
            relays[0].cursor.tail.append(tx(1, 1, 1), VClock({1: 1}))
        sched.sleep(start + periods * timeout - clock())
        for relay in relays:
            sched.cancel(relay.fiber)
            relay.cursor.tail.detach()
        return start
    return run(main), timeout, sends


@pytest.mark.parametrize("count", [2, 3])
def test_with_election_on_idle_relays_heartbeat_in_slots_spread_over_the_period(
        run, sched, tmp_path, clock, count):
    """Started in step, each of n relays heartbeats at its own slot (rank/n of the
    period, by replica id) from its first heartbeat on: the slots stay 1/n of a
    period apart, no relay is silent longer than a period, and each sends one
    heartbeat per period. On the fake clock, so the times are exact."""
    relays = relays_of_one_box(sched, tmp_path, count, election=True)
    start, timeout, sends = heartbeats_of(run, sched, clock, relays, 4.5)
    for rank, times in enumerate(sends):
        assert times[0] == start                       # at the subscribe, as 2.6.3
        slot = rank * timeout / count
        assert [(t - slot) % timeout for t in times[1:]] == \
            pytest.approx([0.0] * (len(times) - 1), abs=1e-9)
        gaps = [b - a for a, b in zip([start] + times, times + [start + 4.5 * timeout])]
        assert max(gaps) <= timeout + 1e-9 and len(times) in (5, 6)


def test_with_election_on_a_row_sent_to_all_does_not_put_them_in_step(
        run, sched, tmp_path, clock):
    """A row goes to every relay at once; the heartbeats after it still come at
    each relay's own slot, not replication_timeout after the row for all."""
    relays = relays_of_one_box(sched, tmp_path, 2, election=True)
    start, timeout, sends = heartbeats_of(run, sched, clock, relays, 4.5, row_at=1.3)
    for rank, times in enumerate(sends):
        after = [t for t in times if t > start + 1.3 + relay_module.COALESCE_WINDOW]
        assert len(after) >= 3
        assert [(t - rank * timeout / 2) % timeout for t in after] == \
            pytest.approx([0.0] * len(after), abs=1e-9)


def test_an_anonymous_replica_takes_no_slot_and_heartbeats_as_2_6_3(
        run, sched, tmp_path, clock):
    """An anonymous replica never votes: its relay heartbeats a period after its
    last send, and the two registered replicas share the period between them."""
    relays = relays_of_one_box(sched, tmp_path, 3, election=True)
    anonymous = relays[2].replica
    anonymous.id, anonymous.anon = 0, True
    start, timeout, sends = heartbeats_of(run, sched, clock, relays, 3.5)
    assert sends[2] == pytest.approx([start + n * timeout for n in range(4)])
    for rank, times in enumerate(sends[:2]):
        assert [(t - rank * timeout / 2) % timeout for t in times[1:]] == \
            pytest.approx([0.0] * (len(times) - 1), abs=1e-9)


def test_with_election_off_idle_relays_heartbeat_as_2_6_3(run, sched, tmp_path, clock):
    """Election off: every relay a replication_timeout after its last send, so
    relays started together stay in step (2.6.0 and 2.6.3 alike)."""
    relays = relays_of_one_box(sched, tmp_path, 2, election=False)
    start, timeout, sends = heartbeats_of(run, sched, clock, relays, 3.5)
    assert sends[0] == sends[1] == pytest.approx([start + n * timeout for n in range(4)])


# ------------------------------------------------------------------- ACKs

class BufferedReader:
    def __init__(self, packets):
        self.packets = list(packets)

    def next_buffered(self):
        return self.packets.pop(0) if self.packets else None


def ack(vclock: dict) -> bytes:
    return encode_vclock_row(VClock(vclock)).encode(0)


class ReplicaSet:
    def __init__(self):
        self.acks = []
        self.on_relay_ack = [lambda replica, vclock: self.acks.append(vclock.to_dict())]


def test_buffered_acks_are_processed_as_the_newest(sched, tmp_path):
    relay = make_relay(sched, tmp_path)
    relay.box.replicaset = ReplicaSet()
    relay.stream.reader = BufferedReader([ack({1: 5}), ack({1: 9})])
    relay.note_sent(1, 3, TS)
    relay.note_sent(1, 9, TS)
    relay_process_acks(relay, VClock({1: 2}))
    assert relay.box.replicaset.acks == [{1: 9}]
    assert relay.vclock == VClock({1: 9}) and not relay._unacked
    relay.cursor.tail.detach()


def test_a_bad_packet_after_acks_stops_after_they_are_processed(sched, tmp_path):
    relay = make_relay(sched, tmp_path)
    relay.box.replicaset = ReplicaSet()
    relay.stream.reader = BufferedReader([ack({1: 5}), b"\x81\x00\xc1"])
    with pytest.raises(ClientError):
        relay_process_acks(relay, VClock({1: 2}))
    assert relay.box.replicaset.acks == [{1: 5}]
    relay.cursor.tail.detach()


# --------------------------------------------------------------- no holes sent

@pytest.mark.parametrize("encoded", [False, True], ids=["rows", "spans"])
def test_a_relay_refuses_to_send_past_rows_its_cursor_skipped(sched, tmp_path, encoded):
    """Issue 21's loss in the relay's own terms: the tail got 14..15 before 11..13
    (batches out of the WAL's order), the cursor takes 14..15 and would skip 11..13
    as sent. The relay refuses instead of sending a hole: RelayGapError, nothing
    sent; a relay fed in order sends everything and moves its `sent` vclock."""
    def feed(relay, batches):
        tail = relay.cursor.tail
        for rows, clock in batches:
            tail.append(rows, clock, [encode_row(row) for row in rows] if encoded else None)
        txs = relay.cursor.read()
        return b"".join(relay_tx_frames(relay, one, True, None) for one in txs)

    early, late = (tx(1, 11, 3), VClock({1: 13})), (tx(1, 14, 2), VClock({1: 15}))
    relay = make_relay(sched, tmp_path / "in-order")
    relay.cursor.vclock, relay.sent = VClock({1: 10}), {1: 10}
    assert feed(relay, [early, late]) == b"".join(
        row.encode_frame(0) for row in early[0] + late[0])
    assert relay.sent == {1: 15}
    relay.cursor.tail.detach()

    relay = make_relay(sched, tmp_path / "out-of-order")
    relay.cursor.vclock, relay.sent = VClock({1: 10}), {1: 10}
    with pytest.raises(relay_module.RelayGapError,
                       match="instance 1: LSN 10 would be followed by LSN 14"):
        feed(relay, [late, early])
    assert relay.rows_sent == 0 and relay.sent == {1: 10}
    relay.cursor.tail.detach()


def test_rows_one_by_one_and_runs_with_a_hole_inside_are_refused(sched, tmp_path):
    relay = make_relay(sched, tmp_path)
    relay.sent = {1: 4}
    with pytest.raises(relay_module.RelayGapError, match="LSN 4 would be followed by LSN 6"):
        relay_tx_frames(relay, [insert(1, 6)], True, None)
    run, out = WireRun(0), []
    for one in (tx(1, 5, 2), tx(1, 8, 1)):          # 5, 6, then 8: 7 missing inside
        run.add(one, [encode_row(row) for row in one], out)
    run.flush(out)
    with pytest.raises(relay_module.RelayGapError, match=r"LSNs 5\.\.8 come as 3 rows"):
        relay_tx_frames(relay, out[0], True, None)
    assert relay.sent == {1: 4}
    relay_tx_frames(relay, tx(1, 5, 3), True, None)
    assert relay.sent == {1: 7}
    relay.cursor.tail.detach()
