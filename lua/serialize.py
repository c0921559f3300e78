"""Lua values as display data: what Tarantool's serializers (the console, yaml, ...) see.

`to_display(runtime, value)` turns any Lua value into plain Python data the way
Tarantool 2.6's luaL_tofield classifies it (lua/modules/serializer.lua does the
classifying, on the Lua side): __serialize functions are called and string hints
honoured, box.NULL is None, int64 cdata are ints, uuids are `UuidText`, decimals
`DecimalText`, functions and other values the serializer cannot encode become their
tostring() text (console options). A table shared by several places is one Python
object (so renderers can emit YAML anchors), and a table that contains itself becomes
a recursive structure.

Display types, all plain containers or strings underneath:
  FlowList / FlowDict  a table with __serialize = 'seq' / 'map' (YAML flow style)
  UuidText             a uuid (printed bare where a string would be quoted)
  DecimalText          a decimal: its plain text (bare in YAML, quoted in Lua output)
  bytes                a string that is not printable UTF-8 (YAML !!binary)
  MapKey               a map key that is a table or collides with another key
  NULL                 box.NULL, only when asked for (Lua output tells nil from it)
"""
from __future__ import annotations

import math
import re
import unicodedata
from typing import Any, Iterable

from spindle.core.iproto.errors import BoxError

from .runtime import LuaRuntime, read_source

MAX_DEPTH = 400          # a __serialize that builds a fresh copy of itself forever
ER_PROC_LUA = 32         # LuajitError's code


class FlowList(list):
    """An array shown in YAML flow style: [1, 2]."""


class FlowDict(dict):
    """A map shown in YAML flow style: {'a': 1}."""


class BareText(str):
    """A value shown by its text: bare in YAML, quoted in Lua output."""


class UuidText(BareText):
    """A uuid value: its canonical text, never quoted in YAML."""


class DecimalText(BareText):
    """A decimal value: its plain text ('1.5', '-0.00', '100'), never quoted in YAML."""


class MapKey:
    """A map key Python cannot use as itself (a table, or a duplicate such as `true`
    next to 1). Hashes by identity; `value` is the displayed key."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"MapKey({self.value!r})"


class _Null:
    """box.NULL, kept apart from nil where the output can tell them apart."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class SerializeError(BoxError):
    """A value the serializer refused (or a __serialize that raised). `lua_value` is
    the Lua error value, when there is one."""

    type = "LuajitError"

    def __init__(self, message: str, lua_value: Any = None):
        super().__init__(message, ER_PROC_LUA)
        self.lua_value = lua_value


# ----------------------------------------------------------------- the Lua side

_RAISE_BOX = """
local new = ...
return function(message)
    error(new('LuajitError', 32, message, nil, 3), 0)
end
"""


class SerializerCore:
    """The runtime's serializer core (lua/modules/serializer.lua) with its functions
    fetched once. (lupa 2.8: a Lua table wrapped outside a Lua->Python callback
    cannot be indexed inside one running in a coroutine - it yields (thread, value) -
    so Python code that may run in callbacks only calls these prefetched functions.)"""

    def __init__(self, table, runtime: LuaRuntime):
        self.table = table
        for name in ("NULL", "map_mt", "array_mt", "uuid_t", "new_cfg", "call_cfg",
                     "tofield", "integer_text", "make_uint64", "make_int64",
                     "pack", "walk_begin", "expand"):
            setattr(self, name, table[name.encode()])
        self.console_cfg = self.new_cfg(runtime.table({
            b"encode_invalid_numbers": True, b"encode_load_metatables": True,
            b"encode_use_tostring": True, b"encode_invalid_as_nil": True}))

    def __getitem__(self, name: bytes):
        return getattr(self, name.decode())


def core(runtime: LuaRuntime) -> SerializerCore:
    """The runtime's serializer core, loaded once (build it outside Lua callbacks)."""
    found = getattr(runtime, "_serializer_core", None)
    if found is None:
        helpers = runtime._error_helpers
        raise_box = runtime.load(_RAISE_BOX, "=serializer")(helpers[b"new"])
        convert = runtime.convert
        chunk = runtime.load(read_source("modules/serializer.lua"), "@serializer.lua")
        table = chunk(convert.NULL, convert.map_mt, convert.array_mt,
                      helpers[b"is_error"], raise_box)
        found = SerializerCore(table, runtime)
        runtime._serializer_core = found
    return found


def console_cfg(runtime: LuaRuntime):
    """The console's serializer options (src/box/lua/console.c): show what cannot be
    encoded with tostring(), never refuse a value."""
    return core(runtime).console_cfg


# ------------------------------------------------------------------- the walk

class _Walker:
    def __init__(self, runtime: LuaRuntime, cfg, null: Any):
        lua_core = core(runtime)
        self._expand = lua_core.expand
        self._begin = lua_core.walk_begin
        self._cfg = cfg if cfg is not None else lua_core.console_cfg
        self._null = null
        self._memo: dict[int, Any] = {}
        self._state = None

    def run(self, packed, count: int, first: int = 1) -> list[Any]:
        self._state = self._begin(packed, count, first)
        return [self.node(packed, i, 0) for i in range(first, count + 1)]

    def node(self, parent, key, depth: int) -> Any:
        result = self._expand(parent, key, self._cfg, self._state)
        kind = result[0]
        if kind == b"str":
            return display_text(result[1])
        if kind == b"uint" or kind == b"int":
            return int(result[1])
        if kind == b"array":
            return self._array(result, depth)
        if kind == b"map":
            return self._map(result, depth)
        if kind == b"double" or kind == b"float":
            return float(result[1])
        if kind == b"bool":
            return bool(result[1])
        if kind == b"nil":
            return None
        if kind == b"null":
            return self._null
        if kind == b"uuid":
            return UuidText(result[1].decode())
        if kind == b"decimal":
            return DecimalText(result[1].decode())
        if kind == b"error":
            message = result[2]
            raise SerializeError(message.decode(errors="replace")
                                 if isinstance(message, bytes) else str(message),
                                 result[1])
        raise SerializeError(f"serializer: unknown kind {kind!r}")

    def _container(self, result, depth: int, flow_cls, block_cls):
        ident = result[4]
        if ident is not None and ident in self._memo:
            return self._memo[ident], None
        if depth >= MAX_DEPTH:
            raise SerializeError("Too high nest level")
        out = flow_cls() if result[3] else block_cls()
        if ident is not None:
            self._memo[ident] = out
        return out, result[1]

    def _array(self, result, depth: int) -> list:
        out, items = self._container(result, depth, FlowList, list)
        if items is not None:
            node = self.node
            for i in range(1, int(result[2]) + 1):
                out.append(node(items, i, depth + 1))
        return out

    def _map(self, result, depth: int) -> dict:
        out, items = self._container(result, depth, FlowDict, dict)
        if items is not None:
            node = self.node
            for i in range(1, 2 * int(result[2]) + 1, 2):
                key = node(items, i, depth + 1)
                if isinstance(key, (list, dict)) or key in out:
                    key = MapKey(key)
                out[key] = node(items, i + 1, depth + 1)
        return out


def display_table(runtime: LuaRuntime, packed, count: int, cfg=None,
                  null: Any = None, first: int = 1) -> list[Any]:
    """packed[first..count] (a Lua table) as display data, sharing one view of which
    tables are referenced more than once, as the console's YAML does. `cfg` is a
    serializer cfg table (default: the console's); `null` is what box.NULL becomes
    (None, or NULL for Lua output, which tells nil from box.NULL). __serialize
    functions run here, directly: a fiber switch attempted from one is refused."""
    sched = runtime.sched
    sched.switch_forbidden += 1
    try:
        return _Walker(runtime, cfg, null).run(packed, count, first)
    finally:
        sched.switch_forbidden -= 1


def display_values(runtime: LuaRuntime, values: Iterable[Any], cfg=None,
                   null: Any = None) -> list[Any]:
    """Several Lua values (a statement's results) as display data. Prefer
    display_table for values still in Lua: a Lua thread does not survive a trip
    through Python."""
    values = list(values)
    return display_table(runtime, core(runtime).pack(*values), len(values), cfg, null)


def to_display(runtime: LuaRuntime, value: Any, cfg=None, null: Any = None) -> Any:
    """One Lua value as display data."""
    return display_values(runtime, [value], cfg, null)[0]


# ------------------------------------------------------------ string helpers

def display_text(raw: bytes | str) -> str | bytes:
    """A Lua string: text when Tarantool would print it (printable UTF-8), else bytes."""
    if isinstance(raw, str):
        return raw
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return raw
    return text if printable(text) else raw


def printable(text: str) -> bool:
    """Tarantool's utf8_check_printable on already-valid UTF-8: ASCII always passes;
    most of the BMP passes by its UTF-8 lead byte; the rest needs ICU's u_isprint."""
    if text.isascii():
        return True
    for ch in text:
        code = ord(ch)
        if code < 0x80:
            continue
        if 0xA0 <= code <= 0xEFFF or (0xF000 <= code <= 0xFFFD and code != 0xFEFF):
            continue
        if unicodedata.category(ch)[0] == "C":
            return False
    return True


_LUA_NUMBER = re.compile(
    r"[ \t\n\v\f\r]*[+-]?(?:inf(?:inity)?|nan"
    r"|0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?"
    r"|0b[01]+\.?"
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)[ \t\n\v\f\r]*",
    re.IGNORECASE)


def lua_isnumber(text: str) -> bool:
    """Would Tarantool's LuaJIT 2.1 convert this string to a number? (It also reads
    0b binary, which the LuaJIT under lupa does not quite the same way.)"""
    return _LUA_NUMBER.fullmatch(text) is not None


def format_double(value: float, precision: int = 14) -> str:
    """C's printf("%.14lg"), which Tarantool's serializers use for doubles."""
    if value != value:
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return "%.*g" % (precision, value)
