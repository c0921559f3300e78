"""box.cfg options and their validation, refusing exactly as Tarantool 2.6.0 does.

Pure: no I/O, no Lua. The option table is in cfg_options.py.

Tarantool validates box.cfg in two passes, and so does this module:

* the Lua pass (load_cfg.lua): deprecated names are translated, unknown names are
  refused ("unexpected option"), "" or nil means "the default", types are checked
  against template_cfg, the log module checks log_*, listen/replication are
  normalized (numbers become strings; replication always becomes a list);
* the C pass (box.cc box_check_config, in its fixed order) on the merged
  configuration at the first call; at a later call each changed dynamic option's
  own setter check, in dynamic_cfg_order.

Errors:

* ClientError(ER_CFG, name, reason) — "Incorrect value for option 'X': reason";
* ClientError(ER_RELOAD_CFG, name) — "Can't set option 'X' dynamically";
* CfgError — a plain Lua error string (no box.error object): a non-table argument,
  a deprecated option whose value cannot be translated, a boolean key. Its message
  is the full text 2.6.0 prints, builtin file positions included.

Where Tarantool's order depends on Lua's pairs() or on its unstable table.sort
(which of several bad options is reported first in the Lua pass or among static
options; which of the options without a dynamic_cfg_order rank are applied before
a failing one), this module follows the order of the dict it is given.

Not reproduced: after a *failed first* box.cfg, Tarantool's log module keeps the
log/log_nonblock/log_level/log_format values it was given and the next box.cfg
sees them again; here a failed call leaves nothing behind. Some first-call
refusals (net_msg_max, replication_anon) make real Tarantool exit instead of
raising, after its log says the same message; here they raise.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Mapping

from spindle.core.iproto.errors import ClientError, ErrorCode

from .cfg_options import (
    DEPRECATED, LOG_FORMATS, LOG_FORMATS_EXPECTED, LOG_LEVELS, LOG_LEVELS_EXPECTED,
    MEMTX_MIN_TUPLE_SIZE_RANGE, NET_MSG_MAX_MIN, OPTIONS, QUOTA_MAX, QUOTA_UNIT_SIZE,
    READAHEAD_MIN, RELOAD_ORDER, SYSLOG_FACILITIES, UUID_OPTIONS, UUID_TEXT, VCLOCK_MAX,
    WAL_MODES, DeprecatedValueError, Option, lua_type, parse_uuid, uri_has_service)
from .limbo_quorum import check_formula, is_formula

# Options that also take a formula of N (2.7+); any other string is refused with
# 2.6.0's "should be of type number", in the Lua pass, as 2.6.0 refuses every string.
FORMULA_OPTIONS = frozenset(("replication_synchro_quorum",))

__all__ = ["OPTIONS", "Option", "CfgError", "Config", "defaults", "check_option",
           "lua_type", "uri_has_service"]


class CfgError(Exception):
    """A plain Lua error from box.cfg; `message` is the exact error string.

    Deliberately not a BoxError: Tarantool raises these with error(), so Lua code
    receives a string, not a box.error object with a code.
    """

    lua_plain = True   # raised into Lua as a plain string, as load_cfg.lua does

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# The locked() wrapper re-raises with error(err), so 2.6.0 prefixes its own line too.
_LUA_ERR = "builtin/box/load_cfg.lua:19: builtin/box/load_cfg.lua:%d: %s"
_LINE_PAIRS, _LINE_ARITH, _LINE_CONCAT, _LINE_NIL_CFG = 410, 373, 456, 505

_URI_REASON = "expected host:service or /unix.socket"


def _cfg_error(name: str, reason: str) -> ClientError:
    return ClientError(ErrorCode.ER_CFG, name, reason)


def _reload_error(name: str) -> ClientError:
    return ClientError(ErrorCode.ER_RELOAD_CFG, name)


# ---------------------------------------------------------------- Lua value model

def _is_table(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict))


def _truthy(value: Any) -> bool:
    return value is not None and value is not False


def _as_double(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _lua_eq(a: Any, b: Any) -> bool:
    """Lua's ==: no coercion between types; tables equal only to themselves."""
    ta, tb = lua_type(a), lua_type(b)
    if ta != tb:
        return False
    if ta == "number":
        return _as_double(a) == _as_double(b)
    if ta == "table":
        return a is b
    return a == b


def _py_number(value: Any) -> int | float:
    # Lua numbers are doubles: integral ones are shown as Python ints.
    f = _as_double(value)
    return int(f) if f.is_integer() else f


def _tostring_number(value: Any) -> str:
    f = _as_double(value)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return "%.14g" % f


def _lua_tostring(value: Any) -> Any:
    """Lua's tostring() for the scalars normalize_uri() meets."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = _c_string(value)
    return value if text is None else text


def _c_string(value: Any) -> str | None:
    """lua_tostring() as the C side sees a cfg value: strings and numbers only."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _tostring_number(value)
    return None


def _c_int64(value: Any) -> int:
    # (int64_t) of a double on x86-64: NaN and out-of-range become INT64_MIN.
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    f = _as_double(value)
    if math.isnan(f) or not -2.0 ** 63 <= f < 2.0 ** 63:
        return -(1 << 63)
    return int(f)


def _c_int(value: Any) -> int:
    # cfg_geti(): lua_tointeger (int64 on x86-64) stored into a C int.
    v = _c_int64(value) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _c_double(value: Any) -> float:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return _as_double(value)


def _ipairs(table: Any) -> list:
    if isinstance(table, dict):
        out, i = [], 1
        while table.get(i) is not None:
            out.append(table[i])
            i += 1
        return out
    out = []
    for item in table:
        if item is None:
            break
        out.append(item)
    return out


def _to_python(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return _py_number(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, (list, tuple)):
        return [_to_python(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_python(v) for k, v in value.items()}
    return value


def _option_name(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        raise CfgError(_LUA_ERR % (_LINE_CONCAT,
                                   "attempt to concatenate local 'k' (a boolean value)"))
    if isinstance(key, (int, float)):
        return _tostring_number(key)
    if isinstance(key, bytes):
        return key.decode("utf-8", "surrogateescape")
    return str(key)


# ---------------------------------------------------------------- URI and UUID

def _check_uri(value: Any, option: str) -> None:
    if value is None:
        return
    text = _c_string(value)
    if text is None or not uri_has_service(text):
        raise _cfg_error(option, _URI_REASON)


def _uuid_canonical(value: Any) -> str | None:
    """The UUID as box.info prints it (tt_uuid_str), or None."""
    text = _c_string(value)
    fields = parse_uuid(text) if text is not None else None
    if fields is None:
        return None
    return UUID_TEXT % fields


def _check_uuid(value: Any, option: str) -> None:
    text = _c_string(value)
    if text is None:
        return
    fields = parse_uuid(text)
    if fields is None:
        raise _cfg_error(option, text)
    if not any(fields):
        raise _cfg_error(option, "nil UUID is reserved")


# ---------------------------------------------------------------- log (say.c)

def _logger_type(log: str) -> tuple[str, str]:
    if log.startswith("|"):
        return "pipe", log[1:]
    for prefix, kind in (("file:", "file"), ("pipe:", "pipe"), ("syslog:", "syslog")):
        if log.startswith(prefix):
            return kind, log[len(prefix):]
    if ":" not in log:
        return "file", log
    raise _cfg_error("log", "expecting a file name or a prefix, such as '|', 'pipe:', 'syslog:'")


def _check_syslog_opts(opts: str) -> None:
    seen = set()
    for option in opts.split(","):
        if option == "":
            break   # say.c stops at the first empty option
        key, eq, value = option.partition("=")
        if not eq or key not in ("identity", "facility", "server"):
            raise _cfg_error("log", "bad option '%s'" % option)
        if key in seen:
            raise _cfg_error("log", "duplicate option '%s'" % key)
        seen.add(key)
        if key == "facility" and value.lower() not in SYSLOG_FACILITIES:
            raise _cfg_error("log", "bad syslog facility option '%s'" % value)


def _check_say(cfg: Mapping[str, Any]) -> None:
    log = _c_string(cfg.get("log"))
    kind = "stderr"
    if log is not None:
        kind, rest = _logger_type(log)
        if kind == "syslog":
            _check_syslog_opts(rest)
    nonblock = cfg.get("log_nonblock")
    if nonblock is not None and _truthy(nonblock) and kind in ("file", "stderr"):
        raise _cfg_error("log_nonblock", "the option is incompatible with file/stderr logger")


def _is_syslog(log: Any) -> bool:
    return isinstance(log, str) and log.startswith("syslog:")


# ---------------------------------------------------------------- C-side checks
# Each takes the merged configuration; used in box_check_config order at the
# first call and one by one by the dynamic setters later.

def _check_listen(cfg):
    _check_uri(cfg.get("listen"), "listen")


def _check_instance_uuid(cfg):
    _check_uuid(cfg.get("instance_uuid"), "instance_uuid")


def _check_replicaset_uuid(cfg):
    _check_uuid(cfg.get("replicaset_uuid"), "replicaset_uuid")


def _check_replication(cfg):
    for source in cfg.get("replication") or ():
        if not isinstance(source, str):
            raise _cfg_error("replication", _URI_REASON)
        _check_uri(source, "replication")


def _positive(name: str, reason: str) -> Callable[[Mapping[str, Any]], None]:
    def check(cfg):
        if _c_double(cfg.get(name)) <= 0:
            raise _cfg_error(name, reason)
    return check


# "greather" is 2.6.0's spelling.
_check_replication_timeout = _positive("replication_timeout", "the value must be greather than 0")
_check_replication_connect_timeout = _positive("replication_connect_timeout",
                                              "the value must be greather than 0")
_check_replication_sync_lag = _positive("replication_sync_lag", "the value must be greater than 0")
_check_replication_synchro_timeout = _positive("replication_synchro_timeout",
                                               "the value must be greater than zero")
_check_replication_sync_timeout = _positive("replication_sync_timeout",
                                            "the value must be greater than 0")


def _check_replication_connect_quorum(cfg):
    value = cfg.get("replication_connect_quorum")
    if value is not None and _c_int(value) < 0:
        raise _cfg_error("replication_connect_quorum", "the value must be greater or equal to 0")


def _check_replication_synchro_quorum(cfg):
    raw = cfg.get("replication_synchro_quorum")
    if isinstance(raw, (str, bytes)):
        # The 'N/2+1' formula form of later versions (2.6.0 takes only numbers).
        check_formula(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
        return
    value = _c_int(raw)
    if value <= 0 or value >= VCLOCK_MAX:
        raise _cfg_error("replication_synchro_quorum", "the value must be greater than zero "
                         "and less than maximal number of replicas")


ELECTION_MODES = ("off", "voter", "manual", "candidate")


def _check_election_mode(cfg):
    # box_check_election_mode of 2.6.3 (the message lists them in its own order)
    if _c_string(cfg.get("election_mode")) not in ELECTION_MODES:
        raise _cfg_error("election_mode", "the value must be one of the following strings: "
                         "'off', 'voter', 'candidate', 'manual'")


_check_election_timeout = _positive("election_timeout", "the value must be a positive number")


def _check_readahead(cfg):
    if _c_int(cfg.get("readahead")) < READAHEAD_MIN:
        raise _cfg_error("readahead", "specified value is out of bounds")


def _check_checkpoint_count(cfg):
    if _c_int(cfg.get("checkpoint_count")) < 1:
        raise _cfg_error("checkpoint_count", "the value must not be less than one")


def _check_wal_max_size(cfg):
    if _c_int64(cfg.get("wal_max_size")) <= 1:
        raise _cfg_error("wal_max_size", "the value must be greater than one")


def _check_wal_mode(cfg):
    mode = _c_string(cfg.get("wal_mode"))
    if mode is None or mode.lower() not in WAL_MODES:
        raise _cfg_error("wal_mode", mode if mode is not None else "(null)")


def _check_quota(name: str) -> Callable[[Mapping[str, Any]], None]:
    def check(cfg):
        size = _c_int64(cfg.get(name))
        if not 0 <= size <= QUOTA_MAX:
            raise _cfg_error(name, "must be >= 0 and <= %d, but it is %d" % (QUOTA_MAX, size))
    return check


_check_memtx_memory = _check_quota("memtx_memory")
_check_vinyl_memory = _check_quota("vinyl_memory")


def _check_memtx_min_tuple_size(cfg):
    low, high = MEMTX_MIN_TUPLE_SIZE_RANGE
    if not low <= _c_int64(cfg.get("memtx_min_tuple_size")) <= high:
        raise _cfg_error("memtx_min_tuple_size", "specified value is out of bounds")


def _check_vinyl(cfg):
    _check_vinyl_memory(cfg)
    if _c_int(cfg.get("vinyl_read_threads")) < 1:
        raise _cfg_error("vinyl_read_threads", "must be greater than or equal to 1")
    if _c_int(cfg.get("vinyl_write_threads")) < 2:
        raise _cfg_error("vinyl_write_threads", "must be greater than or equal to 2")
    page = _c_int64(cfg.get("vinyl_page_size"))
    range_size = _c_int64(cfg.get("vinyl_range_size"))
    if page <= 0 or (range_size > 0 and page > range_size):
        raise _cfg_error("vinyl_page_size", "must be greater than 0 and less than "
                         "or equal to vinyl_range_size")
    if _c_int(cfg.get("vinyl_run_count_per_level")) <= 0:
        raise _cfg_error("vinyl_run_count_per_level", "must be greater than 0")
    if _c_double(cfg.get("vinyl_run_size_ratio")) <= 1:
        raise _cfg_error("vinyl_run_size_ratio", "must be greater than 1")
    fpr = _c_double(cfg.get("vinyl_bloom_fpr"))
    if fpr <= 0 or fpr > 1:
        raise _cfg_error("vinyl_bloom_fpr", "must be greater than 0 and less than or equal to 1")


def _check_sql_cache_size(cfg):
    if _c_int(cfg.get("sql_cache_size")) < 0:
        raise _cfg_error("sql_cache_size", "must be non-negative")


def _check_net_msg_max(cfg):
    if _c_int(cfg.get("net_msg_max")) < NET_MSG_MAX_MIN:
        raise _cfg_error("net_msg_max", "minimal value is %d" % NET_MSG_MAX_MIN)


_ANON_NEEDS_RO = "the value may be set to true only when the instance is read-only"


def _writable_anon(cfg) -> bool:
    """An anonymous replica must stay read-only: checked on either option."""
    return _truthy(cfg.get("replication_anon")) and not _truthy(cfg.get("read_only"))


def _check_replication_anon(cfg):
    if _writable_anon(cfg):
        raise _cfg_error("replication_anon", _ANON_NEEDS_RO)


def _check_read_only(cfg):
    """box_check_ro."""
    if _writable_anon(cfg):
        raise _cfg_error("read_only", "the value may be set to false only when "
                         "replication_anon is false")


# box_check_config() order, then the checks box_cfg_xc() makes while loading.
_FIRST_CHECKS = (
    _check_say, _check_listen, _check_instance_uuid, _check_replicaset_uuid,
    _check_election_mode, _check_election_timeout,     # (2.6.3 checks them here)
    _check_replication, _check_replication_timeout, _check_replication_connect_timeout,
    _check_replication_connect_quorum, _check_replication_sync_lag,
    _check_replication_synchro_quorum, _check_replication_synchro_timeout,
    _check_replication_sync_timeout, _check_readahead, _check_checkpoint_count,
    _check_wal_max_size, _check_wal_mode, _check_memtx_memory, _check_memtx_min_tuple_size,
    _check_vinyl, _check_sql_cache_size,
    _check_net_msg_max, _check_replication_anon,
)

# The dynamic setters that refuse values; the others accept anything the Lua
# pass let through (vinyl_cache = -1 included, as 2.6.0 does).
_RELOAD_CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "listen": _check_listen,
    "replication": _check_replication,
    "readahead": _check_readahead,
    "checkpoint_count": _check_checkpoint_count,
    "replication_timeout": _check_replication_timeout,
    "replication_connect_timeout": _check_replication_connect_timeout,
    "replication_connect_quorum": _check_replication_connect_quorum,
    "replication_sync_lag": _check_replication_sync_lag,
    "replication_synchro_quorum": _check_replication_synchro_quorum,
    "replication_synchro_timeout": _check_replication_synchro_timeout,
    "replication_sync_timeout": _check_replication_sync_timeout,
    "net_msg_max": _check_net_msg_max,
    "sql_cache_size": _check_sql_cache_size,
    "election_mode": _check_election_mode,
    "election_timeout": _check_election_timeout,
    "read_only": _check_read_only,
}


# ---------------------------------------------------------------- Lua pass

def _upgrade(cfg: Mapping, warnings: list[str]) -> dict:
    """translate_cfg: deprecated names to current ones."""
    result: dict = {}
    for key, value in cfg.items():
        translation = DEPRECATED.get(key) if isinstance(key, str) else None
        if translation is None:
            result[key] = value
            continue
        new_key, transform = translation
        warnings.append("Deprecated option %s, please use %s instead" % (key, new_key))
        given = cfg.get(new_key)
        if transform is None:
            old_value, new_value = None, value
        else:
            try:
                old_value, new_value = transform(value, given)
            except DeprecatedValueError as e:
                raise CfgError(_LUA_ERR % (
                    _LINE_ARITH, "attempt to perform arithmetic on local 'size' (a %s value)"
                    % e.lua_type)) from None
        if given is not None and not _lua_eq(given, new_value):
            raise _cfg_error(key, "can not override a value for a deprecated option")
        # Storing nil in a Lua table removes the key.
        for name, item in ((key, old_value), (new_key, new_value)):
            if item is None:
                result.pop(name, None)
            else:
                result[name] = item
    return result


def _check_log_level(value: Any) -> None:
    if isinstance(value, str):
        if value not in LOG_LEVELS:
            raise _cfg_error("log_level", LOG_LEVELS_EXPECTED)
    elif lua_type(value) != "number":
        raise _cfg_error("log_level", "must be a number or a string")


def _check_log_format(value: Any, cfg: Mapping, current_log: Any) -> None:
    if not isinstance(value, str) or value not in LOG_FORMATS:
        raise _cfg_error("log_format", LOG_FORMATS_EXPECTED)
    log = cfg.get("log")
    if log is not None and not isinstance(log, (str, bytes)):
        # log.lua calls string.startswith(cfg.log, "syslog:") unguarded.
        raise CfgError("builtin/box/load_cfg.lua:19: builtin/log.lua:216: bad argument #1 "
                       "to 'string.startswith' (string expected, got %s)" % lua_type(log))
    if value == "json" and (_is_syslog(cfg.get("log")) or _is_syslog(current_log)):
        raise _cfg_error("log_format", "json can't be used with syslog logger")


def _normalize(name: str, value: Any) -> Any:
    if name == "listen":
        return value if value is None or _is_table(value) else _lua_tostring(value)
    if name == "replication":
        if value is None:
            return []
        items = _ipairs(value) if _is_table(value) else [value]
        return [v if _is_table(v) else _lua_tostring(v) for v in items]
    return value


class Config:
    """The current box.cfg values of one instance, with Tarantool's rules for changing them.

    `configure(options)` behaves like `box.cfg(options)`: the first successful call
    is `first_configure`, later ones are `reconfigure`. Values are held in Python
    form (see module docstring of cfg_options for names and defaults).
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._configured = False
        # memtx's quota is kept in 1 KB units, rounded up: decreasing is judged
        # against the rounded size; vinyl's limit is exact.
        self._memtx_quota = 0
        self._vinyl_limit = 0
        # What the log module was told for its static keys (None unless given).
        self._log_state: dict[str, Any] = {"log": None, "log_nonblock": None}
        # The UUIDs the instance really runs with (box.info.uuid and
        # box.info.cluster.uuid); box sets them after bootstrap.
        self.instance_uuid_actual: str | None = None
        self.replicaset_uuid_actual: str | None = None
        # Deprecation notices Tarantool logs as warnings, for the caller to log.
        self.warnings: list[str] = []

    # -- reading

    @property
    def configured(self) -> bool:
        return self._configured

    def get(self, name: str) -> Any:
        if name not in OPTIONS:
            raise KeyError(name)
        if not self._configured:
            return copy.deepcopy(OPTIONS[name].default)
        return copy.deepcopy(self._values.get(name))

    def as_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._values if self._configured else defaults())

    def set_runtime_uuids(self, instance_uuid: str | None, replicaset_uuid: str | None) -> None:
        self.instance_uuid_actual = instance_uuid
        self.replicaset_uuid_actual = replicaset_uuid

    # -- changing

    def configure(self, options: Any = None, apply=None) -> dict[str, Any]:
        """box.cfg(options): first configuration, or a reconfiguration after it."""
        if self._configured:
            return self.reconfigure(options, apply=apply)
        return self.first_configure(options)

    def first_configure(self, options: Any = None) -> dict[str, Any]:
        """Validate everything, merge with defaults; return the whole new configuration."""
        if self._configured:
            raise RuntimeError("box.cfg is already configured; use reconfigure()")
        cfg = self._upgrade(options)
        if _truthy(cfg.get("dont_check")):
            # prepare_cfg() returns nothing for dont_check; 2.6.0 then indexes nil.
            raise CfgError(_LUA_ERR % (_LINE_NIL_CFG, "attempt to index local 'cfg' (a nil value)"))
        new = self._prepare(cfg, reload=False)
        merged = defaults()
        for name, value in new.items():
            if value is not None:
                merged[name] = value
        for check in _FIRST_CHECKS:
            check(merged)
        self._values = {name: _to_python(v) for name, v in merged.items()}
        self._configured = True
        self._memtx_quota = _round_quota(_c_int64(merged["memtx_memory"]))
        self._vinyl_limit = _c_int64(merged["vinyl_memory"])
        for key in self._log_state:
            if key in new:
                self._log_state[key] = new[key]
        if self.instance_uuid_actual is None:
            self.instance_uuid_actual = _uuid_canonical(merged.get("instance_uuid"))
        if self.replicaset_uuid_actual is None:
            self.replicaset_uuid_actual = _uuid_canonical(merged.get("replicaset_uuid"))
        return self.as_dict()

    def reconfigure(self, options: Any = None, apply=None) -> dict[str, Any]:
        """Apply a later box.cfg call; return the options whose value changed.

        Changes are applied one by one in Tarantool's order. `apply(name, value)`,
        if given, is called after each change passes its check (the place for the
        side effect: listening, reconnecting...). When a check or `apply` fails,
        that option keeps its old value and the error propagates, but options
        applied before it stay applied, as in Tarantool.
        """
        if not self._configured:
            raise RuntimeError("box.cfg is not configured yet; use first_configure()")
        cfg = self._upgrade(options)
        dont_check = _truthy(cfg.get("dont_check"))
        new = {} if dont_check else self._prepare(cfg, reload=True)
        for key, value in cfg.items():
            name = _option_name(key)
            option = OPTIONS.get(name)
            if (option is None or not option.dynamic) and name not in UUID_OPTIONS \
                    and not _lua_eq(self._values.get(name), value):
                raise _reload_error(name)
        names = [_option_name(k) for k in cfg]
        names.sort(key=lambda n: RELOAD_ORDER.get(n, math.inf))
        changed: dict[str, Any] = {}
        for name in names:
            value = new.get(name)
            old = self._values.get(name)
            if _same_cfg(value, old):
                continue
            self._values[name] = _to_python(value)
            try:
                self._check_reload(name, value, old)
                if apply is not None:
                    apply(name, copy.deepcopy(self._values[name]))
            except BaseException:
                self._values[name] = old
                raise
            self._commit_reload(name, value)
            changed[name] = copy.deepcopy(self._values[name])
        return changed

    # -- internals

    def _upgrade(self, options: Any) -> dict:
        if options is None:
            return {}
        if isinstance(options, (list, tuple)):
            # A Lua array is a table too: its keys 1..n are option names.
            options = {i + 1: v for i, v in enumerate(options)}
        if not isinstance(options, Mapping):
            raise CfgError(_LUA_ERR % (_LINE_PAIRS, "bad argument #1 to 'pairs' "
                                       "(table expected, got %s)" % lua_type(options)))
        return _upgrade(options, self.warnings)

    def _prepare(self, cfg: Mapping, reload: bool) -> dict[str, Any]:
        new: dict[str, Any] = {}
        module_keys = []
        for key, value in cfg.items():
            name = _option_name(key)
            option = OPTIONS.get(name)
            if option is None:
                raise _cfg_error(name, "unexpected option")
            if value is None or value == "":
                value = None if option.module else copy.deepcopy(option.default)
            elif option.module:
                module_keys.append(name)
                try:
                    self._check_module(name, value, cfg, reload)
                except ClientError:
                    # On failure load_cfg.lua restores the log module's values
                    # from a backup taken as `old or box.NULL`: a false becomes nil.
                    for done in module_keys:
                        if self._log_state.get(done) is False:
                            self._log_state[done] = None
                    raise
            elif (option.types != ("any",) and lua_type(value) not in option.types
                    and not (name in FORMULA_OPTIONS and is_formula(value))):
                if len(option.types) == 1:
                    raise _cfg_error(name, "should be of type " + option.types[0])
                raise _cfg_error(name, "should be one of types " + option.template)
            new[name] = _normalize(name, value)
        return new

    def _check_module(self, name: str, value: Any, cfg: Mapping, reload: bool) -> None:
        if name == "log_level":
            _check_log_level(value)
        elif name == "log_format":
            _check_log_format(value, cfg, self._values.get("log") if reload else None)
        elif reload and not _lua_eq(self._log_state[name], value):
            # log and log_nonblock: the log module refuses any change once the
            # logger runs, with its own wording (ER_CFG, not ER_RELOAD_CFG).
            raise _cfg_error(name, "can't be set dynamically")

    def _check_reload(self, name: str, value: Any, old: Any) -> None:
        check = _RELOAD_CHECKS.get(name)
        if check is not None:
            check(self._values)
        elif name == "memtx_memory":
            _check_memtx_memory(self._values)
            if _c_int64(value) < self._memtx_quota:
                raise _cfg_error(name, "cannot decrease memory size at runtime")
        elif name == "vinyl_memory":
            _check_vinyl_memory(self._values)
            if _c_int64(value) < self._vinyl_limit:
                raise _cfg_error(name, "cannot decrease memory size at runtime")
        elif name == "replication_anon":
            if _truthy(value) and not _truthy(old):
                if not _truthy(self._values.get("read_only")):
                    raise _cfg_error(name, _ANON_NEEDS_RO)
                raise _cfg_error(name, "cannot be turned on after bootstrap has finished")
        elif name == "instance_uuid":
            if not _lua_eq(value, self.instance_uuid_actual):
                raise _reload_error(name)
        elif name == "replicaset_uuid":
            if not _lua_eq(value, self.replicaset_uuid_actual):
                raise _reload_error(name)

    def _commit_reload(self, name: str, value: Any) -> None:
        if name == "memtx_memory":
            self._memtx_quota = _round_quota(_c_int64(value))
        elif name == "vinyl_memory":
            self._vinyl_limit = _c_int64(value)


def _round_quota(size: int) -> int:
    return (size + QUOTA_UNIT_SIZE - 1) // QUOTA_UNIT_SIZE * QUOTA_UNIT_SIZE


def _same_cfg(a: Any, b: Any) -> bool:
    """load_cfg.lua compare_cfg(): arrays compare element by element."""
    if lua_type(a) != lua_type(b):
        return False
    if not _is_table(a):
        return _lua_eq(a, b)
    la, lb = _ipairs(a), _ipairs(b)
    return len(la) == len(lb) and all(_lua_eq(x, y) for x, y in zip(la, lb))


def defaults() -> dict[str, Any]:
    """A fresh dict of what box.cfg reports after a default start (None = nil)."""
    return {name: copy.deepcopy(option.default) for name, option in OPTIONS.items()}


def check_option(name: str, value: Any) -> Any:
    """Check one option as a first `box.cfg{[name] = value}` would; return its value.

    Raises ClientError(ER_CFG, ...) (or CfgError) with Tarantool's message. The
    result is the value box.cfg would then hold, in Python form (for a deprecated
    name: the value of the option it stands for).
    """
    result = Config().first_configure({name: value})
    if name in DEPRECATED:
        name = DEPRECATED[name][0]
    return result.get(name)
