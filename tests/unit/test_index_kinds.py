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


def _check_rtree(tree, expected: dict) -> None:
    """Every tuple once, in a leaf at the same depth; every page box the cover of
    its page; pages between min_fill and max_fill (the root: at least 2 branches
    above the leaves)."""
    from spindle.core.box.index_rtree import _page_cover
    seen: list = []

    def walk(page, level, is_root):
        assert len(page) <= tree.max_fill
        if not is_root:
            assert len(page) >= tree.min_fill
        elif level > 1:
            assert len(page) >= 2
        for box, child in page:
            if level == 1:
                seen.append(child)
                assert box == expected[child[0]]
            else:
                assert box == _page_cover(child)
                walk(child, level - 1, False)

    if tree.root is not None:
        walk(tree.root, tree.height, True)
    assert sorted(t[0] for t in seen) == sorted(expected)


def test_rtree_stays_an_rtree_through_inserts_deletes_and_undos():
    import random
    from spindle.core.iproto.constants import IteratorType as It
    rng = random.Random(23)
    pk = make_index(_Space(), IndexDef(0, "pk", "TREE", [KeyPart(0)]))
    rt = make_index(_Space(), IndexDef(1, "r", "RTREE", [KeyPart(1, "array")], unique=False),
                    pk.key_def)
    rows: dict = {}
    boxes: dict = {}

    def box_of(value):
        return [c for v in value for c in (float(v), float(v))]

    for step in range(4000):
        key = rng.randrange(600)
        old = rows.get(key)
        roll = rng.random()
        if roll < 0.2 and old is not None:
            rt.replace(old, None, DupMode.INSERT)
            del rows[key], boxes[key]
            continue
        new = (key, [rng.randrange(100), rng.randrange(100)])
        rt.replace(old, new, DupMode.INSERT)
        if roll < 0.3:                       # undone: new out, old back (space.undo)
            rt.delete_raw(new)
            if old is not None:
                rt.insert_raw(old)
            continue
        rows[key], boxes[key] = new, box_of(new[1])
        if step % 500 == 0:
            _check_rtree(rt.tree, boxes)
    _check_rtree(rt.tree, boxes)
    assert rt.tree.height >= 3 and len(rt) == len(rows)
    # every iterator finds what a look at every entry finds
    for _ in range(50):
        x, y = rng.randrange(100), rng.randrange(100)
        key = [x, y, x + rng.randrange(30), y + rng.randrange(30)]
        q = [key[0], key[2], key[1], key[3]]
        inside = {k for k, b in boxes.items()
                  if q[0] <= b[0] and b[1] <= q[1] and q[2] <= b[2] and b[3] <= q[3]}
        assert {t[0] for t in rt.select(key, It.LE)} == inside
        overlapping = {k for k, b in boxes.items()
                       if b[0] <= q[1] and q[0] <= b[1] and b[2] <= q[3] and q[2] <= b[3]}
        assert {t[0] for t in rt.select(key, It.OVERLAPS)} == overlapping
        near = rt.select([x, y], It.NEIGHBOR, limit=20)
        dist = [(t[1][0] - x) ** 2 + (t[1][1] - y) ** 2 for t in near]
        assert dist == sorted(dist)
        assert dist[-1] <= sorted((b[0] - x) ** 2 + (b[2] - y) ** 2
                                  for b in boxes.values())[19]
    assert len(rt.select([], It.ALL)) == len(rows)


def test_bitset_bitmaps_follow_replaces_and_undos():
    import random
    from spindle.core.iproto.constants import IteratorType as It
    rng = random.Random(23)
    pk = make_index(_Space(), IndexDef(0, "pk", "TREE", [KeyPart(0)]))
    bits = make_index(_Space(), IndexDef(1, "b", "BITSET", [KeyPart(1)], unique=False),
                      pk.key_def)
    rows: dict = {}
    for _ in range(3000):
        key = rng.randrange(400)
        old = rows.get(key)
        new = (key, rng.getrandbits(12))
        bits.replace(old, new, DupMode.INSERT)
        if rng.random() < 0.2:
            bits.delete_raw(new)
            if old is not None:
                bits.insert_raw(old)
        else:
            rows[key] = new
    for mask in [0, 1, 6, 0xFFF, 0x800, 0x155]:
        for it, match in [(It.BITS_ALL_SET, lambda v: mask and v & mask == mask),
                          (It.BITS_ANY_SET, lambda v: v & mask),
                          (It.BITS_ALL_NOT_SET, lambda v: not v & mask),
                          (It.EQ, lambda v: v == mask)]:
            found = bits.select([mask], it)
            assert {t[0] for t in found} == {k for k, t in rows.items() if match(t[1])}
            assert bits.count([mask], it) == len(found)
            # in the order of the tuples' ids
            ids = [bits._ids[id(t)] for t in found]
            assert ids == sorted(ids)
    assert len(bits.select()) == len(rows) == len(bits)
