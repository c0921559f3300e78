"""JSON paths of index parts (2.6.0's `{2, 'string', path = 'a.b'}`): parsing, key
extraction and the format checks they add.

A part's path leads from its field into nested maps and arrays: `.name` or `name` at
the start, `["name"]`, `[n]` (arrays count from 1, as in 2.6.0's json lexer). A tuple
lacking the path has a nil there; whether that is allowed is the format's business,
checked by `PathChecks` as tuple_field_map_create() checks it in 2.6.0: a container on
the way of the wrong kind is "Tuple field [2]["a"] type does not match one required by
operation: expected map", a missing leaf of a non-nullable part "Tuple field
[2]["a"]["b"] required by space format is missing".

`[*]` (multikey) parses to MULTIKEY; indexes on such parts are not built here
(index.py refuses them by name).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from spindle.core.box.field_types import FieldType, is_compatible
from spindle.core.iproto.errors import ClientError, ErrorCode

MULTIKEY = "[*]"

_NAME = r"[^\W\d][\w]*"           # (json_lexer: an identifier, letters/_ first)
_TOKEN = re.compile(rf"""\.({_NAME})|\[(\d+)\]|\["([^"]*)"\]|\['([^']*)'\]|(\[\*\])""")
_FIRST = re.compile(_NAME)


def parse(path: str) -> tuple | None:
    """The path's tokens (str keys, 0-based int positions, MULTIKEY), or None when
    2.6.0 would call it an invalid path."""
    if not isinstance(path, str) or not path:
        return None
    tokens: list[Any] = []
    pos = 0
    first = _FIRST.match(path)
    if first is not None:
        tokens.append(first.group(0))
        pos = first.end()
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            return None
        name, number, dq, sq, star = m.groups()
        if star is not None:
            tokens.append(MULTIKEY)
        elif number is not None:
            if int(number) == 0:
                return None
            tokens.append(int(number) - 1)
        else:
            tokens.append(name if name is not None else (dq if dq is not None else sq))
        pos = m.end()
    return tuple(tokens) if tokens else None


def display(fieldno: int, tokens: Sequence[Any]) -> str:
    """A field path as 2.6.0's errors show it: [2]["a"][1] (fieldno 0-based)."""
    out = [f"[{fieldno + 1}]"]
    for token in tokens:
        if token == MULTIKEY:
            out.append("[*]")
        elif isinstance(token, int):
            out.append(f"[{token + 1}]")
        else:
            out.append(f'["{token}"]')
    return "".join(out)


def container_type(token: Any) -> FieldType:
    """The type a node must have to hold `token`."""
    return FieldType.MAP if isinstance(token, str) and token != MULTIKEY else FieldType.ARRAY


def dig(value: Any, tokens: Sequence[Any]) -> Any:
    """The value at `tokens` inside `value`, or None when it is not there."""
    for token in tokens:
        if isinstance(token, int):
            if type(value) not in (list, tuple) or token >= len(value):
                return None
            value = value[token]
        elif isinstance(value, dict):
            value = value.get(token)
        else:
            return None
    return value


def extractor(fieldno: int, tokens: Sequence[Any]):
    """fn(tuple) -> the value at the part's path (None when absent)."""
    tokens = tuple(tokens)

    def extract(tup):
        return dig(tup[fieldno], tokens) if fieldno < len(tup) else None
    return extract


class PathChecks:
    """The format's checks of the nested fields that index parts with paths name.

    `leaves` are (fieldno, tokens, type, nullable); every prefix of a path must be a
    container of the kind its next token needs, and two parts may not ask different
    kinds of one node (ER_INDEX_PART_TYPE_MISMATCH, as 2.6.0's format merge)."""

    def __init__(self) -> None:
        self.nodes: dict[tuple, FieldType] = {}      # (fieldno, *prefix) -> its type
        self.leaves: dict[tuple, tuple[FieldType, bool]] = {}
        # (fieldno, path to the array, path in an element, type, nullable)
        self.multikey: list[tuple] = []

    def add(self, fieldno: int, tokens: Sequence[Any], ftype: FieldType,
            nullable: bool) -> None:
        if MULTIKEY in tokens:      # the array here, each element's field in check()
            at = list(tokens).index(MULTIKEY)
            self.multikey.append((fieldno, tuple(tokens[:at]), tuple(tokens[at + 1:]),
                                  ftype, nullable))
            tokens = tokens[:at]
            ftype, nullable = FieldType.ARRAY, True
            if not tokens:
                return
        for depth in range(1, len(tokens)):
            self._node((fieldno, *tokens[:depth]), container_type(tokens[depth]))
        key = (fieldno, *tokens)
        self._node(key, ftype)
        old = self.leaves.get(key)
        self.leaves[key] = (ftype, nullable and (old is None or old[1]))

    def _node(self, key: tuple, ftype: FieldType) -> None:
        current = self.nodes.get(key)
        if current is None or current is ftype:
            self.nodes[key] = ftype
            return
        if key in self.leaves or ftype in (FieldType.MAP, FieldType.ARRAY) or \
                current in (FieldType.MAP, FieldType.ARRAY):
            raise ClientError(ErrorCode.ER_INDEX_PART_TYPE_MISMATCH,
                              display(key[0], key[1:]), current.value, ftype.value)

    def __bool__(self) -> bool:
        return bool(self.leaves or self.multikey)

    def fits(self, tup: Sequence[Any]) -> bool:
        try:
            self.check(tup)
        except ClientError:
            return False
        return True

    def check(self, tup: Sequence[Any]) -> None:
        """Raise 2.6.0's error for the first nested field `tup` gets wrong."""
        n = len(tup)
        for key, (ftype, nullable) in self.leaves.items():
            fieldno, tokens = key[0], key[1:]
            value = _walk(tup[fieldno] if fieldno < n else None, fieldno, (), tokens)
            _check_leaf(value, ftype, nullable, fieldno, tokens)
        for fieldno, head, rest, ftype, nullable in self.multikey:
            array = _walk(tup[fieldno] if fieldno < n else None, fieldno, (), head)
            if array is None:
                continue        # (no array, no entries)
            if not is_compatible(FieldType.ARRAY, array, False):
                _wrong_type(fieldno, head, FieldType.ARRAY)
            path = (*head, MULTIKEY)
            for element in array:
                value = _walk(element, fieldno, path, rest)
                # (a nil element is of the wrong type; a missing field in one, missing)
                _check_leaf(value, ftype, nullable, fieldno, path + rest, present=not rest)


def _wrong_type(fieldno: int, tokens: Sequence[Any], want: FieldType) -> None:
    where = str(fieldno + 1) if not tokens else display(fieldno, tokens)
    raise ClientError(ErrorCode.ER_FIELD_TYPE, where, want.value)


def _walk(value: Any, fieldno: int, above: tuple, tokens: Sequence[Any]) -> Any:
    """Follow `tokens` from `value` (at path `above`): the value there, None when a
    level is missing; a level of the wrong kind is 2.6.0's ER_FIELD_TYPE."""
    for depth, token in enumerate(tokens):
        if value is None:
            return None
        want = container_type(token)
        if not is_compatible(want, value, False):
            _wrong_type(fieldno, (*above, *tokens[:depth]), want)
        value = dig(value, (token,))
    return value


def _check_leaf(value: Any, ftype: FieldType, nullable: bool, fieldno: int,
                tokens: Sequence[Any], present: bool = False) -> None:
    if value is None and not present:
        if not nullable:
            raise ClientError(ErrorCode.ER_FIELD_MISSING, display(fieldno, tokens))
    elif not is_compatible(ftype, value, nullable):
        raise ClientError(ErrorCode.ER_FIELD_TYPE, display(fieldno, tokens), ftype.value)
