"""box.cfg refusals: Spindle's cfg module against the real Tarantool 2.6.0 binary.

Each group of probes runs in one tarantool process (in a temporary directory),
calling pcall(box.cfg, probe) and printing what came back; Spindle's Config gets
the same calls and must give the same outcome and the same message.

Probes of the first box.cfg must all fail, so that the instance never configures:
those that would pass get `sql_cache_size = -1`, the last check Tarantool makes
before loading. Probes touching log_* run in a process of their own, because a
failed first box.cfg leaves log options behind in Tarantool's log module.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from spindle.core.box.cfg import OPTIONS, CfgError, Config
from spindle.core.iproto.errors import BoxError

TARANTOOL = shutil.which("tarantool")
TIMEOUT = 20
STOPPER = ("sql_cache_size", -1)

U1 = "11111111-1111-4111-8111-111111111111"
U2 = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"


@pytest.fixture(scope="module", autouse=True)
def tarantool_present():
    if TARANTOOL is None:
        pytest.fail("the tarantool binary (2.6.0) is required by the oracle tests")


# ------------------------------------------------------------------ Lua literals

def lua(value) -> str:
    """A Lua expression for a Python value (None stands for box.NULL)."""
    if value is None:
        return "box.NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "(0/0)"
        if math.isinf(value):
            return "math.huge" if value > 0 else "(-math.huge)"
        return repr(value)
    if isinstance(value, str):
        out = []
        for b in value.encode():
            c = chr(b)
            out.append(c if 32 <= b < 127 and c not in '"\\' else "\\%03d" % b)
        return '"' + "".join(out) + '"'
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(lua(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join("[%s] = %s" % (lua(k), lua(v)) for k, v in value.items()) + "}"
    raise TypeError(value)


_RUNNER = r"""
local json = require('json')
local function probe(i, arg)
    local ok, e = pcall(box.cfg, arg)
    local r = {i = i, ok = ok}
    if not ok then
        if type(e) == 'string' then
            r.kind, r.msg = 'lua', e
        else
            r.kind, r.code, r.msg = 'box', e.code, e.message
        end
    end
    io.stdout:write(json.encode(r), '\n')
    io.stdout:flush()
end
%s
%s
if type(box.cfg) == 'table' then
    local snapshot = {}
    for k, v in pairs(box.cfg) do
        -- json.encode writes nan/inf bare, which is not JSON
        if type(v) == 'number' and (v ~= v or v == math.huge or v == -math.huge) then
            v = {nonfinite = tostring(v)}
        end
        snapshot[k] = v
    end
    io.stdout:write(json.encode({final = snapshot}), '\n')
end
os.exit(0)
"""


def run_tarantool(setup: dict | None, probes: list) -> tuple[list[dict], dict | None]:
    calls = "\n".join("probe(%d, %s)" % (i, lua(p)) for i, p in enumerate(probes))
    setup_code = "box.cfg(%s)" % lua(setup) if setup is not None else ""
    script = _RUNNER % (setup_code, calls)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "probe.lua")
        with open(path, "w") as f:
            f.write(script)
        proc = subprocess.run([TARANTOOL, path], cwd=tmp, capture_output=True,
                              text=True, timeout=TIMEOUT)
    results, final = [], None
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        if "final" in item:
            final = {k: float(v["nonfinite"]) if isinstance(v, dict) and "nonfinite" in v else v
                     for k, v in item["final"].items()}
        else:
            results.append(item)
    assert len(results) == len(probes), (proc.stdout, proc.stderr[-2000:])
    return results, final


def spindle_outcome(call, arg) -> dict:
    try:
        call(arg)
    except CfgError as e:
        return {"ok": False, "kind": "lua", "msg": e.message}
    except BoxError as e:
        return {"ok": False, "kind": "box", "code": e.code, "msg": e.message}
    return {"ok": True}


def tarantool_outcome(item: dict) -> dict:
    return {k: item[k] for k in ("ok", "kind", "code", "msg") if k in item}


def with_stopper(probe):
    if isinstance(probe, dict) and STOPPER[0] not in probe:
        return {**probe, STOPPER[0]: STOPPER[1]}
    return probe


# ------------------------------------------------------------------ first box.cfg

def _wrong_type_value(option):
    for candidate in ("abc", 5, True, [1]):
        kind = {str: "string", int: "number", bool: "boolean", list: "table"}[type(candidate)]
        if kind not in option.types:
            return candidate
    raise AssertionError(option)


# Options 2.6.0 does not have (leader election, 2.6.1+): compared with 2.6.3 in
# test_election_oracle.py instead; 2.6.0 refuses them as unexpected.
LATER_OPTIONS = frozenset(("election_mode", "election_timeout"))
OPTIONS_2_6_0 = [name for name in OPTIONS if name not in LATER_OPTIONS]

TYPE_PROBES = [{name: _wrong_type_value(opt)} for name, opt in OPTIONS.items()
               if opt.types != ("any",) and not opt.module and name not in LATER_OPTIONS]

FIRST_PROBES = TYPE_PROBES + [
    "x", 5, True, [1, 2],
    {"unknown_opt": 1},
    {1: 5},
    {1.5: 5},
    {"dont_check": True},
    {"dont_check": False},
    {"rows_per_wal": 5},
    {"snapshot_count": 1, "checkpoint_count": 3},
    {"snapshot_count": 3, "checkpoint_count": 3, "wal_mode": "x"},
    {"slab_alloc_arena": "x"},
    {"slab_alloc_arena": {}},
    {"slab_alloc_arena": 0.3, "memtx_memory": 2 ** 30},
    {"slab_alloc_arena": 1, "memtx_memory": 2 ** 30, "wal_mode": "x"},
    {"panic_on_snap_error": False, "force_recovery": False},
    {"panic_on_wal_error": 5, "force_recovery": False, "wal_mode": "x"},
    {"replication_source": "a:b:c"},
    {"snap_dir": 5},
    {"listen": "bogus:uri:x"},
    {"listen": "localhost:"},
    {"listen": "localhost"},
    {"listen": 3301.5},
    {"listen": -1},
    {"listen": ""},
    {"wal_mode": "bogus"},
    {"wal_mode": "WRITE"},
    {"wal_mode": "write "},
    {"wal_mode": ""},
    {"replication": "bogus:uri:x"},
    {"replication": ["localhost:3301", "a:b:c"]},
    {"replication": [[]]},
    {"replication": [True]},
    {"replication": [3301, "localhost:1"]},
    {"replication": {"a": "x:y:z"}},
    {"replication": []},
    {"replication": ""},
    {"replication": "h" * 254 + ":1"},
    {"replication_connect_quorum": -1},
    {"replication_connect_quorum": -0.5},
    {"replication_connect_quorum": 2 ** 31},
    {"replication_connect_quorum": float("nan")},
    {"replication_connect_quorum": 1e30},
    {"replication_synchro_quorum": -1},
    {"replication_synchro_quorum": 0},
    {"replication_synchro_quorum": 0.5},
    {"replication_synchro_quorum": 31},
    {"replication_synchro_quorum": 32},
    {"replication_synchro_quorum": 2 ** 32 + 1},
    {"replication_synchro_quorum": 2 ** 31},
    {"replication_synchro_quorum": float("nan")},
    {"replication_synchro_quorum": float("inf")},
    {"replication_synchro_timeout": 0},
    {"replication_synchro_timeout": 1e-300},
    {"replication_timeout": 0},
    {"replication_timeout": -1},
    {"replication_timeout": float("nan")},
    {"replication_connect_timeout": 0},
    {"replication_sync_lag": 0},
    {"replication_sync_timeout": -1},
    {"readahead": 1},
    {"readahead": 127},
    {"readahead": 128},
    {"readahead": 2 ** 31},
    {"readahead": 2 ** 31 - 1},
    {"readahead": 2 ** 32 + 128},
    {"readahead": float("nan")},
    {"readahead": ""},
    {"instance_uuid": "abc"},
    {"instance_uuid": "00000000-0000-0000-0000-000000000000"},
    {"instance_uuid": "ffffffff-ffff-ffff-ffff-ffffffffffff"},
    {"instance_uuid": "FFFFFFFF-FFFF-FFFF-BFFF-FFFFFFFFFFFF"},
    {"replicaset_uuid": "abc"},
    {"replicaset_uuid": U2},
    {"checkpoint_count": 0},
    {"checkpoint_count": 0.5},
    {"checkpoint_count": 2 ** 32 + 1},
    {"wal_max_size": 0},
    {"wal_max_size": 1.5},
    {"wal_max_size": 2},
    {"wal_max_size": 1e30},
    {"memtx_memory": -1},
    {"memtx_memory": -1.5},
    {"memtx_memory": -0.5},
    {"memtx_memory": 2 ** 60},
    {"memtx_memory": 1e30},
    {"memtx_memory": float("nan")},
    {"memtx_memory": 4398046510080},
    {"memtx_memory": 4398046510081},
    {"memtx_min_tuple_size": 7},
    {"memtx_min_tuple_size": 8},
    {"memtx_min_tuple_size": 1048281},
    {"vinyl_memory": -1},
    {"vinyl_read_threads": 0},
    {"vinyl_write_threads": 1},
    {"vinyl_page_size": 0},
    {"vinyl_page_size": 1024, "vinyl_range_size": 512},
    {"vinyl_page_size": 100, "vinyl_range_size": -5},
    {"vinyl_run_count_per_level": 0.5},
    {"vinyl_run_size_ratio": 1},
    {"vinyl_run_size_ratio": float("nan")},
    {"vinyl_bloom_fpr": 0},
    {"vinyl_bloom_fpr": 1.5},
    {"vinyl_bloom_fpr": 1},
    {"sql_cache_size": -1},
    {"sql_cache_size": 2 ** 31},
    # Several C-side errors at once: box_check_config's order decides.
    {"listen": "a:b:c", "instance_uuid": "x", "wal_mode": "bogus", "readahead": 1},
    {"wal_mode": "bogus", "readahead": 1, "vinyl_read_threads": 0},
    {"memtx_memory": -1, "vinyl_memory": -1, "wal_max_size": 0},
    {"replication_sync_timeout": 0, "replication_synchro_timeout": 0,
     "replication_synchro_quorum": 0, "replication_sync_lag": 0},
]

# A failed first box.cfg leaves these behind in the log module: one process each.
LOG_PROBES = [
    {"log_level": "x"},
    {"log_level": {}},
    {"log_level": True},
    {"log_level": 100},
    {"log_level": "debug"},
    {"log_format": "x"},
    {"log_format": 1},
    {"log_format": "json"},
    {"log": "syslog:", "log_format": "json"},
    {"log": "a:b"},
    {"log": "Syslog:foo"},
    {"log": "syslog:foo"},
    {"log": "syslog:identity=a,identity=b"},
    {"log": "syslog:facility=bogus"},
    {"log": "syslog:facility=LOCAL0"},
    {"log": "syslog:identity=a,,foo"},
    {"log": "syslog:identity=a,foo,"},
    {"log": "|cat", "log_nonblock": True},
    {"log": "x.log", "log_nonblock": True},
    {"log": "x.log", "log_nonblock": 0},
    {"log": "x.log", "log_nonblock": False},
    {"log_nonblock": "x"},
    {"log": 5},
    {"log": {}},
    {"log": 5, "log_format": "plain"},
    {"log": True, "log_format": "json"},
    {"logger": "a:b"},
    {"logger_nonblock": True, "log_nonblock": False},
]

URIS = [
    "3301", "0", "localhost:3301", "localhost", "localhost:", "localhost:http",
    "localhost:3301x", "127.0.0.1:3301", "127.0.0.1", "[::1]:3301", "[::1]",
    "[::FFFF:1]:3301", "[::ffff:127.0.0.1]:3301", "[fe80::1]:3301",
    "[::1:2:3:4:5:6:7:8]:3301", "[1:2:3:4:5:6:7:8:9]:1",
    "user:pass@localhost:3301", "user@localhost:3301", "user:@localhost:3301",
    "user:pass@localhost", "@localhost:3301", "user:pass@/tmp/sock", "/tmp/x.sock",
    "/tmp/x.sock:", "/", "//", "./x.sock", "x.sock", "unix/:/tmp/x.sock", "unix/:./x.sock",
    "unix/:x.sock", "user:pass@unix/:/tmp/x.sock", "user:pass@unix/:./s",
    "tcp://localhost:3301", "tcp://localhost", "tcp://user:pass@localhost:3301",
    "tcp://unix/:/tmp/sock", "tcp:///tmp/sock", "tcp:///tmp/sock:", "tcp://u@unix/:/tmp/s",
    "u@unix/:/tmp/s", "unix/:/tmp/sock:", "unix/:/tmp/sock:/p", "unix/:/tmp/s?q",
    "/tmp/sock?x", "/tmp/sock#f", "/tmp/sock:/x", "/a:b", "/tmp/a|b", "/tmp/dir/",
    "/tmp//x", "/tmp/x y", "./x.sock?q", "a:b:c", "bogus:uri:x", "localhost:3301/path",
    "localhost:3301/path?q=1#frag", "localhost:3301?q", "localhost:3301#f",
    "host name:3301", "host%20name:3301", "loc%zzhost:3301", "loc%5host:3301",
    "loc%u12afhost:3301", "loc%%host:3301", "localhost:" + "9" * 100,
    "localhost:" + "a" * 200, "a", ":3301", "::3301", "3301:", "3301.5", "1e3", "-1",
    "localhost:-1", "local_host:3301", "local~host:3301", "a.b.c.d:3301",
    "1.2.3.4.5:3301", "999.999.999.999:3301", "user:p@ss@host:3301",
    "user:pa:ss@host:3301", "user@3301", "x:3301", "X:3301", "tcp://x:3301",
    "http://localhost:8080/path", "http://localhost:8080/path?a=b", "scheme:",
    "scheme://", "localhost:3301:", "h" * 253 + ":3301", "h" * 254 + ":3301",
    "h" * 254 + ":http", "u@" + "h" * 254 + ":1", "h" * 1025 + ":1", "1" * 254,
]

UUIDS = [
    "11111111-1111-4111-8111-111111111111", "ffffffff-ffff-ffff-dfff-ffffffffffff",
    "ffffffff-ffff-ffff-cfff-ffffffffffff", "ffffffff-ffff-ffff-efff-ffffffffffff",
    "11111111-1111-4111-8111-11111111111", "11111111-1111-4111-8111-1111111111111",
    "11111111111111111111111111111111", "{1111111-1111-4111-8111-111111111111}",
    " 1111111-1111-4111-8111-111111111111", "+1111111-1111-4111-8111-111111111111",
    "0x111111-1111-4111-8111-111111111111", "1111111-11111-4111-8111-111111111111",
    "11111111-1111-4111-8111-11111111111g", "11111111-1111-4111-8111-g11111111111",
    "11111111-1111-4111-8111-1111111111 1", "11111111-1111-4111-81111111111111111",
    "11111111:1111-4111-8111-111111111111", "-0000000-0000-0000-0000-000000000000",
]


def _first_groups():
    groups = [("first", None, [with_stopper(p) for p in FIRST_PROBES])]
    groups.append(("uri", None, [with_stopper({"listen": u}) for u in URIS]))
    groups.append(("uuid", None, [with_stopper({"instance_uuid": u}) for u in UUIDS]))
    for i, probe in enumerate(LOG_PROBES):
        groups.append(("log%d" % i, None, [with_stopper(probe)]))
    return groups


def _check_first_group(results, probes):
    mismatches = []
    for item, probe in zip(results, probes):
        theirs = tarantool_outcome(item)
        assert not theirs["ok"], ("a first-call probe configured the instance", probe)
        ours = spindle_outcome(Config().first_configure, probe)
        if ours != theirs:
            mismatches.append((probe, theirs, ours))
    return mismatches


# ------------------------------------------------------------------ later box.cfg

RELOAD_SETUP = {"instance_uuid": U1, "replicaset_uuid": U2, "memtx_memory": 200000000,
                "vinyl_memory": 100000000, "log_level": "verbose"}

RELOAD_PROBES = [
    "x", True, None, {},
    {"unknown_opt": 1},
    {"memtx_dir": "x"},
    {"memtx_dir": "."},
    {"memtx_dir": ""},
    {"memtx_dir": 5},
    {"wal_mode": "bogus"},
    {"wal_mode": "write"},
    {"wal_mode": "none"},
    {"wal_mode": ""},
    {"vinyl_read_threads": 1.0},
    {"strip_core": True},
    {"strip_core": False},
    {"username": "x"},
    {"pid_file": ""},
    {"work_dir": None},
    {"vinyl_dir": "y"},
    {"snap_dir": "zz"},
    {"snapshot_count": 5},
    {"rows_per_wal": 5},
    {"dont_check": True},
    {"memtx_memory": 200000000},
    {"memtx_memory": 200000001},
    {"memtx_memory": 200000511},
    {"memtx_memory": 200000512},
    {"memtx_memory": 200001000},
    {"memtx_memory": 200001024},
    {"memtx_memory": -1},
    {"memtx_memory": 2 ** 60},
    {"memtx_memory": 300000000},
    {"vinyl_memory": 100000000},
    {"vinyl_memory": 99999999},
    {"vinyl_memory": 100000001},
    {"vinyl_memory": 100000000},
    {"vinyl_cache": -1},
    {"memtx_max_tuple_size": 1},
    {"listen": "a:b:c"},
    {"listen": {}},
    {"replication": "a:b:c"},
    {"replication": ["a", "b:c:d"]},
    {"replication": []},
    {"replication": ""},
    {"replication_synchro_quorum": 0},
    {"replication_synchro_quorum": 1.5},
    {"replication_synchro_quorum": 2 ** 32 + 1},
    {"replication_synchro_timeout": 0},
    {"replication_timeout": 0},
    {"replication_timeout": "1"},
    {"replication_connect_quorum": -1},
    {"replication_connect_timeout": 0},
    {"replication_sync_lag": 0},
    {"replication_sync_timeout": -1},
    {"readahead": 1},
    {"readahead": "16320"},
    {"readahead": ""},
    {"readahead": 2 ** 31},
    {"log_level": "x"},
    {"log_level": {}},
    {"log_level": 6},
    {"log_level": "info"},
    {"log_format": "x"},
    {"log_format": "json"},
    {"log_format": "plain"},
    {"log": "foo.log"},
    {"log": ""},
    {"log_nonblock": True},
    {"log_nonblock": False},
    {"log_nonblock": None},
    {"instance_uuid": "abc"},
    {"instance_uuid": U1},
    {"instance_uuid": U2},
    {"instance_uuid": ""},
    {"replicaset_uuid": "abc"},
    {"replicaset_uuid": U2},
    {"replicaset_uuid": U1},
    {"checkpoint_count": 0},
    {"checkpoint_count": 0.5},
    {"sql_cache_size": -1},
    {"net_msg_max": 1},
    {"net_msg_max": 2},
    {"worker_pool_threads": 0},
    {"too_long_threshold": -1},
    {"read_only": "true"},
    {"replication_anon": True},
    {"replication_anon": True, "read_only": True},
    {"read_only": True},
    {"replication_anon": True},
    {"replication_anon": False},
    {"read_only": False},
    {"slab_alloc_arena": "x"},
    {"panic_on_wal_error": True, "force_recovery": True},
    {"panic_on_wal_error": True},
    {"listen": "a:b:c", "replication_timeout": 0},
    {"replication_timeout": 0, "readahead": 1},
    {"memtx_min_tuple_size": 16, "checkpoint_count": 0},
    # listen is applied first and stays applied when a later option fails;
    # read_only (unordered) is never reached. The final snapshot shows both.
    {"replication_timeout": 0, "listen": "unix/:./probe.sock", "read_only": True},
]

LOG_RELOAD_SETUP = {"log_nonblock": False, "log_format": "plain", "log": "x.log"}
LOG_RELOAD_PROBES = [
    {"log_nonblock": False},
    {"log_level": "bogus"},
    {"log_nonblock": False},
    # A refused log_nonblock resets the log module's false to nil (load_cfg.lua
    # backs module values up as `old or box.NULL`): false is then refused too.
    {"log_nonblock": True},
    {"log_nonblock": False},
    {"log": "x.log"},
    {"log": "y.log"},
    {"log": ""},
    {"log_format": "json"},
    {"log_level": ""},
    {"log_level": 5},
]


def _reload_groups():
    return [("reload", RELOAD_SETUP, RELOAD_PROBES),
            ("log_reload", LOG_RELOAD_SETUP, LOG_RELOAD_PROBES)]


def _same_value(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def _check_reload_group(setup, results, probes, final):
    config = Config()
    config.first_configure(setup)
    mismatches = []
    for item, probe in zip(results, probes):
        theirs = tarantool_outcome(item)
        ours = spindle_outcome(config.reconfigure, probe)
        if ours != theirs:
            mismatches.append((probe, theirs, ours))
    ours_final = config.as_dict()
    for name in OPTIONS_2_6_0:
        # json.encode gives an empty Lua table as {}, an array as [...]
        theirs = final.get(name)
        if theirs == {}:
            theirs = []
        if not _same_value(ours_final[name], theirs):
            mismatches.append(("final box.cfg." + name, theirs, ours_final[name]))
    return mismatches


# ------------------------------------------------------------------ the tests

@pytest.fixture(scope="module")
def oracle():
    groups = _first_groups() + _reload_groups()
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(run_tarantool, setup, probes)
                   for name, setup, probes in groups}
        return {name: (setup, probes, futures[name].result())
                for name, setup, probes in groups}


def test_enough_bad_inputs():
    assert len(FIRST_PROBES) + len(LOG_PROBES) + len(RELOAD_PROBES) >= 30


@pytest.mark.parametrize("group", ["first", "uri", "uuid"])
def test_first_box_cfg(oracle, group):
    _, probes, (results, _) = oracle[group]
    mismatches = _check_first_group(results, probes)
    assert not mismatches, "\n".join(map(repr, mismatches))


def test_first_box_cfg_log_options(oracle):
    mismatches = []
    for i in range(len(LOG_PROBES)):
        _, probes, (results, _) = oracle["log%d" % i]
        mismatches += _check_first_group(results, probes)
    assert not mismatches, "\n".join(map(repr, mismatches))


@pytest.mark.parametrize("group", ["reload", "log_reload"])
def test_later_box_cfg(oracle, group):
    setup, probes, (results, final) = oracle[group]
    assert final is not None
    mismatches = _check_reload_group(setup, results, probes, final)
    assert not mismatches, "\n".join(map(repr, mismatches))


def test_defaults_match_a_default_start():
    _, final = run_tarantool({}, [])
    ours = Config().first_configure({})
    for name in OPTIONS_2_6_0:
        assert _same_value(ours[name], final.get(name)), name
    assert set(final) <= set(OPTIONS)


@pytest.mark.parametrize("options", [
    {"net_msg_max": 1},
    {"net_msg_max": 1, "replication_anon": True},
    {"replication_anon": True},
])
def test_refusals_that_stop_tarantool(options):
    # 2.6.0 checks these while loading, after box.cfg's own checks, and exits.
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([TARANTOOL, "-e", "box.cfg(%s)" % lua(options)], cwd=tmp,
                              capture_output=True, text=True, timeout=TIMEOUT)
    found = re.search(r"F> can't initialize storage: (.*)", proc.stderr)
    assert found, proc.stderr[-2000:]
    ours = spindle_outcome(Config().first_configure, options)
    assert ours["msg"] == found.group(1)
