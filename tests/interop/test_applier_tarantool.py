"""Spindle's applier, in this process, replicating from a real Tarantool 2.6.0 master.

A fresh Box is bootstrapped by stepping the applier with applier_resume_to_state the way
bootstrap_from_master does (ready -> initial_join -> final_join -> joined -> ready),
then it follows with its WAL started: the master's data, vclock and its view of our
ACKs must match. A synchronous space on the master commits only with our ACK. The
applier is stopped and restarted, the master is killed and restarted, and the stream
goes on each time.

These tests fail, never skip, when tarantool is not installed.
"""
from __future__ import annotations

import struct
import uuid

from spindle.core.instance.box import Box
from spindle.core.iproto.msgpack import ext_hook
from spindle.core.fiber import Scheduler
from spindle.core.fiber.coio import run_in_thread
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.request import decode_dml_body, decode_relay_put_frame
from spindle.core.iproto.xrow import decode_row
from spindle.core.net import protocol
from spindle.core.replication import streams
from spindle.core.replication.applier import Applier
from spindle.core.replication.replica import ApplierState as S
from spindle.core.vclock import VClock
from spindle.core.wal.writer import WalWriter

from ..integration.cluster import Cluster

MASTER_SETUP = """
box.schema.space.create('test', {if_not_exists = true})
box.space.test:create_index('pk', {if_not_exists = true})
box.schema.space.create('sync', {is_sync = true, if_not_exists = true})
box.space.sync:create_index('pk', {if_not_exists = true})
for i = 1, 1000 do box.space.test:replace{i, 'value ' .. i} end
box.begin()
box.space.test:replace{5001, 'multi'}
box.space.test:replace{5002, 'multi'}
box.space.test:delete{1}
box.commit()
"""


class Replica:
    """An in-process Spindle replica: Box + Applier on a real-clock scheduler."""

    def __init__(self, workdir, master_uri: str):
        self.sched = Scheduler()
        self.box = Box(self.sched)
        self.box.instance_uuid = str(uuid.uuid4())
        self.box.cfg = {"replication_timeout": 0.1}
        self.workdir = workdir
        self.applier = Applier(self.sched, self.box, master_uri)

    def run(self, fn, timeout: float = 60.0):
        outcome = {}

        def main():
            try:
                outcome["result"] = fn()
            finally:
                self.sched.stop()

        def expired():
            outcome["timeout"] = True
            self.sched.stop()
        timer = self.sched.call_later(timeout, expired)
        self.sched.run(main)
        timer.cancel()
        assert not outcome.get("timeout"), "timed out"
        return outcome.get("result")

    def close(self) -> None:
        def stop():
            self.applier.applier_stop()
            if self.box.wal is not None:
                self.box.wal.stop()
        self.run(stop)
        self.sched.shutdown(timeout=2.0)
        self.sched.close()

    # -- steps run inside the loop

    def bootstrap(self) -> None:
        applier = self.applier
        applier.applier_start()
        applier.applier_resume_to_state(S.CONNECTED)
        for state in (S.READY, S.INITIAL_JOIN, S.FINAL_JOIN, S.JOINED, S.READY):
            applier.applier_resume_to_state(state)
        self.box.wal = WalWriter(self.sched, str(self.workdir), self.box.instance_uuid,
                                 self.box.replicaset.vclock, instance_id=self.box.instance_id)

    def wait(self, predicate, what: str, timeout: float = 20.0):
        deadline = self.sched.clock() + timeout
        while True:
            result = predicate()
            if result:
                return result
            assert self.sched.clock() < deadline, f"timed out waiting for {what}"
            self.sched.sleep(0.02)

    def eval(self, node, code: str, *args):
        """Ask the master without blocking the loop (the connector blocks)."""
        return run_in_thread(self.sched, node.eval, code, *args, timeout=30)

    def rows(self, space: str) -> list:
        return [list(t) for t in self.box.engine.space(space).select()]


def master_rows(node, space: str) -> list:
    return [list(t) for t in node.eval(f"return box.space.{space}:select()")]


def test_join_follow_sync_restart_and_master_restart(tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add("tarantool", "master", {"replication_timeout": 0.1}).start()
        master.eval(MASTER_SETUP)
        replica = Replica(tmp_path / "replica", master.rep_uri)
        (tmp_path / "replica").mkdir()
        states = []
        replica.applier.on_state.add(lambda a: states.append(a.state.value))
        try:
            def joined():
                replica.bootstrap()
                return replica.rows("test"), replica.box.replicaset.vclock.copy()
            rows, vclock = replica.run(joined)
            assert rows == master_rows(master, "test")
            assert vclock == VClock(master.vclock())
            assert replica.box.instance_id == 2

            def follow():
                applier = replica.applier
                applier.applier_resume()
                replica.wait(lambda: applier.state == S.FOLLOW, "follow")
                replica.eval(master, "box.space.test:replace{7, 'after join'}"
                                     " box.space.test:delete{2}")
                # a synchronous space commits only when our ACK reaches the master
                replica.eval(master, "box.cfg{replication_synchro_quorum = 2,"
                                     " replication_synchro_timeout = 10}"
                                     " box.space.sync:insert{1, 'quorum'}")
                master_vclock = VClock(master.vclock())
                replica.wait(lambda: replica.box.replicaset.vclock == master_vclock,
                             "equal vclocks")
                # ACKs go out as rows are written: wait for the one covering the last
                def last_ack():
                    acked = replica.eval(
                        master, "return box.info.replication[2].downstream.vclock")
                    acked = {int(k): v for k, v in (acked or {}).items()}
                    return acked if VClock(acked) == master_vclock else None
                return replica.wait(last_ack, "the ACK of the last row")
            acked = replica.run(follow)
            assert replica.rows("test") == master_rows(master, "test")
            assert replica.rows("sync") == [[1, "quorum"]]
            assert acked == master.vclock()

            # stop, write on the master meanwhile, restart: it resubscribes and catches up
            def restart():
                applier = replica.applier
                applier.applier_stop()
                replica.eval(master, "box.cfg{replication_synchro_quorum = 1}"
                                     " for i = 2001, 2100 do box.space.test:insert{i} end")
                applier.restart()
                replica.wait(lambda: replica.box.replicaset.vclock == VClock(master.vclock()),
                             "catch-up after restart")
                # (sync turns into follow once the applier sees it is caught up: on a
                # loaded machine that may come a moment after the rows)
                return replica.wait(lambda: applier.state == S.FOLLOW and applier.state,
                                    "follow after restart")
            assert replica.run(restart) == S.FOLLOW
            assert replica.rows("test") == master_rows(master, "test")

            # the master dies and comes back: disconnected, then following again
            def master_restart():
                applier = replica.applier
                run_in_thread(replica.sched, master.kill, timeout=30)
                replica.wait(lambda: applier.state in (S.DISCONNECTED, S.LOADING),
                             "disconnected")
                run_in_thread(replica.sched, master.start, timeout=60)
                # it answers before its box.cfg has returned (and made it writable)
                replica.wait(lambda: replica.eval(master, "return box.info.ro") is False,
                             "the master writable again")
                replica.eval(master, "box.space.test:replace{9999, 'back'}")
                replica.wait(lambda: replica.box.replicaset.vclock == VClock(master.vclock()),
                             "catch-up after the master's restart")
                replica.wait(lambda: applier.state == S.FOLLOW, "follow")
            replica.run(master_restart)
            assert replica.rows("test") == master_rows(master, "test")
        finally:
            replica.close()
    assert states[:10] == ["connect", "connected", "auth", "ready", "initial_join",
                           "final_join", "joined", "ready", "sync", "follow"]
    assert "disconnected" in states


def test_tarantool_relay_frames_take_the_whole_frame_reader(tmp_path, monkeypatch):
    """The INSERT/REPLACE frames a real 2.6.0 relay sends past LSN 255 — single-row
    transactions and rows of 100-row ones — are read by decode_relay_put_frame,
    not left to the slower decoders, and the data arrives as the master has it.

    How the frames happened to be buffered when the replica read them is up to the
    machine's load (a frame read alone takes the strict way), so the claim is made
    on the bytes the relay sent, recorded on the way in and then fed to the reader
    all buffered: every such frame is taken whole, and gives what the strict
    decoder gives."""
    received: dict[int, bytearray] = {}     # per frame reader: the bytes it read
    fill = protocol.FrameReader.fill

    def recording_fill(self, timeout=None):
        before = self.bytes_read
        ok = fill(self, timeout)
        if ok:
            got = self.bytes_read - before
            received.setdefault(id(self), bytearray()).extend(self._buf[-got:])
        return ok
    monkeypatch.setattr(protocol.FrameReader, "fill", recording_fill)
    with Cluster(tmp_path) as cluster:
        master = cluster.add("tarantool", "master", {"replication_timeout": 0.1}).start()
        master.eval(MASTER_SETUP)
        replica = Replica(tmp_path / "replica", master.rep_uri)
        (tmp_path / "replica").mkdir()
        try:
            def follow_writes():
                replica.bootstrap()
                replica.applier.applier_resume()
                replica.wait(lambda: replica.applier.state == S.FOLLOW, "follow")
                replica.eval(master, """
                    for i = 1, 300 do box.space.test:replace{10000 + i, 'x'} end
                    for t = 1, 3 do
                        box.begin()
                        for i = 1, 100 do box.space.test:insert{20000 + t * 1000 + i} end
                        box.commit()
                    end""")
                master_vclock = VClock(master.vclock())
                replica.wait(lambda: replica.box.replicaset.vclock == master_vclock,
                             "the writes")
                return replica.rows("test")
            assert replica.run(follow_writes) == master_rows(master, "test")
            box = replica.box
        finally:
            replica.close()
    # Each connection's stream (one, or more if the applier reconnected), cut into
    # frames and strictly decoded; the wide-LSN puts among them.
    streams_read = [(bytes(stream), frames_of(stream)) for stream in received.values()]
    puts = {(n, start): row for n, (_, frames) in enumerate(streams_read)
            for start, _, row in frames
            if row.type in (IprotoType.INSERT, IprotoType.REPLACE) and row.lsn > 255}
    single = {row.lsn for row in puts.values() if row.tsn == row.lsn and row.is_commit}
    inside = {row.lsn for row in puts.values() if not (row.tsn == row.lsn and row.is_commit)}
    assert len(single) >= 300 and len(inside) == 300
    # Each of them alone: read whole, as the strict decoder reads it.
    for (n, start), row in puts.items():
        quick = decode_relay_put_frame(streams_read[n][0], start, ext_hook)
        assert quick is not None, row
        taken, request, _ = quick
        assert (taken.type, taken.replica_id, taken.lsn, taken.tsn, taken.is_commit,
                taken.timestamp) == (row.type, row.replica_id, row.lsn, row.tsn,
                                     row.is_commit, row.timestamp)
        assert request.tuple == decode_dml_body(row.body, row.type).tuple
    # All of them buffered at once, as a replica that fell behind reads them: the
    # reader's take_frames hands every one to decode_relay_put_frame, and nothing
    # to the slower decoders. (It stops before any other frame — JOIN markers,
    # heartbeats, the SUBSCRIBE reply, none inside a transaction — and those are
    # stepped over here, as the reader reads them the strict way.)
    taken_at = set()
    read_whole = streams.decode_relay_put_frame
    for n, (stream, frames) in enumerate(streams_read):
        def counting(buf, at, hook=None):
            quick = read_whole(buf, at, hook)
            if quick is not None:
                taken_at.add((n, at))
            return quick
        monkeypatch.setattr(streams, "decode_relay_put_frame", counting)
        assembler = streams.TxAssembler(box)
        ends = {start: stop for start, stop, _ in frames}
        pos = 0
        while pos in ends:
            end, _ = assembler.take_frames(stream, pos)
            while assembler.pop() is not None:
                pass
            if end == pos:                       # not a frame take_frames takes
                assert (n, pos) not in puts and not assembler.rows
                end = ends[pos]
            pos = end
    assert taken_at >= set(puts)


def frames_of(stream: bytes | bytearray) -> list:
    """(start, stop, row) of each whole frame of a relay's byte stream (one that a
    broken connection cut short ends before its last, partial frame)."""
    frames, pos = [], 0
    while pos + 5 <= len(stream):
        assert stream[pos] == 0xCE           # the length prefix relays write
        stop = pos + 5 + struct.unpack_from(">I", stream, pos + 1)[0]
        if stop > len(stream):
            break
        frames.append((pos, stop, decode_row(bytes(stream[pos + 5:stop]), exact=True)[0]))
        pos = stop
    return frames
