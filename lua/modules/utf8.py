"""Tarantool's `utf8` module (lua/modules/utf8.lua): the Unicode half. Case mappings
are Python's full ones (ß upper is SS, as ICU's root locale); character classes are
Unicode general categories as ICU's u_isalpha/u_isdigit/u_islower/u_isupper test
them; cmp and casecmp compare under the 'unicode' and 'unicode_ci' collations (ICU's
root at tertiary and primary strength), answering -1, 0 or 1 as 2.6.0's."""
from __future__ import annotations

import unicodedata

from spindle.core.box import collation

from ..runtime import read_source

_CLASSES = {
    "alpha": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "digit": ("Nd",),
    "lower": ("Ll",),
    "upper": ("Lu",),
}


def _text(data: bytes) -> str:
    # bytes that are not UTF-8 pass through unchanged, as they do in 2.6.0
    return data.decode("utf-8", "surrogateescape")


def _upper(data: bytes) -> bytes:
    return _text(data).upper().encode("utf-8", "surrogateescape")


def _lower(data: bytes) -> bytes:
    return _text(data).lower().encode("utf-8", "surrogateescape")


def _is(kind: bytes, code) -> bool:
    code = int(code)
    if not 0 <= code <= 0x10FFFF:
        return False
    return unicodedata.category(chr(code)) in _CLASSES[kind.decode()]


def _compare(name: bytes, a: bytes, b: bytes) -> int:
    key = collation.icu_key(name.decode())
    if key is None:      # without PyICU: code point order (case folded for casecmp)
        left, right = _text(a), _text(b)
        if name == b"unicode_ci":
            left, right = left.casefold(), right.casefold()
    else:
        left, right = key(_text(a)), key(_text(b))
    return (left > right) - (left < right)


def build(instance):
    runtime = instance.runtime
    # raw byte strings both ways: Lua strings are bytes, not necessarily UTF-8
    native = runtime.table({
        "upper": runtime.bridge(_upper, convert_args=False),
        "lower": runtime.bridge(_lower, convert_args=False),
        "is": runtime.bridge(_is, convert_args=False),
        "compare": runtime.bridge(_compare, convert_args=False),
    })
    chunk = runtime.load(read_source("modules/utf8.lua"), "@builtin/utf8.lua")
    return chunk(native)
