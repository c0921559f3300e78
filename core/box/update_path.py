"""UPDATE / UPSERT operations on JSON paths inside a field (2.6.0's xrow_update_route,
_bar, _map and _array), for update.py.

A field is named by a string: a format field name (the whole string first, so a
field called 'a.b' wins), or a JSON path whose first token is a field name or `[N]`
and whose rest (`.key`, `["key"]`, `[N]`, arrays from 1) leads inside that field.
As 2.6.0:

* the first token is read when the operations are decoded (a bad one is "invalid
  JSON in position P", an unknown name "Field 'x.y' was not found in the tuple");
  the rest when the operation is applied, in order;
* on the way, a key needs a map ("can not access by key a non-map field"), an index
  an array ("... by index a non-array field"), and what is not there is
  ER_NO_SUCH_FIELD_NAME naming the quoted path ("Field ''f.q'' was not found...");
* at the end, in a map: '=' sets or adds the key, '!' adds it ("the key exists
  already"), '#' removes it (one at a time); in an array '=' and '!' work at
  positions 1..n+1, '#' on existing items; arithmetic and splice need the value;
* a path updated twice is "double update of the same field"; a path that is the
  prefix of one updated before fails as 2.6.0's tree does ("can not update map by
  non-string key" / "array by non-integer index"). (2.6.0 crashes on a path below
  one updated before, or below a field updated whole; Spindle applies it.)

Where new map keys go is 2.6.0's: one operation in a field (a "bar") changes its map
in place and puts a new key first; with several, the maps where their paths part
(`_map_node`) store the keys they touch first, then the other pairs in the order
xrow_update_map.c's item list leaves them.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from spindle.core.iproto.errors import ClientError, ErrorCode

_IDENT = re.compile(r"[^\W\d]\w*")


class PathError(Exception):
    """A JSON path 2.6.0's lexer refuses: `position` is what its error shows."""

    def __init__(self, position: int):
        super().__init__(position)
        self.position = position


def lex(path: str, pos: int, first: bool) -> tuple[Any, int]:
    """json_lexer_next_token(): the token at `pos` and the position after it. A token
    is a str key, a 0-based int index or '*' (`[*]`). Raises PathError."""
    n = len(path)
    c = path[pos]
    if c == "[":
        start = pos + 1
        if start >= n:
            raise PathError(pos + 1)
        c = path[start]
        if c in "\"'":
            end = path.find(c, start + 1)
            if end < 0:
                raise PathError(n + 1)
            token: Any = path[start + 1:end]
            pos = end + 1
        elif c.isdigit():
            end = start
            while end < n and path[end].isdigit():
                end += 1
            number = int(path[start:end])
            if number == 0:
                raise PathError(start + 1)
            token, pos = number - 1, end
        elif c == "*":
            token, pos = "*", start + 1
        else:
            raise PathError(start + 1)
        if pos >= n:
            raise PathError(n + 1)
        if path[pos] != "]":
            raise PathError(pos + 1)
        return token, pos + 1
    if c == ".":
        pos += 1
    elif not first:
        raise PathError(pos + 1)
    m = _IDENT.match(path, pos)
    if m is None:
        raise PathError(pos + 1)
    return m.group(0), m.end()


def lex_rest(path: str, pos: int) -> tuple:
    """The tokens of the path after its first token (at `pos`)."""
    tokens = []
    while pos < len(path):
        token, pos = lex(path, pos, False)
        if token == "*":
            raise PathError(pos - 1)      # (multikey `[*]` is no update target)
        tokens.append(token)
    return tuple(tokens)


# ---------------------------------------------------------------------------
# Applying one operation on a path, the value's containers copied on the way.

def _dict_like(value: Any) -> bool:
    return isinstance(value, dict)


def _list_like(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _step(op: Any, value: Any, token: Any, errors: Any) -> None:
    """Check that `value` can be entered with `token`."""
    if isinstance(token, str):
        if not _dict_like(value):
            raise errors.field(op, "can not access by key a non-map field")
    elif not _list_like(value):
        raise errors.field(op, "can not access by index a non-array field")


def value_at(value: Any, tokens: tuple) -> Any:
    for token in tokens:
        value = value[token]
    return value


def apply_path(op: Any, value: Any, tokens: tuple, errors: Any,
               scalar: Callable[[Any, Any], Any]) -> Any:
    """The field `value` after `op` at `tokens` inside it (in place: a bar)."""
    token = tokens[0]
    _step(op, value, token, errors)
    if len(tokens) > 1:
        new: dict | list
        if isinstance(token, str):
            if token not in value:
                raise errors.missing(op)
            new = dict(value)
        else:
            if token >= len(value):
                raise errors.missing(op)
            new = list(value)
        new[token] = apply_path(op, value[token], tokens[1:], errors, scalar)
        return new
    if isinstance(token, str):
        return _map_bar(op, value, token, errors, scalar)
    return _array_last(op, list(value), token, errors, scalar)


def _map_bar(op: Any, value: dict, key: str, errors: Any, scalar) -> dict:
    code = op.opcode
    if code == "#":
        if op.args[0] != 1:
            raise errors.field(op, "can delete only 1 field from a map in a row")
        if key not in value:
            raise errors.missing(op)
        return {k: v for k, v in value.items() if k != key}
    if code == "!" and key in value:
        raise errors.field(op, "the key exists already")
    if code in "=!":
        if key in value:
            new = dict(value)
            new[key] = op.args[0]
            return new
        return {key: op.args[0], **value}        # a new key goes first
    if key not in value:
        raise errors.missing(op)
    new = dict(value)
    new[key] = scalar(op, value[key])
    return new


def _array_last(op: Any, items: list, index: int, errors: Any, scalar) -> list:
    code, n = op.opcode, len(items)
    if code == "=":
        if index == n:
            items.append(op.args[0])
        elif index < n:
            items[index] = op.args[0]
        else:
            raise errors.missing(op)
    elif code == "!":
        if index > n:
            raise errors.missing(op)
        items.insert(index, op.args[0])
    elif index >= n:
        raise errors.missing(op)
    elif code == "#":
        del items[index:index + op.args[0]]
    else:
        items[index] = scalar(op, items[index])
    return items


def check_repeat(op: Any, tokens: tuple, before: list, value: Any, errors: Any) -> None:
    """2.6.0's refusals of a path next to the paths this field had updated before."""
    for other in before:
        if other == tokens:
            raise errors.field(op, "double update of the same field")
        if len(tokens) < len(other) and other[:len(tokens)] == tokens:
            kind = "map by non-string key" if _dict_like(value_at(value, tokens)) \
                else "array by non-integer index"
            raise errors.field(op, f"can not update {kind}")
        if len(other) < len(tokens) and tokens[:len(other)] == other:
            # 2.6.0 crashes here; refused rather than guessed
            raise errors.field(op, "double update of the same field")


# ---------------------------------------------------------------------------
# The final value of a field several path operations went into, in 2.6.0's order.

def rebuild(value: Any, ops: list, scalar) -> Any:
    """`value` after `ops` [(tokens, op)], all already checked: one is a bar; the
    common prefix of several is a route, where they part a map or array node."""
    if len(ops) == 1:
        tokens, op = ops[0]
        return apply_path(op, value, tokens, _Unreachable, scalar)
    common = ops[0][0]
    for tokens, _ in ops[1:]:
        n = 0
        while n < min(len(common), len(tokens)) and common[n] == tokens[n]:
            n += 1
        common = common[:n]
    if common:
        head = common[0]
        new = dict(value) if _dict_like(value) else list(value)
        new[head] = rebuild(value[head], [(t[1:], op) for t, op in ops], scalar)
        return new
    if _dict_like(value):
        return _map_node(value, ops, scalar)
    return _array_node(list(value), ops, scalar)


def _map_node(value: dict, ops: list, scalar) -> dict:
    """xrow_update_map.c's items: [key or None, value, sub-operations, deleted, the
    unchanged pairs after it]; first one item without a key holding every pair. A
    key found among an item's pairs becomes an item of its own at the head (the
    pairs before it stay with that item, those after go with the key), except that
    an item without a key whose first pair it is takes the key itself. A new key
    goes at the head. Stored: the items' keys in order, then their pairs in order."""
    items: list[list] = [[None, None, [], False, list(value.items())]]

    def find(key: str) -> list | None:
        for item in items:
            if item[0] == key:
                return item
        for item in items:
            pairs = item[4]
            for p, (k, v) in enumerate(pairs):
                if k != key:
                    continue
                if p == 0 and item[0] is None:
                    item[0], item[1], item[4] = key, v, pairs[1:]
                    return item
                item[4] = pairs[:p]
                found = [key, v, [], False, pairs[p + 1:]]
                items.insert(0, found)
                return found
        return None

    for tokens, op in ops:
        key = tokens[0]
        item = find(key)
        if len(tokens) > 1:
            assert item is not None
            item[2].append((tokens[1:], op))
        elif op.opcode in "=!":
            if item is None:
                items.insert(0, [key, op.args[0], [], False, []])
            else:
                item[1] = op.args[0]
        elif op.opcode == "#":
            assert item is not None
            item[3] = True
        else:
            assert item is not None
            item[1] = scalar(op, item[1])
    result: dict = {}
    for item in items:
        if item[0] is not None and not item[3]:
            result[item[0]] = rebuild(item[1], item[2], scalar) if item[2] else item[1]
    for item in items:
        result.update(item[4])
    return result


def _array_node(values: list, ops: list, scalar) -> list:
    items: list[list] = [[v, []] for v in values]
    for tokens, op in ops:
        index, code = tokens[0], op.opcode
        if len(tokens) > 1:
            items[index][1].append((tokens[1:], op))
        elif code == "=":
            if index == len(items):
                items.append([op.args[0], []])
            else:
                items[index] = [op.args[0], []]
        elif code == "!":
            items.insert(index, [op.args[0], []])
        elif code == "#":
            del items[index:index + op.args[0]]
        else:
            items[index][0] = scalar(op, items[index][0])
    return [rebuild(v, sub, scalar) if sub else v for v, sub in items]


class _Unreachable:
    """Errors while rebuilding: the operations were checked already."""

    @staticmethod
    def field(op: Any, reason: str) -> ClientError:
        return ClientError(ErrorCode.ER_UPDATE_FIELD, op.field_str(), reason)

    @staticmethod
    def missing(op: Any) -> ClientError:
        return ClientError(ErrorCode.ER_NO_SUCH_FIELD_NAME, op.field_str())
