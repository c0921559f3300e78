"""Snapshots, box.snapshot() with writes going on, retention, gc info, the daemon, and
the loop running while a million-row snapshot is written."""
from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import msgpack
import pytest
import yaml

from spindle.core import log
from spindle.core.fiber import Scheduler
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import unpack
from spindle.core.iproto.request import decode_dml_body, encode_dml_body
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import decode_file
from spindle.core.vclock import VClock
from spindle.core.wal.checkpoint import Checkpointer, CheckpointSchedule, write_snapshot, \
    write_snapshot_file
from spindle.core.wal.gc import (
    GarbageCollector, gc_consumer_advance, gc_consumer_register, gc_consumer_unregister,
)
from spindle.core.wal.recovery import recover
from spindle.core.wal.writer import WalWriter
from spindle.core.xlog import files as xlog_files
from spindle.core.xlog.files import list_files, read_meta

pytestmark = pytest.mark.usefixtures("collector_paused")   # see tests/conftest.py

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
UUID1 = "11111111-1111-4111-8111-111111111111"
SPACE = 512


@pytest.fixture
def logs():
    lines: list[str] = []
    previous = log.set_sink(lines.append)
    yield lines
    log.set_sink(previous)


class CounterEngine:
    """A stand-in for memtx: counters changed by UPDATE '+' rows. Increments are not
    idempotent, so a snapshot that holds a change twice or misses one is caught."""

    def __init__(self):
        self.data: dict[int, int] = {}
        self.views = 0

    def add(self, wal: WalWriter, key: int, delta: int) -> None:
        self.data[key] = self.data.get(key, 0) + delta     # in memory before the WAL
        row = XRow(type=IprotoType.UPDATE, body=encode_dml_body(
            IprotoType.UPDATE, SPACE, key=[key], ops=[["+", 2, delta]]))
        try:
            wal.write([row])
        except ClientError:
            self.data[key] -= delta
            raise

    def read_view(self):
        self.views += 1
        frozen = sorted(self.data.items())     # the copy is the read view
        return ((SPACE, msgpack.packb([key, value])) for key, value in frozen)

    @staticmethod
    def replay(directory: Path) -> tuple[dict[int, int], object]:
        data: dict[int, int] = {}

        def snap(row: XRow) -> None:
            key, value = unpack(row.body)[0x21]
            data[key] = value

        def apply(rows: list[XRow]) -> None:
            for row in rows:
                request = decode_dml_body(row.body, row.type)
                key = request.key[0]
                data[key] = data.get(key, 0) + request.ops[0][2]

        result = recover(str(directory), str(directory), snap, apply)
        return data, result


def make_setup(sched, directory: Path, checkpoint_count: int = 2, interval: float = 0):
    wal = WalWriter(sched, str(directory), UUID1, VClock({1: 0}), instance_id=1)
    engine = CounterEngine()
    gc = GarbageCollector(str(directory), wal, checkpoint_count=checkpoint_count, sched=sched)
    checkpointer = Checkpointer(sched, wal, str(directory), UUID1, engine.read_view, gc,
                                checkpoint_interval=interval, rng=random.Random(7),
                                snapshot_kwargs={"fsync": False})
    return wal, engine, gc, checkpointer


# --------------------------------------------------------------------- the file

def test_snapshot_rows_are_what_2_6_0_writes(tmp_path):
    fixture = FIXTURES / "master" / "00000000000000000025.snap"
    original = decode_file(fixture.read_bytes())
    items = [(unpack(r.body)[0x10], msgpack.packb(unpack(r.body)[0x21], use_bin_type=True))
             for r in original.rows]
    info = write_snapshot_file(str(tmp_path / "a"), UUID1, VClock({1: 25}), items,
                               timestamp=original.rows[0].timestamp)
    ours = Path(info.path).read_bytes()
    assert info.rows == 528 and Path(info.path).name == "00000000000000000025.snap"
    assert ours[:original.header_size] == fixture.read_bytes()[:original.header_size]
    assert decode_file(ours).blocks[0].data == original.blocks[0].data   # row for row
    # XRows work too (their body and group are used, LSN and time are the file's)
    again = write_snapshot_file(str(tmp_path / "b"), UUID1, VClock({1: 25}), original.rows,
                                timestamp=original.rows[0].timestamp)
    assert Path(again.path).read_bytes() == ours
    assert not list(Path(info.path).parent.glob("*.inprogress"))


def test_snapshot_of_a_failing_read_view_leaves_nothing(tmp_path):
    def broken():
        yield (SPACE, msgpack.packb([1]))
        raise RuntimeError("read view broke")

    with pytest.raises(RuntimeError):
        write_snapshot_file(str(tmp_path), UUID1, VClock({1: 1}), broken())
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ box.snapshot()

def test_snapshot_is_consistent_while_writes_go_on(tmp_path, logs):
    sched = Scheduler()
    wal, engine, gc, checkpointer = make_setup(sched, tmp_path, checkpoint_count=10)
    rng = random.Random(1)
    clocks = []

    def client(n):
        # Writes must still be going on while the checkpoints are taken: a write
        # into the page cache is quick (tx writes it when the WAL thread is idle),
        # so the clients pause now and then.
        for _ in range(150):
            engine.add(wal, rng.randrange(40), rng.randrange(1, 9))
            if rng.random() < 0.3:
                sched.sleep(0.001)

    def main():
        fibers = [sched.spawn(client, n) for n in range(6)]
        for _ in range(4):
            sched.sleep(0.002)
            clocks.append(checkpointer.checkpoint())
        while any(f.status != "dead" for f in fibers):
            sched.sleep(0.001)
        wal.stop()

    sched.run(main)
    sched.close()
    assert len({c.signature for c in clocks}) == len(clocks)   # writes went on in between
    assert clocks[-1].signature < 900
    for clock in clocks:
        snap = tmp_path / f"{clock.signature:020d}.snap"
        assert read_meta(str(snap)).vclock == clock
    data, result = CounterEngine.replay(tmp_path)
    assert result.last_checkpoint_vclock == clocks[-1]
    assert result.vclock == VClock({1: 900})
    assert data == engine.data
    assert sum(1 for line in logs if "saving snapshot `" in line) == len(clocks)


def test_snapshot_without_new_rows_writes_nothing(tmp_path, logs):
    sched = Scheduler()
    wal, engine, gc, checkpointer = make_setup(sched, tmp_path)

    def main():
        engine.add(wal, 1, 1)
        first = checkpointer.checkpoint()
        second = checkpointer.checkpoint()
        assert first == second == VClock({1: 1})
        wal.stop()

    sched.run(main)
    sched.close()
    assert engine.views == 2
    assert sum(1 for line in logs if "saving snapshot" in line) == 1


def test_second_snapshot_while_one_is_running_is_refused(tmp_path):
    sched = Scheduler()
    wal, engine, gc, checkpointer = make_setup(sched, tmp_path)
    gate = threading.Event()
    outcome = {}

    def slow_view():
        def rows():
            gate.wait(10)
            yield (SPACE, msgpack.packb([1, 1]))
        return rows()

    checkpointer.read_view = slow_view

    def first():
        outcome["first"] = checkpointer.checkpoint()

    def main():
        engine.add(wal, 1, 1)
        fiber = sched.spawn(first)
        assert gc.info()["checkpoint_is_in_progress"] is True
        with pytest.raises(ClientError) as err:
            checkpointer.checkpoint()
        outcome["error"] = err.value
        gate.set()
        while fiber.status != "dead":
            sched.sleep(0.001)
        assert gc.info()["checkpoint_is_in_progress"] is False
        wal.stop()

    sched.run(main)
    sched.close()
    assert outcome["error"].code == ErrorCode.ER_CHECKPOINT_IN_PROGRESS
    assert str(outcome["error"]) == "Snapshot is already in progress"
    assert outcome["first"] == VClock({1: 1})


# ------------------------------------------------------------------ retention

def test_retention_keeps_checkpoint_count_checkpoints_and_their_xlogs(tmp_path, logs):
    sched = Scheduler()
    wal, engine, gc, checkpointer = make_setup(sched, tmp_path, checkpoint_count=2)
    clocks = []

    def main():
        for round_ in range(4):
            for key in range(3):
                engine.add(wal, key, 1)
            clocks.append(checkpointer.checkpoint())
        engine.add(wal, 0, 1)
        wal.stop()

    sched.run(main)
    sched.close()
    assert [c.signature for c in clocks] == [3, 6, 9, 12]
    assert [f.signature for f in list_files(str(tmp_path), ".snap")] == [9, 12]
    # xlogs: the one covering {1: 9} onwards (the xlog written after the checkpoint at
    # 9 is named …9), plus the one after the last checkpoint and the empty last one
    assert [f.signature for f in list_files(str(tmp_path))] == [9, 12, 13]
    info = gc.info()
    assert [c["signature"] for c in info["checkpoints"]] == [9, 12]
    assert info["vclock"] == {1: 9} and info["signature"] == 9
    assert sum(1 for line in logs if "I> removed " in line) == 2 + 3
    data, result = CounterEngine.replay(tmp_path)
    assert data == engine.data and result.vclock == VClock({1: 13})


def test_consumer_holds_xlogs_until_it_advances(tmp_path):
    sched = Scheduler()
    wal, engine, gc, checkpointer = make_setup(sched, tmp_path, checkpoint_count=1)

    def main():
        engine.add(wal, 1, 1)
        consumer = gc_consumer_register(gc, VClock({1: 1}), "replica 2222")
        for _ in range(3):
            engine.add(wal, 1, 1)
            checkpointer.checkpoint()
        assert [f.signature for f in list_files(str(tmp_path))] == [0, 2, 3]
        assert [f.signature for f in list_files(str(tmp_path), ".snap")] == [4]
        assert gc.info()["consumers"] == [
            {"name": "replica 2222", "vclock": {1: 1}, "signature": 1}]
        gc_consumer_advance(gc, consumer, VClock({1: 3}))
        gc.wait_cleanup()
        assert [f.signature for f in list_files(str(tmp_path))] == [3]
        gc_consumer_unregister(gc, consumer)
        gc.wait_cleanup()
        assert gc.info()["vclock"] == {1: 4}
        wal.stop()

    sched.run(main)
    sched.close()


def test_gc_info_has_the_shape_of_2_6_0(tmp_path):
    """master-gc-after-snapshot.yaml: two checkpoints kept, a replica at its join vclock."""
    expected = yaml.safe_load(
        (FIXTURES / "box_info" / "master-gc-after-snapshot.yaml").read_text())[0]
    gc = GarbageCollector(str(tmp_path), None, checkpoint_count=2)
    gc.load_checkpoints([VClock(), VClock({1: 25})])
    gc_consumer_register(gc, VClock({1: 14}), "replica 22222222-2222-4222-8222-222222222222")
    gc.run_cleanup()
    assert gc.info() == expected


# ---------------------------------------------------------------- the daemon

def test_schedule_follows_checkpoint_schedule_c():
    schedule = CheckpointSchedule(random.Random(3))
    schedule.configure(100.0, 60.0)
    first = schedule.timeout(100.0)
    assert 60.0 <= first < 120.0
    start = 100.0 + first
    assert schedule.timeout(start + 1) == pytest.approx(59.0)
    assert schedule.timeout(start + 60 + 5) == pytest.approx(55.0)
    schedule.configure(0.0, 0)
    assert schedule.timeout(5.0) == 0.0       # periodic checkpoints off


def test_daemon_checkpoints_on_schedule(sched, tmp_path, logs):
    wal, engine, gc, checkpointer = make_setup(sched, tmp_path, interval=10.0)
    checkpointer.start_daemon()

    def main():
        for step in range(8):
            engine.add(wal, step, 1)
            sched.sleep(5)       # fake time: 40 s in all
            while checkpointer.in_progress:
                # the snapshot thread runs in real time; let it finish before the
                # fake clock jumps again
                sched.sleep(0)
                time.sleep(0.001)
        checkpointer.stop_daemon()
        wal.stop()

    sched.run(main)
    snaps = [f.signature for f in list_files(str(tmp_path), ".snap")]
    assert 2 <= len(snaps) <= 3
    assert any("I> scheduled next checkpoint for " in line for line in logs)


# ------------------------------------------------- the loop during a snapshot

def test_million_row_snapshot_keeps_the_loop_running(tmp_path, monkeypatch):
    """1,000,000 rows encoded and written in the snapshot thread while a tx fiber
    ticks: the fiber runs again and again while the blocks are written. Counted in
    blocks written at each tick, not in milliseconds between ticks (a loaded machine
    deschedules any thread for as long as it likes)."""
    sched = Scheduler()
    state: dict = {"blocks": 0, "seen at ticks": []}
    # (the snapshot's blocks are the xlog writer's)
    encode_block = xlog_files.encode_block

    def counted_encode_block(data, **kwargs):
        state["blocks"] += 1
        return encode_block(data, **kwargs)

    monkeypatch.setattr(xlog_files, "encode_block", counted_encode_block)

    def rows():
        state["rows made in"] = threading.current_thread().name
        pack = msgpack.packb
        for i in range(1_000_000):
            yield (SPACE, pack([i, "value", i * 3]))

    def ticker():
        while not state.get("done"):
            state["seen at ticks"].append(state["blocks"])
            sched.sleep(0.001)

    def main():
        sched.spawn(ticker, name="ticker")
        state["info"] = write_snapshot(str(tmp_path), UUID1, VClock({1: 1}), rows(),
                                       sched=sched, fsync=False)
        state["done"] = True

    sched.run(main)
    sched.close()
    total = state["blocks"]
    assert state["info"].rows == 1_000_000
    assert state["rows made in"] == "snapshot/101/main"
    assert total > 100
    during = {blocks for blocks in state["seen at ticks"] if 0 < blocks < total}
    assert len(during) >= 5, (total, sorted(during))
    # and the file is a valid snapshot with every row
    result = recover(str(tmp_path), str(tmp_path), lambda r: None, lambda t: None)
    assert result.snapshot_rows == 1_000_000
