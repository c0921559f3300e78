"""box.snapshot() of a million rows keeps the loop serving: the read view copies
references in tx, the rows are encoded and written in the snapshot thread, and tx
fibers run between the blocks that thread writes.

Nothing here is timed by the wall clock (a loaded machine deschedules any thread for
as long as it likes): the costs compared are CPU times of the threads that paid them
(time.thread_time), and "the loop kept serving" is counted in blocks the snapshot
thread had written each time a tx fiber ran."""
from __future__ import annotations

import threading
import time

import pytest

from spindle.core.instance.box import Box
from spindle.core.box.cfg import defaults
from spindle.core.fiber import Scheduler
from spindle.core.wal import checkpoint
from spindle.core.xlog import files as xlog_files
from spindle.core.xlog.files import XlogReader, list_files

pytestmark = pytest.mark.usefixtures("collector_paused")   # see tests/conftest.py

ROWS = 1_000_000


def test_million_row_snapshot_is_written_outside_tx_while_fibers_run(tmp_path, monkeypatch):
    sched = Scheduler()
    seen = {"blocks": 0, "seen at ticks": []}
    # (the snapshot's blocks are the xlog writer's)
    write_snapshot_file, encode_block = checkpoint.write_snapshot_file, xlog_files.encode_block

    def counted_encode_block(data, **kwargs):
        seen["blocks"] += 1
        return encode_block(data, **kwargs)

    def timed_write(*args, **kwargs):
        seen["writer"] = threading.current_thread().name
        started = time.thread_time()
        try:
            return write_snapshot_file(*args, **kwargs)
        finally:
            seen["writer cpu"] = time.thread_time() - started

    monkeypatch.setattr(xlog_files, "encode_block", counted_encode_block)
    monkeypatch.setattr(checkpoint, "write_snapshot_file", timed_write)

    def main():
        box = Box(sched)
        cfg = defaults()
        cfg.update(work_dir=str(tmp_path), wal_mode="none")
        box.start(cfg)
        engine = box.engine
        engine.space("_schema").update(["max_id"], [["+", 2, 1]])
        engine.space("_space").insert([512, 1, "big", "memtx", 0, {}, []])
        engine.space("_index").insert([512, 0, "pk", "tree", {"unique": True},
                                       [[0, "unsigned"]]])
        pk = engine.space("big").primary
        for i in range(ROWS):                  # bulk fill below the DML layer
            tup = (i, "payload")
            pk._store(pk._entry_key(tup), tup)
            if i % 10_000 == 0:
                sched.sleep(0)
        read_view = box.checkpointer.read_view

        def timed_read_view():
            seen["read view thread"] = threading.current_thread().name
            started = time.thread_time()
            try:
                return read_view()
            finally:
                seen["read view cpu"] = time.thread_time() - started

        box.checkpointer.read_view = timed_read_view

        def ticker():
            while True:
                seen["seen at ticks"].append(seen["blocks"])
                sched.sleep(0.001)

        ticking = sched.spawn(ticker)
        box.snapshot()
        ticking.cancel()
        box.stop()

    sched.run(main)
    sched.shutdown()
    sched.close()
    total = seen["blocks"]
    # tx made the read view; every row was encoded in the snapshot thread ...
    assert seen["read view thread"] == threading.main_thread().name
    assert seen["writer"] == "snapshot/101/main"
    assert total > 100
    # ... and the read view's share of the work is small: a copy of references
    # (CPU time of tx for it against the snapshot thread's for the rest).
    assert seen["read view cpu"] < seen["writer cpu"] / 10, seen
    # A tx fiber ran again and again while the blocks were being written: it saw
    # the count of written blocks at many values between the first and the last.
    during = {blocks for blocks in seen["seen at ticks"] if 0 < blocks < total}
    assert len(during) >= 5, (total, sorted(during))
    newest = list_files(str(tmp_path), ".snap")[-1]
    with XlogReader(newest.path) as reader:
        count = sum(1 for row in reader.rows())
    assert count > ROWS
