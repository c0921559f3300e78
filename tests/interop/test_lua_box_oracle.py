"""The Lua box API against real Tarantool 2.6.0, statement by statement.

One console session (box.cfg, DDL with formats, tree/hash/multi-part/non-unique
indexes, every DML, iterators, errors, transactions, triggers, tuple methods,
read-only mode, users, box.snapshot, box.info.vclock after the writes) runs through
Tarantool's console and through `spindle` in pipe mode, each from a fresh directory;
each statement's output must be identical after normalising memory addresses and
UUIDs. Maps whose key order is LuaJIT's hash order are compared parsed ("yaml").

Then the data directories are read back: real Tarantool started on the directory
Spindle left behind must see the same spaces, rows and vclock as on its own
directory, and so must Spindle restarted on it.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

from .oracle import SPINDLE, own_home, tarantool_binary

Y = "yaml"
STATEMENTS: list[tuple[str, str]] = [
    ("box.cfg{log_level = 1}", ""),
    ("box.info.status, box.info.ro, box.info.id, type(box.info.uuid)", ""),
    # DDL
    ("s = box.schema.space.create('test', {format = {{'id', 'unsigned'}, {'name', 'string'},"
     " {'age', 'unsigned', is_nullable = true}}})", ""),
    ("s.name, s.id, s.engine, s.field_count, s.temporary, s.is_local, s.enabled", ""),
    ("s:create_index('pk')", Y),
    ("h = s:create_index('by_name', {type = 'hash', parts = {'name'}})", ""),
    ("h", Y),
    ("m = s:create_index('multi', {parts = {{'age', 'unsigned', is_nullable = true},"
     " {'name', 'string'}}, unique = false})", ""),
    ("m.parts, m.unique, m.type", Y),
    ("box.schema.space.create('test')", ""),
    # DML and its errors
    ("for i = 1, 8 do s:insert{i, 'n' .. i, i % 3} end", ""),
    ("s:insert{1, 'dup'}", ""),
    ("s:insert{9, 'n1'}", ""),
    ("s:insert{'x', 'y'}", ""),
    ("s:insert{10, 10}", ""),
    ("s:insert{}", ""),
    ("s:insert(5)", ""),
    ("s.insert{11, 'z'}", ""),
    ("s:replace{2, 'two', 7}", ""),
    ("s:update(3, {{'=', 3, 30}, {'!', 4, 'extra'}})", ""),
    ("s:update({3}, {{'=', 1, 100}})", ""),
    ("s:update(99, {{'=', 3, 1}})", ""),
    ("s:upsert({4, 'n4', 0}, {{'+', 3, 5}})", ""),
    ("s:upsert({20, 'n20', 1}, {{'+', 3, 5}})", ""),
    ("s:delete(5)", ""),
    ("s:delete{99}", ""),
    ("s:get(4)", ""),
    ("s:get{99}", ""),
    # reads, iterators
    ("s:select()", ""),
    ("s:select({3}, {iterator = 'GE', limit = 3})", ""),
    ("s:select({6}, {iterator = 'LT'})", ""),
    ("s:select(nil, {iterator = 'REQ', offset = 2, limit = 2})", ""),
    ("s:select({}, {iterator = 'ALL', limit = 2})", ""),
    ("s:select({1}, 'GT')", ""),
    ("s:select(1, {iterator = 'NOPE'})", ""),
    ("s:select('a')", ""),
    ("s.index.multi:select({1})", ""),
    ("s.index.multi:select({1}, {iterator = 'REQ'})", ""),
    ("s.index.multi:count(1), s.index.multi:count({1}, {iterator = 'GT'})", ""),
    ("s.index.multi:min(), s.index.multi:max()", ""),
    ("s.index.by_name:get('n7')", ""),
    ("s.index.by_name:select('n7', {iterator = 'LE'})", ""),
    ("s.index.by_name:min()", ""),
    ("s.index.multi:get({1})", ""),
    ("s.index.by_name:update('n6', {{'=', 3, 66}})", ""),
    ("s.index.by_name:delete('n6')", ""),
    ("s:count(), s:len(), s:bsize()", ""),
    ("s.index.nope, s.index[7]", ""),
    ("box.space.nope:select()", ""),
    ("box.space.test.index.nope:select()", ""),
    ("s.index.multi:select({1}, {iterator = 'BITS_ALL_SET'})", ""),
    ("r = {} for _, t in s:pairs({2}, {iterator = 'GE'}) do table.insert(r, t[1]) end "
     "return table.concat(r, ',')", ""),
    ("r = {} for _, t in s.index.multi:pairs({1}) do table.insert(r, t.name) end "
     "return table.concat(r, ',')", ""),
    # tuples
    ("t = s:get(4)", ""),
    ("t, t[1], t.name, t.age, #t, t[99]", ""),
    ("t:unpack()", ""),
    ("t:totable(), t:tomap({names_only = true})", Y),
    ("t:update({{'=', 'name', 'q'}}), t:transform(2, 1), t:find('n4'), t:findall(4)", ""),
    ("tostring(t), t:bsize(), box.tuple.is(t), box.tuple.is({1})", ""),
    ("box.tuple.new({1, 'a', {b = 2}}), box.tuple.new(1, 2, 3), box.tuple.new()", ""),
    # transactions
    ("box.begin() s:insert{50, 'fifty'} s:replace{4, 'changed'} box.rollback()", ""),
    ("s:get(50), s:get(4)", ""),
    ("box.begin() s:insert{51, 'n51'} sp = box.savepoint() s:insert{52, 'n52'} "
     "box.rollback_to_savepoint(sp) box.commit()", ""),
    ("s:get(51), s:get(52)", ""),
    ("box.atomic(function() s:insert{53, 'n53'} s:insert{53, 'again'} end)", ""),
    ("s:get(53)", ""),
    ("box.atomic(function(a, b) s:insert{54, 'n54'} return a + b end, 1, 2)", ""),
    ("box.begin() s:insert{55, 'n55'} box.begin()", ""),
    ("box.rollback()", ""),
    # triggers
    ("s:on_replace(function(old, new, name, op) rawset(_G, 'seen', "
     "{old and old[1], new and new[1], name, op}) end)", ""),
    ("s:replace{1, 'one'}", ""),
    ("seen", ""),
    ("s:on_replace(nil, s:on_replace()[1])", ""),
    ("s:before_replace(function(old, new) if new[1] == 60 then return nil end end)", ""),
    ("s:insert{60, 'skipped'}", ""),
    ("s:get(60)", ""),
    ("s:before_replace(nil, s:before_replace()[1])", ""),
    # read-only
    ("box.cfg{read_only = true}", ""),
    ("s:insert{70, 'ro'}", ""),
    ("box.schema.space.create('ro_space')", ""),
    ("box.cfg{read_only = false}", ""),
    ("s:insert{70, 'rw'}", ""),
    # users, a second space, rename, format
    ("box.schema.user.create('alice', {password = 'secret'})", ""),
    ("box.schema.user.grant('alice', 'read,write', 'space', 'test')", ""),
    ("box.schema.user.info('alice')", ""),
    ("s2 = box.schema.space.create('second', {if_not_exists = true})", ""),
    ("s2:create_index('primary', {parts = {{1, 'string'}}})", Y),
    ("s2:insert{'k1', {a = 1}, {1, 2}}", ""),
    ("s2:insert{'k2', box.NULL, 3.5}", ""),
    ("s2:select()", ""),
    ("s2:rename('renamed')", ""),
    ("box.space.second, box.space.renamed.name", ""),
    ("s2.index.primary:rename('pk2')", ""),
    ("s2.index.pk2.name, s2:select()", ""),
    ("box.space.renamed:format({{'key', 'string'}})", ""),
    ("box.space.renamed:format()", Y),
    ("s2:get('k1').key", ""),
    # checkpoint, vclock
    ("box.snapshot()", ""),
    ("s:insert{80, 'after snapshot'}", ""),
    ("box.info.vclock", ""),
    ("box.info.gc().checkpoints[2].vclock", ""),
]

# Printed by both servers when started on a data directory.
READ_BACK = """
box.cfg{log_level = 1}
local spaces = {}
for _, row in box.space._space:pairs({512}, {iterator = 'GE'}) do
    local space = box.space[row[1]]
    local rows = {}
    for _, t in space:pairs() do table.insert(rows, t:totable()) end
    table.insert(spaces, {row[3], rows})
end
print(require('json').encode({spaces = spaces, vclock = box.info.vclock}))
os.exit(0)
"""

_ADDRESS = re.compile(r"0x[0-9a-f]+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _tarantool_outputs(statements: list[str], cwd: Path) -> list[str]:
    """Tarantool echoes each statement after its prompt; the output follows."""
    proc = subprocess.run([tarantool_binary(), "-e", "require('console').start() os.exit(0)"],
                          input="\n".join(statements) + "\n", capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=own_home(cwd))
    outputs = []
    for chunk in proc.stdout.split("tarantool> ")[1:]:
        if "\n" not in chunk:      # the last prompt, at EOF
            continue
        lines = chunk.split("\n")[1:]
        while lines and "\x1b[" in lines[0]:    # readline redrawing a long echo
            lines.pop(0)
        outputs.append("\n".join(lines).rstrip("\n") + "\n")
    return outputs


def _spindle_outputs(statements: list[str], cwd: Path) -> list[str]:
    """Pipe mode prints only the outputs: YAML documents from '---' to '...'."""
    proc = subprocess.run([SPINDLE, "-i"], input="\n".join(statements) + "\n", capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    outputs, current = [], []
    for line in proc.stdout.rstrip("\n").split("\n"):
        current.append(line)
        if line == "..." and current[0] == "---":
            outputs.append("\n".join(current) + "\n")
            current = []
    assert not current, f"unfinished output: {current}"
    return outputs


def _normalise(text: str) -> str:
    return _UUID.sub("<uuid>", _ADDRESS.sub("0x?", text))


def _same(mode: str, real: str, ours: str) -> bool:
    if mode == Y:
        return yaml.safe_load(_normalise(real)) == yaml.safe_load(_normalise(ours))
    return _normalise(real) == _normalise(ours)


def _read_back(binary: str, data_dir: Path) -> dict:
    (data_dir / "read_back.lua").write_text(READ_BACK)
    proc = subprocess.run([binary, "read_back.lua"], cwd=data_dir, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import json
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_enough_statements():
    assert len(STATEMENTS) >= 60


def test_box_api_matches_tarantool_and_the_data_reads_back(tmp_path):
    real_dir, our_dir = tmp_path / "tarantool", tmp_path / "spindle"
    real_dir.mkdir()
    our_dir.mkdir()
    statements = [s for s, _ in STATEMENTS]
    real = _tarantool_outputs(statements, real_dir)
    ours = _spindle_outputs(statements, our_dir)
    assert len(real) == len(statements), real[-3:]
    assert len(ours) == len(statements), ours[-3:]
    mismatches = [f"{statement}\n--- tarantool:\n{r}--- spindle:\n{o}"
                  for (statement, mode), r, o in zip(STATEMENTS, real, ours)
                  if not _same(mode, r, o)]
    assert not mismatches, "\n\n".join(mismatches)

    # Both data directories, as Tarantool reads them and as Spindle reads them.
    expected = _read_back(tarantool_binary(), real_dir)
    assert [name for name, _ in expected["spaces"]] == ["test", "renamed"]
    spindle_copy = tmp_path / "spindle-restart"
    shutil.copytree(our_dir, spindle_copy)
    assert _read_back(SPINDLE, spindle_copy) == expected
    assert _read_back(tarantool_binary(), our_dir) == expected
