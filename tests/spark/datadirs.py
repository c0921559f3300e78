"""Data directories for the tests: written by real Tarantool 2.6.0, by Spindle,
or synthesised with core's XlogWriter."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.request import encode_dml_body, synchro_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import EOF_MARKER_BYTES, XlogMeta
from spindle.core.vclock import VClock
from spindle.core.xlog.files import SyncPolicy, XlogWriter

SPINDLE = str(Path(sys.executable).with_name("spindle"))
UUID = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
ZSTD_MAGIC = b"\xd5\xba\x0b\xba"

# DDL and DML of every kind; rows over 2 KiB so that blocks are zstd-compressed;
# a multi-row transaction; a local space (replica_id 0); a rename and a drop so
# space names change along the WAL; a checkpoint in the middle.
SCRIPT = """\
local exit_mode = ...
box.cfg{log = 'instance.log', checkpoint_count = 5}
local big = box.schema.space.create('big')
big:create_index('pk')
for i = 1, 40 do big:insert{i, string.rep('x', 3000)} end
box.begin()
for i = 41, 60 do big:insert{i, string.rep('y', 50)} end
box.commit()
big:update(1, {{'=', 2, 'short'}})
big:delete(2)
big:upsert({3, 'u'}, {{'=', 2, 'uu'}})
big:replace{4, 'r'}
local loc = box.schema.space.create('loc', {is_local = true})
loc:create_index('pk')
loc:insert{1, 'local'}
box.snapshot()
local second = box.schema.space.create('second')
second:create_index('pk')
for i = 1, 30 do second:insert{i, string.rep('z', 2500)} end
second:rename('renamed')
box.space.renamed:insert{100, 'after rename'}
box.space.renamed:delete(1)
box.space.big:insert{1000, 'tail'}
box.space.big:drop()
box.space.renamed:insert{101, 'last'}
if exit_mode == 'hard' then
    -- No clean shutdown: the newest xlog keeps its rows and has no EOF marker,
    -- as the live WAL of a running instance.
    local ffi = require('ffi')
    ffi.cdef('void _exit(int)')
    ffi.C._exit(0)
end
os.exit(0)
"""


def _run(binary: str, directory: Path, exit_mode: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "make.lua").write_text(SCRIPT)
    result = subprocess.run([binary, "make.lua", exit_mode], cwd=directory,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (result.stdout, result.stderr)
    (directory / "make.lua").unlink()
    return directory


def tarantool_dir(directory: Path) -> Path:
    binary = shutil.which("tarantool")
    assert binary, "tarantool 2.6.0 must be installed: ./scripts/test installs it"
    return _run(binary, directory, "hard")


def spindle_dir(directory: Path) -> Path:
    return _run(SPINDLE, directory, "clean")


# ---------------------------------------------------------------------------
# Synthetic files.

def dml(rtype: int, space_id: int, lsn: int, *, replica_id: int = 1, ts: float = 0.0,
        tsn: int = 0, commit: bool = True, group_id: int = 0, **body) -> XRow:
    return XRow(type=rtype, replica_id=replica_id, lsn=lsn, timestamp=ts, tsn=tsn,
                is_commit=commit, group_id=group_id,
                body=encode_dml_body(rtype, space_id, **body))


def space_row(lsn: int, space_id: int, name: str, **kw) -> XRow:
    return dml(IprotoType.INSERT, 280, lsn,
               tuple=[space_id, 1, name, "memtx", 0, {}, []], **kw)


def confirm(lsn: int, target: int, **kw) -> XRow:
    return synchro_row(IprotoType.CONFIRM, 1, target, replica_id=1, lsn=lsn, **kw)


def write_xlog(directory: Path, vclock: dict, transactions: list[list[XRow]], *,
               close: bool = True, prev: dict | None = None, per_block: int = 1,
               compress: bool = True) -> Path:
    """An xlog named by `vclock` holding `transactions`, `per_block` of them per
    block; `close=False` leaves it as a live WAL (no EOF marker)."""
    meta = XlogMeta("XLOG", UUID, VClock(vclock), None if prev is None else VClock(prev))
    writer = XlogWriter.create(str(directory), meta, sync=SyncPolicy.NEVER, compress=compress)
    for i, tx in enumerate(transactions):
        writer.add_tx(tx)
        if (i + 1) % per_block == 0:
            writer.flush()
    writer.close()
    path = Path(writer.path)
    if not close:
        # Exactly what a running WAL looks like: whole blocks, no EOF marker.
        os.truncate(path, path.stat().st_size - len(EOF_MARKER_BYTES))
    return path
