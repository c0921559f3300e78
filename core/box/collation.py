"""Collations of `_collation` as 2.6.0's coll.c makes them: ICU collators.

2.6.0 compares strings under an ICU collation with ucol_strcollUTF8 of a collator
opened for the row's locale ('' is the root collation) with the row's options set
(strength, french_collation, alternate_handling, case_first, case_level,
normalization_mode, numeric_collation; 'default' leaves ICU's). Here the same
collator (PyICU over the same libicu) gives a sort key per string: comparing sort keys
is comparing the strings. 'unicode' is the root at tertiary strength, 'unicode_ci' at
primary (the bootstrap rows), 'unicode_<locale>_s<n>' the locale at strength n.

Strings that are not valid UTF-8 (Lua byte strings: surrogate escapes here) collate as
ICU reads them, each bad byte a U+FFFD.

Without PyICU, field_types' approximation serves 'unicode' and 'unicode_ci', and the
other ICU collations as the one of them nearest their strength (so a replica without
PyICU still takes any collated index of its master).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

try:
    import icu
except ImportError:     # (see the docstring)
    icu = None

# name -> (locale, options) of the ICU rows of `_collation` seen so far; the bootstrap
# rows of 2.6.0 give the two every schema has.
_DEFINITIONS: dict[str, tuple[str, dict]] = {
    "unicode": ("", {"strength": "tertiary"}),
    "unicode_ci": ("", {"strength": "primary"}),
}


def define(name: str, kind: str, locale: str, opts: dict | None) -> None:
    """A `_collation` row (name, type, locale, opts): remember an ICU one."""
    if str(kind).upper() == "ICU" and isinstance(name, str):
        _DEFINITIONS[name] = (locale or "", dict(opts or {}))


def is_icu(name: str | None) -> bool:
    return name in _DEFINITIONS


def strength(name: str) -> str:
    """An ICU collation's strength option ('tertiary' unless the row says)."""
    return str(_DEFINITIONS[name][1].get("strength", "tertiary")).lower()


_STRENGTH = {"primary": "PRIMARY", "secondary": "SECONDARY", "tertiary": "TERTIARY",
             "quaternary": "QUATERNARY", "identical": "IDENTICAL"}
_ON_OFF = {"on": "ON", "off": "OFF"}
_ATTRIBUTES = {   # option -> (ICU attribute, its values)
    "french_collation": ("FRENCH_COLLATION", _ON_OFF),
    "alternate_handling": ("ALTERNATE_HANDLING", {"non_ignorable": "NON_IGNORABLE",
                                                  "shifted": "SHIFTED"}),
    "case_first": ("CASE_FIRST", {"upper_first": "UPPER_FIRST",
                                  "lower_first": "LOWER_FIRST", "off": "OFF"}),
    "case_level": ("CASE_LEVEL", _ON_OFF),
    "normalization_mode": ("NORMALIZATION_MODE", _ON_OFF),
    "numeric_collation": ("NUMERIC_COLLATION", _ON_OFF),
    "strength": ("STRENGTH", _STRENGTH),
}


def _collator(locale: str, opts: dict) -> Any:
    collator = icu.Collator.createInstance(icu.Locale(locale))
    for option, (attribute, values) in _ATTRIBUTES.items():
        value = opts.get(option)
        if isinstance(value, str) and value.lower() in values:
            collator.setAttribute(getattr(icu.UCollAttribute, attribute),
                                  getattr(icu.UCollAttributeValue, values[value.lower()]))
    return collator


@lru_cache(maxsize=None)
def icu_key(name: str) -> Callable[[str], bytes] | None:
    """The sort-key function of an ICU collation, or None without PyICU."""
    if icu is None or name not in _DEFINITIONS:
        return None
    sort_key = _collator(*_DEFINITIONS[name]).getSortKey

    @lru_cache(maxsize=65536)
    def key(value: str) -> bytes:
        try:
            return sort_key(value)
        except UnicodeEncodeError:      # surrogate escapes: bytes that are not UTF-8
            raw = value.encode("utf-8", "surrogateescape")
            return sort_key(raw.decode("utf-8", "replace"))
    return key
