"""Recovery both ways between Spindle and real Tarantool 2.6.0: Spindle starts on the
fixture data dirs and on a fresh dir made by Tarantool in the test and sees the same
data; Tarantool starts on a dir Spindle wrote and sees the same data."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from spindle.core.instance.box import Box
from spindle.core.box.cfg import defaults
from spindle.core.fiber import Scheduler

from .oracle import tarantool_binary

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"

DUMP_LUA = """
local json = require('json')
local out = {vclock = box.info.vclock, spaces = {}}
for _, s in box.space._space:pairs({512}, {iterator = 'GE'}) do
    local rows = {}
    if box.space[s[3]].index[0] then
        for _, t in box.space[s[3]]:pairs() do table.insert(rows, t:totable()) end
    end
    out.spaces[s[3]] = rows
end
print(json.encode(out))
os.exit(0)
"""


def spindle_dump(work_dir: Path) -> dict:
    """Start a Box on work_dir (recovery), return its vclock and user spaces."""
    sched = Scheduler()
    cwd = os.getcwd()

    def main():
        box = Box(sched)
        cfg = defaults()
        cfg["work_dir"] = str(work_dir)
        box.start(cfg)
        try:
            spaces = {space.name: [list(t) for t in space.select()]
                      for space in box.engine.spaces.values()
                      if space.id >= 512 and space.primary is not None}
            return {"vclock": box.vclock.to_dict(), "spaces": spaces}
        finally:
            box.stop()

    try:
        return sched.run(main)
    finally:
        os.chdir(cwd)
        sched.shutdown()
        sched.close()


def tarantool_dump(work_dir: Path) -> dict:
    proc = subprocess.run([tarantool_binary(), "-e",
                           f"box.cfg{{work_dir = '{work_dir}', log_level = 1}} " + DUMP_LUA],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["vclock"] = {int(k): v for k, v in (data["vclock"] or {}).items()} \
        if isinstance(data["vclock"], dict) else \
        {i + 1: v for i, v in enumerate(data["vclock"]) if v is not None}
    data["spaces"] = {name: rows for name, rows in data["spaces"].items()}
    return data


def normalise(dump: dict) -> dict:
    spaces = {name: rows for name, rows in dump["spaces"].items()}
    return {"vclock": {int(k): v for k, v in dump["vclock"].items()}, "spaces": spaces}


@pytest.mark.parametrize("fixture", ["master", "replica"])
def test_spindle_recovers_the_fixture_dirs_like_tarantool(fixture, tmp_path):
    ours_dir, theirs_dir = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(FIXTURES / fixture, ours_dir)
    shutil.copytree(FIXTURES / fixture, theirs_dir)
    for extra in list(ours_dir.glob("*.txt")) + list(theirs_dir.glob("*.txt")):
        extra.unlink()
    ours = normalise(spindle_dump(ours_dir))
    theirs = normalise(tarantool_dump(theirs_dir))
    assert ours == theirs
    assert ours["vclock"] == ({1: 26} if fixture == "master" else {1: 23})


MAKE_DATA = """
box.cfg{log_level = 1}
local s = box.schema.space.create('kinds', {format = {{'id', 'unsigned'}, {'v', 'any'}}})
s:create_index('pk')
s:create_index('by_v', {parts = {{2, 'scalar'}}, unique = false})
s:insert{1, 'text'}
s:insert{2, 2.5}
s:insert{3, true}
s:insert{4, -7}
s:insert{5, 18446744073709551615ULL}
local loc = box.schema.space.create('loc', {is_local = true})
loc:create_index('pk', {type = 'hash', parts = {1, 'string'}})
loc:insert{'a', {1, {b = 2}}}
box.snapshot()
box.begin()
s:replace{2, 'two'}
s:delete{3}
s:update({4}, {{'+', 2, 10}})
box.commit()
s:upsert({6, 'new'}, {{'=', 2, 'x'}})
loc:replace{'b', box.NULL}
os.exit(0)
"""


def test_spindle_recovers_a_fresh_tarantool_dir(tmp_path):
    work = tmp_path / "t"
    work.mkdir()
    subprocess.run([tarantool_binary(), "-e", MAKE_DATA], cwd=work, check=True,
                   capture_output=True, timeout=60)
    copy = tmp_path / "copy"
    shutil.copytree(work, copy)
    assert normalise(spindle_dump(copy)) == normalise(tarantool_dump(work))


def test_tarantool_starts_on_a_spindle_dir(tmp_path):
    work = tmp_path / "s"
    work.mkdir()                  # a work_dir must exist, as in 2.6.0
    sched = Scheduler()
    cwd = os.getcwd()

    def main():
        box = Box(sched)
        cfg = defaults()
        cfg["work_dir"] = str(work)
        box.start(cfg)
        engine = box.engine
        engine.space("_schema").update(["max_id"], [["+", 2, 1]])
        engine.space("_space").insert([512, 1, "made", "memtx", 0, {}, []])
        engine.space("_index").insert([512, 0, "pk", "tree", {"unique": True},
                                       [[0, "unsigned"]]])
        made = engine.space("made")
        for i in range(1, 101):
            made.insert([i, f"row {i}", {"n": i}])
        box.snapshot()
        made.delete([50])
        made.replace([1, "changed"])
        box.stop()

    try:
        sched.run(main)
    finally:
        os.chdir(cwd)
        sched.shutdown()
        sched.close()
    copy = tmp_path / "copy"
    shutil.copytree(work, copy)
    theirs = normalise(tarantool_dump(copy))
    assert theirs == normalise(spindle_dump(work))
    assert len(theirs["spaces"]["made"]) == 99
