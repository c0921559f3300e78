"""Tarantool's `iconv` module: the converters, with Python's codecs in place of the C
library's iconv (lua/modules/iconv.lua is the Lua face).

Encoding names are iconv's: case-insensitive, with the //TRANSLIT (letters without
their accents, '?' for the rest) and //IGNORE suffixes on the target. A conversion
fails as 2.6.0 reports its iconv errno: a sequence cut at the end of the input
(EINVAL) reads "Invalid multibyte sequence", an invalid or unconvertible one (EILSEQ)
"Incomplete multibyte sequence" (2.6.0's words, swapped as they are there)."""
from __future__ import annotations

import codecs
import itertools
import unicodedata

from ..runtime import read_source
from .lazy import preload

_EINVAL = 1     # the error kinds the Lua side words
_EILSEQ = 2


class _Converter:
    def __init__(self, to: str, source: str):
        target, _, mode = to.partition("//")
        self.decode = codecs.lookup(source.partition("//")[0]).name
        self.encode = codecs.lookup(target).name
        self.mode = mode.upper()

    def convert(self, data: bytes) -> tuple[int, bytes]:
        try:
            text = data.decode(self.decode)
        except UnicodeDecodeError as error:
            at_end = error.reason in ("unexpected end of data", "truncated data")
            return (_EINVAL if at_end else _EILSEQ), b""
        if self.mode == "TRANSLIT":
            decomposed = unicodedata.normalize("NFKD", text)
            text = "".join(c for c in decomposed if not unicodedata.combining(c))
            return 0, text.encode(self.encode, "replace")
        try:
            return 0, text.encode(self.encode, "ignore" if self.mode == "IGNORE" else "strict")
        except UnicodeEncodeError:
            return _EILSEQ, b""


def _make(instance):
    runtime = instance.runtime
    converters: dict[int, _Converter] = {}
    ids = itertools.count(1)

    def new(to: bytes, source: bytes):
        try:
            converter = _Converter(to.decode("latin-1"), source.decode("latin-1"))
        except LookupError:
            return None          # iconv_open's EINVAL
        ident = next(ids)
        converters[ident] = converter
        return ident

    def convert(ident: int, data: bytes):
        code, result = converters[ident].convert(data)
        return result if code == 0 else code

    def forget(idents) -> None:
        for ident in idents.values():
            converters.pop(int(ident), None)

    native = runtime.table({
        "new": runtime.bridge(new, convert_args=False),
        "convert": runtime.bridge(convert, convert_args=False),
        "forget": runtime.bridge(forget, convert_args=False),
    })
    chunk = runtime.load(read_source("modules/iconv.lua"), "@builtin/iconv.lua")
    return chunk(native)


def build(instance):
    """Built at the first require('iconv') (see lazy.py)."""
    preload(instance, "iconv", lambda: _make(instance))
