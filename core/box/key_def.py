"""Key definitions: which tuple fields make an index key, and how keys compare.

A `KeyDef` turns a tuple (or a search key) into a *sort key*: a Python tuple of part keys
(see field_types.part_key_func) whose natural ordering is Tarantool's. Sort keys are
hashable, so one shape serves the ordered TREE (a SortedDict) and the HASH (a dict).

A partial search key of m parts becomes an m-tuple, which sorts before every full key
that starts with it; `prefix + (MAX_KEY,)` sorts after all of them. That is all the
TREE iterators need for lower_bound / upper_bound on partial keys.

One exception: the entries of a unique index on a one-part key without nils are keyed
by the part key itself (`KeyDef.plain`, `tuple_key` / `search_key`), not a 1-tuple:
no tuple to build per statement, and ints hash cheaply and in order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from spindle.core.box import field_types, json_path
from spindle.core.box.field_types import (
    INDEXABLE, FieldType, field_type_by_name, is_compatible, part_key_func,
)
from spindle.core.iproto.errors import ClientError, ErrorCode


@dataclass(frozen=True)
class KeyPart:
    """One part of a key: a 0-based field number and its type."""

    fieldno: int
    type: FieldType = FieldType.UNSIGNED
    is_nullable: bool = False
    collation: str | None = None
    # A JSON path inside the field (json_path.py), as given; parts compare by its
    # tokens ('a.b' is '["a"]["b"]').
    path: str | None = field(default=None, compare=False)
    _key: Callable[[Any], Any] = field(init=False, repr=False, compare=False, hash=False)
    tokens: tuple = field(init=False, repr=False)

    def __post_init__(self):
        ftype = field_type_by_name(self.type)
        object.__setattr__(self, "type", ftype)
        collation = self.collation
        if collation in ("none", "binary"):
            collation = None
        if ftype not in (FieldType.STRING, FieldType.SCALAR):
            collation = None
        object.__setattr__(self, "collation", collation)
        # A part of a type no index takes (any, array, map) is refused by create_index.
        key = (part_key_func(ftype, is_nullable=self.is_nullable, collation=collation)
               if ftype in INDEXABLE else None)
        object.__setattr__(self, "_key", key)
        if not self.path:
            object.__setattr__(self, "path", None)
            object.__setattr__(self, "tokens", ())
        else:
            tokens = json_path.parse(self.path)
            if tokens is None:
                raise ValueError(f"invalid path {self.path!r}")
            object.__setattr__(self, "tokens", tokens)

    @property
    def is_multikey(self) -> bool:
        return json_path.MULTIKEY in self.tokens

    def sort_key(self, value: Any) -> Any:
        return self._key(value)


def key_part(spec: Any) -> KeyPart:
    """A KeyPart from a KeyPart, a (fieldno, type) pair or a dict with
    fieldno/field, type, is_nullable, collation (fieldno 0-based)."""
    if isinstance(spec, KeyPart):
        return spec
    if isinstance(spec, dict):
        fieldno = spec.get("fieldno", spec.get("field"))
        if fieldno is None:   # (a part without one failed at its first key)
            raise ValueError(f"key part without a fieldno: {spec!r}")
        return KeyPart(fieldno, spec.get("type", FieldType.UNSIGNED),
                       bool(spec.get("is_nullable", False)), spec.get("collation"),
                       spec.get("path"))
    fieldno, ftype = spec[0], spec[1]
    return KeyPart(fieldno, ftype)


class KeyDef:
    """An ordered list of key parts (a JsonKeyDef when a part has a JSON path)."""

    __slots__ = ("parts", "part_count", "_getters", "_fieldnos", "is_nullable", "tuple_key",
                 "search_key", "plain")

    def __new__(cls, parts: Sequence[Any]):
        if cls is KeyDef:
            parts = [key_part(p) for p in parts]
            if any(p.tokens for p in parts):
                cls = JsonKeyDef
        return object.__new__(cls)

    def __init__(self, parts: Sequence[Any]):
        self.parts: tuple[KeyPart, ...] = tuple(key_part(p) for p in parts)
        if not self.parts:
            raise ValueError("a key needs at least one part")
        self.part_count = len(self.parts)
        self._fieldnos = tuple(p.fieldno for p in self.parts)
        self._getters = tuple(p._key for p in self.parts)
        self.is_nullable = any(p.is_nullable for p in self.parts)
        # A unique index keys its entries by tuple_key(tuple) and finds them by
        # search_key(full key): tuple_sort_key / key_sort_key, except that a one-part
        # key is `plain`: the part's sort key itself, with no 1-tuple around it
        # (cheaper to build, hash and compare; the order is the same).
        self.plain = self.part_count == 1 and self._getters[0] is not None
        self.tuple_key, self.search_key = self._make_key_funcs()

    def _make_key_funcs(self) -> tuple[Callable, Callable]:
        if not self.plain:
            return self.tuple_sort_key, self.key_sort_key
        fieldno, get = self._fieldnos[0], self._getters[0]
        if get is field_types._identity:
            def tuple_key(tup):
                return tup[fieldno] if fieldno < len(tup) else None

            def search_key(key):
                return key[0]
        else:
            def tuple_key(tup):
                return get(tup[fieldno] if fieldno < len(tup) else None)

            def search_key(key):
                return get(key[0])
        return tuple_key, search_key

    def __repr__(self) -> str:
        return f"KeyDef({list(self.parts)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyDef) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    # -- tuples -------------------------------------------------------------

    def extract_key(self, tup: Sequence[Any]) -> list:
        """The raw key of a tuple (missing trailing fields of nullable parts are nil)."""
        n = len(tup)
        return [tup[f] if f < n else None for f in self._fieldnos]

    def tuple_sort_key(self, tup: Sequence[Any]) -> tuple:
        n = len(tup)
        return tuple(get(tup[f] if f < n else None)
                     for f, get in zip(self._fieldnos, self._getters))

    def tuple_has_null(self, tup: Sequence[Any]) -> bool:
        n = len(tup)
        return any(f >= n or tup[f] is None for f in self._fieldnos)

    # -- search keys ----------------------------------------------------------

    def key_sort_key(self, key: Sequence[Any]) -> tuple:
        """Sort key of a (possibly partial) search key already validated."""
        return tuple(get(v) for v, get in zip(key, self._getters))

    def validate_key(self, key: Sequence[Any], *, allow_nullable: bool = True) -> None:
        """key_validate_parts(): every supplied part must fit its type
        (ER_KEY_PART_TYPE, parts numbered from 0)."""
        for i, value in enumerate(key):
            part = self.parts[i]
            if not is_compatible(part.type, value, allow_nullable and part.is_nullable):
                raise ClientError(ErrorCode.ER_KEY_PART_TYPE, i, part.type.value)

    def validate_exact_key(self, key: Sequence[Any]) -> None:
        """exact_key_validate(): a full key, no nils."""
        if len(key) != self.part_count:
            raise ClientError(ErrorCode.ER_EXACT_MATCH, self.part_count, len(key))
        self.validate_key(key, allow_nullable=False)

    def validate_partial_key(self, key: Sequence[Any]) -> None:
        if len(key) > self.part_count:
            raise ClientError(ErrorCode.ER_KEY_PART_COUNT, self.part_count, len(key))
        self.validate_key(key)

    # -- comparison -----------------------------------------------------------

    def compare(self, a: Sequence[Any], b: Sequence[Any]) -> int:
        """tuple_compare(): -1/0/1 over the parts of two tuples."""
        ka, kb = self.tuple_sort_key(a), self.tuple_sort_key(b)
        return (ka > kb) - (ka < kb)

    def compare_with_key(self, tup: Sequence[Any], key: Sequence[Any]) -> int:
        """tuple_compare_with_key(): compares only the parts the key supplies."""
        kt = self.tuple_sort_key(tup)[:len(key)]
        kk = self.key_sort_key(key)
        return (kt > kk) - (kt < kk)

    def merge(self, other: "KeyDef") -> "KeyDef":
        """key_def_merge(): these parts, then those of `other` on fields not yet used."""
        used = {(p.fieldno, p.tokens) for p in self.parts}
        return KeyDef(list(self.parts) +
                      [p for p in other.parts if (p.fieldno, p.tokens) not in used])

    @property
    def fieldnos(self) -> tuple[int, ...]:
        return self._fieldnos


class JsonKeyDef(KeyDef):
    """Parts with JSON paths: each part's value is dug out of its field (a missing
    path gives nil); never `plain`."""

    __slots__ = ("_extracts",)

    def __init__(self, parts: Sequence[Any]):
        super().__init__(parts)
        self._extracts = tuple(json_path.extractor(p.fieldno, p.tokens) for p in self.parts)

    def _make_key_funcs(self) -> tuple[Callable, Callable]:
        self.plain = False
        return self.tuple_sort_key, self.key_sort_key

    def extract_key(self, tup: Sequence[Any]) -> list:
        return [extract(tup) for extract in self._extracts]

    def tuple_sort_key(self, tup: Sequence[Any]) -> tuple:
        return tuple(get(extract(tup)) for extract, get in zip(self._extracts, self._getters))

    def tuple_has_null(self, tup: Sequence[Any]) -> bool:
        return any(extract(tup) is None for extract in self._extracts)


def normalize_key(key: Any) -> list:
    """A search key as a list: None -> [], a scalar -> [scalar] (as Lua's box API)."""
    if key is None:
        return []
    if isinstance(key, (list, tuple)):
        return list(key)
    return [key]
