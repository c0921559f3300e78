"""Tarantool's `key_def` module: the Python half of lua/modules/key_def.lua.

A key_def object in Lua holds a number; here that number names a core KeyDef (the
one the indexes use, core/box/key_def.py), so extract_key, compare, compare_with_key
order and check values exactly as an index on the same parts would. Lua names the
numbers of collected objects back in `forget`."""
from __future__ import annotations

import itertools
from typing import Any

from spindle.core.box import json_path
from spindle.core.box.field_types import FieldType, field_type_by_name, is_compatible
from spindle.core.box.key_def import KeyDef, KeyPart
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode

from ..runtime import read_source
from .lazy import preload

# types 2.6.0's key_def.new takes; the other field types it names "unsupported"
_KEY_TYPES = {"unsigned", "string", "number", "integer", "boolean", "varbinary",
              "scalar", "double", "decimal", "uuid"}
_ABSENT_FIELD = 1 << 32      # where a part with a field number below 1 looks


class IllegalParams(BoxError):
    type = "IllegalParams"


class KeyDefs:
    def __init__(self):
        self._defs: dict[int, KeyDef] = {}
        self._parts: dict[int, list[dict]] = {}
        self._ids = itertools.count(1)

    def new(self, parts: list) -> int:
        """parts: [{fieldno (1-based), type, is_nullable, collation, path}], checked by
        the Lua side except for the field type and the path."""
        core_parts = []
        for spec in parts:
            ftype = str(spec["type"])
            if ftype not in _KEY_TYPES:
                try:
                    field_type_by_name(ftype)
                except (ValueError, KeyError):
                    raise IllegalParams(f"Unknown field type: {ftype}") from None
                raise IllegalParams(f"Unsupported field type: {ftype}")
            path = spec.get("path")
            if path is not None and (not isinstance(path, str)
                                     or json_path.parse(path) is None):
                raise IllegalParams("invalid path")
            fieldno = spec["fieldno"]
            core_parts.append(KeyPart(int(fieldno) - 1 if fieldno >= 1 else _ABSENT_FIELD,
                                      FieldType(ftype), bool(spec["is_nullable"]),
                                      spec.get("collation"), path))
        ident = next(self._ids)
        self._defs[ident] = KeyDef(core_parts)
        return ident

    @staticmethod
    def illegal(message: str) -> None:
        raise IllegalParams(message)

    def forget(self, idents: list) -> None:
        for ident in idents:
            self._defs.pop(int(ident), None)

    def _check_tuple(self, key_def: KeyDef, tup: Any) -> None:
        """tuple_validate_key_parts(): every part's field present (or nullable) and
        of its type."""
        values = key_def.extract_key(tup)
        for number, (part, value) in enumerate(zip(key_def.parts, values)):
            if value is None and not part.is_nullable:
                where = f"[{part.fieldno + 1}]" + (part.path or "")
                raise ClientError(ErrorCode.ER_FIELD_MISSING, where)
            if not is_compatible(part.type, value, part.is_nullable):
                raise ClientError(ErrorCode.ER_KEY_PART_TYPE, number, part.type.value)

    def extract_key(self, ident: int, tup: list) -> list:
        key_def = self._defs[ident]
        self._check_tuple(key_def, tup)
        return key_def.extract_key(tup)

    def compare(self, ident: int, a: list, b: list) -> int:
        key_def = self._defs[ident]
        self._check_tuple(key_def, a)
        self._check_tuple(key_def, b)
        return key_def.compare(a, b)

    def compare_with_key(self, ident: int, tup: list, key: Any) -> int:
        key_def = self._defs[ident]
        if not isinstance(key, list):
            raise ClientError(ErrorCode.ER_TUPLE_NOT_ARRAY)
        self._check_tuple(key_def, tup)
        key_def.validate_partial_key(key)
        return key_def.compare_with_key(tup, key)


def _make(instance):
    runtime = instance.runtime
    defs = KeyDefs()
    native = runtime.table({name: runtime.bridge(getattr(defs, name)) for name in
                            ("new", "forget", "illegal", "extract_key", "compare", "compare_with_key")})
    chunk = runtime.load(read_source("modules/key_def.lua"), "@builtin/key_def.lua")
    return chunk(native)


def build(instance):
    """Built at the first require('key_def') (see lazy.py)."""
    preload(instance, "key_def", lambda: _make(instance))
