"""`spindle cat` against `tarantoolctl cat` on files the real Tarantool 2.6.0 writes now.

A real instance runs a script in a temporary directory: spaces of several kinds
(memtx with and without format, is_local, temporary, is_sync, vinyl), DDL
(users, grants, functions, sequences, truncate, index drop), inserts,
replaces, updates, upserts, deletes, a multi-statement transaction (and one
rolled back), values that exercise quoting and line wrapping, random nested
values from a fixed seed, two snapshots. Every file it leaves (.xlog, .snap,
.vylog, .run, .index) is printed by both tools in every format, and stderr must
be the same "Processing file" lines.

stdout: row by row, the same bytes, except for rows holding a map with several
keys inside the data (the random values, system tuples with options maps,
vylog records, vinyl statistics): spindle prints such maps in MsgPack order,
tarantoolctl in the order of LuaJIT's hash tables, so those rows are compared
parsed (yaml.safe_load-like for yaml, json.loads for json, a table reader for
lua: the same values, and the record's, HEADER's and BODY's keys in the same
order; see row_problem in tests/console/test_cat.py).

A second instance writes maps keyed by floats and booleans, which json.encode
refuses (tarantoolctl dies on them), so that one is compared in yaml and lua.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spindle.core.xlog.format import decode_file
from spindle.shell.cat_record import BODY_ORDERS, HEADER_ORDERS

SPINDLE = str(Path(sys.executable).parent / "spindle")
TIMEOUT = 300


def _load_row_comparison():
    """output_problems() of the console tests (one comparison for both)."""
    path = Path(__file__).resolve().parents[1] / "console" / "test_cat.py"
    spec = importlib.util.spec_from_file_location("_spindle_cat_rows", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.output_problems


output_problems = _load_row_comparison()

SCRIPT = r"""
local mode = arg[1]
box.cfg{work_dir = '.', log = 'tarantool.log', checkpoint_count = 10,
        replication_synchro_quorum = 1}
local decimal = require('decimal')
local uuid = require('uuid')
math.randomseed(mode == 'main' and 2026 or 6202)

local pool = {'a', 'b', 'z', ' ', ' ', ':', '#', '-', "'", '"', ',', '[', ']', '{', '}', '?',
  '!', '&', '*', '|', '>', '%', '@', '`', '0', '1', '9', '.', 'e', '+', 'x', 'ж', 'é', '€',
  '😀', '\n', '\t', '\r', '\0', 'null', 'true', 'no', '~', '---', '...', 'inf', 'nan', '0x',
  'long word '}
local function rstr(maxlen)
    local t = {}
    for i = 1, math.random(0, maxlen) do t[i] = pool[math.random(#pool)] end
    return table.concat(t)
end
local function rkey()
    local r = math.random(mode == 'main' and 4 or 6)
    if r <= 3 then return rstr(6) end
    if r == 4 then return math.random(-3, 12) end
    if r == 5 then return math.random(1, 1000) / 7 end
    return math.random(2) == 1
end
local gen
gen = function(depth)
    local r = math.random(depth > 2 and 9 or 12)
    if r == 1 then return math.random(0, 100) end
    if r == 2 then
        return ({-1, -128, -40000, -2^40, 2^53, 2^63, 1e14, 1e14 - 1, 123456789012,
                 0})[math.random(10)]
    end
    if r == 3 then
        return ({0.5, -1.25, 1e300, 1e-300, 3.14159265358979, 2.0, 1/3, -0.0, 1e15})[math.random(9)]
    end
    if r == 4 or r == 5 then return rstr(12) end
    if r == 6 then return rstr(120) end
    if r == 7 then return ({true, false, box.NULL})[math.random(3)] end
    if r == 8 then
        return ({decimal.new('1.25'), decimal.new('-7E+3'), decimal.new('0.001'),
                 uuid.fromstr('aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee')})[math.random(4)]
    end
    if r == 9 then return '\255\254' .. rstr(3) end
    if r == 10 or r == 11 then
        local t = {}
        for i = 1, math.random(0, 8) do t[i] = gen(depth + 1) end
        return t
    end
    local t = setmetatable({}, {__serialize = 'map'})
    for _ = 1, math.random(0, 9) do t[rkey()] = gen(depth + 1) end
    return t
end

if mode == 'wild' then
    local s = box.schema.space.create('wild')
    s:create_index('pk')
    for i = 1, 150 do
        local tuple = {i}
        for j = 1, math.random(1, 5) do tuple[j + 1] = gen(0) end
        s:replace(tuple)
    end
    box.snapshot()
    for i = 1, 40 do s:replace{i, gen(0), gen(1)} end
    os.exit(0)
end

-- Spaces and DDL.
local accounts = box.schema.space.create('accounts', {format = {
    {'id', 'unsigned'}, {'name', 'string'}, {'balance', 'number'}}})
accounts:create_index('pk')
accounts:create_index('name', {parts = {2, 'string'}})
local kv = box.schema.space.create('kv')
kv:create_index('pk', {parts = {1, 'string'}})
local loc = box.schema.space.create('loc', {is_local = true})
loc:create_index('pk')
local tmp = box.schema.space.create('tmp', {temporary = true})
tmp:create_index('pk')
local sync = box.schema.space.create('sync', {is_sync = true})
sync:create_index('pk')
local vy = box.schema.space.create('vy', {engine = 'vinyl'})
vy:create_index('pk')
vy:create_index('sk', {parts = {2, 'string'}, unique = false})
box.schema.sequence.create('ids')
local auto = box.schema.space.create('auto')
auto:create_index('pk', {sequence = 'ids'})
box.schema.user.create('alice', {password = 'secret'})
box.schema.user.grant('alice', 'read,write', 'space', 'accounts')
box.schema.func.create('add', {language = 'LUA', is_deterministic = true,
                               body = 'function(a, b) return a + b end'})

-- DML of every kind.
for i = 1, 20 do accounts:insert{i, 'user' .. i, i * 10.5} end
accounts:replace{3, 'replaced', 0}
accounts:update(1, {{'=', 2, 'renamed'}, {'+', 3, 5}})
accounts:update(1, {{'-', 3, 1.5}})
accounts:update(2, {{'!', 4, 'extra'}, {'=', 2, 'two'}})
accounts:update(2, {{'#', 4, 1}})
accounts:upsert({4, 'ignored', 0}, {{'+', 3, 100}})
accounts:upsert({100, 'new', 1}, {{'+', 3, 100}})
accounts:delete(5)
kv:insert{'key', {nested = {1, 2, {deep = true}}, list = {'a', 'b'}}}
kv:insert{'null', box.NULL, 'yes', 'no', '12', '1e5', '', ' x', 'a: b', '#c', '-', '- d'}
kv:insert{'long', string.rep('word ', 40), {string.rep('x', 90), string.rep('y ', 60)}}
kv:insert{'unicode', 'привет', 'emoji 😀', 'tab\there', 'two\n\nlines', '\255binary'}
kv:insert{'numbers', 0, -1, 2^53, 2^64 - 1, -2^63, 0.1, -0.0, 1e300, 100000000000000,
          decimal.new('3.14'), uuid.fromstr('11111111-2222-4333-8444-555555555555')}
loc:insert{1, 'local row'}
tmp:insert{1, 'not logged'}
sync:insert{1, 'synchronous'}
sync:insert{2, 'also synchronous'}
auto:insert{box.NULL, 'first'}
auto:insert{box.NULL, 'second'}
for i = 1, 30 do vy:replace{i, 'v' .. i % 7, {i}} end

-- Transactions.
box.begin()
accounts:insert{50, 'tx-a', 1}
accounts:insert{51, 'tx-b', 2}
accounts:update(50, {{'=', 3, 3}})
kv:delete('null')
box.commit()
box.begin()
accounts:insert{60, 'rolled back', 0}
box.rollback()
-- Transactions with rows of a local space (a NOP follows a last local row, so
-- that the commit flag is on a global one), and a local-only one.
box.begin() loc:insert{10, 'tx-local'} accounts:insert{70, 'tx-global-70', 0} box.commit()
box.begin() accounts:insert{71, 'tx-global-71', 0} loc:insert{11, 'tx-local'} box.commit()
box.begin() loc:insert{12, 'only local'} loc:insert{13, 'only local'} box.commit()
-- A before_replace trigger that keeps the old tuple: a NOP row.
local keep = kv:before_replace(function(old) return old end)
kv:replace{'key', 'ignored'}
kv:before_replace(nil, keep)

-- Random values.
local r = box.schema.space.create('random')
r:create_index('pk')
for i = 1, 150 do
    local tuple = {i}
    for j = 1, math.random(1, 6) do tuple[j + 1] = gen(0) end
    r:replace(tuple)
end
for _ = 1, 30 do
    local id = math.random(1, 150)
    pcall(r.update, r, id, {{'=', 2, gen(0)}})
    pcall(r.upsert, r, {id, gen(0)}, {{'=', 2, gen(0)}})
end

-- A DELETE by a unique secondary key of a vinyl space is logged with index_id.
local vyd = box.schema.space.create('vyd', {engine = 'vinyl'})
vyd:create_index('pk')
vyd:create_index('uk', {parts = {2, 'string'}})
vyd:insert{1, 'one'}
vyd.index.uk:delete('one')

box.snapshot()

-- After the snapshot: more rows and more DDL.
accounts:insert{200, 'after snapshot', 1}
accounts.index.name:drop()
kv:truncate()
kv:insert{'after', 'truncate'}
for i = 31, 40 do vy:replace{i, 'late', {}} end
box.snapshot()
accounts:delete(200)
-- Let vinyl finish its background dumps and compactions: a run file cut by
-- os.exit() would have no EOF marker.
local fiber = require('fiber')
local deadline = fiber.clock() + 30
while box.stat.vinyl().scheduler.tasks_inprogress > 0 and fiber.clock() < deadline do
    fiber.sleep(0.01)
end
os.exit(0)
"""


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} (Tarantool 2.6.0) must be installed for interop tests")
    return path


def make_instance(directory: Path, mode: str) -> Path:
    directory.mkdir()
    script = directory / "make.lua"
    script.write_text(SCRIPT)
    result = subprocess.run([tool("tarantool"), str(script), mode], cwd=directory,
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 0, (result.stderr.decode()
                                    + (directory / "tarantool.log").read_text())
    return directory


@pytest.fixture(scope="module")
def instances(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cat-oracle")
    return {mode: make_instance(root / mode, mode) for mode in ("main", "wild")}


def data_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*")
                  if p.suffix in (".xlog", ".snap", ".vylog", ".run", ".index"))


def cat(which: str, args: list, cwd: Path) -> subprocess.CompletedProcess:
    command = [SPINDLE, "cat"] if which == "spindle" else [tool("tarantoolctl"), "cat"]
    return subprocess.run(command + [str(a) for a in args], cwd=cwd, capture_output=True,
                          timeout=TIMEOUT)


def _format(args: list) -> str:
    args = [str(a) for a in args]
    return args[args.index("--format") + 1] if "--format" in args else "yaml"


# Rows that differed only in the order of data map keys, per data directory
# (reported, and checked to be a minority of what was compared).
REORDERED: dict[str, list[int]] = {}


def compare(directory: Path, args: list) -> str | None:
    """None if both tools agree (rows with data maps compared parsed), else a
    description of the difference."""
    theirs = cat("tarantoolctl", args, directory)
    ours = cat("spindle", args, directory)
    if theirs.returncode != 0:
        return f"tarantoolctl failed on {args}: {theirs.stderr.decode()}"
    problems, reordered = output_problems(ours.stdout, theirs.stdout, _format(args))
    if problems:
        return f"{args}: stdout differs:\n" + "\n".join(problems[:3])
    counts = REORDERED.setdefault(directory.name, [0, 0])
    counts[0] += reordered
    counts[1] += theirs.stdout.count(b"\n---\n" if _format(args) == "yaml" else b"\n")
    if ours.stderr != theirs.stderr or ours.returncode != 0:
        return (f"{args}: stderr/status differ: tarantoolctl {theirs.stderr!r}, "
                f"spindle {ours.returncode} {ours.stderr!r}")
    return None


def test_the_instance_wrote_every_kind_of_file(instances):
    files = data_files(instances["main"])
    suffixes = [p.suffix for p in files]
    assert suffixes.count(".snap") == 3 and suffixes.count(".xlog") >= 3
    assert ".vylog" in suffixes and ".run" in suffixes and ".index" in suffixes
    biggest = max((p for p in files if p.suffix == ".xlog"), key=lambda p: p.stat().st_size)
    blocks = decode_file(biggest.read_bytes()).blocks
    assert len(blocks) > 100
    snapshot = max(p for p in files if p.suffix == ".snap")
    assert any(b.compressed for b in decode_file(snapshot.read_bytes()).blocks)
    # Rows tarantool rarely writes are in there.
    text = cat("spindle", [biggest, "--show-system"], instances["main"]).stdout.decode()
    for needle in ("type: 40\n", "commit: true", "group_id: 1", "type: UPSERT",
                   "type: DELETE", "operations:", "!!binary", "space_id: 340", "type: NOP\n"):
        assert needle in text, needle


def _block_key_orders(text: str) -> tuple[set, set]:
    """The key orders of HEADER and of BODY maps with several keys in yaml
    output (their keys are the lines indented by exactly two spaces)."""
    headers, bodies = set(), set()
    for document in text.split("\n---\n"):
        keys: dict[str, list[str]] = {"HEADER": [], "BODY": []}
        section = None
        for line in document.splitlines():
            if line in ("HEADER:", "BODY:") or line.startswith("BODY: "):
                section = line.split(":")[0]
                continue
            match = re.match(r"  ([A-Za-z_]+):", line)
            if section and match:
                keys[section].append(match.group(1))
        if keys["HEADER"]:
            headers.add(tuple(keys["HEADER"]))
        if len(keys["BODY"]) > 1:
            bodies.add(tuple(keys["BODY"]))
    return headers, bodies


def test_recorded_key_orders_are_tarantoolctls(instances):
    """cat_record's tables of HEADER and BODY key orders are exactly the
    orders tarantoolctl prints over every file the instance wrote."""
    directory = instances["main"]
    headers, bodies = set(), set()
    for path in data_files(directory):
        text = cat("tarantoolctl", [path.relative_to(directory), "--show-system"],
                   directory).stdout.decode("utf-8", "replace")
        found = _block_key_orders(text)
        headers |= found[0]
        bodies |= found[1]
    def as_text(orders: dict) -> set:
        return {tuple(key.decode() for key in keys) for keys in orders.values()}

    assert headers == as_text(HEADER_ORDERS)
    assert bodies == as_text(BODY_ORDERS)


@pytest.mark.parametrize("fmt", ["yaml", "json", "lua"])
@pytest.mark.parametrize("system", [True, False], ids=["show-system", "default"])
def test_every_file_every_format(instances, fmt, system):
    directory = instances["main"]
    REORDERED.clear()
    problems = []
    for path in data_files(directory):
        args = [path.relative_to(directory), "--format", fmt]
        if system:
            args.append("--show-system")
        problem = compare(directory, args)
        if problem:
            problems.append(problem)
    assert not problems, "\n\n".join(problems)
    # Most rows hold no map with several keys: they were the same bytes.
    reordered, rows = REORDERED["main"]
    assert 0 < reordered < rows / 2


@pytest.mark.parametrize("fmt", ["yaml", "lua"])
def test_maps_with_any_keys(instances, fmt):
    directory = instances["wild"]
    problems = [compare(directory, [path.name, "--format", fmt, "--show-system"])
                for path in data_files(directory)]
    assert not [p for p in problems if p], "\n\n".join(p for p in problems if p)


FILTERS = [
    ["--from", "30", "--to", "80"],
    ["--from", "30", "--to", "80", "--show-system"],
    ["--space", "512"],
    ["--space", "280", "--space", "512", "--space", "516"],
    ["--replica", "1", "--to", "60"],
    ["--replica", "1", "--replica", "5", "--to", "60", "--show-system"],
    ["--replica", "0", "--show-system"],
    ["--format", "json", "--space", "512", "--from", "100"],
    ["--format", "lua", "--to", "150"],
]


@pytest.mark.parametrize("args", FILTERS, ids=" ".join)
def test_filters(instances, args):
    directory = instances["main"]
    problems = [compare(directory, [path.name, *args])
                for path in data_files(directory) if path.suffix in (".xlog", ".snap")]
    assert not [p for p in problems if p], "\n\n".join(p for p in problems if p)


def test_all_files_in_one_command(instances):
    directory = instances["main"]
    names = [p.name for p in data_files(directory) if p.suffix in (".xlog", ".snap")]
    assert compare(directory, [*names, "--show-system"]) is None


def test_damaged_copy_prints_what_tarantoolctl_prints(instances, tmp_path):
    source = max((p for p in data_files(instances["main"]) if p.suffix == ".xlog"),
                 key=lambda p: p.stat().st_size)
    data = bytearray(source.read_bytes())
    blocks = decode_file(bytes(data)).blocks
    victim = blocks[len(blocks) // 2]
    data[victim.offset + victim.size - 1] ^= 0x01
    damaged = tmp_path / source.name
    damaged.write_bytes(bytes(data[:blocks[-5].offset + 7]))
    theirs = cat("tarantoolctl", [damaged.name, "--show-system"], tmp_path)
    ours = cat("spindle", [damaged.name, "--show-system"], tmp_path)
    assert theirs.stdout
    problems, _ = output_problems(ours.stdout, theirs.stdout, "yaml")
    assert not problems, "\n".join(problems[:3])
    assert ours.returncode == 1
    err = ours.stderr.decode()
    assert f"corrupted block at offset {victim.offset}: tx checksum mismatch" in err
    assert f"truncated: the file ends inside the block at offset {blocks[-5].offset}" in err
