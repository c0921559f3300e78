"""box.snapshot() of a million rows keeps the loop serving: the read view copies
references in tx, the rows are encoded and written in the snapshot thread, and the
stall watchdog stays quiet."""
from __future__ import annotations

import pytest

from spindle.core.box.box import Box
from spindle.core.box.cfg import defaults
from spindle.core.fiber import Scheduler
from spindle.core.xlog.files import XlogReader, list_files

pytestmark = pytest.mark.usefixtures("collector_paused")   # see tests/conftest.py

ROWS = 1_000_000


def test_million_row_snapshot_keeps_the_watchdog_quiet(tmp_path):
    sched = Scheduler()
    seen = {}

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
        sched.stalls.clear()
        ticks = []

        def ticker():
            while True:
                ticks.append(sched.clock())
                sched.sleep(0.01)

        ticking = sched.spawn(ticker)
        box.snapshot()
        ticking.cancel()
        seen["stalls"] = list(sched.stalls)
        seen["ticks"] = len(ticks)
        box.stop()

    sched.run(main)
    sched.shutdown()
    sched.close()
    assert seen["stalls"] == []
    assert seen["ticks"] > 10                   # the loop kept ticking meanwhile
    newest = list_files(str(tmp_path), ".snap")[-1]
    with XlogReader(newest.path) as reader:
        count = sum(1 for row in reader.rows())
    assert count > ROWS
