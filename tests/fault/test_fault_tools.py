"""The fault suite's own tools, without processes: the seeded schedule, the xlog
damage (a torn tail reads as a torn tail, a flipped byte as a corrupt block), the
LSN comparison (it finds a hole, an extra row, a changed row, and accepts rows a
node got by JOIN into its snapshot), and the pattern of 2.6.0's gh-5185 (a ROLLBACK
of a confirmed LSN) told apart from an ordinary rollback."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.request import encode_dml_body, synchro_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import FIXHEADER_SIZE, CorruptBlock, XlogMeta, decode_file
from spindle.core.vclock import VClock
from spindle.core.xlog.files import SyncPolicy, XlogReader, XlogWriter

from .invariants import lsn_problems
from .known_bugs import explained_by_gh_5185, gh_5185_rows
from . import nemesis as nemesis_module
from .nemesis import ALL_LINKS, Nemesis, flip_byte, make_schedule, tear_tail

UUID = "11111111-1111-4111-8111-111111111111"


def row(lsn: int, replica_id: int = 1, value: str = "v") -> XRow:
    return XRow(type=IprotoType.INSERT, replica_id=replica_id, lsn=lsn,
                timestamp=1000.0 + lsn,
                body=encode_dml_body(IprotoType.INSERT, 512, tuple=[lsn, value]))


def write_xlog(workdir: Path, rows_per_tx: list[list[XRow]], start: dict | None = None) -> Path:
    """One xlog file, each transaction in its own block (one write per tx)."""
    vclock = VClock(start or {})
    writer = XlogWriter.create(str(workdir), XlogMeta("XLOG", UUID, vclock),
                               sync=SyncPolicy.NEVER)
    for tx in rows_per_tx:
        writer.write_tx(tx)
    writer.close()
    return Path(writer.path)


def write_snapshot(workdir: Path, vclock: dict) -> None:
    writer = XlogWriter.create_snapshot(str(workdir), UUID, VClock(vclock),
                                        sync=SyncPolicy.NEVER)
    writer.close()


# ------------------------------------------------------------------ schedule

def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    targets = {"cut": ["r1", "r2", ALL_LINKS], "kill": ["r1"], "delay": ["r2"]}
    first = make_schedule(7, 10, targets)
    assert first == make_schedule(7, 10, targets)
    assert first != make_schedule(8, 10, targets)
    assert len(first) >= 3
    for event, following in zip(first, first[1:]):
        assert event.at + event.duration < following.at        # one at a time
    assert first[-1].at + first[-1].duration <= 10
    assert all(0.005 <= e.param <= 0.1 for e in first if e.fault == "delay")
    assert {e.fault for e in make_schedule(7, 60, targets)} == {"cut", "kill", "delay"}


# -------------------------------------------------------------------- damage

class _FakeClock:
    """time.monotonic for the nemesis: each wait of the schedule's event moves it
    by the wait's length; `during_wait` runs at each wait (a restart recovering)."""

    def __init__(self, during_wait):
        self.now = 0.0
        self.during_wait = during_wait

    def monotonic(self) -> float:
        return self.now

    def wait(self, timeout: float) -> bool:
        self.now += timeout
        return self.during_wait(self.now)


def test_the_schedule_bound_leaves_out_the_time_restarted_nodes_recover(monkeypatch):
    nemesis = Nemesis({}, {}, [])
    # 30 s of recovery waits by t = 30, the schedule done at t = 35: finished in a
    # bound of 10 s of its own
    def during_wait(now: float) -> bool:
        nemesis.recovery_waits = min(now, 30.0)
        return now >= 35.0
    clock = _FakeClock(during_wait)
    monkeypatch.setattr(nemesis_module.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(nemesis._finished, "wait", clock.wait)
    assert nemesis.wait_finished(10.0)
    # without the recovery waits the same schedule overruns the bound
    nemesis = Nemesis({}, {}, [])
    clock = _FakeClock(lambda now: now >= 35.0)
    monkeypatch.setattr(nemesis_module.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(nemesis._finished, "wait", clock.wait)
    assert not nemesis.wait_finished(10.0)
    assert clock.now == 11.0


def test_a_torn_tail_is_cut_strictly_inside_the_last_block(tmp_path):
    path = write_xlog(tmp_path, [[row(i)] for i in range(1, 6)])
    blocks = decode_file(path.read_bytes()).blocks
    for seed in range(20):
        copy = tmp_path / f"copy{seed}"
        copy.mkdir()
        (copy / path.name).write_bytes(path.read_bytes())
        damage = tear_tail(copy, random.Random(seed))
        assert damage.block == (blocks[-1].offset, blocks[-1].size)
        assert blocks[-1].offset < damage.offset < blocks[-1].offset + blocks[-1].size
        assert damage.lsns == (5, 5)
        with XlogReader(str(copy / path.name)) as reader:
            assert [r.lsn for r in reader.rows()] == [1, 2, 3, 4]
            assert reader.torn_tail is not None and not reader.eof_marker


def test_a_flipped_byte_makes_the_last_block_corrupt(tmp_path):
    path = write_xlog(tmp_path, [[row(i)] for i in range(1, 4)] + [[row(4), row(5)]])
    last = decode_file(path.read_bytes()).blocks[-1]
    damage = flip_byte(tmp_path, random.Random(3))
    assert last.offset + FIXHEADER_SIZE <= damage.offset < last.offset + last.size
    assert damage.old != damage.new and damage.lsns == (4, 5)
    with XlogReader(str(path)) as reader, pytest.raises(CorruptBlock, match="checksum"):
        list(reader.rows())
    with XlogReader(str(path), force_recovery=True) as reader:
        assert [r.lsn for r in reader.rows()] == [1, 2, 3]
        assert [e.offset for e in reader.skipped] == [last.offset]


def test_the_last_block_is_found_past_a_block_damaged_before(tmp_path):
    """2.6.0 started with force_recovery writes on after a block it skipped, in the
    same file: a second flip or tear of that file must find its last whole block
    (the matrix's 2.6.0 fault runs stopped on CorruptBlock here)."""
    path = write_xlog(tmp_path, [[row(i)] for i in range(1, 4)])
    middle = decode_file(path.read_bytes()).blocks[1]
    data = bytearray(path.read_bytes())
    data[middle.offset + FIXHEADER_SIZE] ^= 0xFF
    path.write_bytes(bytes(data))
    damage = tear_tail(tmp_path, random.Random(1))
    assert damage.lsns == (3, 3) and damage.offset > middle.offset + middle.size


def test_no_block_no_damage(tmp_path):
    write_xlog(tmp_path, [])
    assert tear_tail(tmp_path, random.Random(1)) is None
    assert flip_byte(tmp_path, random.Random(1)) is None


# ------------------------------------------------------------ LSN comparison

def node_dir(tmp_path: Path, name: str, txs: list[list[XRow]], snap: dict | None = None,
             start: dict | None = None) -> Path:
    workdir = tmp_path / name
    workdir.mkdir()
    write_snapshot(workdir, snap or {})
    write_xlog(workdir, txs, start or snap)
    return workdir


def test_equal_logs_have_no_problem(tmp_path):
    txs = [[row(1)], [row(2), row(3)], [row(4)]]
    logs = {"master": (1, node_dir(tmp_path, "master", txs)),
            "r1": (2, node_dir(tmp_path, "r1", txs))}
    assert lsn_problems(logs) == ([], {"master": 0, "r1": 0})


def test_a_hole_an_extra_row_and_a_changed_row_are_found(tmp_path):
    master = [[row(i)] for i in range(1, 9)]
    replica = [[row(i)] for i in (1, 2, 3, 6, 7)] + [[row(8, value="other")], [row(9)]]
    problems, holes = lsn_problems({"master": (1, node_dir(tmp_path, "master", master)),
                                    "r1": (2, node_dir(tmp_path, "r1", replica))})
    assert holes == {"master": 0, "r1": 2}
    assert any("2 LSNs of master (id 1) missing" in p and "4-5" in p for p in problems)
    assert any("that master never wrote: LSN 9" in p for p in problems)
    assert any("differ from master's: LSN 8" in p for p in problems)


def test_rows_below_a_snapshot_came_by_join(tmp_path):
    master = [[row(i)] for i in range(1, 9)]
    replica = [[row(i)] for i in range(6, 9)]          # joined at {1: 5}
    problems, holes = lsn_problems({
        "master": (1, node_dir(tmp_path, "master", master)),
        "r1": (2, node_dir(tmp_path, "r1", replica, snap={1: 5}))})
    assert problems == [] and holes["r1"] == 0


def test_master_master_compares_each_authors_rows(tmp_path):
    a = [[row(1, 1)], [row(1, 2)], [row(2, 1)]]
    b = [[row(1, 1)], [row(1, 2)]]                   # lacks a's LSN 2
    problems, holes = lsn_problems({"a": (1, node_dir(tmp_path, "a", a)),
                                    "b": (2, node_dir(tmp_path, "b", b))})
    assert holes == {"a": 0, "b": 1}
    assert problems == ["b: 1 LSNs of a (id 1) missing from its xlogs: 2"]


# ------------------------------------------------------------- gh-5185 pattern

def synchro(kind: int, lsn: int, target: int) -> list[XRow]:
    return [synchro_row(kind, 1, target, replica_id=1, lsn=lsn, timestamp=1000.0 + lsn)]


def test_a_rollback_after_the_confirm_of_a_row_is_gh_5185(tmp_path):
    # 2.6.0: rows 1-2 confirmed (CONFIRM at 3), then a timed-out waiter's ROLLBACK 0
    txs = [[row(1)], [row(2)], synchro(IprotoType.CONFIRM, 3, 2),
           synchro(IprotoType.ROLLBACK, 4, 0)]
    pattern = gh_5185_rows(node_dir(tmp_path, "master", txs), 1)
    assert pattern == {(512, 1): (1, "v"), (512, 2): (2, "v")}
    # the replica holds the row and the master's memory does not: explained
    assert explained_by_gh_5185(pattern, 512, 2, None, (2, "v"))
    # anything else is not
    assert not explained_by_gh_5185(pattern, 512, 2, (2, "v"), None)
    assert not explained_by_gh_5185(pattern, 512, 2, None, (2, "other"))
    assert not explained_by_gh_5185(pattern, 512, 3, None, (3, "v"))


def test_an_ordinary_rollback_is_not_gh_5185(tmp_path):
    # row 1 confirmed; row 2 rolled back by its own ROLLBACK before any CONFIRM of it;
    # a CONFIRM after the ROLLBACK does not make it a ROLLBACK of a confirmed row
    txs = [[row(1)], synchro(IprotoType.CONFIRM, 2, 1), [row(3)],
           synchro(IprotoType.ROLLBACK, 4, 3), [row(5)], synchro(IprotoType.CONFIRM, 6, 5)]
    assert gh_5185_rows(node_dir(tmp_path, "master", txs), 1) == {}
