"""`spindle cat` run as a command, against the real `tarantoolctl cat` of Tarantool 2.6.0.

* every fixture file: `--show-system` output byte for byte equal to its
  `.cat.txt` (captured as `tarantoolctl cat NAME --show-system 2>&1` in the
  fixture's directory: the "Processing file" line is tarantoolctl's stderr);
* json and lua formats, filters and several files at once: stdout byte for byte
  equal to what `tarantoolctl cat` prints here and now;
* a file written by Spindle's own XlogWriter with rows tarantool rarely writes
  (NOP, local rows, CONFIRM/ROLLBACK, odd values), and one with values that
  exercise quoting, folding and number formats: the same rows as tarantoolctl;
* damaged files: rows before the damage printed as tarantoolctl prints them, a
  message naming the file (and the offset of a corrupted block) on stderr, exit 1.

Maps inside the data (tuple fields, operations...) are printed by spindle in
the order of their keys in the MsgPack, by tarantoolctl in the order of its Lua
hash tables. A row holding such a map with two keys or more is therefore
compared parsed (`row_problem`): the same values, maps as sets of pairs, but
the record's, HEADER's and BODY's keys in the same order. Every other row must
be the same bytes. The fixture files have no such maps whose order differs.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
import yaml

from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.request import encode_dml_body, synchro_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import XlogMeta, decode_file
from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogWriter

SPINDLE = str(Path(sys.executable).parent / "spindle")
FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
FIXTURE_FILES = sorted(p for p in FIXTURES.glob("*/*") if p.suffix in (".xlog", ".snap"))
MASTER = FIXTURES / "master"
UUID = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
TIMEOUT = 120


def tarantoolctl() -> str:
    path = shutil.which("tarantoolctl")
    if path is None:
        pytest.fail("tarantoolctl (Tarantool 2.6.0) must be installed to check `spindle cat`")
    return path


def run(tool: str, args: list[str], cwd: Path | None = None,
        combined: bool = False) -> subprocess.CompletedProcess:
    command = [SPINDLE, "cat"] if tool == "spindle" else [tarantoolctl(), "cat"]
    return subprocess.run(command + [str(a) for a in args], cwd=cwd, capture_output=not combined,
                          stdout=subprocess.PIPE if combined else None,
                          stderr=subprocess.STDOUT if combined else None, timeout=TIMEOUT)


def assert_same_stdout(args: list, cwd: Path | None = None) -> subprocess.CompletedProcess:
    ours = run("spindle", args, cwd)
    theirs = run("tarantoolctl", args, cwd)
    assert theirs.returncode == 0, theirs.stderr.decode()
    assert ours.stdout == theirs.stdout
    assert ours.returncode == 0, ours.stderr.decode()
    return ours


def processing(*names) -> bytes:
    return b"".join(f"Processing file '{name}'\n".encode() for name in names)


# ---------------------------------------------------------------------------
# Comparing rows whose data maps may be in another order.

class _Map(list):
    """A parsed mapping: its (key, value) pairs, in printed order."""


class _YamlLoader(yaml.SafeLoader):
    pass


_YamlLoader.add_constructor(
    "tag:yaml.org,2002:map",
    lambda loader, node: _Map(loader.construct_pairs(node, deep=True)))

_LUA_ROW = re.compile(rb"(box\.space\[\d+\]:\w+)\((.*)\)\n?", re.S)
_LUA_TOKEN = re.compile(rb"\s*(\{|\}|\[|\]|=|,|'(?:\\x[0-9a-f]{2})*'"
                        rb"|cdata<void \*>: NULL|[^\s{}\[\],=]+)")


def _lua_values(text: bytes) -> list:
    """The arguments of a `box.space[N]:op(...)` line: tables as _Map of
    (key, value), scalars as their text."""
    tokens, pos = [], 0
    while pos < len(text):
        match = _LUA_TOKEN.match(text, pos)
        assert match, text[pos:]
        tokens.append(match.group(1))
        pos = match.end()

    def value(i: int) -> tuple:
        if tokens[i] != b"{":
            return tokens[i], i + 1
        pairs, i = _Map(), i + 1
        while tokens[i] != b"}":
            assert tokens[i] == b"["
            key, i = value(i + 1)
            assert tokens[i:i + 2] == [b"]", b"="]
            item, i = value(i + 2)
            pairs.append((key, item))
            if tokens[i] == b",":
                i += 1
        return pairs, i + 1

    values, i = [], 0
    while i < len(tokens):
        item, i = value(i)
        values.append(item)
        if i < len(tokens):
            assert tokens[i] == b","
            i += 1
    return values


def _canonical(value, depth: int):
    """`value` with the pairs of maps deeper than record/HEADER/BODY sorted."""
    if isinstance(value, _Map):
        pairs = [(_canonical(k, depth + 1), _canonical(v, depth + 1)) for k, v in value]
        if depth >= 2:
            pairs.sort(key=repr)
        return ("map", tuple(pairs))
    if isinstance(value, list):
        return ("seq", tuple(_canonical(item, depth + 1) for item in value))
    return (type(value).__name__, value)


def _has_data_map(value, depth: int, lua: bool = False) -> bool:
    """Whether a map with two keys or more is inside the data (depth >= 2;
    in lua, a table that is not an array)."""
    if isinstance(value, _Map):
        keys = [k for k, _ in value]
        if depth >= 2 and len(value) > 1 and not (
                lua and keys == [str(i).encode() for i in range(1, len(keys) + 1)]):
            return True
        return any(_has_data_map(k, depth + 1, lua) or _has_data_map(v, depth + 1, lua)
                   for k, v in value)
    if isinstance(value, list):
        return any(_has_data_map(item, depth + 1, lua) for item in value)
    return False


def _parse_row(row: bytes, fmt: str) -> tuple:
    """(canonical form, whether it holds a data map with several keys)."""
    if fmt == "lua":
        match = _LUA_ROW.fullmatch(row)
        assert match, row
        values = _lua_values(match.group(2))
        return ((match.group(1), _canonical(values, 2)),
                any(_has_data_map(v, 2, lua=True) for v in values))
    if fmt == "json":
        parsed = json.loads(row.decode("utf-8", "surrogateescape"), object_pairs_hook=_Map)
    else:
        parsed = yaml.load(row, Loader=_YamlLoader)
    return _canonical(parsed, 0), _has_data_map(parsed, 0)


def split_rows(out: bytes, fmt: str) -> list[bytes]:
    if fmt == "yaml":
        return out.split(b"\n---\n")
    return out.splitlines(keepends=True)


def row_problem(ours: bytes, theirs: bytes, fmt: str) -> str | None:
    """None if the rows are the same bytes, or differ only in the order of the
    keys of data maps with several keys; else what is wrong."""
    if ours == theirs:
        return None
    try:
        theirs_parsed, has_map = _parse_row(theirs, fmt)
        ours_parsed, _ = _parse_row(ours, fmt)
    except Exception as exc:     # noqa: BLE001 - reported as the difference
        return f"unparsable row ({exc!r})"
    if not has_map:
        return "differs, and holds no map with several keys"
    if ours_parsed != theirs_parsed:
        return "differs in more than the order of map keys"
    return None


def output_problems(ours: bytes, theirs: bytes, fmt: str) -> tuple[list[str], int]:
    """(problems, number of rows that differ only in map key order)."""
    if ours == theirs:
        return [], 0
    a, b = split_rows(theirs, fmt), split_rows(ours, fmt)
    if len(a) != len(b):
        return [f"{len(b)} rows, tarantoolctl printed {len(a)}"], 0
    problems, reordered = [], 0
    for theirs_row, ours_row in zip(a, b):
        if theirs_row == ours_row:
            continue
        problem = row_problem(ours_row, theirs_row, fmt)
        if problem:
            problems.append(f"{problem}:\n tarantoolctl: {theirs_row!r}\n spindle:      "
                            f"{ours_row!r}")
        else:
            reordered += 1
    return problems, reordered


def assert_same_rows(args: list,
                     cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """Like assert_same_stdout, rows holding data maps compared parsed;
    also returns how many rows differ only in the order of map keys."""
    fmt = args[args.index("--format") + 1] if "--format" in args else "yaml"
    ours = run("spindle", args, cwd)
    theirs = run("tarantoolctl", args, cwd)
    assert theirs.returncode == 0, theirs.stderr.decode()
    problems, reordered = output_problems(ours.stdout, theirs.stdout, fmt)
    assert not problems, "\n".join(problems[:5])
    assert ours.returncode == 0, ours.stderr.decode()
    return ours, reordered


def test_row_comparison():
    """The comparison itself: strict where it must be."""
    row = b"---\nHEADER:\n  lsn: 1\n  type: INSERT\nBODY:\n  space_id: 512\n"
    two = row + b"  tuple: [1, {'a': 1, 'b': [2]}]\n"
    assert row_problem(two, two.replace(b"'a': 1, 'b': [2]", b"'b': [2], 'a': 1"), "yaml") is None
    assert row_problem(two, two.replace(b"'b': [2]", b"'b': [3]"), "yaml")
    assert row_problem(two, two.replace(b"lsn: 1\n  type: INSERT", b"type: INSERT\n  lsn: 1"),
                       "yaml")
    one = row + b"  tuple: [1, {'a': 1}]\n"
    assert row_problem(one, one.replace(b"[1, {", b"[1,\n    {"), "yaml")
    assert row_problem(b'{"BODY":{"t":[{"a":1,"b":2}]}}\n', b'{"BODY":{"t":[{"b":2,"a":1}]}}\n',
                       "json") is None
    assert row_problem(b'{"BODY":{"t":[1,2]}}\n', b'{"BODY":{"t":[2,1]}}\n', "json")
    lua = b"box.space[512]:insert({[1] = 1, [2] = {['\\x61'] = 1, [2] = true}})\n"
    swapped = lua.replace(b"['\\x61'] = 1, [2] = true", b"[2] = true, ['\\x61'] = 1")
    assert swapped != lua and row_problem(lua, swapped, "lua") is None
    assert row_problem(lua, lua.replace(b"[1] = 1", b"[1] = 5"), "lua")
    assert row_problem(lua, lua.replace(b"] = true", b"] = false"), "lua")


# ---------------------------------------------------------------------------
# Fixture files.

def test_fixtures_are_there():
    assert len(FIXTURE_FILES) == 8
    for path in FIXTURE_FILES:
        reference = path.with_name(path.name + ".cat.txt").read_bytes()
        # The capture is tarantoolctl's stderr line followed by its stdout.
        assert reference.startswith(processing(path.name))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_yaml_is_byte_identical(path):
    result = run("spindle", [path.name, "--show-system"], cwd=path.parent, combined=True)
    assert result.returncode == 0
    assert result.stdout == path.with_name(path.name + ".cat.txt").read_bytes()


@pytest.mark.parametrize("fmt", ["json", "lua", "yaml"])
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_formats_match_tarantoolctl(path, fmt):
    result = assert_same_stdout([path.name, "--show-system", "--format", fmt], cwd=path.parent)
    assert result.stderr == processing(path.name)


def test_default_hides_system_spaces():
    result = assert_same_stdout(["00000000000000000000.xlog"], cwd=MASTER)
    text = result.stdout.decode()
    assert "space_id: 512" in text and "space_id: 280" not in text
    snap = assert_same_stdout(["00000000000000000000.snap"], cwd=MASTER)
    assert snap.stdout == b""      # bootstrap snapshot: system spaces only


FILTERS = [
    ["--from", "10", "--to", "20"],
    ["--from", "10", "--to", "20", "--show-system"],
    ["--to", "19"],
    ["--from", "22"],
    ["--space", "512"],
    ["--space", "280", "--space", "513"],
    ["--space=288"],
    ["--replica", "1"],
    ["--replica", "1", "--to", "15", "--show-system"],
    ["--replica", "1", "--replica", "2", "--to", "15", "--show-system"],
    ["--replica", "2", "--show-system"],
    ["--replica", "0", "--show-system"],
    ["--space", "512", "--format", "json", "--from", "12"],
    ["--space", "512", "--format", "lua", "--replica", "1"],
]


@pytest.mark.parametrize("name", ["00000000000000000000.xlog", "00000000000000000025.snap"])
@pytest.mark.parametrize("args", FILTERS, ids=" ".join)
def test_filters_match_tarantoolctl(name, args):
    assert_same_stdout([name, *args], cwd=MASTER)


@pytest.mark.parametrize("args", FILTERS[:6], ids=" ".join)
def test_filters_on_a_replica_xlog(args):
    assert_same_stdout(["00000000000000000014.xlog", *args], cwd=FIXTURES / "replica")


@pytest.mark.parametrize("fmt", ["yaml", "json", "lua"])
def test_several_files(fmt):
    names = ["00000000000000000000.xlog", "00000000000000000026.xlog",
             "00000000000000000025.xlog", "00000000000000000025.snap"]
    result = assert_same_stdout([*names, "--show-system", "--format", fmt], cwd=MASTER)
    assert result.stderr == processing(*names)
    if fmt == "yaml":     # each file's rows are one YAML stream ending with '...'
        assert result.stdout.count(b"\n...\n\n") == 3


# ---------------------------------------------------------------------------
# A file written by Spindle, with rows of every kind.

TS = 1795308837.25


def _dml(rtype, lsn, space_id=512, **kwargs) -> XRow:
    return XRow(type=rtype, replica_id=1, lsn=lsn, timestamp=TS + lsn,
                body=encode_dml_body(rtype, space_id, **kwargs))


@pytest.fixture
def odd_xlog(tmp_path) -> Path:
    rows = [
        [_dml(IprotoType.INSERT, 1, tuple=[1, "a", b"\x00\xffbin", -3, 2**40, 2**60, -2**62,
                                           None, True, {"k": [1, {"n": "ünï"}]}, 0.5, 1e300,
                                           "null", "12", "", " x", "a: b", "x" * 150,
                                           {1: "one", 2: "two"}, {3: 3, "s": "s", -1: 0}])],
        [_dml(IprotoType.REPLACE, 2, space_id=280, tuple=[600, 1, "t", "memtx", 0, {}, []])],
        [_dml(IprotoType.UPDATE, 3, index_base=1, key=[1], ops=[["=", 2, "aa"], ["+", 3, 1]])],
        [_dml(IprotoType.UPSERT, 4, index_base=1, tuple=[3, "c"], ops=[["=", 2, "cc"]])],
        [_dml(IprotoType.DELETE, 5, index_id=1, key=[2])],
        [synchro_row(IprotoType.CONFIRM, 1, 5, replica_id=1, lsn=6, timestamp=TS + 6)],
        [XRow(type=IprotoType.NOP, replica_id=1, lsn=7, timestamp=TS + 7)],
        [XRow(type=IprotoType.INSERT, replica_id=0, group_id=GroupId.LOCAL, lsn=1,
              timestamp=TS + 8, body=encode_dml_body(IprotoType.INSERT, 600, tuple=[1, "l"]))],
        [synchro_row(IprotoType.ROLLBACK, 1, 8, replica_id=1, lsn=9, timestamp=TS + 9)],
    ]
    multi = [_dml(IprotoType.INSERT, lsn, tuple=[lsn, "multi " * 10]) for lsn in range(10, 40)]
    for row in multi:
        row.tsn, row.is_commit = 10, False
    multi[-1].is_commit = True
    rows.append(multi)      # a zstd block
    writer = XlogWriter.create(str(tmp_path), XlogMeta("XLOG", UUID, VClock()), sync="never")
    for transaction in rows:
        writer.write_tx(transaction)
    writer.close()
    return Path(writer.path)


@pytest.mark.parametrize("fmt", ["yaml", "json", "lua"])
@pytest.mark.parametrize("extra", [[], ["--show-system"], ["--replica", "1"], ["--space", "600"]],
                         ids=" ".join)
def test_spindle_written_file(odd_xlog, fmt, extra):
    """The same rows; only the first holds maps with several keys (its last
    two fields), which may come out in another order."""
    result, reordered = assert_same_rows([odd_xlog.name, "--format", fmt, *extra],
                                         cwd=odd_xlog.parent)
    assert reordered <= 1
    if fmt == "yaml" and extra != ["--space", "600"]:
        first = result.stdout.split(b"\n---\n")[0]
        assert b"{1: 'one', 2: 'two'}, {3: 3, 's': 's', -1: 0}]" in first   # MsgPack order


def _values_xlog(directory: Path, rows: list[bytes]) -> Path:
    writer = XlogWriter.create(str(directory), XlogMeta("XLOG", UUID, VClock()), sync="never")
    for lsn, body in enumerate(rows, 1):
        writer.write_tx([XRow(type=IprotoType.INSERT, replica_id=1, lsn=lsn,
                              timestamp=TS + lsn, body=body)])
    writer.close()
    return Path(writer.path)


# Strings for the quoting rules: plain, quoted because they read as something
# else, double-quoted, literal, binary, folded...
ODD_STRINGS = [
    "null", "Null", "~", "true", "True", "false", "yes", "Yes", "no", "on", "", "nil", "1",
    "+1", "-1", "1.5", ".5", "5.", "1e5", "1e", ".", "0x10", "0x", "0x1p4", "0x.8", "0b11",
    "1LL", "0b1.", "0b.0", "0b1.1", " 1 ", "\t1\n", "1 1", "inf", "-Infinity", "nan", "+nan",
    ".inf", "1_000", "0777",
    "1:2", "- a", "-", "--", "---", "...", "a b", "#", "a #b", "? a", ": a", "a:", "a:b", "!a",
    "&a", "*a", "|", ">", "%", "@", "`", ",", "[", "]", "{", "}", "'", '"', "a b ", " a",
    "a\n", "\na", "a\n\nb", "\n\n1", "1\n\n", "a\n\n", "a\nb", "\x85", "\u2028", "\ufeff",
    "\x7f", "\t", "\r", "\0", "\x1b", "é", "\ue000", "\U0001F600", "\U0010FFFF", "\ufffe",
    "\u200b", "a\tb", "a\rb", "a \n b", "\xa0", "x" * 200, "word " * 40, "a\n\n" * 30,
    "emoji \U0001F600 " * 12, "\0 \t " * 30, "it's", "a\\b",
]
ODD_BINARY = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\x80", b"a\xffb", b"\xef\xbf\xbe"]


def _double(x: float) -> bytes:
    return b"\xcb" + struct.pack(">d", x)


ODD_NUMBERS = [msgpack.packb(i) for i in (
    0, 127, 255, 2**32, 10**14 - 1, 10**14, 2**53, 2**63, 2**64 - 1, -1, -33, -2**31 - 1,
    -(10**14 - 1), -10**14, -2**63)] + [_double(x) for x in (
        0.0, -0.0, 0.5, 2.0, 1e14, 1e16, 2.0**63, 2.0**64, 2.0**64 - 2048, -2.0**63,
        -2.0**63 - 2048, 1e300, 5e-324, 1 / 3, 1795308837.0353, math.inf, -math.inf, math.nan,
        -math.nan, 12345678901234.5, -12345678901234.5, 1234567890123.25)] + [
    b"\xca" + struct.pack(">f", 0.1), b"\xd0\x05", b"\xd3" + struct.pack(">q", 10**14),
    b"\xc7\x03\x01\x02\x31\x4c",                  # decimal 3.14
    b"\xd5\x01\xfd\x7d",                          # decimal -7E+3
    b"\xd5\x01\x05\x0c",                          # decimal 0E-5
    b"\xc7\x04\x01\x03\x01\x23\x4d",              # decimal -1.234
    b"\xd8\x02" + bytes(range(16)),                # uuid
]


def _array(items: list[bytes]) -> bytes:
    return b"\xdc" + struct.pack(">H", len(items)) + b"".join(items)


@pytest.mark.parametrize("fmt", ["yaml", "json", "lua"])
def test_values_print_like_tarantoolctl(tmp_path, fmt):
    """Scalars of every kind in tuples (flow style), as single-key map keys and
    values, and (yaml, json) as a body value of their own (block style): the
    same bytes as tarantoolctl."""
    pack = msgpack.packb
    head = b"\x82\x10\xcd\x02\x00\x21"            # {space_id: 512, tuple: ...}
    scalars = [pack(s) for s in ODD_STRINGS] + [pack(b) for b in ODD_BINARY] + ODD_NUMBERS
    keys = [k for k in scalars if k not in (_double(math.nan), _double(-math.nan))]
    rows = [head + _array([pack(n), item]) for n, item in enumerate(scalars)]
    rows += [head + _array([b"\x81" + key + b"\xa1v", b"\x81\xa1k" + key]) for key in keys
             if fmt != "json" or key[0] in range(0xa0, 0xc0) or key[:1] in (b"\xd9", b"\xc4")]
    rows.append(head + _array([pack(n) for n in range(40)] + [_array(scalars[:60])]))
    for length in (127, 128, 129):        # simple keys up to 128 bytes
        rows += [head + _array([pack({key: 1})])
                 for key in ("k" * length, "k" * (length % 2) + "ж" * (length // 2))]
    if fmt != "lua":                      # tarantoolctl's lua writer wants tables
        rows += [head + item for item in scalars]
    path = _values_xlog(tmp_path, rows)
    assert_same_stdout([path.name, "--format", fmt], cwd=tmp_path)


def test_json_cannot_encode_every_key(tmp_path):
    """json.encode() refuses a float (or boolean) map key: tarantoolctl dies
    there; spindle says which row, goes on, and exits 1."""
    rows = [[_dml(IprotoType.INSERT, 1, tuple=[1, "before"])],
            [_dml(IprotoType.INSERT, 2, tuple=[2, {4.5: "float key"}])],
            [_dml(IprotoType.INSERT, 3, tuple=[3, "after"])]]
    writer = XlogWriter.create(str(tmp_path), XlogMeta("XLOG", UUID, VClock()), sync="never")
    for transaction in rows:
        writer.write_tx(transaction)
    writer.close()
    args = [writer.path, "--format", "json"]
    theirs = run("tarantoolctl", args)
    assert theirs.returncode == 1 and b"table key must be a number or string" in theirs.stderr
    ours = run("spindle", args)
    assert ours.returncode == 1
    assert ours.stdout.startswith(theirs.stdout) and b'"before"' in theirs.stdout
    assert b'"after"' in ours.stdout[len(theirs.stdout):]
    assert "row with lsn 2 at block offset" in ours.stderr.decode()
    assert "table key must be a number or string" in ours.stderr.decode()
    # yaml and lua have no such limit
    for fmt in ("yaml", "lua"):
        assert_same_stdout([writer.path, "--format", fmt])


# ---------------------------------------------------------------------------
# Damage.

def _copy(tmp_path: Path, data: bytes, name: str = "00000000000000000000.xlog") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_missing_file_does_not_stop_the_others(tmp_path):
    good = MASTER / "00000000000000000025.xlog"
    result = run("spindle", [tmp_path / "nope.xlog", good, "--show-system"])
    assert result.returncode == 1
    alone = run("spindle", [good, "--show-system"])
    assert result.stdout == alone.stdout and b"after-snapshot" in result.stdout
    err = result.stderr.decode()
    assert f"{tmp_path / 'nope.xlog'}: no such file" in err
    assert err.index("nope.xlog: no such file") < err.index(f"Processing file '{good}'")


@pytest.mark.parametrize("content, message", [
    (b"hello, world\n", "not an .xlog/.snap file: bad header (Unexpected end of file)"),
    (b"\x00" * 5000, "not an .xlog/.snap file: bad header"),
    (b"FOO\n0.13\nInstance: 11111111-1111-4111-8111-111111111111\nVClock: {}\n\n",
     "not an .xlog/.snap file: unsupported file type 'FOO'"),
    (b"XLOG\n0.99\n\n", "unsupported file format version 0.99"),
])
def test_not_an_xlog(tmp_path, content, message):
    path = _copy(tmp_path, content, "junk.xlog")
    result = run("spindle", [path])
    assert result.returncode == 1
    assert result.stdout == b""
    assert f"spindle cat: {path}: " in result.stderr.decode()
    assert message in result.stderr.decode()


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b"XLOG\n0.13\nVersion: 2.6.0-0-g47aa4e01e\nInst",
     "truncated: the file ends inside its text header"),
])
def test_empty_or_cut_in_the_header(tmp_path, content, message):
    path = _copy(tmp_path, content)
    result = run("spindle", [path])
    assert result.returncode == 1 and result.stdout == b""
    assert f"spindle cat: {path}: {message}" in result.stderr.decode()


def test_a_directory(tmp_path):
    result = run("spindle", [tmp_path])
    assert result.returncode == 1
    assert f"{tmp_path}: is a directory" in result.stderr.decode()


@pytest.mark.parametrize("fmt", ["yaml", "json", "lua"])
def test_truncated_file_prints_the_rows_before(tmp_path, fmt):
    data = (MASTER / "00000000000000000000.xlog").read_bytes()
    blocks = decode_file(data).blocks
    cut = blocks[10].offset + blocks[10].size // 2
    path = _copy(tmp_path, data[:cut])
    ours = run("spindle", [path, "--show-system", "--format", fmt])
    theirs = run("tarantoolctl", [path, "--show-system", "--format", fmt])
    assert ours.stdout == theirs.stdout      # tarantoolctl: silently the same rows
    assert ours.returncode == 1
    err = ours.stderr.decode()
    assert f"spindle cat: {path}: truncated" in err and f"offset {blocks[10].offset}" in err
    if fmt == "yaml":
        assert ours.stdout.endswith(b"\n...\n\n")
        # The message comes after the YAML stream is closed.
        combined = run("spindle", [path, "--show-system"], combined=True).stdout
        assert combined.endswith(f"{blocks[10].offset} on are lost\n".encode())


def test_torn_first_block(tmp_path):
    data = (MASTER / "00000000000000000000.xlog").read_bytes()
    first = decode_file(data).blocks[0]
    path = _copy(tmp_path, data[:first.offset + 5])
    result = run("spindle", [path, "--show-system"])
    assert result.returncode == 1 and result.stdout == b""
    assert f"truncated: the file ends inside the block at offset {first.offset}" in \
        result.stderr.decode()


@pytest.mark.parametrize("where", ["payload", "magic", "fixheader length"])
def test_corrupted_block_is_reported_and_skipped(tmp_path, where):
    data = bytearray((MASTER / "00000000000000000000.xlog").read_bytes())
    victim = decode_file(bytes(data)).blocks[7]
    offset = {"payload": victim.offset + victim.size - 3, "magic": victim.offset + 1,
              "fixheader length": victim.offset + 4}[where]
    data[offset] ^= 0x5A
    path = _copy(tmp_path, bytes(data))
    ours = run("spindle", [path, "--show-system"])
    theirs = run("tarantoolctl", [path, "--show-system"])
    assert ours.stdout == theirs.stdout     # the block is skipped by both
    assert ours.returncode == 1
    text = ours.stdout.decode()
    lost = victim.rows[0].lsn
    assert f"lsn: {lost - 1}\n" in text and f"lsn: {lost}\n" not in text \
        and f"lsn: {lost + 1}\n" in text
    err = ours.stderr.decode()
    assert f"spindle cat: {path}: corrupted block at offset {victim.offset}" in err
    # In the combined output the message sits where the lost rows would be.
    combined = run("spindle", [path, "--show-system"], combined=True).stdout.decode()
    message = combined.index("corrupted block")
    assert combined.rindex(f"lsn: {lost - 1}\n", 0, message) < message \
        < combined.index(f"lsn: {lost + 1}\n")


def test_corrupted_snapshot(tmp_path):
    data = bytearray((MASTER / "00000000000000000025.snap").read_bytes())
    block = decode_file(bytes(data)).blocks[0]
    data[block.offset + 100] ^= 0xFF          # inside the only (zstd) block
    path = _copy(tmp_path, bytes(data), "00000000000000000025.snap")
    ours = run("spindle", [path, "--show-system"])
    theirs = run("tarantoolctl", [path, "--show-system"])
    assert ours.stdout == theirs.stdout == b""
    assert ours.returncode == 1
    assert f"corrupted block at offset {block.offset}: tx checksum mismatch" in \
        ours.stderr.decode()


def test_data_after_eof_marker(tmp_path):
    data = (MASTER / "00000000000000000025.xlog").read_bytes()
    path = _copy(tmp_path, data + b"garbage", "00000000000000000025.xlog")
    ours = run("spindle", [path, "--show-system"])
    assert ours.stdout == run("tarantoolctl", [path, "--show-system"]).stdout
    assert ours.returncode == 1
    assert f"7 bytes of data after the EOF marker at offset {len(data) - 4}" in \
        ours.stderr.decode()


def test_snapshot_without_eof_marker_is_an_error(tmp_path):
    data = (MASTER / "00000000000000000025.snap").read_bytes()
    path = _copy(tmp_path, data[:-4], "00000000000000000025.snap")
    ours = run("spindle", [path, "--show-system"])
    assert ours.stdout == run("tarantoolctl", [path, "--show-system"]).stdout != b""
    assert ours.returncode == 1
    assert "no EOF marker" in ours.stderr.decode()


def test_xlog_without_eof_marker_is_only_a_warning(tmp_path):
    """What a crash, or a running instance, leaves: all blocks are complete."""
    data = (MASTER / "00000000000000000000.xlog").read_bytes()
    path = _copy(tmp_path, data[:-4])
    ours = run("spindle", [path, "--show-system"])
    assert ours.stdout == run("tarantoolctl", [path, "--show-system"]).stdout != b""
    assert ours.returncode == 0
    assert f"spindle cat: {path}: warning: no EOF marker" in ours.stderr.decode()


# ---------------------------------------------------------------------------
# The command line.

def test_usage_errors():
    result = run("spindle", [])
    assert result.returncode == 2 and b"FILE" in result.stderr
    result = run("spindle", [MASTER / "00000000000000000025.xlog", "--format", "xml"])
    assert result.returncode == 2 and b"invalid choice" in result.stderr
    result = run("spindle", [MASTER / "00000000000000000025.xlog", "--space", "x"])
    assert result.returncode == 2


def test_help():
    result = run("spindle", ["--help"])
    assert result.returncode == 0
    for option in ("--from", "--to", "--space", "--replica", "--show-system", "--format"):
        assert option.encode() in result.stdout


def test_closed_pipe_is_quiet(tmp_path):
    path = MASTER / "00000000000000000025.snap"
    process = subprocess.Popen([SPINDLE, "cat", str(path), "--show-system"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.read(100)
    process.stdout.close()
    err = process.stderr.read()
    process.wait(timeout=TIMEOUT)
    assert b"Traceback" not in err
