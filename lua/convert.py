"""Lua values <-> plain Python data, at the boundary (DESIGN §2 rule 4).

Lua -> Python: nil and box.NULL -> None, numbers -> int/float (int64 cdata -> int),
strings -> str (bytes that are not UTF-8 as surrogate escapes, as a MsgPack str
decodes: Tarantool sends and stores every Lua string as one), tables -> list or dict by Tarantool's
array/map rule, functions -> the lupa function object (only safe when it arrived
through a wait-request, which anchors it on the main state).
Python -> Lua: None -> nil at top level and box.NULL inside containers (keeps positions
and keys, as Tarantool's msgpack decoding does), big ints -> int64/uint64 cdata,
lists/tuples -> arrays, dicts -> maps (an empty dict keeps a map hint).
Decimals are decimal_t cdata in Lua and decimal.Decimal in Python, both ways, once the
decimal module has installed its two helpers (install_decimal).
"""
from __future__ import annotations

import decimal
import uuid
from typing import Any

import lupa.luajit21 as lupa

from spindle.core.iproto.msgpack import KeyMap, hashable_key

_DOUBLE_EXACT = 2 ** 53
_AS_IS = frozenset({int, float, bool, type(None)})    # what to_py() returns unchanged
DECIMAL_ROOM = 39        # digits a decimal_t holds (lsu[13] of 3 digits)


def decimal_parts(value: decimal.Decimal) -> tuple[bool, bytes, int] | None:
    """(negative, digits, exponent) of a finite Decimal that a decimal_t can hold."""
    sign, digits, exponent = value.as_tuple()
    if type(exponent) is not int or len(digits) > DECIMAL_ROOM:
        return None
    return sign == 1, "".join(map(str, digits)).encode(), exponent


class Converter:
    def __init__(self, runtime, helpers):
        self._lua = runtime
        self._classify = helpers[b"classify"]
        self._cdata_info = helpers[b"cdata_info"]
        self._make_uuid = helpers[b"make_uuid"]
        self._make_int64 = helpers[b"make_int64"]
        self._setmetatable = helpers[b"setmetatable"]
        self._tostring = helpers[b"tostring"]
        self.NULL = helpers[b"NULL"]
        self._map_mt = self.map_mt = helpers[b"map_mt"]
        self.array_mt = helpers[b"array_mt"]
        self._table = runtime.table
        self._decimal_sci = self._make_decimal = None

    def install_decimal(self, decimal_sci, make_decimal) -> None:
        """Lua helpers of the decimal module: a value's exact text ('-15E-1') or nil
        when it is not a decimal_t, and a decimal_t from (negative, digits, exponent)."""
        self._decimal_sci, self._make_decimal = decimal_sci, make_decimal

    # ------------------------------------------------------------- Lua -> Py

    def to_py(self, value: Any) -> Any:
        if value is None or value is True or value is False:
            return value
        kind = type(value)
        if kind is int or kind is float:
            return value
        if kind is bytes:
            # a Lua string is a MsgPack str whatever its bytes (Lua strings are bytes:
            # uuid:bin() and the like); surrogateescape keeps them byte for byte
            return value.decode("utf-8", "surrogateescape")
        lua_kind = lupa.lua_type(value)
        if lua_kind == "table":
            return self._table_to_py(value)
        if lua_kind == "cdata":
            info = self._cdata_info(value)
            if type(info) is not tuple or info[0] == b"null":   # ('null') comes alone
                return None
            if info[0] == b"int":
                return int(info[1])
            if info[0] == b"uuid":
                return uuid.UUID(info[1].decode())
            if self._decimal_sci is not None:
                sci = self._decimal_sci(value)
                if sci is not None:
                    return decimal.Decimal(sci.decode())
            return info[1].decode(errors="replace")
        return value   # functions, coroutines, userdata, Python objects

    def _table_to_py(self, table) -> Any:
        shape = self._classify(table)
        if isinstance(shape, tuple):      # ('array', size[, the elements...])
            if shape[0] == b"serialize":  # ('serialize', what __serialize returned)
                return self.to_py(shape[1])
            size = shape[1]
            to_py = self.to_py
            if len(shape) == size + 2:
                return [v if type(v) in _AS_IS else to_py(v) for v in shape[2:]]
            return [to_py(table[i]) for i in range(1, size + 1)]
        if shape == b"empty":
            return []
        to_py = self.to_py
        result = {}
        for k, v in table.items():
            key = to_py(k)
            if type(key) is list or type(key) is dict:
                key = hashable_key(key)     # a table as a key: MsgPack allows it
            result[key] = to_py(v)
        return result

    def text(self, value: Any) -> str:
        """tostring(value) as Lua would print it (bytes that are not UTF-8 kept as
        surrogate escapes: an error message goes out byte for byte)."""
        if isinstance(value, bytes):
            return value.decode("utf-8", "surrogateescape")
        rendered = self._tostring(value)
        if isinstance(rendered, bytes):
            return rendered.decode("utf-8", "surrogateescape")
        return str(rendered)

    # ------------------------------------------------------------- Py -> Lua

    def to_lua(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            # with encoding=None lupa would wrap a str as userdata
            return value.encode("utf-8", "surrogateescape")
        if value is None or kind is bool or kind is float or kind is bytes:
            return value
        if kind is int:
            return value if -_DOUBLE_EXACT <= value <= _DOUBLE_EXACT else self._big_int(value)
        if kind is list or kind is tuple:
            return self._table(*[self._element(v) for v in value])
        if kind is dict or kind is KeyMap:
            if not value:
                return self._setmetatable(self._table(), self._map_mt)
            table = self._table()
            for k, v in value.items():
                table[self.to_lua(k)] = self._element(v)
            return table
        if kind is uuid.UUID:
            return self.make_uuid(value)
        if isinstance(value, decimal.Decimal):     # (an ExtDecimal too)
            return self.make_decimal(value)
        return value   # lupa objects and Python objects pass as they are

    def make_uuid(self, value: uuid.UUID) -> Any:
        return self._make_uuid(str(value).encode())

    def make_decimal(self, value: decimal.Decimal) -> Any:
        """A decimal_t cdata (its text when no decimal_t can hold it)."""
        parts = decimal_parts(value) if self._make_decimal is not None else None
        if parts is None:
            return str(value).encode()
        return self._make_decimal(*parts)

    def _element(self, value: Any) -> Any:
        return self.NULL if value is None else self.to_lua(value)

    def _big_int(self, value: int) -> Any:
        magnitude = abs(value)
        return self._make_int64(value < 0, magnitude >> 32, magnitude & 0xFFFFFFFF)
