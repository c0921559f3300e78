"""box.cfg options and validation (pure). Messages are the ones Tarantool 2.6.0 prints;
tests/interop/test_cfg_oracle.py checks many more against the binary itself."""
from __future__ import annotations

import math

import pytest

from spindle.core.box.cfg import (
    OPTIONS, CfgError, Config, Option, check_option, defaults, lua_type, uri_has_service)
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode

U1 = "11111111-1111-4111-8111-111111111111"
U2 = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"


def cfg_msg(name, reason):
    return "Incorrect value for option '%s': %s" % (name, reason)


def reload_msg(name):
    return "Can't set option '%s' dynamically" % name


def refusal(call, *args):
    with pytest.raises((BoxError, CfgError)) as info:
        call(*args)
    return info.value


# ------------------------------------------------------------------ the table

STATIC = {
    "strip_core", "memtx_min_tuple_size", "slab_alloc_factor", "work_dir", "memtx_dir",
    "wal_dir", "vinyl_dir", "vinyl_read_threads", "vinyl_write_threads",
    "vinyl_run_count_per_level", "vinyl_run_size_ratio", "vinyl_range_size",
    "vinyl_page_size", "vinyl_bloom_fpr", "log", "log_nonblock", "wal_mode", "wal_max_size",
    "instance_uuid", "replicaset_uuid", "pid_file", "background", "username", "coredump",
    "hot_standby",
}


def test_every_option_of_2_6_0():
    # 2.6.0's 61, and the two of leader election (2.6.1+, as 2.6.3 has them)
    assert len(OPTIONS) == 63
    assert all(isinstance(o, Option) and o.name == n for n, o in OPTIONS.items())
    assert OPTIONS["election_mode"].default == "off" and OPTIONS["election_mode"].dynamic
    assert OPTIONS["election_timeout"].default == 5
    assert {n for n, o in OPTIONS.items() if not o.dynamic} == STATIC


def test_types_as_tarantool_names_them():
    assert OPTIONS["listen"].types == ("string", "number")
    assert OPTIONS["replication"].types == ("string", "number", "table")
    assert OPTIONS["replication"].template == "string, number, table"
    assert OPTIONS["read_only"].types == ("boolean",)
    assert OPTIONS["log"].types == ("any",) and OPTIONS["log"].module
    assert OPTIONS["log_level"].types == ("number", "string")


def test_defaults_as_box_cfg_reports_them():
    d = defaults()
    assert d["memtx_memory"] == 268435456 and d["readahead"] == 16320
    assert d["slab_alloc_factor"] == 1.05 and d["checkpoint_wal_threshold"] == 10 ** 18
    assert d["log_level"] == 5 and d["log_format"] == "plain"
    assert d["wal_mode"] == "write" and d["memtx_dir"] == "."
    assert d["replication_synchro_quorum"] == 1 and d["replication_synchro_timeout"] == 5
    for nil in ("listen", "replication", "instance_uuid", "replication_connect_quorum",
                "vinyl_range_size", "log", "log_nonblock", "work_dir"):
        assert d[nil] is None
    d["memtx_memory"] = 1
    assert defaults()["memtx_memory"] == 268435456


def test_lua_type():
    assert [lua_type(v) for v in (None, True, 1, 1.5, "s", [], {}, print)] == \
        ["nil", "boolean", "number", "number", "string", "table", "table", "function"]


# ------------------------------------------------------------------ check_option

@pytest.mark.parametrize("name, value, reason", [
    ("listen", {}, "should be one of types string, number"),
    ("listen", True, "should be one of types string, number"),
    ("listen", "bogus:uri:x", "expected host:service or /unix.socket"),
    ("listen", "localhost", "expected host:service or /unix.socket"),
    ("replication", True, "should be one of types string, number, table"),
    ("replication", ["localhost:3301", "a:b:c"], "expected host:service or /unix.socket"),
    ("memtx_memory", "1000", "should be of type number"),
    ("memtx_memory", -1, "must be >= 0 and <= 4398046510080, but it is -1"),
    ("memtx_memory", 1e30, "must be >= 0 and <= 4398046510080, but it is -9223372036854775808"),
    ("memtx_dir", 5, "should be of type string"),
    ("read_only", "yes", "should be of type boolean"),
    ("wal_mode", "bogus", "bogus"),
    ("wal_mode", 1, "should be of type string"),
    ("log_level", "x", "expected crit,warn,info,debug,syserror,verbose,fatal,error"),
    ("log_level", {}, "must be a number or a string"),
    ("log_format", "x", "expected json,plain"),
    ("log", "a:b", "expecting a file name or a prefix, such as '|', 'pipe:', 'syslog:'"),
    ("log", "syslog:facility=bogus", "bad syslog facility option 'bogus'"),
    ("log", "syslog:foo", "bad option 'foo'"),
    ("log_nonblock", True, "the option is incompatible with file/stderr logger"),
    ("replication_synchro_quorum", -1,
     "the value must be greater than zero and less than maximal number of replicas"),
    ("replication_synchro_quorum", 32,
     "the value must be greater than zero and less than maximal number of replicas"),
    ("replication_synchro_timeout", 0, "the value must be greater than zero"),
    ("replication_timeout", 0, "the value must be greather than 0"),
    ("replication_connect_timeout", -1, "the value must be greather than 0"),
    ("replication_connect_quorum", -1, "the value must be greater or equal to 0"),
    ("replication_sync_lag", 0, "the value must be greater than 0"),
    ("replication_sync_timeout", 0, "the value must be greater than 0"),
    ("readahead", 127, "specified value is out of bounds"),
    ("readahead", 2 ** 31, "specified value is out of bounds"),
    ("instance_uuid", "abc", "abc"),
    ("instance_uuid", "00000000-0000-0000-0000-000000000000", "nil UUID is reserved"),
    ("replicaset_uuid", "ffffffff-ffff-ffff-ffff-ffffffffffff",
     "ffffffff-ffff-ffff-ffff-ffffffffffff"),
    ("checkpoint_count", 0, "the value must not be less than one"),
    ("wal_max_size", 1, "the value must be greater than one"),
    ("memtx_min_tuple_size", 7, "specified value is out of bounds"),
    ("vinyl_read_threads", 0, "must be greater than or equal to 1"),
    ("vinyl_write_threads", 1, "must be greater than or equal to 2"),
    ("vinyl_page_size", 0, "must be greater than 0 and less than or equal to vinyl_range_size"),
    ("vinyl_run_count_per_level", 0, "must be greater than 0"),
    ("vinyl_run_size_ratio", 1, "must be greater than 1"),
    ("vinyl_bloom_fpr", 0, "must be greater than 0 and less than or equal to 1"),
    ("sql_cache_size", -1, "must be non-negative"),
    ("net_msg_max", 1, "minimal value is 2"),
    ("replication_anon", True, "the value may be set to true only when the instance is read-only"),
    ("election_mode", "on", "the value must be one of the following strings: "
     "'off', 'voter', 'candidate', 'manual'"),
    ("election_mode", 1, "should be of type string"),
    ("election_timeout", 0, "the value must be a positive number"),
    ("election_timeout", "1", "should be of type number"),
    ("unknown_opt", 1, "unexpected option"),
])
def test_check_option_refusals(name, value, reason):
    err = refusal(check_option, name, value)
    assert isinstance(err, ClientError)
    assert err.code == ErrorCode.ER_CFG
    assert err.message == cfg_msg(name, reason)


@pytest.mark.parametrize("name, value, result", [
    ("listen", 3301, "3301"),
    ("listen", "localhost:3301", "localhost:3301"),
    ("listen", "/tmp/x.sock", "/tmp/x.sock"),
    ("listen", "", None),
    ("replication", "localhost:3301", ["localhost:3301"]),
    ("replication", [3301, "unix/:/tmp/s"], ["3301", "unix/:/tmp/s"]),
    ("replication", "", []),
    ("replication", {"a": "x:y:z"}, []),
    ("readahead", "", 16320),
    ("wal_mode", "FSYNC", "FSYNC"),
    ("replication_synchro_quorum", 2 ** 32 + 1, 4294967297),  # C int wraps to 1
    ("checkpoint_count", 2.0, 2),
    ("memtx_memory", 200000000.7, 200000000.7),
    ("log_level", "debug", "debug"),
    ("log_level", "", 5),
    ("log", "|cat", "|cat"),
    ("snapshot_count", 5, 5),
    ("slab_alloc_arena", 0.5, 536870912),
])
def test_check_option_accepts(name, value, result):
    got = check_option(name, value)
    assert got == result and type(got) is type(result)


def test_nan_passes_where_c_compares_doubles():
    # NaN <= 0 is false in C; cfg_geti(NaN) is 0, a valid connect quorum.
    assert math.isnan(check_option("replication_timeout", float("nan")))
    assert math.isnan(check_option("replication_connect_quorum", float("nan")))
    assert refusal(check_option, "readahead", float("nan")).message == \
        cfg_msg("readahead", "specified value is out of bounds")


def test_non_table_arguments_are_plain_lua_errors():
    for arg, kind in (("x", "string"), (5, "number"), (True, "boolean"), (print, "function")):
        err = refusal(Config().first_configure, arg)
        assert isinstance(err, CfgError) and not isinstance(err, BoxError)
        assert err.message == ("builtin/box/load_cfg.lua:19: builtin/box/load_cfg.lua:410: "
                               "bad argument #1 to 'pairs' (table expected, got %s)" % kind)
    # A Lua array is a table: its index becomes the option name.
    assert refusal(Config().first_configure, [1]).message == cfg_msg("1", "unexpected option")


def test_deprecated_options():
    config = Config()
    config.first_configure({"snapshot_count": 4, "slab_alloc_arena": 0.25,
                            "panic_on_wal_error": True})
    assert config.get("checkpoint_count") == 4
    assert config.get("memtx_memory") == 268435456
    assert config.get("force_recovery") is False
    assert "Deprecated option snapshot_count, please use checkpoint_count instead" \
        in config.warnings
    err = refusal(Config().first_configure, {"snapshot_count": 1, "checkpoint_count": 3})
    assert err.message == cfg_msg("snapshot_count",
                                  "can not override a value for a deprecated option")
    # rows_per_wal has no translation in 2.6.0: it stays and is refused.
    err = refusal(Config().first_configure, {"rows_per_wal": 5})
    assert err.message == cfg_msg("rows_per_wal", "unexpected option")
    err = refusal(Config().first_configure, {"slab_alloc_arena": "x"})
    assert isinstance(err, CfgError) and err.message.endswith(
        "attempt to perform arithmetic on local 'size' (a string value)")


def test_first_configure_reports_c_side_errors_in_tarantool_order():
    err = refusal(Config().first_configure,
                  {"wal_mode": "bogus", "readahead": 1, "listen": "a:b:c", "memtx_memory": -1})
    assert err.message == cfg_msg("listen", "expected host:service or /unix.socket")
    err = refusal(Config().first_configure, {"wal_mode": "bogus", "readahead": 1})
    assert err.message == cfg_msg("readahead", "specified value is out of bounds")


def test_type_errors_come_before_value_errors():
    err = refusal(Config().first_configure, {"wal_mode": "bogus", "read_only": 1})
    assert err.message == cfg_msg("read_only", "should be of type boolean")


# ------------------------------------------------------------------ Config

@pytest.fixture
def config():
    c = Config()
    c.first_configure({"instance_uuid": U1, "replicaset_uuid": U2,
                       "memtx_memory": 200000000, "listen": 3301})
    return c


def test_first_configure_merges_defaults(config):
    values = config.as_dict()
    assert set(values) == set(OPTIONS)
    assert values["listen"] == "3301" and values["wal_mode"] == "write"
    assert config.get("memtx_memory") == 200000000
    assert config.configured


def test_failed_first_configure_leaves_nothing():
    c = Config()
    refusal(c.first_configure, {"wal_mode": "bogus"})
    assert not c.configured
    assert c.first_configure({})["wal_mode"] == "write"


def test_reconfigure_refuses_static_options(config):
    err = refusal(config.reconfigure, {"memtx_dir": "x"})
    assert err.code == ErrorCode.ER_RELOAD_CFG and err.message == reload_msg("memtx_dir")
    assert config.reconfigure({"memtx_dir": ".", "wal_mode": "write"}) == {}
    assert config.reconfigure({"vinyl_read_threads": 1.0}) == {}
    # "" means the default, which is still a different value from the current one.
    assert refusal(config.reconfigure, {"memtx_dir": ""}).message == reload_msg("memtx_dir")
    assert refusal(config.reconfigure, {"snap_dir": "zz"}).message == reload_msg("memtx_dir")
    # Types are checked before staticness.
    assert refusal(config.reconfigure, {"memtx_dir": 5}).message == \
        cfg_msg("memtx_dir", "should be of type string")


def test_memtx_memory_never_shrinks(config):
    # memtx keeps its quota in 1 KB units, rounded up: 200000000 became 200000512.
    assert config.reconfigure({"memtx_memory": 200000000}) == {}
    msg = cfg_msg("memtx_memory", "cannot decrease memory size at runtime")
    assert refusal(config.reconfigure, {"memtx_memory": 200000001}).message == msg
    assert config.get("memtx_memory") == 200000000
    assert config.reconfigure({"memtx_memory": 200000512}) == {"memtx_memory": 200000512}
    assert refusal(config.reconfigure, {"memtx_memory": 100 * 2 ** 20}).message == msg


def test_vinyl_memory_never_shrinks(config):
    msg = cfg_msg("vinyl_memory", "cannot decrease memory size at runtime")
    assert refusal(config.reconfigure, {"vinyl_memory": 2 ** 20}).message == msg
    assert config.reconfigure({"vinyl_memory": 2 ** 28}) == {"vinyl_memory": 2 ** 28}


def test_uuids_can_only_be_confirmed(config):
    assert config.reconfigure({"instance_uuid": U1, "replicaset_uuid": U2}) == {}
    for name, other in (("instance_uuid", U2), ("replicaset_uuid", U1), ("instance_uuid", "abc")):
        err = refusal(config.reconfigure, {name: other})
        assert err.code == ErrorCode.ER_RELOAD_CFG and err.message == reload_msg(name)
    c = Config()
    c.first_configure({})
    c.set_runtime_uuids(U1, U2)
    assert c.reconfigure({"instance_uuid": U1}) == {"instance_uuid": U1}


def test_log_module_options(config):
    assert config.reconfigure({"log_level": "verbose"}) == {"log_level": "verbose"}
    assert config.reconfigure({"log_level": 6}) == {"log_level": 6}
    assert refusal(config.reconfigure, {"log": "foo.log"}).message == \
        cfg_msg("log", "can't be set dynamically")
    # The log module remembers nil, not false, for a nonblock it was never given.
    assert refusal(config.reconfigure, {"log_nonblock": False}).message == \
        cfg_msg("log_nonblock", "can't be set dynamically")
    assert refusal(config.reconfigure, {"log": ""}).message == reload_msg("log")
    # A log_level of "" resets box.cfg.log_level to nil on reconfiguration.
    assert config.reconfigure({"log_level": ""}) == {"log_level": None}


def test_replication_anon(config):
    ro = cfg_msg("replication_anon",
                 "the value may be set to true only when the instance is read-only")
    # replication_anon is applied before read_only, whatever the call says.
    assert refusal(config.reconfigure, {"replication_anon": True, "read_only": True}).message == ro
    config.reconfigure({"read_only": True})
    assert refusal(config.reconfigure, {"replication_anon": True}).message == cfg_msg(
        "replication_anon", "cannot be turned on after bootstrap has finished")


def test_an_anonymous_replica_stays_read_only():
    """box_check_ro: read_only = false is refused while replication_anon is on,
    and allowed in the same call that turns it off (replication_anon goes first)."""
    config = Config()
    config.first_configure({"instance_uuid": U1, "replicaset_uuid": U2,
                            "replication_anon": True, "read_only": True})
    assert refusal(config.reconfigure, {"read_only": False}).message == cfg_msg(
        "read_only", "the value may be set to false only when replication_anon is false")
    assert config.as_dict()["read_only"] is True
    assert config.reconfigure({"read_only": False, "replication_anon": False}) == {
        "replication_anon": False, "read_only": False}


def test_reconfigure_order_and_partial_application(config):
    applied = []
    err = refusal(config.reconfigure,
                  {"replication_timeout": 0, "listen": "3302", "read_only": True},
                  lambda name, value: applied.append((name, value)))
    assert err.message == cfg_msg("replication_timeout", "the value must be greather than 0")
    # listen goes first and stays applied; the failing option keeps its value.
    assert applied == [("listen", "3302")]
    assert config.get("listen") == "3302" and config.get("replication_timeout") == 1
    assert config.get("read_only") is False


def test_apply_failure_reverts_that_option(config):
    def apply(name, value):
        raise BoxError("bind failed")
    with pytest.raises(BoxError):
        config.reconfigure({"listen": 3310}, apply)
    assert config.get("listen") == "3301"


def test_reconfigure_returns_only_changes(config):
    assert config.reconfigure() == {}
    assert config.reconfigure({"replication": "localhost:3302"}) == \
        {"replication": ["localhost:3302"]}
    assert config.reconfigure({"replication": ["localhost:3302"]}) == {}
    assert config.reconfigure({"replication": ""}) == {"replication": []}
    assert config.reconfigure({"readahead": 2 ** 20, "read_only": False}) == {"readahead": 2 ** 20}


def test_dont_check():
    err = refusal(Config().first_configure, {"dont_check": True})
    assert isinstance(err, CfgError)
    c = Config()
    c.first_configure({})
    assert refusal(c.reconfigure, {"dont_check": True}).message == reload_msg("dont_check")


def test_configure_dispatches_like_box_cfg():
    c = Config()
    assert c.configure({"read_only": False})["read_only"] is False
    assert c.configure({"read_only": True}) == {"read_only": True}


# ------------------------------------------------------------------ URIs

@pytest.mark.parametrize("uri", [
    "3301", "localhost:3301", "localhost:http", "127.0.0.1:3301", "[::1]:3301",
    "user:pass@localhost:3301", "/tmp/x.sock", "unix/:/tmp/x.sock", "unix/:./x.sock",
    "tcp://localhost:3301", "localhost:3301/path?q=1#frag", "user:pass@/tmp/sock",
    "h" * 253 + ":1",
])
def test_uri_accepted(uri):
    assert uri_has_service(uri)


@pytest.mark.parametrize("uri", [
    "", "localhost", "localhost:", "a:b:c", "./x.sock", "unix/:x.sock", "[::FFFF:1]:3301",
    "host name:3301", "tcp:///tmp/sock", "/tmp/sock?x", "localhost:3301x", "h" * 254 + ":1",
])
def test_uri_refused(uri):
    assert not uri_has_service(uri)


@pytest.mark.parametrize("uri", [
    "3301", "0", "localhost:3301", "127.0.0.1:3301", "a-b_c~d.e:1", "h" * 253 + ":1",
    "h" * 254 + ":1", "localhost:3301x", "a:b:1", ":1", "localhost:", "x%41:1", "ü:1",
    "٣٣", "host:٣",
])
def test_uri_plain_fast_path_agrees_with_the_grammar(uri):
    from spindle.core.box import cfg_options
    by_grammar = any(
        m is not None and len(m.groupdict().get("host") or m.groupdict().get("ip6") or "")
        <= cfg_options.URI_HOST_MAX
        for m in (form.fullmatch(uri) for form in cfg_options._compiled_uri_forms()))
    assert uri_has_service(uri) == by_grammar
