"""Tuples between the memtx engine (Python tuples) and Lua.

Representation (decided here, used by every lua/box module): a tuple seen from Lua is
a plain Lua array table of its fields with a shared tuple metatable (tuple.lua). That
keeps t[i], #t, unpack(t) and ipairs(t) native-speed; methods, field names and
tostring come from the metatable. A metatable per space format gives t.name. The
table is a copy: writing into it changes nothing stored (Tarantool's tuples are
immutable cdata; here the copy is simply not written back). Differences from
Tarantool: type(t) is 'table', and t1 == t2 compares fields instead of pointers.

Conversion: field values become Lua values as Tarantool's msgpack decoding makes
them: nil fields are box.NULL, integers beyond 2^53 are int64/uint64 cdata, nested
arrays and maps carry the msgpack array/map metatables (so they print in flow style).
Going back, Lua values are checked the way msgpack encoding checks them (a function
in a tuple is "unsupported Lua type 'function'").
"""
from __future__ import annotations

import decimal
import uuid
from typing import Any

from spindle.core.iproto.msgpack import KeyMap, RawExt, mp_sizeof
from spindle.core.box.update import update_tuple, upsert_tuple

from ..convert import decimal_parts
from ..errors import LuaError
from ..runtime import LuaRuntime, read_source

_DOUBLE_EXACT = 2 ** 53
_PLAIN = (type(None), bool, int, float, str, bytes)


class TupleBridge:
    """Tuples both ways, and the natives of tuple methods that need the engine's
    update code."""

    def __init__(self, runtime: LuaRuntime):
        self.runtime = runtime
        convert = runtime.convert
        self._table = runtime.lua.table
        self._setmetatable = convert._setmetatable
        self._array_mt = convert.array_mt
        self._map_mt = convert.map_mt
        self._big_int = convert._big_int
        self._make_uuid = convert.make_uuid
        self.NULL = convert.NULL
        self._to_py = runtime.to_py
        natives = {
            "new": lambda fields: self.to_lua(self.from_lua(fields)),
            "update": self._update,
            "upsert": self._upsert,
            "bsize": lambda t: mp_sizeof(self.from_lua(t)),
        }
        bridged = runtime.table({k: runtime.bridge(v, convert_args=False)
                                 for k, v in natives.items()})
        helpers = runtime.table({"array_mt": convert.array_mt, "map_mt": convert.map_mt,
                                 "NULL": convert.NULL})
        chunk = runtime.load(read_source("box/tuple.lua"), "@box/tuple.lua")
        self.lua = chunk(bridged, helpers)
        self.box_tuple = self.lua[b"box_tuple"]
        self.make_mt = self.lua[b"make_mt"]

    # ------------------------------------------------------------- Python -> Lua

    def to_lua(self, tup: Any) -> Any:
        """A stored tuple as a Lua array table (the caller's Lua code blesses it)."""
        if tup is None:
            return None
        field = self._field
        return self._table(*[field(v) for v in tup])

    def list_to_lua(self, tuples: list) -> Any:
        to_lua = self.to_lua
        return self._table(*[to_lua(t) for t in tuples])

    def value_to_lua(self, value: Any) -> Any:
        """Any decoded MsgPack value (a `_space` format, a field) as Lua sees it."""
        return self._field(value)

    def _field(self, v: Any) -> Any:
        kind = type(v)
        if kind is int:
            return v if -_DOUBLE_EXACT <= v <= _DOUBLE_EXACT else self._big_int(v)
        if kind is str:
            return v.encode("utf-8", "surrogateescape")
        if v is None:
            return self.NULL
        if kind is float or kind is bool or kind is bytes:
            return v
        if kind is list or kind is tuple:
            table = self._table(*[self._field(x) for x in v])
            return self._setmetatable(table, self._array_mt)
        if kind is dict or kind is KeyMap:
            table = self._table()
            for key, value in v.items():
                table[self._field(key)] = self._field(value)
            return self._setmetatable(table, self._map_mt)
        if kind is uuid.UUID:
            return self._make_uuid(v)
        if isinstance(v, decimal.Decimal):
            if decimal_parts(v) is None:
                # more digits than a decimal_t holds (2.6.0 keeps them past its
                # buffer): left as it is, so it goes back byte for byte
                return v
            return self.runtime.convert.make_decimal(v)
        return v        # an extension 2.6.0 keeps raw: back as it came

    # ------------------------------------------------------------- Lua -> Python

    def from_lua(self, value: Any) -> Any:
        """A Lua tuple or table as a list of plain fields; other values as they are
        (the engine then refuses what is not an array)."""
        result = self._to_py(value)
        _check_encodable(result)
        return result

    # ------------------------------------------------------------------ natives

    def _update(self, t, ops, names=None) -> Any:
        fields = self.from_lua(t)
        result = update_tuple(fields, self.from_lua(ops), index_base=1,
                              field_names=self._names(names))
        return self.to_lua(result)

    def _upsert(self, t, ops, names=None) -> Any:
        fields = self.from_lua(t)
        result = upsert_tuple(fields, self.from_lua(ops), index_base=1,
                              field_names=self._names(names))
        return self.to_lua(result)

    def _names(self, names) -> dict[str, int] | None:
        """A format's {name = fieldno (1-based)} as update's {name: 0-based no}."""
        if names is None:
            return None
        return {name: no - 1 for name, no in self._to_py(names).items()}


def _check_encodable(value: Any) -> None:
    """What Tarantool's msgpack encoder refuses in a tuple."""
    kind = type(value)
    if kind in _PLAIN:
        return
    if kind is list or kind is tuple:           # (a tuple: an array used as a key)
        for item in value:
            if type(item) not in _PLAIN:
                _check_encodable(item)
        return
    if kind is dict or kind is KeyMap:
        for key, item in value.items():
            _check_encodable(key)
            _check_encodable(item)
        return
    if isinstance(value, (uuid.UUID, decimal.Decimal, RawExt)):
        return      # (an extension 2.6.0 keeps as it came: back as it came)
    raise LuaError(f"unsupported Lua type '{_lua_type_name(value)}'")


def _lua_type_name(value: Any) -> str:
    import lupa.luajit21 as lupa
    kind = lupa.lua_type(value)
    return kind or "userdata"
