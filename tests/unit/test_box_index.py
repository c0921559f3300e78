"""Field types, key definitions and memtx-like TREE/HASH indexes."""
from __future__ import annotations

import decimal
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from spindle.core.box import field_types as ft
from spindle.core.box.field_types import FieldType
from spindle.core.iproto import msgpack as mp
from spindle.core.box.index import (
    DupMode, HashIndex, IndexDef, TreeIndex, iterator_type, make_index,
)
from spindle.core.box.key_def import KeyDef, KeyPart
from spindle.core.iproto.constants import IteratorType
from spindle.core.iproto.errors import ClientError, ErrorCode


class FakeSpace:
    name = "s"
    engine = "memtx"


# ---------------------------------------------------------------- field types

U = uuid.UUID("11111111-1111-1111-1111-111111111111")
D = decimal.Decimal("1.5")


@pytest.mark.parametrize("ftype, good, bad", [
    ("unsigned", [0, 1, 2 ** 64 - 1], [-1, 1.0, True, "1", None, 2 ** 64]),
    ("integer", [-2 ** 63, 0, 2 ** 64 - 1], [1.5, False, "x", -2 ** 63 - 1]),
    ("number", [1, -1, 1.5, D, float("nan")], [True, "1", None, b"1"]),
    ("double", [1.0, 1.5, float("inf")], [1, D, True]),
    ("string", ["", "x"], [b"x", 1, None]),
    ("boolean", [True, False], [0, 1, None]),
    ("varbinary", [b"", b"\x00"], ["x", 1]),
    ("scalar", [True, 1, 1.5, "s", b"b", D], [None, [1], {}, U]),
    ("decimal", [D], [1, 1.5]),
    ("uuid", [U], ["11111111-1111-1111-1111-111111111111", b"x" * 16]),
    ("array", [[], [1], (1,)], [{}, "x"]),
    ("map", [{}, {"a": 1}], [[], "x"]),
    ("any", [None, 1, [1], {}, U], []),
])
def test_field_type_accepts(ftype, good, bad):
    for value in good:
        assert ft.is_compatible(FieldType(ftype), value), value
    for value in bad:
        assert not ft.is_compatible(FieldType(ftype), value), value


def test_nil_only_when_nullable():
    assert not ft.is_compatible(FieldType.UNSIGNED, None)
    assert ft.is_compatible(FieldType.UNSIGNED, None, True)
    assert ft.is_compatible(FieldType.ANY, None)


def test_type_aliases_and_containment():
    assert ft.field_type_by_name("num") is FieldType.UNSIGNED
    assert ft.field_type_by_name("STR") is FieldType.STRING
    assert ft.type1_contains_type2(FieldType.NUMBER, FieldType.UNSIGNED)
    assert ft.type1_contains_type2(FieldType.SCALAR, FieldType.DOUBLE)
    assert not ft.type1_contains_type2(FieldType.SCALAR, FieldType.UUID)
    assert not ft.type1_contains_type2(FieldType.INTEGER, FieldType.NUMBER)


def test_scalar_order_by_class():
    ordered = [None, False, True, float("nan"), -2 ** 63, -1, 1, 1.5, 2 ** 64 - 1,
               float(2 ** 64), "", "B", "a", b"\x00", b"\x00\x00", b"a"]
    key = ft.part_key_func(FieldType.SCALAR)
    keys = [key(v) for v in ordered]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("a, b, expected", [
    (2 ** 53 + 1, float(2 ** 53), 1),
    (2 ** 64 - 1, float(2 ** 64), -1),
    (1, 1.0, 0),
    (-1, float("nan"), 1),
    (float("nan"), float("nan"), 0),
    (decimal.Decimal("0.1"), 0.1, -1),
    (decimal.Decimal("2"), 2, 0),
])
def test_number_comparison_is_exact(a, b, expected):
    assert ft.compare(FieldType.NUMBER, a, b) == expected


def test_strings_compare_bytewise():
    assert ft.compare(FieldType.STRING, "z", "\u00e9") == -1      # 0x7a < 0xc3
    assert ft.compare(FieldType.STRING, "Z", "a") == -1
    assert ft.compare(FieldType.STRING, "a", "ab") == -1
    bad = b"\xff".decode("utf-8", "surrogateescape")
    assert ft.compare(FieldType.STRING, "\u00e9", bad) == -1       # 0xc3 < 0xff


@pytest.mark.parametrize("collation, equal, ordered", [
    ("unicode_ci", [("a", "A"), ("a", "\u00e4"), ("ss", "\u00df"), ("\u044f", "\u042f")],
     ["", " ", "!", "1", "9", "a", "B", "c", "z", "\u044f", "\u4e2d"]),
    ("unicode", [("\u00e9", "e\u0301")],
     ["", " ", "1", "a", "A", "\u00e4", "a b", "ab", "b", "B", "ss", "\u00df", "z"]),
])
def test_collations(collation, equal, ordered):
    for a, b in equal:
        assert ft.compare(FieldType.STRING, a, b, collation=collation) == 0, (a, b)
    key = ft.collation_key(collation)
    assert sorted(ordered, key=key) == ordered


def test_decimal_pack_roundtrip():
    for text in ["0", "1.5", "-1.5", "123456789012345678901234567890.12345678", "1E+5"]:
        value = decimal.Decimal(text)
        assert mp.decimal_unpack(mp.decimal_pack(value)) == value
    # 2.6.0 bytes for decimal.new('-12.34'): scale 2, BCD 01 23 4d
    assert mp.decimal_pack(decimal.Decimal("-12.34")) == b"\x02\x01\x23\x4d"
    assert mp.unpackb(mp.packb([U, D])) == [U, D]


def test_mp_sizeof_matches_packb():
    for value in [None, True, 0, 127, 128, 255, 256, 65536, 2 ** 32, 2 ** 64 - 1, -1, -33,
                  -129, -32769, -2 ** 31 - 1, 1.5, "", "x" * 31, "x" * 32, "x" * 256,
                  "\u00e9" * 20, b"", b"x" * 256, [1, [2, {"a": 3}]], list(range(16)),
                  {i: i for i in range(16)}, U, D]:
        assert mp.mp_sizeof(value) == len(mp.packb(value)), value


# ---------------------------------------------------------------- key defs

def test_key_validation_messages():
    kd = KeyDef([KeyPart(0, "unsigned"), KeyPart(1, "string", is_nullable=True)])
    with pytest.raises(ClientError) as e:
        kd.validate_partial_key([1, "a", 3])
    assert str(e.value) == "Invalid key part count (expected [0..2], got 3)"
    assert e.value.code == ErrorCode.ER_KEY_PART_COUNT
    with pytest.raises(ClientError, match="part 1 does not match index part type: expected string"):
        kd.validate_partial_key([1, 2])
    kd.validate_partial_key([1, None])      # nullable part takes nil in a search
    with pytest.raises(ClientError, match="part 1 does not match"):
        kd.validate_exact_key([1, None])    # but not in an exact match
    with pytest.raises(ClientError) as e:
        kd.validate_exact_key([1])
    assert str(e.value) == "Invalid key part count in an exact match (expected 2, got 1)"


def test_key_def_compare_and_extract():
    kd = KeyDef([KeyPart(2, "number"), KeyPart(0, "unsigned")])
    assert kd.extract_key((1, "x", 2.5)) == [2.5, 1]
    assert kd.compare((1, "x", 2), (0, "y", 2.0)) == 1
    assert kd.compare_with_key((1, "x", 2), [2]) == 0
    assert kd.compare_with_key((1, "x", 2), [3]) == -1
    merged = kd.merge(KeyDef([KeyPart(0, "unsigned"), KeyPart(1, "string")]))
    assert [p.fieldno for p in merged.parts] == [2, 0, 1]


# ---------------------------------------------------------------- indexes

def tree(parts, unique=True, iid=1, pk=None):
    pk = pk or KeyDef([KeyPart(0, "unsigned")])
    return TreeIndex(FakeSpace(), IndexDef(iid, "i", "TREE", parts, unique), pk)


MULTI = [(1, "a"), (1, "b"), (1, "c"), (2, "a"), (2, "c"), (3, "b")]


@pytest.fixture
def multi():
    index = tree([KeyPart(0, "unsigned"), KeyPart(1, "string")], iid=0)
    for t in MULTI:
        index.replace(None, t, DupMode.INSERT)
    return index


@pytest.mark.parametrize("key, it, expected", [
    ([1], "EQ", [(1, "a"), (1, "b"), (1, "c")]),
    ([1], "REQ", [(1, "c"), (1, "b"), (1, "a")]),
    ([2], "LT", [(1, "c"), (1, "b"), (1, "a")]),
    ([2], "LE", [(2, "c"), (2, "a"), (1, "c"), (1, "b"), (1, "a")]),
    ([2], "GE", [(2, "a"), (2, "c"), (3, "b")]),
    ([2], "GT", [(3, "b")]),
    ([2], "ALL", [(2, "a"), (2, "c"), (3, "b")]),          # ALL with a key acts as GE
    ([2, "b"], "EQ", []), ([2, "b"], "REQ", []),
    ([2, "b"], "GE", [(2, "c"), (3, "b")]),
    ([2, "b"], "LE", [(2, "a"), (1, "c"), (1, "b"), (1, "a")]),
    ([4], "LT", list(reversed(MULTI))), ([0], "GT", MULTI), ([0], "EQ", []),
    ([], "EQ", MULTI), ([], "GT", MULTI), ([], "REQ", list(reversed(MULTI))),
    ([], "LT", list(reversed(MULTI))), (None, None, MULTI),
])
def test_tree_iterators(multi, key, it, expected):
    assert multi.select(key, it) == expected
    assert list(multi.pairs(key, it)) == expected
    if it not in (None, "ALL"):
        assert multi.count(key, it) == len(expected)


def test_tree_offset_limit_count_minmax(multi):
    assert multi.select([1], "GE", offset=2, limit=2) == [(1, "c"), (2, "a")]
    assert multi.select([], "ALL", limit=0) == []
    assert multi.count([2], "ALL") == len(MULTI)          # 2.6.0's shortcut
    assert multi.min() == (1, "a") and multi.max() == (3, "b")
    assert multi.min([2]) == (2, "a") and multi.max([1]) == (1, "c")
    assert multi.min([9]) is None
    assert multi.get([1, "b"]) == (1, "b") and multi.get([1, "z"]) is None


def test_tree_iterator_errors(multi):
    with pytest.raises(ClientError) as e:
        multi.select([1], "BITS_ALL_SET")
    assert str(e.value) == "Index 'i' (TREE) of space 's' (memtx) does not support requested iterator type"
    with pytest.raises(ClientError, match="Unknown iterator type 'FOO'"):
        multi.select([1], "FOO")
    with pytest.raises(ClientError, match="Invalid iterator type"):
        multi.select([1], 42)
    assert iterator_type(None, True) is IteratorType.ALL
    assert iterator_type(None, False) is IteratorType.EQ


def test_pairs_tolerates_changes(multi):
    seen = []
    for t in multi.pairs([], "GE"):
        seen.append(t)
        if t == (1, "a"):
            multi.replace((1, "b"), None, DupMode.REPLACE_OR_INSERT)   # ahead: skipped
            multi.replace(None, (1, "bb"), DupMode.INSERT)             # ahead: found
        if t == (2, "a"):
            multi.replace((2, "a"), None, DupMode.REPLACE_OR_INSERT)   # current: ok
            multi.replace(None, (0, "z"), DupMode.INSERT)              # behind: not seen
    assert seen == [(1, "a"), (1, "bb"), (1, "c"), (2, "a"), (2, "c"), (3, "b")]
    back = []
    for t in multi.pairs([2], "LE"):
        back.append(t)
        if t == (2, "c"):
            multi.replace((1, "c"), None, DupMode.REPLACE_OR_INSERT)
    assert back == [(2, "c"), (1, "bb"), (1, "a"), (0, "z")]


def test_non_unique_orders_by_primary_key():
    index = tree([KeyPart(1, "string")], unique=False)
    for t in [(3, "a"), (1, "b"), (2, "a"), (4, "b"), (0, "a")]:
        index.replace(None, t, DupMode.INSERT)
    assert index.select(["a"]) == [(0, "a"), (2, "a"), (3, "a")]
    assert index.select(["b"], "REQ") == [(4, "b"), (1, "b")]
    with pytest.raises(ClientError, match="Get\\(\\) doesn't support partial keys"):
        index.get(["a"])


def test_unique_nullable_allows_many_nils():
    index = tree([KeyPart(1, "integer", is_nullable=True), KeyPart(2, "string", is_nullable=True)])
    for t in [(1,), (2,), (3, None, "x"), (4, None, "x"), (5, 1, "x"), (7, 2), (8, 2)]:
        index.replace(None, t, DupMode.INSERT)
    with pytest.raises(ClientError, match="Duplicate key exists in unique index 'i' in space 's'"):
        index.replace(None, (6, 1, "x"), DupMode.INSERT)
    assert index.select([None]) == [(1,), (2,), (3, None, "x"), (4, None, "x")]
    assert index.select([2]) == [(7, 2), (8, 2)]
    assert index.select([None, "x"]) == [(3, None, "x"), (4, None, "x")]


@pytest.mark.parametrize("old, dup, mode, code", [
    (None, None, DupMode.INSERT, 0),
    (None, "d", DupMode.INSERT, ErrorCode.ER_TUPLE_FOUND),
    (None, "d", DupMode.REPLACE_OR_INSERT, 0),
    (None, None, DupMode.REPLACE, ErrorCode.ER_TUPLE_NOT_FOUND),
    ("o", None, DupMode.REPLACE, ErrorCode.ER_CANT_UPDATE_PRIMARY_KEY),
    ("o", "d", DupMode.REPLACE, ErrorCode.ER_TUPLE_FOUND),
    ("o", "o", DupMode.REPLACE, 0),
])
def test_replace_check_dup(old, dup, mode, code):
    from spindle.core.box.index import replace_check_dup
    assert replace_check_dup(old, dup, mode) == code


def test_failed_replace_leaves_index_unchanged(multi):
    before = multi.tuples()
    with pytest.raises(ClientError):
        multi.replace(None, (1, "a"), DupMode.INSERT)
    with pytest.raises(ClientError):
        multi.replace((1, "a"), (9, "a"), DupMode.REPLACE)
    assert multi.tuples() == before


def hash_index():
    index = HashIndex(FakeSpace(), IndexDef(1, "h", "HASH", [KeyPart(0, "unsigned"),
                                                           KeyPart(1, "string")]))
    for t in [(1, "a"), (2, "b"), (3, "c")]:
        index.replace(None, t, DupMode.INSERT)
    return index


def test_hash_index():
    index = hash_index()
    assert index.select([2, "b"]) == [(2, "b")]
    assert sorted(index.select([])) == [(1, "a"), (2, "b"), (3, "c")]
    assert sorted(index.select([], "GT")) == [(1, "a"), (2, "b"), (3, "c")]
    after = index.select([1, "a"], "GT")
    assert sorted(after + [(1, "a")]) == sorted(index.tuples()) and (1, "a") not in after
    assert index.select([9, "z"], "GT") == []
    assert index.count([], "ALL") == 3 and index.count([1, "a"], "EQ") == 1
    for it in ("REQ", "LT", "LE", "GE"):
        with pytest.raises(ClientError, match="does not support requested iterator type"):
            index.select([1, "a"], it)
    with pytest.raises(ClientError) as e:
        index.select([1], "EQ")
    assert str(e.value) == ("HASH index  does not support selects via a partial key "
                            "(expected 2 parts, got 1). Please Consider changing index type to TREE.")
    with pytest.raises(ClientError, match="got 0"):
        index.select([], "EQ")
    with pytest.raises(ClientError, match="does not support min\\(\\)"):
        index.min()
    with pytest.raises(ClientError, match="HASH index must be unique"):
        make_index(FakeSpace(), IndexDef(2, "x", "HASH", [KeyPart(0)], unique=False))


def test_hash_number_keys_equal_across_int_and_float():
    index = HashIndex(FakeSpace(), IndexDef(1, "h", "HASH", [KeyPart(0, "number")]))
    index.replace(None, (1,), DupMode.INSERT)
    with pytest.raises(ClientError, match="Duplicate key"):
        index.replace(None, (1.0,), DupMode.INSERT)
    assert index.get([1.0]) == (1,)


# ---------------------------------------------------------------- model check

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from("abc")), max_size=30),
       st.lists(st.integers(0, 7), max_size=2),
       st.sampled_from(["EQ", "REQ", "ALL", "LT", "LE", "GE", "GT"]))
def test_tree_iterators_match_naive_model(rows, key, it):
    index = tree([KeyPart(1, "string"), KeyPart(0, "unsigned")], unique=False,
                 pk=KeyDef([KeyPart(2, "unsigned")]))
    data = {}
    for n, (a, b) in enumerate(rows):
        t = (a, b, n)
        index.replace(None, t, DupMode.INSERT)
        data[n] = t
    probe = ["abc"[k % 3] for k in key[:1]] + key[1:]
    full = sorted(data.values(), key=lambda t: (t[1], t[0], t[2]))
    m = len(probe)

    def prefix(t):
        return (t[1], t[0])[:m]
    p = tuple(probe)
    if m == 0:
        expected = full[::-1] if it in ("REQ", "LT", "LE") else full
    else:
        expected = {
            "EQ": [t for t in full if prefix(t) == p],
            "REQ": [t for t in full if prefix(t) == p][::-1],
            "ALL": [t for t in full if prefix(t) >= p],
            "GE": [t for t in full if prefix(t) >= p],
            "GT": [t for t in full if prefix(t) > p],
            "LT": [t for t in full if prefix(t) < p][::-1],
            "LE": [t for t in full if prefix(t) <= p][::-1],
        }[it]
    assert index.select(probe, it) == expected
