"""The three output formats of `spindle cat`: yaml, json and lua.

They print the records of cat_record the way `tarantoolctl cat` of Tarantool
2.6.0 prints its records.

yaml (the default): each row is a YAML document, emitted by PyYAML's emitter
(block style, two-space indent, lines folded at 80 columns, `---` before each
document). tarantoolctl prints yaml.encode(record) without the closing `...`
line, and closes the file's stream with one `...` line (cat.py). The record,
HEADER and BODY are block mappings; everything decoded from MsgPack (tuples,
keys, update operations, maps) is in flow style (`[1, 'a']`), which is what
Tarantool's serializer does for decoded values. Scalars as Tarantool prints
them:

* strings in flow collections are single-quoted; in block context they are
  plain unless they would read back as something else (null, ~, true, false,
  yes, no, or anything Lua's tonumber() accepts, e.g. '12', ' 1e5', '0x1f',
  'inf'), then single-quoted; any other string with an empty line ("\\n\\n")
  in block context is a literal block (`|-`). Where these styles cannot hold
  a string (special characters, leading/trailing spaces...), the emitter falls
  back to single then double quotes by YAML's own rules, which PyYAML applies
  the same way libyaml (Tarantool's emitter) does;
* a string that is not valid UTF-8 or contains characters Tarantool considers
  unprintable (C1 controls, U+FEFF, U+FFFE/U+FFFF, unprintable characters
  beyond U+FFFF) is `!!binary <base64>`;
* numbers: integers in full; a double that is a whole number in the 64-bit
  range also in full (2.0 -> 2, -0.0 -> 0), any other double with 14
  significant digits (%.14g: 1e+300, 1795308837.0353), inf, -inf, and nan or
  -nan for a NaN after its sign (see cat_record.Decoder); decimals and UUIDs
  in plain text; box.NULL is null.

Adjustments to PyYAML's emitter, where libyaml 0.2.5 (which Tarantool 2.6.0
uses) differs from it:

* characters beyond U+FFFF are not printable for libyaml: a string holding
  one is double-quoted, with the character escaped ("\\U0001F600"), which is
  how PyYAML writes them in double quotes;
* a `!!binary` value is a plain scalar after its tag (PyYAML would quote it);
* a mapping key stays a simple key (`key: value`, not `? key`) up to 128
  bytes of UTF-8 (PyYAML: fewer than 128 characters), and also when empty;
  a carriage return makes a key multi-line (`? "\\r"`) as a line feed does;
* a long double-quoted string is folded only at a space (PyYAML also folds
  after an escape or inside a word).

json: one line per row, the record as Tarantool's json.encode writes it:
compact, `/` escaped as `\\/`, DEL as `\\u007f`, other bytes as they are
(invalid UTF-8 included), numbers as in yaml but nan for a NaN, decimals and
UUIDs as strings. A map key must be a string or an integer; any other key
is an error for the row.

lua: `box.space[ID]:insert({...})` (replace, delete, update, upsert alike) per
DML row, other rows skipped. Tables are `{[k] = v, ...}`, strings are every
byte as `\\xNN`, numbers as Lua's tostring() (%.14g with exact ties rounded
away from zero; integers of 10^14 and beyond are 64-bit cdata:
`100000000000000ULL`, `-9223372036854775808LL`), box.NULL is
`cdata<void *>: NULL`.

Maps inside the data are printed in MsgPack order (see cat_record), which may
differ from tarantoolctl's order when they have several keys.
"""
from __future__ import annotations

import base64
import decimal
import io
import json
import math
import re
import unicodedata
from typing import Any

from yaml.emitter import Emitter
from yaml.events import (DocumentEndEvent, DocumentStartEvent, MappingEndEvent,
                         MappingStartEvent, ScalarEvent, SequenceEndEvent,
                         SequenceStartEvent, StreamStartEvent)

from .cat_record import (LUA_NUMBER_LIMIT, NULL, CatError, ExtValue, Map, Seq, SignedInt,
                         Table)

# ---------------------------------------------------------------------------
# Numbers and strings.

_INT64_MIN = -2.0 ** 63
_UINT64_END = 2.0 ** 64


def number_text(value: int | float, signed_nan: bool) -> str:
    """A number as yaml (`signed_nan`: -nan for a NaN with the sign bit) and
    json print it."""
    if isinstance(value, int):
        return str(int(value))
    if math.isnan(value):
        return "-nan" if signed_nan and math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value.is_integer() and _INT64_MIN <= value < _UINT64_END:
        return str(int(value))
    return "%.14g" % value


def lua_number_text(value: int | float) -> str:
    """tostring() of a Lua number or 64-bit integer cdata."""
    if isinstance(value, int):
        if abs(value) < LUA_NUMBER_LIMIT:
            return str(int(value))
        suffix = "LL" if isinstance(value, SignedInt) or value < 0 else "ULL"
        return f"{int(value)}{suffix}"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return _g14_ties_away(value)


_LUA_DIGITS = decimal.Context(prec=14, rounding=decimal.ROUND_HALF_UP)


def _g14_ties_away(value: float) -> str:
    """%.14g, except that a value exactly halfway between two 14-digit
    numbers goes away from zero (LuaJIT's tostring; C's printf rounds such
    ties to even: 12345678901234.5 is ...35 in Lua, ...34 in yaml/json)."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    rounded = _LUA_DIGITS.plus(decimal.Decimal(value))
    exponent = rounded.adjusted()
    sign, digits, _ = rounded.as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    minus = "-" if sign else ""
    if exponent < -4 or exponent >= 14:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{minus}0.{'0' * (-exponent - 1)}{text}"
    if len(text) <= exponent + 1:
        return minus + text + "0" * (exponent + 1 - len(text))
    return f"{minus}{text[:exponent + 1]}.{text[exponent + 1:]}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What Lua's tonumber() accepts in a string (LuaJIT 2.1, as observed):
# optional blanks around an optionally signed decimal (digits with an optional
# point and exponent), hexadecimal (0x digits, optional point, optional binary
# exponent p), binary (0b digits, at most 64 of them after leading zeros, and
# an optional point followed by zeros only; or 0b.0), or inf / infinity / nan
# in any case.
_LUA_NUMBER = re.compile(
    rb"[ \t\n\v\f\r]*[+-]?"
    rb"(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|0[bB](?:(?=[01])0*(?P<bits>[01]*)(?:\.0*)?|\.0+)"
    rb"|(?i:inf(?:inity)?|nan))"
    rb"[ \t\n\v\f\r]*")
_OTHER_SCALARS = frozenset((b"null", b"~", b"true", b"false", b"yes", b"no"))


def reads_as_non_string(s: bytes) -> bool:
    """Whether Tarantool quotes the string where it could be plain."""
    if s in _OTHER_SCALARS:
        return True
    match = _LUA_NUMBER.fullmatch(s)
    if match is None:
        return False
    bits = match.group("bits")
    return bits is None or len(bits) <= 64


def printable_text(s: bytes) -> str | None:
    """The string as text, or None when Tarantool prints it as !!binary."""
    try:
        text = s.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.isascii():
        return text
    for ch in text:
        code = ord(ch)
        if code < 0x80:
            continue
        if code < 0xA0 or code in (0xFEFF, 0xFFFE, 0xFFFF):
            return None
        if code > 0xFFFF and unicodedata.category(ch).startswith("C"):
            return None
    return text


def _beyond_bmp(text: str) -> bool:
    return not text.isascii() and any(ord(ch) > 0xFFFF for ch in text)


# ---------------------------------------------------------------------------
# yaml.

BINARY_TAG = "tag:yaml.org,2002:binary"
_SIMPLE_KEY_MAX = 128


class _TarantoolEmitter(Emitter):
    """PyYAML's emitter with the libyaml behaviours listed in the module doc."""

    def choose_scalar_style(self):
        if self.event.tag == BINARY_TAG:
            if self.analysis is None:
                self.analysis = self.analyze_scalar(self.event.value)
            return ""
        return super().choose_scalar_style()

    def check_simple_key(self):
        event = self.event
        if isinstance(event, ScalarEvent):
            if self.analysis is None:
                self.analysis = self.analyze_scalar(event.value)
            if self.analysis.multiline or "\r" in event.value:
                return False
            length = len(event.value.encode("utf-8"))
            if event.tag is not None:
                if self.prepared_tag is None:
                    self.prepared_tag = self.prepare_tag(event.tag)
                length += len(self.prepared_tag)
            return length <= _SIMPLE_KEY_MAX
        return self.check_empty_sequence() or self.check_empty_mapping()

    def write_double_quoted(self, text, split=True):
        """Double quotes, escapes as PyYAML writes them; a long line is only
        folded at a single space past the width (the space becomes the line
        break; a backslash keeps a second space), never inside a word."""
        self.write_indicator('"', True)
        last = len(text) - 1
        after_space = False
        for i, ch in enumerate(text):
            if ch == " ":
                if (split and not after_space and 0 < i < last
                        and self.column > self.best_width):
                    self.write_indent()
                    self.whitespace = self.indention = False
                    if text[i + 1] == " ":
                        self._put("\\")
                else:
                    self._put(" ")
                after_space = True
                continue
            after_space = False
            self._put(_double_quoted_char(ch))
        self.write_indicator('"', False)

    def _put(self, data: str) -> None:
        self.column += len(data)
        self.stream.write(data)


_ESCAPES = dict(Emitter.ESCAPE_REPLACEMENTS)


def _double_quoted_char(ch: str) -> str:
    """`ch` inside double quotes: itself when printable, else an escape."""
    code = ord(ch)
    if (0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD) \
            and ch not in '"\\\u2028\u2029\ufeff':
        return ch
    if ch in _ESCAPES:
        return "\\" + _ESCAPES[ch]
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _scalar(text: str, style: str | None = None, plain: bool = True) -> ScalarEvent:
    return ScalarEvent(None, None, (plain, True), text, style=style)


def _yaml_string(s: bytes, flow: bool) -> ScalarEvent:
    text = printable_text(s)
    if text is None:
        return ScalarEvent(None, BINARY_TAG, (False, False), base64.b64encode(s).decode())
    quote = reads_as_non_string(s)
    if _beyond_bmp(text):
        style = '"'
    elif flow or quote:
        style = "'"
    elif "\n\n" in text:
        style = "|"
    else:
        style = None
    return _scalar(text, style, plain=not quote)


def _yaml_events(value: Any, emit, flow: bool) -> None:
    if isinstance(value, bytes):
        emit(_yaml_string(value, flow))
    elif value is True or value is False:
        emit(_scalar("true" if value else "false"))
    elif _is_number(value):
        emit(_scalar(number_text(value, True)))
    elif value is NULL or value is None:
        emit(_scalar("null"))
    elif isinstance(value, ExtValue):
        emit(_scalar(value.text))
    elif isinstance(value, Seq):
        _yaml_sequence(value, emit, True)
    elif isinstance(value, Map):
        _yaml_mapping(value.items, emit, True)
    elif isinstance(value, Table):
        sequence = value.as_sequence()
        if sequence is None:
            _yaml_mapping(value.items, emit, flow)
        else:
            _yaml_sequence(sequence, emit, flow)
    else:   # pragma: no cover - the value model has nothing else
        raise CatError(f"cannot print {value!r}")


def _yaml_sequence(items: list[Any], emit, flow: bool) -> None:
    emit(SequenceStartEvent(None, None, True, flow_style=flow))
    for item in items:
        _yaml_events(item, emit, flow)
    emit(SequenceEndEvent())


def _yaml_mapping(items: list[tuple[Any, Any]], emit, flow: bool) -> None:
    emit(MappingStartEvent(None, None, True, flow_style=flow))
    for key, item in items:
        _yaml_events(key, emit, flow)
        _yaml_events(item, emit, flow)
    emit(MappingEndEvent())


def format_yaml(record: Table) -> bytes:
    """`---` and the record; tarantoolctl leaves out the document end `...`."""
    out = io.StringIO()
    emitter = _TarantoolEmitter(out, indent=2, width=80, allow_unicode=True, line_break="\n")
    emit = emitter.emit
    emit(StreamStartEvent())
    emit(DocumentStartEvent(explicit=True))
    _yaml_events(record, emit, False)
    emit(DocumentEndEvent(explicit=True))     # flushes; no stream end needed
    return out.getvalue().removesuffix("...\n").encode("utf-8")


# ---------------------------------------------------------------------------
# json.

_JSON_MAX_DEPTH = 128


def _json_string(s: bytes) -> str:
    text = json.dumps(s.decode("utf-8", "surrogateescape"), ensure_ascii=False)
    if "/" in text:
        text = text.replace("/", "\\/")
    if "\x7f" in text:
        text = text.replace("\x7f", "\\u007f")
    return text


def _json_key(key: Any) -> str:
    if isinstance(key, bytes):
        return _json_string(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return f'"{int(key)}"'
    if isinstance(key, float) and key.is_integer() and _INT64_MIN <= key < _UINT64_END:
        return f'"{int(key)}"'
    raise CatError("table key must be a number or string")


def _json_value(value: Any, out: list[str], depth: int) -> None:
    if isinstance(value, bytes):
        out.append(_json_string(value))
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif _is_number(value):
        out.append(number_text(value, False))
    elif value is NULL or value is None:
        out.append("null")
    elif isinstance(value, ExtValue):
        out.append(_json_string(value.text.encode()))
    else:
        if depth >= _JSON_MAX_DEPTH:
            raise CatError("Too high nest level")
        if isinstance(value, Seq):
            items = None
            sequence: list[Any] | None = value
        elif isinstance(value, Map):
            items, sequence = value.items, None
        elif isinstance(value, Table):
            items, sequence = value.items, value.as_sequence()
        else:   # pragma: no cover
            raise CatError(f"cannot print {value!r}")
        if sequence is not None:
            out.append("[")
            for i, item in enumerate(sequence):
                if i:
                    out.append(",")
                _json_value(item, out, depth + 1)
            out.append("]")
        else:
            out.append("{")
            for i, (key, item) in enumerate(items):
                if i:
                    out.append(",")
                out.append(_json_key(key))
                out.append(":")
                _json_value(item, out, depth + 1)
            out.append("}")


def format_json(record: Table) -> bytes:
    out: list[str] = []
    _json_value(record, out, 0)
    out.append("\n")
    return "".join(out).encode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------
# lua.

def _lua_type(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, bytes):
        return "string"
    if isinstance(value, int) and abs(value) >= LUA_NUMBER_LIMIT:
        return "cdata"
    if _is_number(value):
        return "number"
    if isinstance(value, (Seq, Map, Table)):
        return "table"
    return "cdata"


def _lua_value(value: Any, out: list[str]) -> None:
    if isinstance(value, bytes):
        out.append("'" + "".join(f"\\x{c:02x}" for c in value) + "'")
    elif isinstance(value, (Seq, Map, Table)):
        _lua_table(value, out)
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif _is_number(value):
        out.append(lua_number_text(value))
    elif value is NULL:
        out.append("cdata<void *>: NULL")
    elif isinstance(value, ExtValue):
        out.append(value.text)
    else:   # pragma: no cover
        raise CatError(f"cannot print {value!r}")


def _lua_table(value: Any, out: list[str]) -> None:
    """`{[k] = v, ...}`: arrays and tuples by index, maps in their order."""
    if isinstance(value, Seq):
        pairs: list[tuple[Any, Any]] = [(i, item) for i, item in enumerate(value, 1)]
    elif isinstance(value, (Map, Table)):
        pairs = value.items
    else:
        raise CatError(f"bad argument #1 to 'pairs' (table expected, got {_lua_type(value)})")
    out.append("{")
    for n, (key, item) in enumerate(pairs):
        if n:
            out.append(", ")
        out.append("[")
        _lua_value(key, out)
        out.append("] = ")
        _lua_value(item, out)
    out.append("}")


# The arguments each request is written with.
_LUA_ARGUMENTS = {"insert": (b"tuple",), "replace": (b"tuple",), "delete": (b"key",),
                  "update": (b"key", b"tuple"), "upsert": (b"tuple", b"operations")}


def format_lua(record: Table) -> bytes | None:
    """`box.space[N]:op(...)`, or None for rows without a space (and NOP)."""
    header = record.get(b"HEADER")
    body = record.get(b"BODY")
    op_name = header.get(b"type")
    if op_name == b"NOP" or not isinstance(body, Table):
        return None
    space_id = body.get(b"space_id")
    if space_id is None:
        return None
    if not isinstance(op_name, bytes):
        raise CatError("attempt to index a number value")
    if not _is_number(space_id):
        raise CatError("bad argument #2 to 'format' (number expected, got "
                       f"{_lua_type(space_id)})")
    op = op_name.decode().lower()
    out = [f"box.space[{int(space_id)}]:{op}("]
    for i, key in enumerate(_LUA_ARGUMENTS.get(op, ())):
        if i:
            out.append(", ")
        _lua_table(body.get(key), out)
    out.append(")\n")
    return "".join(out).encode("utf-8", "surrogateescape")


FORMATTERS = {"yaml": format_yaml, "json": format_json, "lua": format_lua}
