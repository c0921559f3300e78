"""Spindle's WAL against real Tarantool 2.6.0.

* files written by WalWriter and write_snapshot are read by `tarantoolctl cat`;
* tarantool started on a directory we made recovers our vclock and rows, and appends
  to the empty xlog our writer left, which we then recover;
* a directory made by tarantool (global and local spaces, a multi-row and a mixed
  transaction, a snapshot in the middle) is recovered by us to the same vclock and
  contents, and our writer continues it so that tarantool reads our rows.

These tests fail, never skip, when tarantool is not installed.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from spindle.core.fiber import Scheduler
from spindle.core.iproto.constants import GroupId, IprotoType, type_name
from spindle.core.iproto.msgpack import unpack
from spindle.core.iproto.request import decode_dml_body, encode_dml_body
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import decode_file
from spindle.core.vclock import VClock
from spindle.core.wal.checkpoint import write_snapshot
from spindle.core.wal.recovery import recover
from spindle.core.wal.writer import WalWriter
from spindle.core.xlog.files import list_files

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
UUID1 = "11111111-1111-4111-8111-111111111111"
TEST_SPACE = 512          # 'test' in the master fixture: {id unsigned, val string}
CAT_BODY_KEYS = {"space_id": 0x10, "index_id": 0x11, "index_base": 0x15, "key": 0x20,
                 "tuple": 0x21, "operations": 0x28}


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} (Tarantool 2.6.0) must be installed for interop tests")
    return path


def run_tarantool(work_dir: Path, body: str, *, cfg: str = "") -> dict:
    """Start tarantool on work_dir, run `body` (Lua that sets the global `out`), and
    return `out` decoded from the JSON it prints."""
    scratch = work_dir.parent / f"{work_dir.name}-script"
    scratch.mkdir(exist_ok=True)
    script = scratch / "probe.lua"
    script.write_text(f"""
local json = require('json')
box.cfg{{work_dir = {json.dumps(str(work_dir))}, log_level = 5 {cfg}}}
out = {{}}
{body}
local vclock = {{}}
for id, lsn in pairs(box.info.vclock) do vclock[tostring(id)] = lsn end
out.vclock = vclock
io.stdout:write('RESULT ' .. json.encode(out) .. '\\n')
io.stdout:flush()
os.exit(0)
""")
    proc = subprocess.run([binary("tarantool"), str(script)], cwd=scratch,
                          capture_output=True, text=True, timeout=60)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"tarantool failed:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(lines[-1][len("RESULT "):])
    result["vclock"] = VClock({int(k): v for k, v in result["vclock"].items()})
    result["log"] = proc.stderr
    return result


def cat(path: Path) -> list[dict]:
    proc = subprocess.run([binary("tarantoolctl"), "cat", str(path), "--show-system"],
                          capture_output=True, timeout=60, check=True)
    return [doc for doc in yaml.safe_load_all(proc.stdout.decode()) if doc]


def check_row(row: XRow, doc: dict) -> None:
    head = doc["HEADER"]
    assert head.get("lsn", 0) == row.lsn
    assert head.get("replica_id", 0) == row.replica_id
    assert head.get("group_id", 0) == row.group_id
    assert head["type"] == (type_name(row.type) or row.type)
    assert abs(head.get("timestamp", 0) - row.timestamp) < 1e-3
    if row.tsn != row.lsn or not row.is_commit:
        assert (head["tsn"], head.get("commit", False)) == (row.tsn, row.is_commit)
    else:
        assert "tsn" not in head
    if row.body is not None:
        assert row.body_map() == {CAT_BODY_KEYS[k]: v for k, v in doc["BODY"].items()}


def dml(request_type: int, space_id: int = TEST_SPACE, group_id: int = 0, **kwargs) -> XRow:
    return XRow(type=request_type, group_id=group_id,
                body=encode_dml_body(request_type, space_id, **kwargs))


def copy_fixture(name: str, dest: Path) -> Path:
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns("*.txt"))
    dest.chmod(0o755)
    for path in dest.iterdir():
        path.chmod(0o644)
    return dest


# ------------------------------------------------------ a directory made by Spindle

def spindle_directory(path: Path) -> tuple[VClock, dict[int, list]]:
    """Snapshot of the master fixture's data at {1: 25}, then our WAL on top of it."""
    fixture = decode_file((FIXTURES / "master" / "00000000000000000025.snap").read_bytes())
    sched = Scheduler()
    wal = WalWriter(sched, str(path), UUID1, VClock({1: 25}), mode="fsync", instance_id=1,
                    max_size=400)
    expected = {1: [1, "a1"], 3: [3, "c"], 10: [10, "x"], 11: [11, "y"]}
    state = {}

    def client(n: int) -> None:
        for i in range(5):
            key = 1000 + n * 10 + i
            wal.write([dml(IprotoType.INSERT, tuple=[key, f"fiber {n}"])])
            expected[key] = [key, f"fiber {n}"]

    def main() -> None:
        write_snapshot(str(path), UUID1, VClock({1: 25}), fixture.rows, sched=sched)
        wal.write([dml(IprotoType.INSERT, tuple=[100, "a"])])
        wal.write([dml(IprotoType.INSERT, tuple=[101, "b"]),
                   dml(IprotoType.REPLACE, tuple=[100, "aa"]),
                   dml(IprotoType.DELETE, key=[3])])
        wal.write([dml(IprotoType.UPDATE, key=[1], index_base=1, ops=[["=", 2, "updated"]])])
        wal.write([dml(IprotoType.INSERT, tuple=[200 + i, "z" * 200]) for i in range(20)])
        fibers = [sched.spawn(client, n) for n in range(8)]
        while any(f.status != "dead" for f in fibers):
            sched.sleep(0.001)
        state["vclock"] = wal.vclock.copy()
        wal.stop()

    sched.run(main)
    sched.close()
    expected[100] = [100, "aa"]
    expected[101] = [101, "b"]
    del expected[3]
    expected[1] = [1, "updated"]
    for i in range(20):
        expected[200 + i] = [200 + i, "z" * 200]
    return state["vclock"], expected


def test_tarantoolctl_cat_reads_what_the_wal_writer_and_snapshot_wrote(tmp_path):
    vclock, _ = spindle_directory(tmp_path)
    assert vclock == VClock({1: 25 + 1 + 3 + 1 + 20 + 40})
    xlogs = list_files(str(tmp_path))
    assert len(xlogs) > 2                       # rotated by size, plus the empty last one
    rows_seen = 0
    for entry in xlogs:
        rows = decode_file(Path(entry.path).read_bytes()).rows
        docs = cat(Path(entry.path))
        assert len(docs) == len(rows)
        for row, doc in zip(rows, docs):
            check_row(row, doc)
        rows_seen += len(rows)
    assert rows_seen == vclock.signature - 25
    snap = tmp_path / "00000000000000000025.snap"
    snap_rows = decode_file(snap.read_bytes()).rows
    docs = cat(snap)
    assert len(docs) == len(snap_rows) == 528
    for row, doc in zip(snap_rows, docs):
        check_row(row, doc)


def test_tarantool_recovers_a_directory_made_by_spindle(tmp_path):
    work = tmp_path / "data"
    vclock, expected = spindle_directory(work)
    out = run_tarantool(work, """
out.rows = {}
for _, t in box.space.test:pairs() do table.insert(out.rows, t:totable()) end
box.space.test:insert{5000, 'from tarantool'}
""", cfg=f", instance_uuid = '{UUID1}'")
    assert out["vclock"] == VClock({1: vclock[1] + 1})
    assert {row[0]: row for row in out["rows"]} == expected
    assert "wasn't correctly closed" not in out["log"]
    # tarantool appended to the empty xlog our writer left at stop; we read it back
    seen = []
    result = recover(str(work), str(work), lambda row: None, seen.append)
    assert result.vclock == VClock({1: vclock[1] + 1})
    assert unpack(seen[-1][0].body)[0x21] == [5000, "from tarantool"]


# ---------------------------------------------------- a directory made by Tarantool

class Replay:
    """Apply INSERT/REPLACE/DELETE rows of chosen spaces, keyed by the first field."""

    def __init__(self, spaces: set[int]):
        self.spaces = spaces
        self.data: dict[int, dict] = {space: {} for space in spaces}

    def snapshot_row(self, row: XRow) -> None:
        body = unpack(row.body)
        if body[0x10] in self.spaces:
            self.data[body[0x10]][body[0x21][0]] = body[0x21]

    def tx(self, rows: list[XRow]) -> None:
        for row in rows:
            if row.type == IprotoType.NOP:
                continue
            request = decode_dml_body(row.body, row.type)
            if request.space_id not in self.spaces:
                continue
            space = self.data[request.space_id]
            if row.type in (IprotoType.INSERT, IprotoType.REPLACE):
                space[request.tuple[0]] = request.tuple
            elif row.type == IprotoType.DELETE:
                space.pop(request.key[0], None)
            else:
                raise AssertionError(f"unexpected row {row}")


TARANTOOL_WORKLOAD = """
local g = box.schema.space.create('g') g:create_index('pk')
local l = box.schema.space.create('l', {is_local = true}) l:create_index('pk')
for i = 1, 30 do g:insert{i, 'g' .. i} end
for i = 1, 5 do l:insert{i, 'l' .. i} end
box.begin() g:replace{1, 'one'} g:delete{2} g:insert{100, 'txn'} box.commit()
box.begin() l:insert{10} g:insert{101} l:insert{11} box.commit()
box.begin() g:insert{102} l:insert{12} box.commit()
box.snapshot()
for i = 31, 60 do g:insert{i, string.rep('x', 100)} end
box.begin() l:delete{1} l:replace{2, 'two'} box.commit()
g:delete{31}
out.g = g.id out.l = l.id
out.rows_g = {} for _, t in g:pairs() do table.insert(out.rows_g, t:totable()) end
out.rows_l = {} for _, t in l:pairs() do table.insert(out.rows_l, t:totable()) end
"""


def test_spindle_recovers_and_continues_a_directory_made_by_tarantool(tmp_path):
    work = tmp_path / "data"
    work.mkdir()
    made = run_tarantool(work, TARANTOOL_WORKLOAD)
    assert made["vclock"][0] > 0                   # local rows use component 0
    space_g, space_l = made["g"], made["l"]
    replay = Replay({space_g, space_l})
    result = recover(str(work), str(work), replay.snapshot_row, replay.tx)
    assert result.vclock == made["vclock"]
    assert result.last_checkpoint_vclock is not None
    assert len(result.checkpoints) == 2            # the bootstrap one and box.snapshot()
    assert result.not_closed == []
    assert replay.data[space_g] == {row[0]: row for row in made["rows_g"]}
    assert replay.data[space_l] == {row[0]: row for row in made["rows_l"]}

    # Our writer continues the directory (it reopens tarantool's last, empty xlog).
    sched = Scheduler()
    wal = WalWriter(sched, str(work), result.instance_uuid, result.vclock, instance_id=1)
    appended = wal.current_path

    def main():
        wal.write([dml(IprotoType.INSERT, space_id=space_g, tuple=[7000, "from spindle"])])
        wal.write([dml(IprotoType.INSERT, space_id=space_l, group_id=GroupId.LOCAL,
                       tuple=[7001, "local"]),
                   dml(IprotoType.REPLACE, space_id=space_l, group_id=GroupId.LOCAL,
                       tuple=[7002, "local"])])
        wal.stop()

    sched.run(main)
    sched.close()
    assert appended == str(work / f"{result.vclock.signature:020d}.xlog")
    after = run_tarantool(work, """
out.a = box.space.g:get{7000}:totable()
out.b = box.space.l:get{7001}:totable()
out.c = box.space.l:get{7002}:totable()
""")
    expected = result.vclock.copy()
    expected.reset(1, expected[1] + 1)
    expected.reset(0, expected[0] + 2)
    assert after["vclock"] == expected
    assert (after["a"], after["b"], after["c"]) == (
        [7000, "from spindle"], [7001, "local"], [7002, "local"])
    assert "wasn't correctly closed" not in after["log"]


def test_after_a_torn_tail_both_leave_the_same_files(tmp_path):
    """The last xlog cut inside the 3-row transaction LSN 19-21: tarantool recovers
    {1: 18} and leaves an empty …18.xlog at shutdown; so do recover() + WalWriter."""
    dirs = {}
    for name in ("tarantool", "spindle"):
        path = dirs[name] = tmp_path / name
        path.mkdir()
        for file in ("00000000000000000000.snap", "00000000000000000000.xlog"):
            shutil.copyfile(FIXTURES / "master" / file, path / file)
        xlog = path / "00000000000000000000.xlog"
        xlog.write_bytes(xlog.read_bytes()[:1280])
    out = run_tarantool(dirs["tarantool"], "")
    assert out["vclock"] == VClock({1: 18})
    assert "wasn't correctly closed" in out["log"]
    result = recover(str(dirs["spindle"]), str(dirs["spindle"]), lambda r: None,
                     lambda t: None)
    assert result.vclock == VClock({1: 18})
    WalWriter(Scheduler(), str(dirs["spindle"]), result.instance_uuid, result.vclock,
              instance_id=1).stop()
    ours = sorted(p.name for p in dirs["spindle"].iterdir())
    assert ours == sorted(p.name for p in dirs["tarantool"].iterdir())
    for name in ours:
        assert (dirs["spindle"] / name).read_bytes() == (dirs["tarantool"] / name).read_bytes()


def tarantool_fatal(work_dir: Path) -> str:
    """Start tarantool on a directory it cannot recover; its fatal reason."""
    proc = subprocess.run(
        [binary("tarantool"), "-e", f"box.cfg{{work_dir = {json.dumps(str(work_dir))}}}"
                                    " os.exit(0)"],
        cwd=work_dir.parent, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stderr
    fatal = [line for line in proc.stderr.splitlines() if " F> " in line]
    assert fatal, proc.stderr
    prefix = "can't initialize storage: "
    return fatal[-1].split(" F> ", 1)[1].removeprefix(prefix)


def damaged(tmp_path: Path, name: str, damage) -> tuple[Path, Path]:
    """Two identical damaged copies of the master fixture: one per implementation."""
    pair = []
    for who in ("tarantool", "spindle"):
        path = copy_fixture("master", tmp_path / f"{name}-{who}")
        damage(path)
        pair.append(path)
    return pair[0], pair[1]


def flip_block_10(path: Path) -> None:
    for extra in ("00000000000000000025.snap", "00000000000000000025.xlog",
                  "00000000000000000026.xlog"):
        (path / extra).unlink()
    xlog = path / "00000000000000000000.xlog"
    data = bytearray(xlog.read_bytes())
    data[705 + 19 + 10] ^= 0xFF
    xlog.write_bytes(bytes(data))


@pytest.mark.parametrize("name, damage", [
    ("corrupt", flip_block_10),
    ("gap", lambda path: (path / "00000000000000000025.xlog").unlink()),
    ("gap-first", lambda path: [(path / f).unlink() for f in (
        "00000000000000000025.snap", "00000000000000000000.xlog")]),
    ("foreign", lambda path: (path / "00000000000000000026.xlog").write_bytes(
        (path / "00000000000000000026.xlog").read_bytes().replace(b"11111111-", b"33333333-"))),
])
def test_unrecoverable_directories_fail_with_tarantools_reason(tmp_path, name, damage):
    theirs, ours = damaged(tmp_path, name, damage)
    reason = tarantool_fatal(theirs)
    with pytest.raises(Exception) as err:
        recover(str(ours), str(ours), lambda row: None, lambda rows: None)
    # paths are printed as given: theirs relative to the cwd of the run, ours absolute
    assert str(err.value).replace(str(ours), ".") == reason.replace(f"./{theirs.name}", ".")
