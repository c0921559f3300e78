"""yaml.encode() of Tarantool 2.6.0, for `spindle cat`.

What tarantoolctl prints is lyaml's dump_node() (third_party/lua-yaml/lyaml.cc)
driving libyaml's emitter. Both are reproduced here:

* `scalar_for()` / `to_field()`: how lyaml and luaL_tofield() see a Lua value
  (cat_luajit's model): numbers as %PRIu64 / %.14g, strings that read as null,
  a boolean or a number single-quoted, strings in flow mode single-quoted,
  strings with an empty line literal, non-printable strings !!binary, tables as
  sequences or mappings, flow style for the 'seq'/'map' hints.
* `Emitter`: libyaml 0.2.5's emitter (src/emitter.c). The packaged Tarantool
  2.6.0 that `tarantoolctl` runs on links the system libyaml 0.2.5, not the fork
  in third_party/libyaml (whose ICU-based printable test and trailing space
  after empty plain values differ), so 0.2.5 it is: an emoji is printed as
  "\U0001F600" (not printable for libyaml, while lyaml's utf8_check_printable(),
  with ICU, keeps it a string rather than !!binary).

libyaml is event driven: it queues events until it has enough lookahead and
lyaml peeks into that queue to tell whether a string is in "flow mode". For
the trees lyaml builds, that machinery has nothing left to decide when the
whole tree is known: a string is in flow mode exactly when it is inside a flow
collection (the queue can only hold a flow SEQUENCE-START while that collection
is still open), and the lookahead only asks whether a collection is empty. So
`Emitter` walks the tree and makes the calls the state machine would make, in
the same order, to the same writer routines (write_indicator, write_indent,
the scalar writers), with the same state (column, indent stack, whitespace,
indention, flow level, contexts).
"""
from __future__ import annotations

import base64
import math
import re
import unicodedata
from typing import Any

from .cat_luajit import (NULL, BoxTuple, DecimalValue, I64, LuaTable, U64, UuidValue,
                         fmt_g14, lua_isnumber)


class EmitterError(Exception):
    pass


# Scalar styles.
ANY, PLAIN, SINGLE_QUOTED, DOUBLE_QUOTED, LITERAL, FOLDED = range(6)

BINARY_TAG = b"tag:yaml.org,2002:binary"
# The default %TAG directives every document gets.
_TAG_DIRECTIVES = ((b"!", b"!"), (b"!!", b"tag:yaml.org,2002:"))


def _width(octet: int) -> int:
    if octet & 0x80 == 0:
        return 1
    if octet & 0xE0 == 0xC0:
        return 2
    if octet & 0xF0 == 0xE0:
        return 3
    if octet & 0xF8 == 0xF0:
        return 4
    return 0


def _codepoint(s: bytes, i: int) -> tuple[int, int]:
    octet = s[i]
    width = _width(octet)
    if width == 1:
        return octet, 1
    value = octet & (0x1F if width == 2 else 0x0F if width == 3 else 0x07 if width == 4 else 0)
    for k in range(1, width):
        value = (value << 6) + ((s[i + k] if i + k < len(s) else 0) & 0x3F)
    return value, width


def u_isprint(value: int) -> bool:
    """ICU u_isprint(): general category other than C* (Cc, Cf, Cs, Co, Cn)."""
    try:
        return not unicodedata.category(chr(value)).startswith("C")
    except (ValueError, OverflowError):
        return False


def _at(s: bytes, i: int) -> int:
    return s[i] if i < len(s) else 0


def is_printable(s: bytes, i: int) -> bool:
    """IS_PRINTABLE() of libyaml 0.2.5 (BMP only, no ICU)."""
    b0 = s[i]
    b1 = _at(s, i + 1)
    b2 = _at(s, i + 2)
    return (b0 == 0x0A or 0x20 <= b0 <= 0x7E or (b0 == 0xC2 and b1 >= 0xA0)
            or 0xC2 < b0 < 0xED or (b0 == 0xED and b1 < 0xA0) or b0 == 0xEE
            or (b0 == 0xEF and not (b1 == 0xBB and b2 == 0xBF)
                and not (b1 == 0xBF and b2 in (0xBE, 0xBF))))


def utf8_check_printable(s: bytes) -> bool:
    """utf8_check_printable() of src/lib/core/util.c."""
    if s.isascii():
        return True       # only bytes > 0x7f are checked
    i, end = 0, len(s)
    while i < end:
        octet = s[i]
        width = _width(octet)
        if not width or i + width > end:
            return False
        value = octet & (0x7F if width == 1 else 0x1F if width == 2
                         else 0x0F if width == 3 else 0x07)
        for k in range(1, width):
            octet = s[i + k]
            if octet & 0xC0 != 0x80:
                return False
            value = (value << 6) + (octet & 0x3F)
        if not (width == 1 or (width == 2 and value >= 0x80)
                or (width == 3 and value >= 0x800) or (width == 4 and value >= 0x10000)):
            return False
        if s[i] > 0x7F:
            b1 = _at(s, i + 1)
            b2 = _at(s, i + 2)
            if not ((s[i] == 0xC2 and b1 >= 0xA0) or 0xC2 < s[i] < 0xED
                    or (s[i] == 0xED and b1 < 0xA0) or s[i] == 0xEE
                    or (s[i] == 0xEF and not (b1 == 0xBB and b2 == 0xBF)
                        and not (b1 == 0xBF and b2 in (0xBE, 0xBF)))
                    or u_isprint(value)):
                return False
        i += width
    return True


def _is_break(s: bytes, i: int) -> bool:
    c = _at(s, i)
    if c in (0x0D, 0x0A):
        return True
    if c == 0xC2 and _at(s, i + 1) == 0x85:
        return True
    return c == 0xE2 and _at(s, i + 1) == 0x80 and _at(s, i + 2) in (0xA8, 0xA9)


def _is_blankz(s: bytes, i: int) -> bool:
    c = _at(s, i)
    return c in (0x20, 0x09, 0x00) or _is_break(s, i)


def _is_alpha(c: int) -> bool:
    return (0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A
            or c in (0x5F, 0x2D))


_BREAK_RE = re.compile(rb"[\r\n]|\xc2\x85|\xe2\x80[\xa8\xa9]")
_CONTINUATION_RE = re.compile(rb"[\x80-\xbf]")
_ANALYSIS_CACHE: dict[bytes, tuple[bool, bool, bool, bool, bool]] = {}
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))
_FLOW_INDICATOR_RE = re.compile(rb"[,?\[\]{}:]")
_FIRST_INDICATORS = frozenset(b"#,[]{}&*!|>'\"%@`")


def analyze_scalar(s: bytes) -> tuple[bool, bool, bool, bool, bool]:
    """yaml_emitter_analyze_scalar(): (multiline, flow_plain_allowed,
    block_plain_allowed, single_quoted_allowed, block_allowed)."""
    result = _ANALYSIS_CACHE.get(s)
    if result is None:
        if len(_ANALYSIS_CACHE) > 50000:
            _ANALYSIS_CACHE.clear()
        if s and not s.translate(None, _PRINTABLE_ASCII):
            result = _analyze_printable_ascii(s)
        else:
            result = analyze_scalar_slow(s)
        _ANALYSIS_CACHE[s] = result
    return result


def _analyze_printable_ascii(s: bytes) -> tuple[bool, bool, bool, bool, bool]:
    """The same analysis for a non-empty string of bytes 0x20-0x7e only: no
    breaks, no special characters, blanks are spaces."""
    flow = block = s.startswith(b"---") or s.startswith(b"...")
    first = s[0]
    followed = len(s) == 1 or s[1] == 0x20
    if first in _FIRST_INDICATORS:
        flow = block = True
    elif first in (0x3F, 0x3A):
        flow = True
        block = block or followed
    elif first == 0x2D and followed:
        flow = block = True
    rest = s[1:]
    if _FLOW_INDICATOR_RE.search(rest):
        flow = True
        if b": " in rest or rest.endswith(b":") or b" #" in s:
            block = True
    elif b" #" in s:
        flow = block = True
    if s[0] == 0x20 or s[-1] == 0x20:
        return False, False, False, True, s[-1] != 0x20
    return False, not flow, not block, True, True


def analyze_scalar_slow(s: bytes) -> tuple[bool, bool, bool, bool, bool]:
    """Character by character, as libyaml does it."""
    if not s:
        return False, False, True, True, False
    block_indicators = flow_indicators = line_breaks = special_characters = False
    leading_space = leading_break = trailing_space = trailing_break = False
    break_space = space_break = previous_space = previous_break = False
    if s.startswith(b"---") or s.startswith(b"..."):
        block_indicators = flow_indicators = True
    preceded_by_whitespace = True
    end = len(s)
    i = 0
    followed_by_whitespace = _is_blankz(s, _width(s[0]) or 1)
    while i != end:
        c = s[i]
        if i == 0:
            if c in b"#,[]{}&*!|>'\"%@`":
                flow_indicators = block_indicators = True
            if c in b"?:":
                flow_indicators = True
                if followed_by_whitespace:
                    block_indicators = True
            if c == 0x2D and followed_by_whitespace:
                flow_indicators = block_indicators = True
        else:
            if c in b",?[]{}":
                flow_indicators = True
            if c == 0x3A:
                flow_indicators = True
                if followed_by_whitespace:
                    block_indicators = True
            if c == 0x23 and preceded_by_whitespace:
                flow_indicators = block_indicators = True
        if not is_printable(s, i):
            special_characters = True
        width = _width(c) or 1
        if _is_break(s, i):
            line_breaks = True
        if c == 0x20:
            if i == 0:
                leading_space = True
            if i + width == end:
                trailing_space = True
            if previous_break:
                break_space = True
            previous_space, previous_break = True, False
        elif _is_break(s, i):
            if i == 0:
                leading_break = True
            if i + width == end:
                trailing_break = True
            if previous_space:
                space_break = True
            previous_space, previous_break = False, True
        else:
            previous_space = previous_break = False
        preceded_by_whitespace = _is_blankz(s, i)
        i += width
        if i != end:
            followed_by_whitespace = _is_blankz(s, i + (_width(s[i]) or 1))
    flow_plain = block_plain = single_quoted = block_allowed = True
    if leading_space or leading_break or trailing_space or trailing_break:
        flow_plain = block_plain = False
    if trailing_space:
        block_allowed = False
    if break_space:
        flow_plain = block_plain = single_quoted = False
    if space_break or special_characters:
        flow_plain = block_plain = single_quoted = block_allowed = False
    if line_breaks:
        flow_plain = block_plain = False
    if flow_indicators:
        flow_plain = False
    if block_indicators:
        block_plain = False
    return line_breaks, flow_plain, block_plain, single_quoted, block_allowed


# ---------------------------------------------------------------------------
# luaL_tofield(): what a serializer sees in a Lua value.

F_UINT, F_INT, F_DOUBLE, F_STR, F_BOOL, F_NIL, F_ARRAY, F_MAP, F_DECIMAL, F_UUID = range(10)


class Field:
    __slots__ = ("type", "value", "size", "compact", "table")

    def __init__(self, ftype: int, value: Any = None, *, size: int = 0, compact: bool = False,
                 table: LuaTable | None = None):
        self.type = ftype
        self.value = value
        self.size = size
        self.compact = compact
        self.table = table


def _arrlen(table: LuaTable) -> int:
    best = 0
    for key in table.keys():
        if type(key) is float and key > best and key == math.floor(key):
            best = int(key) if key < 2 ** 63 else best
    return best


def to_field(value: Any, has_compact: bool) -> Field:
    """luaL_checkfield() with the default serializer options."""
    if type(value) is float:
        if value == value and value not in (float("inf"), float("-inf")) \
                and value != int(value):
            return Field(F_DOUBLE, value)
        if 0 <= value < 18446744073709551616.0:
            return Field(F_UINT, int(value))
        if -9223372036854775808.0 <= value < 9223372036854775808.0:
            return Field(F_INT, int(value))
        return Field(F_DOUBLE, value)
    if isinstance(value, bool):
        return Field(F_BOOL, value)
    if isinstance(value, U64):
        return Field(F_UINT, int(value))
    if isinstance(value, I64):
        return Field(F_UINT if value >= 0 else F_INT, int(value))
    if isinstance(value, bytes):
        return Field(F_STR, value)
    if value is None or value is NULL:
        return Field(F_NIL)
    if isinstance(value, LuaTable):
        return _inspect_table(value, has_compact)
    if isinstance(value, BoxTuple):
        return to_field(value.totable(), has_compact)
    if isinstance(value, DecimalValue):
        return Field(F_DECIMAL, value.text)
    if isinstance(value, UuidValue):
        return Field(F_UUID, value.text)
    raise TypeError(f"unsupported value {value!r}")


_INF = float("inf")


def number_text(x: float) -> bytes:
    """How lyaml prints a Lua number (luaL_tofield's classification)."""
    if x == x and x != _INF and x != -_INF and x != int(x):
        return fmt_g14(x).encode()
    if 0 <= x < 18446744073709551616.0 or -9223372036854775808.0 <= x < 9223372036854775808.0:
        return b"%d" % int(x)
    return fmt_g14(x).encode()


def _inspect_table(table: LuaTable, has_compact: bool) -> Field:
    hint = table.serialize
    if hint in ("array", "seq", "sequence"):
        return Field(F_ARRAY, size=_arrlen(table), compact=has_compact and hint == "seq",
                     table=table)
    if hint in ("map", "mapping"):
        return Field(F_MAP, size=len(table), compact=has_compact and hint == "map",
                     table=table)
    # The verdict does not depend on the order lua_next() gives the keys in.
    keys = table.keys()
    size = 0
    top = 0
    for key in keys:
        size += 1
        if type(key) is not float or (key != size and (key < 1 or key != math.floor(key))):
            return Field(F_MAP, size=len(keys), table=table)
        if key > top:
            top = int(key) if key < 4294967296.0 else 0
    if top > size * 2 and top > 10:      # encode_sparse_ratio / encode_sparse_safe
        return Field(F_MAP, size=size, table=table)
    return Field(F_ARRAY, size=top, table=table)


# ---------------------------------------------------------------------------
# lyaml.cc's dumper.


class Scalar:
    """A scalar event as lyaml emits it: value, tag (binary only), style."""

    __slots__ = ("value", "tag", "style", "plain")

    def __init__(self, value: bytes, style: int, tag: bytes | None = None,
                 plain: bool = False):
        self.value = value
        self.style = style
        self.tag = tag
        # A number, boolean or null: plain, no spaces, no indicators, short.
        self.plain = plain


_NULL_BOOL_WORDS = frozenset((b"~", b"null", b"false", b"no", b"true", b"yes"))


def scalar_for(field: Field, in_flow: bool) -> Scalar:
    """The scalar lyaml's dump_node() emits for a non-table value."""
    ftype = field.type
    if ftype == F_STR:
        text = field.value
        if text in _NULL_BOOL_WORDS or lua_isnumber(text):
            return Scalar(text, SINGLE_QUOTED)
        if utf8_check_printable(text):
            if in_flow:
                return Scalar(text, SINGLE_QUOTED)
            return Scalar(text, LITERAL if b"\n\n" in text else ANY)
        return Scalar(base64.b64encode(text), ANY, BINARY_TAG)
    if ftype == F_UINT or ftype == F_INT:
        return Scalar(str(field.value).encode(), PLAIN, plain=True)
    if ftype == F_DOUBLE:
        return Scalar(fmt_g14(field.value).encode(), PLAIN, plain=True)
    if ftype == F_BOOL:
        return Scalar(b"true" if field.value else b"false", PLAIN, plain=True)
    if ftype == F_NIL:
        return Scalar(b"null", PLAIN, plain=True)
    return Scalar(field.value.encode(), PLAIN)     # decimal, uuid


class Emitter:
    """libyaml's emitter (unicode, indent 2, width 80, '\\n' breaks) for one document."""

    def __init__(self):
        self.out = bytearray()
        self.indents: list[int] = []
        self.indent = -1
        self.flow_level = 0
        self.best_indent = 2
        self.best_width = 80
        self.sequence_context = self.mapping_context = self.simple_key_context = False
        self.line = self.column = 0
        self.whitespace = self.indention = True
        self.tag_handle: bytes | None = None
        self.tag_suffix: bytes | None = None
        self.value = b""
        self.multiline = False
        self.flow_plain_allowed = self.block_plain_allowed = False
        self.single_quoted_allowed = self.block_allowed = False
        self.style = ANY

    # -- document ---------------------------------------------------------------------

    def document(self, value: Any) -> bytes:
        """DOCUMENT-START (explicit), the root node, DOCUMENT-END (explicit)."""
        self._write_indent()
        self._write_indicator(b"---", True, False, False)
        self._node(to_field(value, True))
        self._write_indent()
        self._write_indicator(b"...", True, False, False)
        self._write_indent()
        return bytes(self.out)

    # -- nodes (yaml_emitter_emit_node and the states it leads to) ---------------------

    def _node(self, field: Field, *, sequence: bool = False, mapping: bool = False,
              simple_key: bool = False, scalar: Scalar | None = None) -> None:
        self.sequence_context = sequence
        self.mapping_context = mapping
        self.simple_key_context = simple_key
        ftype = field.type
        if ftype == F_ARRAY:
            if self.flow_level or field.compact or not field.size:
                self._flow_sequence(field)
            else:
                self._block_sequence(field)
        elif ftype == F_MAP:
            if self.flow_level or field.compact or not field.size:
                self._flow_mapping(field)
            else:
                self._block_mapping(field)
        else:
            if scalar is None:
                scalar = scalar_for(field, self.flow_level > 0)
            self._scalar(scalar)

    def _flow_sequence(self, field: Field) -> None:
        self._write_indicator(b"[", True, True, False)
        self._increase_indent(True, False)
        self.flow_level += 1
        table = field.table
        for i in range(1, field.size + 1):
            if i > 1:
                self._write_indicator(b",", False, False, False)
            if self.column > self.best_width:
                self._write_indent()
            self._value(table.geti(i), sequence=True)
        self.flow_level -= 1
        self.indent = self.indents.pop()
        self._write_indicator(b"]", False, False, False)

    def _flow_mapping(self, field: Field) -> None:
        self._write_indicator(b"{", True, True, False)
        self._increase_indent(True, False)
        self.flow_level += 1
        first = True
        for key, value in field.table.items():
            if not first:
                self._write_indicator(b",", False, False, False)
            first = False
            if self.column > self.best_width:
                self._write_indent()
            if type(key) is bytes and len(key) <= 128 and self._string(key, False):
                self._write_indicator(b":", False, False, False)
                self._value(value, mapping=True)
                continue
            kfield = to_field(key, True)
            simple, scalar = self._check_simple_key(kfield)
            if simple:
                self._node(kfield, mapping=True, simple_key=True, scalar=scalar)
                self._write_indicator(b":", False, False, False)
            else:
                self._write_indicator(b"?", True, False, False)
                self._node(kfield, mapping=True, scalar=scalar)
                if self.column > self.best_width:
                    self._write_indent()
                self._write_indicator(b":", True, False, False)
            self._value(value, mapping=True)
        self.flow_level -= 1
        self.indent = self.indents.pop()
        self._write_indicator(b"}", False, False, False)

    def _block_sequence(self, field: Field) -> None:
        self._increase_indent(False, self.mapping_context and not self.indention)
        table = field.table
        for i in range(1, field.size + 1):
            self._write_indent()
            self._write_indicator(b"-", True, False, True)
            self._node(to_field(table.geti(i), True), sequence=True)
        self.indent = self.indents.pop()

    def _block_mapping(self, field: Field) -> None:
        self._increase_indent(False, False)
        for key, value in field.table.items():
            self._write_indent()
            if type(key) is bytes and len(key) <= 128 and self._string(key, False):
                self._write_indicator(b":", False, False, False)
                self._value(value, mapping=True)
                continue
            kfield = to_field(key, True)
            simple, scalar = self._check_simple_key(kfield)
            if simple:
                self._node(kfield, mapping=True, simple_key=True, scalar=scalar)
                self._write_indicator(b":", False, False, False)
            else:
                self._write_indicator(b"?", True, False, True)
                self._node(kfield, mapping=True, scalar=scalar)
                self._write_indent()
                self._write_indicator(b":", True, False, True)
            self._value(value, mapping=True)
        self.indent = self.indents.pop()

    def _value(self, value: Any, *, sequence: bool = False, mapping: bool = False) -> None:
        """_node(to_field(value)) with shortcuts for numbers and plain strings."""
        tv = type(value)
        if tv is float:
            self._plain(number_text(value))
            return
        if tv is bytes and self._string(value, True):
            return
        self._node(to_field(value, True), sequence=sequence, mapping=mapping)

    def _string(self, text: bytes, allow_breaks: bool) -> bool:
        """Write a string of printable ASCII without going through the general
        scalar path, when the outcome is known: single quotes in flow mode, plain
        in block mode when libyaml allows it. False if not such a case."""
        if text.translate(None, _PRINTABLE_ASCII) or text in _NULL_BOOL_WORDS:
            return False
        if lua_isnumber(text):
            return False
        if self.flow_level:
            # Always single-quoted: no breaks or special characters in it.
            self._write_indicator(b"'", True, False, False)
            self._increase_indent(True, False)
            self._write_runs(text, allow_breaks, quoted=True)
            self.indent = self.indents.pop()
            self._write_indicator(b"'", False, False, False)
            return True
        if not text or b" " in text or not analyze_scalar(text)[2]:
            return False
        self._plain(text)      # plain, one run: the same bytes as _write_plain
        return True

    def _check_simple_key(self, field: Field) -> tuple[bool, Scalar | None]:
        """yaml_emitter_check_simple_key() for a key about to be emitted."""
        if field.type == F_ARRAY or field.type == F_MAP:
            return not field.size, None
        scalar = scalar_for(field, self.flow_level > 0)
        if scalar.plain:
            return True, scalar
        self._analyze(scalar)
        length = len(self.tag_handle or b"") + len(self.tag_suffix or b"") + len(self.value)
        return not self.multiline and length <= 128, scalar

    def _increase_indent(self, flow: bool, indentless: bool) -> None:
        self.indents.append(self.indent)
        if self.indent < 0:
            self.indent = self.best_indent if flow else 0
        elif not indentless:
            self.indent += self.best_indent

    # -- scalars (yaml_emitter_emit_scalar) --------------------------------------------

    def _analyze(self, scalar: Scalar) -> None:
        """yaml_emitter_analyze_event() for a scalar."""
        self.tag_handle = self.tag_suffix = None
        if scalar.tag is not None:
            self._analyze_tag(scalar.tag)
        self.value = scalar.value
        (self.multiline, self.flow_plain_allowed, self.block_plain_allowed,
         self.single_quoted_allowed, self.block_allowed) = analyze_scalar(scalar.value)

    def _plain(self, text: bytes) -> None:
        """What the general path does for a number, boolean or null: plain style
        in any context, one run of characters, never a line break. (The node
        contexts it would set are always set again before anyone reads them.)"""
        if not self.whitespace:
            self.out.append(0x20)
            self.column += 1
        self.out += text
        self.column += len(text)
        self.whitespace = self.indention = False

    def _scalar(self, scalar: Scalar) -> None:
        if scalar.plain:
            self._plain(scalar.value)
            return
        self._analyze(scalar)
        self._select_scalar_style(scalar)
        self._process_tag()
        self._increase_indent(True, False)
        allow_breaks = not self.simple_key_context
        value = self.value
        style = self.style
        if style == PLAIN:
            self._write_plain(value, allow_breaks)
        elif style == SINGLE_QUOTED:
            self._write_single_quoted(value, allow_breaks)
        elif style == DOUBLE_QUOTED:
            self._write_double_quoted(value, allow_breaks)
        else:
            self._write_literal(value)
        self.indent = self.indents.pop()

    def _select_scalar_style(self, scalar: Scalar) -> None:
        style = scalar.style
        no_tag = self.tag_handle is None and self.tag_suffix is None
        implicit = scalar.tag is None       # plain_implicit == quoted_implicit
        if style == ANY:
            style = PLAIN
        if self.simple_key_context and self.multiline:
            style = DOUBLE_QUOTED
        if style == PLAIN:
            if ((self.flow_level and not self.flow_plain_allowed)
                    or (not self.flow_level and not self.block_plain_allowed)):
                style = SINGLE_QUOTED
            if not self.value and (self.flow_level or self.simple_key_context):
                style = SINGLE_QUOTED
            if no_tag and not implicit:
                style = SINGLE_QUOTED
        if style == SINGLE_QUOTED and not self.single_quoted_allowed:
            style = DOUBLE_QUOTED
        if style in (LITERAL, FOLDED):
            if not self.block_allowed or self.flow_level or self.simple_key_context:
                style = DOUBLE_QUOTED
        if no_tag and not implicit and style != PLAIN:
            self.tag_handle = b"!"
        self.style = style

    def _analyze_tag(self, tag: bytes) -> None:
        if not tag:
            raise EmitterError("tag value must not be empty")
        for handle, prefix in _TAG_DIRECTIVES:
            if len(prefix) < len(tag) and tag.startswith(prefix):
                self.tag_handle = handle
                self.tag_suffix = tag[len(prefix):]
                return
        self.tag_suffix = tag

    def _process_tag(self) -> None:
        if self.tag_handle is None and self.tag_suffix is None:
            return
        if self.tag_handle is not None:
            self._write_tag_handle(self.tag_handle)
            if self.tag_suffix is not None:
                self._write_tag_content(self.tag_suffix, False)
        else:
            self._write_indicator(b"!<", True, False, False)
            self._write_tag_content(self.tag_suffix or b"", False)
            self._write_indicator(b">", False, False, False)

    # -- writers --------------------------------------------------------------------------

    def _put(self, ch: int) -> None:
        self.out.append(ch)
        self.column += 1

    def _put_break(self) -> None:
        self.out.append(0x0A)
        self.column = 0
        self.line += 1

    def _write(self, s: bytes, i: int) -> int:
        """WRITE: copy one UTF-8 character, column += 1; returns the new index."""
        w = _width(s[i]) or 1
        self.out += s[i:i + w]
        self.column += 1
        return i + w

    def _write_break(self, s: bytes, i: int) -> int:
        if s[i] == 0x0A:
            self._put_break()
            return i + 1
        w = _width(s[i]) or 1
        self.out += s[i:i + w]
        self.column = 0
        self.line += 1
        return i + w

    def _write_indent(self) -> None:
        indent = self.indent if self.indent >= 0 else 0
        if (not self.indention or self.column > indent
                or (self.column == indent and not self.whitespace)):
            self._put_break()
        while self.column < indent:
            self._put(0x20)
        self.whitespace = True
        self.indention = True

    def _write_indicator(self, indicator: bytes, need_whitespace: bool, is_whitespace: bool,
                         is_indention: bool) -> None:
        if need_whitespace and not self.whitespace:
            self.out.append(0x20)
            self.column += 1
        self.out += indicator        # indicators are ASCII
        self.column += len(indicator)
        self.whitespace = is_whitespace
        self.indention = self.indention and is_indention

    def _write_tag_handle(self, value: bytes) -> None:
        if not self.whitespace:
            self._put(0x20)
        i = 0
        while i < len(value):
            i = self._write(value, i)
        self.whitespace = False
        self.indention = False

    def _write_tag_content(self, value: bytes, need_whitespace: bool) -> None:
        if need_whitespace and not self.whitespace:
            self._put(0x20)
        i = 0
        while i < len(value):
            c = value[i]
            if _is_alpha(c) or c in b";/?:@&=+$,_.~*'()[]":
                i = self._write(value, i)
            else:
                for k in range(_width(c) or 1):
                    octet = value[i + k]
                    self._put(0x25)
                    self._put(b"0123456789ABCDEF"[octet >> 4])
                    self._put(b"0123456789ABCDEF"[octet & 0x0F])
                i += _width(c) or 1
        self.whitespace = False
        self.indention = False

    # -- scalar writers ------------------------------------------------------------------

    def _write_plain(self, s: bytes, allow_breaks: bool) -> None:
        if not self.whitespace and (s or self.flow_level):
            self._put(0x20)
        if _BREAK_RE.search(s):
            self._write_plain_slow(s, allow_breaks)
        else:
            self._write_runs(s, allow_breaks, quoted=False)
        self.whitespace = False
        self.indention = False

    def _write_runs(self, s: bytes, allow_breaks: bool, quoted: bool) -> None:
        """The scalar writers' loop for a string without line breaks, a run of
        non-spaces at a time. A space may become a line break once the column is
        past the width (not the first or last character of a quoted scalar, not
        before another space)."""
        out = self.out
        spaces = False
        i, end = 0, len(s)
        while i < end:
            if s[i] == 0x20:
                if (allow_breaks and not spaces and self.column > self.best_width
                        and (not quoted or (i != 0 and i != end - 1))
                        and _at(s, i + 1) != 0x20):
                    self._write_indent()
                else:
                    out.append(0x20)
                    self.column += 1
                spaces = True
                i += 1
                continue
            j = s.find(b" ", i)
            if j < 0:
                j = end
            run = s[i:j]
            chars = len(run) if run.isascii() else len(run) - len(_CONTINUATION_RE.findall(run))
            if quoted and 0x27 in run:
                chars += run.count(b"'")
                run = run.replace(b"'", b"''")
            out += run
            self.column += chars
            self.indention = False
            spaces = False
            i = j

    def _write_plain_slow(self, s: bytes, allow_breaks: bool) -> None:
        spaces = breaks = False
        i, end = 0, len(s)
        while i != end:
            c = s[i]
            if c == 0x20:
                if (allow_breaks and not spaces and self.column > self.best_width
                        and _at(s, i + 1) != 0x20):
                    self._write_indent()
                    i += 1
                else:
                    i = self._write(s, i)
                spaces = True
            elif _is_break(s, i):
                if not breaks and c == 0x0A:
                    self._put_break()
                i = self._write_break(s, i)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self._write_indent()
                i = self._write(s, i)
                self.indention = False
                spaces = breaks = False

    def _write_single_quoted(self, s: bytes, allow_breaks: bool) -> None:
        self._write_indicator(b"'", True, False, False)
        if not _BREAK_RE.search(s):
            self._write_runs(s, allow_breaks, quoted=True)
            self._write_indicator(b"'", False, False, False)
            self.whitespace = False
            self.indention = False
            return
        spaces = breaks = False
        i, end = 0, len(s)
        while i != end:
            c = s[i]
            if c == 0x20:
                if (allow_breaks and not spaces and self.column > self.best_width
                        and i != 0 and i != end - 1 and _at(s, i + 1) != 0x20):
                    self._write_indent()
                    i += 1
                else:
                    i = self._write(s, i)
                spaces = True
            elif _is_break(s, i):
                if not breaks and c == 0x0A:
                    self._put_break()
                i = self._write_break(s, i)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self._write_indent()
                if c == 0x27:
                    self._put(0x27)
                i = self._write(s, i)
                self.indention = False
                spaces = breaks = False
        if breaks:
            self._write_indent()
        self._write_indicator(b"'", False, False, False)
        self.whitespace = False
        self.indention = False

    _ESCAPES = {0x00: b"0", 0x07: b"a", 0x08: b"b", 0x09: b"t", 0x0A: b"n", 0x0B: b"v",
                0x0C: b"f", 0x0D: b"r", 0x1B: b"e", 0x22: b'"', 0x5C: b"\\", 0x85: b"N",
                0xA0: b"_", 0x2028: b"L", 0x2029: b"P"}

    def _write_double_quoted(self, s: bytes, allow_breaks: bool) -> None:
        spaces = False
        self._write_indicator(b'"', True, False, False)
        i, end = 0, len(s)
        while i != end:
            c = s[i]
            if (not is_printable(s, i) or (c == 0xEF and _at(s, i + 1) == 0xBB
                                           and _at(s, i + 2) == 0xBF)
                    or _is_break(s, i) or c in (0x22, 0x5C)):
                value, width = _codepoint(s, i)
                i += width or 1
                self._put(0x5C)
                esc = self._ESCAPES.get(value)
                if esc is not None:
                    self._put(esc[0])
                else:
                    if value <= 0xFF:
                        self._put(0x78)
                        digits = 2
                    elif value <= 0xFFFF:
                        self._put(0x75)
                        digits = 4
                    else:
                        self._put(0x55)
                        digits = 8
                    for k in range((digits - 1) * 4, -1, -4):
                        self._put(b"0123456789ABCDEF"[(value >> k) & 0x0F])
                spaces = False
            elif c == 0x20:
                if (allow_breaks and not spaces and self.column > self.best_width
                        and i != 0 and i != end - 1):
                    self._write_indent()
                    if _at(s, i + 1) == 0x20:
                        self._put(0x5C)
                    i += 1
                else:
                    i = self._write(s, i)
                spaces = True
            else:
                i = self._write(s, i)
                spaces = False
        self._write_indicator(b'"', False, False, False)
        self.whitespace = False
        self.indention = False

    def _write_block_scalar_hints(self, s: bytes) -> None:
        if s and (s[0] == 0x20 or _is_break(s, 0)):
            self._write_indicator(str(self.best_indent).encode(), False, False, False)
        chomp = None
        if not s:
            chomp = b"-"
        else:
            p = len(s) - 1
            while p > 0 and (s[p] & 0xC0) == 0x80:
                p -= 1
            if not _is_break(s, p):
                chomp = b"-"
            elif p == 0:
                chomp = b"+"
            else:
                p -= 1
                while p > 0 and (s[p] & 0xC0) == 0x80:
                    p -= 1
                if _is_break(s, p):
                    chomp = b"+"
        if chomp:
            self._write_indicator(chomp, False, False, False)

    def _write_literal(self, s: bytes) -> None:
        breaks = True
        self._write_indicator(b"|", True, False, False)
        self._write_block_scalar_hints(s)
        self._put_break()
        self.indention = self.whitespace = True
        i, end = 0, len(s)
        while i != end:
            if _is_break(s, i):
                i = self._write_break(s, i)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self._write_indent()
                i = self._write(s, i)
                self.indention = False
                breaks = False


def yaml_encode(value: Any) -> bytes:
    """yaml.encode(value): '--- ...\\n...\\n'."""
    return Emitter().document(value)
