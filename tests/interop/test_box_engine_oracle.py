"""The in-memory engine against the real Tarantool 2.6.0 binary.

One tarantool process (in a temporary directory) builds the same spaces and runs the
operations of CASES in order, printing each outcome (result or error message) as
base64 MsgPack; Spindle's engine runs the same operations and must give the same
results, in the same order, and the same messages.
"""
from __future__ import annotations

import base64
import math
import shutil
import subprocess
import tempfile

import pytest

from spindle.core.iproto.msgpack import unpackb
from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.box.txn import Engine
from spindle.core.iproto.errors import BoxError

TARANTOOL = shutil.which("tarantool")
TIMEOUT = 30
NAN = float("nan")


# ------------------------------------------------------------------ Lua literals

def lua(value) -> str:
    """A Lua expression producing the same MsgPack as the Python value."""
    if value is None:
        return "box.NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if -(1 << 53) < value < (1 << 53):
            return str(value)
        return f"{value}ULL" if value > 0 else f"{value}LL"
    if isinstance(value, float):
        if math.isnan(value):
            return "(0/0)"
        if math.isinf(value):
            return "math.huge" if value > 0 else "(-math.huge)"
        if value.is_integer():
            return f"ffi.cast('double', {value!r})"
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\' else f"\\{b:03d}"
                             for b in value.encode()) + '"'
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(lua(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua(k)}] = {lua(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Lua literal for {value!r}")


# ------------------------------------------------------------------ the schema

LUA_SETUP = """
local t = box.schema.space.create('t', {format = {{'id', 'unsigned'}, {'name', 'string'},
                                                  {'n', 'integer', is_nullable = true}}})
t:create_index('pk')
t:create_index('sk', {parts = {{2, 'string'}}, unique = false})
t:create_index('uk', {parts = {{3, 'integer', is_nullable = true}}, unique = true})
local m = box.schema.space.create('m')
m:create_index('pk', {parts = {{1, 'unsigned'}, {2, 'string'}}})
m:create_index('num', {parts = {{3, 'number'}}, unique = false})
m:create_index('h', {type = 'hash', parts = {{4, 'string'}}})
local sc = box.schema.space.create('sc', {format = {{'k', 'scalar'}}})
sc:create_index('pk', {parts = {{1, 'scalar'}}})
local u = box.schema.space.create('u')
u:create_index('pk')
local ci = box.schema.space.create('ci')
ci:create_index('pk', {parts = {{1, 'string', collation = 'unicode_ci'}}})
"""


def python_setup() -> Engine:
    engine = Engine()
    t = engine.create_space(512, "t", format=[
        {"name": "id", "type": "unsigned"}, {"name": "name", "type": "string"},
        {"name": "n", "type": "integer", "is_nullable": True}])
    t.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    t.create_index(IndexDef(1, "sk", parts=[KeyPart(1, "string")], unique=False))
    t.create_index(IndexDef(2, "uk", parts=[KeyPart(2, "integer", is_nullable=True)]))
    m = engine.create_space(513, "m")
    m.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned"), KeyPart(1, "string")]))
    m.create_index(IndexDef(1, "num", parts=[KeyPart(2, "number")], unique=False))
    m.create_index(IndexDef(2, "h", "HASH", parts=[KeyPart(3, "string")]))
    sc = engine.create_space(514, "sc", format=[{"name": "k", "type": "scalar"}])
    sc.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "scalar")]))
    u = engine.create_space(515, "u")
    u.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    ci = engine.create_space(516, "ci")
    ci.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "string", collation="unicode_ci")]))
    return engine


INDEX_IDS = {"t": {"pk": 0, "sk": 1, "uk": 2}, "m": {"pk": 0, "num": 1, "h": 2},
             "sc": {"pk": 0}, "u": {"pk": 0}, "ci": {"pk": 0}}

# ------------------------------------------------------------------ the operations
# (method, space, ...). Index arguments are index names.

U_OPS = [
    [["+", 3, 1]], [["+", 3, 1.5]], [["-", 3, 100]], [["+", 2, 1]], [["-", 4, 0.25]],
    [["&", 3, 3]], [["=", 3, 12], ], [["|", 3, 5]], [["^", 3, 1]], [["&", 4, 1]],
    [[":", 5, 2, 1, "XY"]], [[":", 5, -1, 0, "END"]], [[":", 5, 100, 0, "!"]],
    [[":", 5, -100, 0, "!"]], [[":", 5, 0, 0, "!"]], [[":", 5, 2, -1, "Q"]],
    [[":", 5, 2, -100, "Q"]], [[":", 3, 1, 1, "x"]], [[":", 5, 1, 1]],
    [["!", 2, "new"]], [["!", 10, "x"]], [["!", -1, "last"]], [["!", -9, "first"]],
    [["#", 3, 1]], [["#", 3, 0]], [["#", -1, 1]], [["#", 8, 100]], [["#", 1, 1]],
    [["=", 1, 2]], [["=", 1, 1]], [["=", 9, 1]], [["=", 0, 1]], [["=", -20, 1]],
    [["%", 3, 1]], [["+", 3]], [[]], ["x"], [["+", 2.5, 1]], [[1, 1, 1]],
    [["+", 3, 1], ["+", 3, 1]], [["=", 3, 5], ["-", 3, 10]], [["=", 3, 5], ["=", 3, 7]],
    [["-", 3, 1], ["=", 3, 1]], [["!", 4, 1], ["+", 4, 1]], [["=", 3, 18446744073709551615]],
    [["+", 3, 1]], [["-", 3, 18446744073709551615]], [["=", 3, -9223372036854775807]],
    [["-", 3, 2]], [["+", 3, 1.5]], [["+", 3, 18446744073709551615]],
    [["=", 7, 1], ["+", 7, 2]], [["+", 99, 1], ["%", 1, 1]], [["+", "[3]", 1]],
    [["+", "nope", 1]], [["=", 3, 3], ["#", 4, 2]], [["+", -1, 1]], [["&", -2, 1]],
]

CASES = [
    # t: format, unique nullable index, duplicates
    ("insert", "t", [1, "a", 10]), ("insert", "t", [2, "b", 20]), ("insert", "t", [3, "a"]),
    ("insert", "t", [4, "c", None]), ("insert", "t", [5, "b", 30]),
    ("insert", "t", [1, "x"]), ("insert", "t", [6, "x", 10]), ("insert", "t", [7, 8]),
    ("insert", "t", ["x", "y"]), ("insert", "t", []), ("insert", "t", [7, "a", 1.5]),
    ("insert", "t", [7, "a", -5, "extra", [1]]),
    ("replace", "t", [2, "bb", 20]), ("replace", "t", [9, "z", 30]),
    ("replace", "t", [7, "q", 5]),
    ("select", "t", "sk", "a", None), ("select", "t", "sk", "a", {"iterator": "REQ"}),
    ("select", "t", "sk", "a", {"iterator": "GT"}), ("select", "t", "sk", "b", {"iterator": "LT"}),
    ("select", "t", "sk", "b", {"iterator": "LE"}), ("select", "t", "sk", "b", {"iterator": "GE"}),
    ("select", "t", "sk", None, {"iterator": "ALL", "offset": 1, "limit": 3}),
    ("select", "t", "uk", [None], None), ("select", "t", "uk", None, None),
    ("select", "t", "uk", [None], {"iterator": "GT"}),
    ("get", "t", "uk", [None]), ("get", "t", "sk", ["a"]), ("get", "t", "uk", [20]),
    ("get", "t", "pk", []), ("get", "t", "pk", [1, 2]), ("get", "t", "pk", ["1"]),
    ("select", "t", "pk", [-1], None),
    # t: update / delete through secondary keys, pk changes, upserts
    ("update", "t", [20], [["=", 2, "B"]], "uk"), ("update", "t", [20], [["=", 1, 99]], "uk"),
    ("update", "t", [1], [["=", 1, 2]], "pk"), ("update", "t", [1], [["=", 3, 20]], "pk"),
    ("update", "t", [1], [["=", 2, 5]], "pk"), ("update", "t", [1], [["=", "n", 11]], "pk"),
    ("update", "t", [1], [["+", "name", 1]], "pk"), ("update", "t", [3], [["+", "n", 1]], "pk"),
    ("update", "t", [3], [["=", "zz", 1]], "pk"), ("update", "t", [100], [["=", 2, "x"]], "pk"),
    ("update", "t", ["a"], [["=", 2, "x"]], "sk"),
    ("delete", "t", ["a"], "sk"), ("delete", "t", [30], "uk"), ("delete", "t", [30], "uk"),
    ("delete", "t", ["x"], "pk"),
    ("upsert", "t", [10, "u", 100], [["+", 3, 1]]), ("upsert", "t", [10, "u", 100], [["+", 3, 1]]),
    ("upsert", "t", [10, "u", 100], [["+", 2, 1], ["-", 3, 50]]),
    ("upsert", "t", [10, "u", 100], [["=", 1, 99]]), ("upsert", "t", [10, "u", 100], [["%", 1, 1]]),
    ("upsert", "t", [10, "u", 100], [["=", 2, 5]]), ("upsert", "t", [11, 5], [["=", 2, "x"]]),
    ("upsert", "t", [12, "x", 51], [["=", 2, "y"]]), ("upsert", "t", [13, "x", 10], []),
    ("upsert", "t", [10, "u"], [["=", 3, 51]]),
    ("select", "t", "pk", None, None), ("len", "t"), ("bsize", "t"),
    # m: multi-part primary key, non-unique number index, hash
    ("insert", "m", [1, "a", 1.5, "x"]), ("insert", "m", [1, "b", 2, "y"]),
    ("insert", "m", [2, "a", -1, "z"]), ("insert", "m", [2, "c", 2, "w"]),
    ("insert", "m", [3, "a", 1e300, "v"]), ("insert", "m", [1, "c", NAN, "u"]),
    ("insert", "m", [4, "a", 2, "w"]), ("insert", "m", [4, "b", 18446744073709551615, "s"]),
    ("insert", "m", [4, "c", 1.8446744073709552e19, "r"]), ("insert", "m", [5, "a", 2, "q"]),
    ("select", "m", "pk", [1], None), ("select", "m", "pk", [1], {"iterator": "REQ"}),
    ("select", "m", "pk", [2], {"iterator": "LT"}), ("select", "m", "pk", [2], {"iterator": "LE"}),
    ("select", "m", "pk", [1, "b"], {"iterator": "GE"}),
    ("select", "m", "pk", [1, "b"], {"iterator": "GT"}),
    ("select", "m", "pk", [2], {"iterator": "ALL"}),
    ("select", "m", "pk", [2, "b"], {"iterator": "LT"}),
    ("select", "m", "pk", [2, "b"], {"iterator": "EQ"}),
    ("select", "m", "pk", [], {"iterator": "GT"}), ("select", "m", "pk", [], {"iterator": "LE"}),
    ("select", "m", "pk", [], {"iterator": "REQ"}), ("select", "m", "pk", [], {"iterator": "EQ"}),
    ("select", "m", "pk", [1], {"iterator": "GE", "offset": 2, "limit": 2}),
    ("select", "m", "pk", [1, 2], None), ("select", "m", "pk", [1, "a", 3], None),
    ("select", "m", "pk", ["x"], None), ("select", "m", "pk", [1], {"iterator": "BITS_ALL_SET"}),
    ("get", "m", "pk", [1]),
    ("select", "m", "num", None, None), ("select", "m", "num", [2], {"iterator": "GE"}),
    ("select", "m", "num", [2], {"iterator": "LT"}), ("select", "m", "num", [2], None),
    ("select", "m", "num", [2], {"iterator": "REQ"}), ("select", "m", "num", [NAN], None),
    ("select", "m", "num", [18446744073709551615], {"iterator": "LE"}),
    ("select", "m", "num", ["x"], None),
    ("count", "m", "num", [2], "EQ"), ("count", "m", "num", [5], "ALL"),
    ("count", "m", "num", [2], "GT"), ("count", "m", "pk", [1], "LE"),
    ("min", "m", "num", None), ("max", "m", "num", None), ("min", "m", "num", [2]),
    ("max", "m", "pk", [1]), ("min", "m", "h", None),
    ("get", "m", "h", ["y"]), ("select", "m", "h", ["y"], None),
    ("select", "m", "h", ["y"], {"iterator": "LT"}), ("select", "m", "h", [], {"iterator": "EQ"}),
    ("select", "m", "h", ["y", "z"], None), ("count", "m", "h", [], "ALL"),
    ("count", "m", "h", ["y"], "EQ"), ("select", "m", "h", ["nope"], {"iterator": "GT"}),
    ("insert", "m", [6, "a", 0, "y"]), ("update", "m", [1, "b"], [["=", 4, "x"]], "pk"),
    ("update", "m", ["y"], [["=", 3, "str"]], "h"), ("update", "m", ["y"], [["=", 3, 7]], "h"),
    ("delete", "m", ["w"], "h"), ("delete", "m", [2], "num"), ("replace", "m", [1, "b", 3, "w"]),
    ("select", "m", "pk", None, None), ("len", "m"), ("bsize", "m"),
    # sc: scalar ordering
    ("insert", "sc", [True]), ("insert", "sc", [False]), ("insert", "sc", [1]),
    ("insert", "sc", [-1]), ("insert", "sc", [1.5]), ("insert", "sc", ["a"]),
    ("insert", "sc", ["B"]), ("insert", "sc", [""]), ("insert", "sc", [1.8446744073709552e19]),
    ("insert", "sc", [18446744073709551615]), ("insert", "sc", [-9223372036854775808]),
    ("insert", "sc", [NAN]), ("insert", "sc", [1.0]), ("insert", "sc", [None]),
    ("insert", "sc", [[1]]), ("sql_bin", "sc", "00"), ("sql_bin", "sc", "61"),
    ("sql_bin", "sc", "0000"),
    ("select", "sc", "pk", None, None), ("select", "sc", "pk", [1], {"iterator": "GT"}),
    ("select", "sc", "pk", ["a"], {"iterator": "LT"}), ("select", "sc", "pk", [True], None),
    ("select", "sc", "pk", [1.5], {"iterator": "REQ"}), ("select", "sc", "pk", [None], None),
    # u: update operations on [1, 'abc', 10, 1.5, 'hello', [1, 2]]
    ("insert", "u", [1, "abc", 10, 1.5, "hello", [1, 2]]),
    *[("update", "u", [1], ops, "pk") for ops in U_OPS],
    ("upsert", "u", [1], [["+", 3, 1], [":", 3, 1, 1, "x"], ["=", 7, "tail"]]),
    ("upsert", "u", [2, 1], [["+", 3, 1]]), ("upsert", "u", [2, 1], [["+", 2, 10], ["#", 5, 1]]),
    ("update", "u", [1], [["=", 6, 5], ["+", 6, 1]], "pk"),
    ("update", "u", [1], [["!", 7, "end"], ["=", -1, "END"]], "pk"),
    ("insert", "u", [3, "h\u00e9llo"]), ("update", "u", [3], [[":", 2, 3, 1, "X"]], "pk"),
    ("update", "u", [3], [[":", 2, -2, 2, "\u00fc"]], "pk"),
    ("select", "u", "pk", None, None),
    # byte-wise string order, unicode_ci
    ("insert", "t", [20, "\u00e9"]), ("insert", "t", [21, "z"]), ("insert", "t", [22, "Z"]),
    ("select", "t", "sk", ["y"], {"iterator": "GT"}),
    ("insert", "ci", ["a"]), ("insert", "ci", ["B"]), ("insert", "ci", ["A"]),
    ("insert", "ci", ["\u00c4"]), ("insert", "ci", ["c"]), ("insert", "ci", ["b"]),
    ("select", "ci", "pk", None, None), ("get", "ci", "pk", ["C"]),
    # transactions
    ("txn", "u", [("insert", [10]), ("savepoint",), ("insert", [11]), ("replace", [1, "x"]),
                  ("rollback_to",), ("delete", [2]), ("commit",)]),
    ("txn", "u", [("insert", [12]), ("update", [3], [["=", 2, "y"]]), ("delete", [1]),
                  ("rollback",)]),
    ("txn", "u", [("insert", [13]), ("insert", [13]), ("insert", [14]), ("commit",)]),
    ("select", "u", "pk", None, None),
]


# ------------------------------------------------------------------ running

def lua_call(case) -> str:
    method, space = case[0], case[1]
    s = f"box.space.{space}"
    if method in ("insert", "replace"):
        return f"{s}:{method}({lua(case[2])})"
    if method == "delete":
        return f"{s}.index.{case[3]}:delete({lua(case[2])})"
    if method == "update":
        return f"{s}.index.{case[4]}:update({lua(case[2])}, {lua(case[3])})"
    if method == "upsert":
        return f"{s}:upsert({lua(case[2])}, {lua(case[3])})"
    if method == "select":
        opts = case[4] or {}
        return f"{s}.index.{case[2]}:select({lua(case[3])}, {lua(opts)})"
    if method == "get":
        return f"{s}.index.{case[2]}:get({lua(case[3])})"
    if method == "count":
        return f"{s}.index.{case[2]}:count({lua(case[3])}, {{iterator = '{case[4]}'}})"
    if method in ("min", "max"):
        return f"{s}.index.{case[2]}:{method}({lua(case[3])})"
    if method in ("len", "bsize"):
        return f"{s}:{method}()"
    if method == "txn":
        body = ["box.begin()", "local sp"]
        for step in case[2]:
            if step[0] in ("insert", "replace", "delete"):
                body.append(f"pcall({s}.{step[0]}, {s}, {lua(step[1])})")
            elif step[0] == "update":
                body.append(f"pcall({s}.update, {s}, {lua(step[1])}, {lua(step[2])})")
            elif step[0] == "savepoint":
                body.append("sp = box.savepoint()")
            elif step[0] == "rollback_to":
                body.append("box.rollback_to_savepoint(sp)")
            else:
                body.append(f"box.{step[0]}()")
        body.append(f"return {s}:select()")
        return "(function() " + " ".join(body) + " end)()"
    if method == "sql_bin":
        return f"""box.execute([[INSERT INTO "{space}" VALUES (x'{case[2]}')]]).row_count"""
    raise ValueError(method)


def python_call(engine: Engine, case):
    method, space = case[0], engine.space(case[1])
    ids = INDEX_IDS[case[1]]
    if method in ("insert", "replace"):
        return getattr(space, method)(case[2])
    if method == "delete":
        return space.delete(case[2], ids[case[3]])
    if method == "update":
        return space.update(case[2], case[3], ids[case[4]])
    if method == "upsert":
        return space.upsert(case[2], case[3])
    if method == "select":
        opts = case[4] or {}
        return space.index(ids[case[2]]).select(case[3], opts.get("iterator"),
                                                offset=opts.get("offset", 0),
                                                limit=opts.get("limit"))
    if method == "get":
        return space.index(ids[case[2]]).get(case[3])
    if method == "count":
        return space.index(ids[case[2]]).count(case[3], case[4])
    if method in ("min", "max"):
        return getattr(space.index(ids[case[2]]), method)(case[3])
    if method == "len":
        return len(space)
    if method == "bsize":
        return space.bsize()
    if method == "txn":
        txns = engine.txns
        txns.begin()
        sp = None
        for step in case[2]:
            try:
                if step[0] in ("insert", "replace", "delete"):
                    getattr(space, step[0])(step[1])
                elif step[0] == "update":
                    space.update(step[1], step[2])
            except BoxError:
                pass
            if step[0] == "savepoint":
                sp = txns.savepoint()
            elif step[0] == "rollback_to":
                txns.rollback_to_savepoint(sp)
            elif step[0] in ("commit", "rollback"):
                getattr(txns, step[0])()
        return space.select()
    if method == "sql_bin":
        space.insert([bytes.fromhex(case[2])])
        return 1
    raise ValueError(method)


LUA_RUNNER = """
ffi = require('ffi')
local msgpack = require('msgpack')
local digest = require('digest')
box.cfg{log_level = 0}
%s
local function emit(ok, res)
    if ok and res == nil then res = box.NULL end
    if not ok then res = tostring(res) end
    io.write(digest.base64_encode(msgpack.encode({ok, res}), {nowrap = true}), '\\n')
end
%s
os.exit(0)
"""


def normalize(value):
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return [normalize(v) for v in value.values()] if not value else \
            {k: normalize(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def oracle():
    if TARANTOOL is None:
        pytest.fail("the tarantool binary (2.6.0) is required by the oracle tests")
    calls = "\n".join(f"emit(pcall(function() return {lua_call(c)} end))" for c in CASES)
    script = LUA_RUNNER % (LUA_SETUP, calls)
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/run.lua", "w") as f:
            f.write(script)
        proc = subprocess.run([TARANTOOL, "run.lua"], cwd=tmp, capture_output=True,
                              timeout=TIMEOUT, text=True)
    lines = proc.stdout.split()
    assert len(lines) == len(CASES), proc.stderr[-2000:]
    return [normalize(unpackb(base64.b64decode(line))) for line in lines]


@pytest.fixture(scope="module")
def spindle():
    engine = python_setup()
    out = []
    for case in CASES:
        try:
            out.append([True, normalize(python_call(engine, case))])
        except BoxError as err:
            out.append([False, str(err)])
    return out


@pytest.mark.parametrize("number", range(len(CASES)),
                         ids=[f"{i}-{c[0]}-{c[1]}" for i, c in enumerate(CASES)])
def test_same_outcome(number, oracle, spindle):
    case = CASES[number]
    assert spindle[number] == oracle[number], f"{case}: lua {lua_call(case)}"


def test_oracle_is_2_6_0():
    out = subprocess.run([TARANTOOL, "--version"], capture_output=True, text=True,
                         timeout=TIMEOUT).stdout
    assert out.startswith("Tarantool 2.6.0")
