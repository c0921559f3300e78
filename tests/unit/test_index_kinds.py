"""Unit tests of the index kinds of issue 23 item 4 (the oracle tests in
tests/interop/test_index_kinds_*.py compare them with 2.6.0)."""
from __future__ import annotations

import pytest

from spindle.core.box import collation, field_types, json_path
from spindle.core.box.index import DupMode, IndexDef, make_index
from spindle.core.box.key_def import JsonKeyDef, KeyDef, KeyPart
from spindle.core.iproto.errors import ClientError


class _Space:
    name = "s"


@pytest.mark.parametrize("path, tokens", [
    ("a.b", ("a", "b")), (".a", ("a",)), ('["a"][2]', ("a", 1)), ("['x y']", ("x y",)),
    ("[*]", (json_path.MULTIKEY,)), ("data[*].name", ("data", json_path.MULTIKEY, "name")),
    ("a..b", None), ("[0]", None), ("1a", None), ("", None),
])
def test_path_tokens(path, tokens):
    assert json_path.parse(path) == tokens


def test_json_key_def_digs_and_compares_by_tokens():
    kd = KeyDef([KeyPart(1, "string", path="a.b"), KeyPart(0)])
    assert isinstance(kd, JsonKeyDef) and not kd.plain
    assert kd.extract_key((1, {"a": {"b": "x"}})) == ["x", 1]
    assert kd.extract_key((1, {"a": 5})) == [None, 1]
    assert KeyPart(1, "string", path="a.b") == KeyPart(1, "string", path='["a"]["b"]')
    assert type(KeyDef([KeyPart(0)])) is KeyDef


def test_bitset_reuses_the_last_freed_id_first():
    pk = make_index(_Space(), IndexDef(0, "pk", "TREE", [KeyPart(0)]))
    bits = make_index(_Space(), IndexDef(1, "b", "BITSET", [KeyPart(1)], unique=False),
                      pk.key_def)
    rows = [(i, i) for i in range(1, 6)]
    for row in rows:
        bits.replace(None, row, DupMode.INSERT)
    bits.replace(rows[1], None, DupMode.INSERT)
    bits.replace(rows[3], None, DupMode.INSERT)
    late = [(6, 6), (7, 7)]
    for row in late:
        bits.replace(None, row, DupMode.INSERT)
    assert [t[0] for t in bits.select()] == [1, 7, 3, 6, 5]


def test_multikey_entries_and_uniqueness():
    pk = make_index(_Space(), IndexDef(0, "pk", "TREE", [KeyPart(0)]))
    mk = make_index(_Space(), IndexDef(1, "mk", "TREE", [KeyPart(1, path="[*]")]),
                    pk.key_def)
    first, second = (1, [1, 2, 2]), (2, [3])
    mk.replace(None, first, DupMode.INSERT)
    mk.replace(None, second, DupMode.INSERT)
    assert len(mk) == 3 and [t[0] for t in mk.select()] == [1, 1, 2]
    with pytest.raises(ClientError, match="Duplicate key"):
        mk.replace(None, (3, [4, 2]), DupMode.INSERT)
    assert len(mk) == 3
    mk.replace(first, (1, [2, 5]), DupMode.INSERT)     # keeps its own key 2
    assert [t[0] for t in mk.select([2])] == [1] and len(mk) == 3


def test_icu_collations_without_pyicu_fall_back_by_strength(monkeypatch):
    monkeypatch.setattr(collation, "icu", None)
    collation.icu_key.cache_clear()
    try:
        collation.define("unicode_xx_s1", "ICU", "xx", {"strength": "primary"})
        key = field_types.collation_key("unicode_xx_s1")
        assert key("A") == key("a")
        key = field_types.collation_key("unicode")
        assert key("A") != key("a")
    finally:
        collation.icu_key.cache_clear()
