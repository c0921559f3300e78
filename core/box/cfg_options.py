"""The box.cfg option table of Tarantool 2.6.0, as data.

Facts come from the 2.6.0 binary: its embedded load_cfg.lua (`default_cfg`,
`template_cfg`, `dynamic_cfg`, `dynamic_cfg_order`, `translate_cfg`), its log.lua
(`box_api`) and the values `box.cfg` reports after a plain `box.cfg{}`.
It also holds the recognizers of the two value formats the checks rely on: URIs
(listen, replication) and UUIDs. Validation itself lives in cfg.py.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

ANY = "any"


@dataclass(frozen=True)
class Option:
    """One box.cfg option.

    types: Lua type names the Lua-side check accepts, in the order Tarantool prints
        them in "should be one of types ..."; ("any",) means no Lua-side type check
        (the log_* options are checked by the log module instead).
    default: the value box.cfg reports after a default start (None = nil).
    dynamic: whether a later box.cfg{} may change it. instance_uuid and
        replicaset_uuid are listed as dynamic in load_cfg.lua but only accept the
        instance's actual UUIDs, so they are static here (cfg.py handles them).
    module: handled by the log module (log.box_api), not by template_cfg types.
    """

    name: str
    types: tuple[str, ...]
    default: Any
    dynamic: bool
    module: bool = False

    @property
    def template(self) -> str:
        """The type string as template_cfg spells it (used in error messages)."""
        return ", ".join(self.types)


_MB = 1024 * 1024

# name, types, default, dynamic — in template_cfg order.
_TABLE: list[tuple[str, tuple[str, ...], Any, bool]] = [
    ("listen", ("string", "number"), None, True),
    ("memtx_memory", ("number",), 256 * _MB, True),
    ("strip_core", ("boolean",), True, False),
    ("memtx_min_tuple_size", ("number",), 16, False),
    ("memtx_max_tuple_size", ("number",), _MB, True),
    ("slab_alloc_factor", ("number",), 1.05, False),
    ("work_dir", ("string",), None, False),
    ("memtx_dir", ("string",), ".", False),
    ("wal_dir", ("string",), ".", False),
    ("vinyl_dir", ("string",), ".", False),
    ("vinyl_memory", ("number",), 128 * _MB, True),
    ("vinyl_cache", ("number",), 128 * _MB, True),
    ("vinyl_max_tuple_size", ("number",), _MB, True),
    ("vinyl_read_threads", ("number",), 1, False),
    ("vinyl_write_threads", ("number",), 4, False),
    ("vinyl_timeout", ("number",), 60, True),
    ("vinyl_run_count_per_level", ("number",), 2, False),
    ("vinyl_run_size_ratio", ("number",), 3.5, False),
    ("vinyl_range_size", ("number",), None, False),
    ("vinyl_page_size", ("number",), 8 * 1024, False),
    ("vinyl_bloom_fpr", ("number",), 0.05, False),
    ("log", (ANY,), None, False),
    ("log_nonblock", (ANY,), None, False),
    ("log_level", ("number", "string"), 5, True),
    ("log_format", ("string",), "plain", True),
    ("io_collect_interval", ("number",), None, True),
    ("readahead", ("number",), 16320, True),
    ("snap_io_rate_limit", ("number",), None, True),
    ("too_long_threshold", ("number",), 0.5, True),
    ("wal_mode", ("string",), "write", False),
    ("wal_max_size", ("number",), 256 * _MB, False),
    ("wal_dir_rescan_delay", ("number",), 2, True),
    ("force_recovery", ("boolean",), False, True),
    ("replication", ("string", "number", "table"), None, True),
    ("instance_uuid", ("string",), None, False),
    ("replicaset_uuid", ("string",), None, False),
    ("custom_proc_title", ("string",), None, True),
    ("pid_file", ("string",), None, False),
    ("background", ("boolean",), False, False),
    ("username", ("string",), None, False),
    ("coredump", ("boolean",), False, False),
    ("checkpoint_interval", ("number",), 3600, True),
    ("checkpoint_wal_threshold", ("number",), 10 ** 18, True),
    ("checkpoint_count", ("number",), 2, True),
    ("read_only", ("boolean",), False, True),
    ("hot_standby", ("boolean",), False, False),
    ("worker_pool_threads", ("number",), 4, True),
    # leader election (2.6.1+; 2.6.3's template_cfg puts them here)
    ("election_mode", ("string",), "off", True),
    ("election_timeout", ("number",), 5, True),
    ("replication_timeout", ("number",), 1, True),
    ("replication_sync_lag", ("number",), 10, True),
    ("replication_sync_timeout", ("number",), 300, True),
    ("replication_synchro_quorum", ("number",), 1, True),
    ("replication_synchro_timeout", ("number",), 5, True),
    ("replication_connect_timeout", ("number",), 30, True),
    ("replication_connect_quorum", ("number",), None, True),
    ("replication_skip_conflict", ("boolean",), False, True),
    ("replication_anon", ("boolean",), False, True),
    ("feedback_enabled", ("boolean",), True, True),
    ("feedback_host", ("string",), "https://feedback.tarantool.io", True),
    ("feedback_interval", ("number",), 3600, True),
    ("net_msg_max", ("number",), 768, True),
    ("sql_cache_size", ("number",), 5 * _MB, True),
]

# The log module owns these; their values live in the module between calls.
MODULE_OPTIONS = frozenset({"log", "log_nonblock", "log_level", "log_format"})

OPTIONS: dict[str, Option] = {
    name: Option(name, types, default, dynamic, name in MODULE_OPTIONS)
    for name, types, default, dynamic in _TABLE
}

# dynamic_cfg_order: on reconfiguration these go first, lowest number first
# (listen before replication, so replication can reach a just-opened port; anon
# after replication). Everything else follows in no defined order.
RELOAD_ORDER: dict[str, int] = {
    "listen": 100,
    "replication_timeout": 150,
    "replication_sync_lag": 150,
    "replication_sync_timeout": 150,
    "replication_synchro_quorum": 150,
    "replication_synchro_timeout": 150,
    "replication_connect_timeout": 150,
    "replication_connect_quorum": 150,
    "replication": 200,
    "replication_anon": 250,
    "election_mode": 300,
    "election_timeout": 320,
}

# Option names load_cfg.lua checks at reconfiguration through a hook, not through
# the plain "is it dynamic" rule.
UUID_OPTIONS = ("instance_uuid", "replicaset_uuid")


class DeprecatedValueError(Exception):
    """A translation could not compute the new value (a Lua arithmetic error)."""

    def __init__(self, lua_type: str):
        super().__init__(lua_type)
        self.lua_type = lua_type


def _gb_to_bytes(old: Any, new: Any) -> tuple[Any, Any]:
    # slab_alloc_arena was in GB; Lua coerces numeric strings in arithmetic.
    if isinstance(old, bool) or not isinstance(old, (int, float, str)):
        raise DeprecatedValueError(lua_type(old))
    if isinstance(old, str):
        try:
            old = float(old.strip())
        except ValueError:
            raise DeprecatedValueError("string") from None
    return None, math.floor(old * 1024 * 1024 * 1024)


def _negate(old: Any, new: Any) -> tuple[Any, Any]:
    # panic_on_*_error = X means force_recovery = not X, with Lua truthiness.
    return None, old is None or old is False


def _keep_both(old: Any, new: Any) -> tuple[Any, Any]:
    # rows_per_wal has no real translation: it stays in the table and is then
    # refused as an unexpected option, exactly as 2.6.0 does.
    return old, new


def lua_type(value: Any) -> str:
    """The Lua type name a Python value stands for (None is nil, lists are tables)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (list, tuple, dict)):
        return "table"
    if callable(value):
        return "function"
    return "userdata"


# translate_cfg: old name -> (new name, transform(old, new_given) -> (old, new)).
DEPRECATED: dict[str, tuple[str, Callable[[Any, Any], tuple[Any, Any]] | None]] = {
    "snapshot_count": ("checkpoint_count", None),
    "snapshot_period": ("checkpoint_interval", None),
    "slab_alloc_arena": ("memtx_memory", _gb_to_bytes),
    "slab_alloc_minimal": ("memtx_min_tuple_size", None),
    "slab_alloc_maximal": ("memtx_max_tuple_size", None),
    "snap_dir": ("memtx_dir", None),
    "logger": ("log", None),
    "logger_nonblock": ("log_nonblock", None),
    "panic_on_snap_error": ("force_recovery", _negate),
    "panic_on_wal_error": ("force_recovery", _negate),
    "replication_source": ("replication", None),
    "rows_per_wal": ("wal_max_size", _keep_both),
}

# log.lua's level and format names. The "expected ..." lists are printed in the
# order LuaJIT's pairs() walks those tables in 2.6.0, which is fixed for the build.
LOG_LEVELS = {"fatal": 0, "syserror": 1, "error": 2, "crit": 3, "warn": 4,
              "info": 5, "verbose": 6, "debug": 7}
LOG_LEVELS_EXPECTED = "expected crit,warn,info,debug,syserror,verbose,fatal,error"
LOG_FORMATS = ("plain", "json")
LOG_FORMATS_EXPECTED = "expected json,plain"

SYSLOG_FACILITIES = frozenset({
    "kern", "user", "mail", "daemon", "auth", "intern", "lpr", "news", "uucp",
    "clock", "authpriv", "ftp", "ntp", "audit", "alert", "cron",
    "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
})

WAL_MODES = ("none", "write", "fsync")

# Limits of the C-side checks (box.cc, memtx, small/quota.h, vclock.h, iproto.cc).
QUOTA_MAX = 4398046510080           # memtx_memory / vinyl_memory upper bound
QUOTA_UNIT_SIZE = 1024              # memtx quota granularity (rounded up)
VCLOCK_MAX = 32
READAHEAD_MIN = 128
MEMTX_MIN_TUPLE_SIZE_RANGE = (8, 1048280)
NET_MSG_MAX_MIN = 2
URI_HOST_MAX = 253                  # measured: a longer host fails the listen check


# ---------------------------------------------------------------- URI (uri.rl)
# Tarantool's ragel URI grammar, rewritten as the few shapes that leave a
# service behind; the listen/replication check only asks "parsed, with a service".

_UNRES = r"[A-Za-z0-9\-_~.]"
_PCT = r"(?:%%|%u[0-9A-Fa-f]{4}|%[0-9A-Fa-f][0-9A-Fa-f]?)"
_SUB = r"[!$&'()*+,;=]"
_PCHAR_NC = rf"(?:{_UNRES}|{_PCT}|{_SUB}|@)"
_PCHAR = rf"(?:{_PCHAR_NC}|[:|])"
_PATH_ABEMPTY = rf"(?:/{_PCHAR}*)*"
_PATH_ABSOLUTE = rf"/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_SOCK_ABS = rf"(?:/{_PCHAR_NC}+)+"
_SOCK = rf"(?:{_SOCK_ABS}|\.{_SOCK_ABS})"
_NAME = rf"(?:{_UNRES}|{_PCT}|{_SUB})"
# hex1_4 is written [0-9a-fa-f] in uri.rl: upper-case hex is refused in IPv6.
_HEX = r"[0-9a-f]{1,4}"
_IP4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_IP6 = rf"\[(?P<ip6>(?:{_HEX})?(?::(?:{_HEX})?){{1,8}}|::ffff:{_IP4})\]"
_USERINFO = rf"{_NAME}+(?::{_NAME}*)?"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"

_URI_FORM_PATTERNS = (
    r"\d+",                                                         # PORT
    rf"(?:{_USERINFO}@)?{_PATH_ABSOLUTE}",                          # PATH
    rf"(?:{_SCHEME}://)?(?:{_USERINFO}@)?unix/:{_SOCK}"
    rf"(?::{_PATH_ABEMPTY})?{_TAIL}",                               # unix/:path
    rf"(?:{_SCHEME}://)?(?:{_USERINFO}@)?"
    rf"(?:{_IP6}|(?P<host>{_NAME}+)):(?:\d+|[A-Za-z]+)"
    rf"{_PATH_ABEMPTY}{_TAIL}",                                     # host:service
)
# The common `port` and `host:port` (host without %-escapes or sub-delims): a
# subset of the PORT and host:service forms above, whose ~2 ms of compiling a
# start then skips.
_PLAIN_URI = re.compile(r"(?:(?P<host>[A-Za-z0-9\-_~.]+):)?\d+", re.ASCII)
_uri_forms: list[re.Pattern] = []


def _compiled_uri_forms() -> list[re.Pattern]:
    if not _uri_forms:
        _uri_forms.extend(re.compile(form, re.ASCII) for form in _URI_FORM_PATTERNS)
    return _uri_forms


def uri_has_service(uri: str) -> bool:
    """True when Tarantool 2.6.0's box_check_uri() accepts `uri` (listen/replication)."""
    plain = _PLAIN_URI.fullmatch(uri)
    if plain is not None and len(plain.group("host") or "") <= URI_HOST_MAX:
        return True
    for form in _compiled_uri_forms():
        m = form.fullmatch(uri)
        if m is None:
            continue
        host = m.groupdict().get("host") or m.groupdict().get("ip6") or ""
        if len(host) <= URI_HOST_MAX:
            return True
    return False


# ---------------------------------------------------------------- UUID text (tt_uuid.c)

_SPACE = " \t\n\v\f\r"
_HEXDIGITS = "0123456789abcdefABCDEF"
_UUID_FORMAT = (8, "-", 4, "-", 4, "-", 2, 2, "-", 2, 2, 2, 2, 2, 2)


def _scan_hex(text: str, pos: int, width: int) -> tuple[int, int] | None:
    # One glibc "%<width>x": skip blanks, optional sign and 0x, then hex digits.
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    end = min(len(text), pos + width)
    sign = 1
    if pos < end and text[pos] in "+-":
        sign = -1 if text[pos] == "-" else 1
        pos += 1
    if pos + 1 < end and text[pos] == "0" and text[pos + 1] in "xX":
        pos += 2
        if not (pos < end and text[pos] in _HEXDIGITS):
            return 0, pos
    start = pos
    while pos < end and text[pos] in _HEXDIGITS:
        pos += 1
    if pos == start:
        return None
    return sign * int(text[start:pos], 16), pos


def parse_uuid(text: str) -> tuple[int, ...] | None:
    """tt_uuid_from_string(): the 11 fields, or None when 2.6.0 refuses the text."""
    if len(text.encode("utf-8", "surrogateescape")) != 36:
        return None
    fields = []
    pos = 0
    for item in _UUID_FORMAT:
        if isinstance(item, str):   # the "-" between groups
            if pos >= len(text) or text[pos] != "-":
                return None
            pos += 1
            continue
        got = _scan_hex(text, pos, item)
        if got is None:
            return None
        value, pos = got
        fields.append(value & ((1 << (4 * item)) - 1))
    variant = fields[3]
    if variant & 0x80 and (variant & 0xC0) != 0x80 and (variant & 0xE0) != 0xC0:
        return None
    return tuple(fields)


UUID_TEXT = "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x"
