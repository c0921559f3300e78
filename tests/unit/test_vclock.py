import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spindle.core.iproto.errors import ClientError
from spindle.core.vclock import VCLOCK_MAX, VClock, VClockParseError


def vc(**kw):
    return VClock({int(k[1:]): v for k, v in kw.items()})


def test_empty_clock():
    clock = VClock()
    assert clock.get(1) == 0
    assert clock.signature == 0
    assert str(clock) == "{}"
    assert clock.to_dict() == {}


def test_follow_advances_and_returns_previous():
    clock = VClock()
    assert clock.follow(1, 5) == 0
    assert clock.follow(1, 7) == 5
    assert clock.follow(0, 2) == 0
    assert clock.get(1) == 7
    assert clock.signature == 9


@pytest.mark.parametrize("lsn", [3, 5])
def test_follow_refuses_to_go_back(lsn):
    clock = VClock({1: 5})
    with pytest.raises(ClientError) as info:
        clock.follow(1, lsn)
    assert info.value.code == 68
    assert str(info.value) == \
        f"Invalid LSN order for instance 1: previous LSN = 5, new lsn = {lsn}"
    assert clock.get(1) == 5


@pytest.mark.parametrize("replica_id", [-1, VCLOCK_MAX, 100])
def test_replica_id_range(replica_id):
    with pytest.raises(ValueError):
        VClock().follow(replica_id, 1)
    with pytest.raises(ValueError):
        VClock({replica_id: 1})


def test_inc_and_reset():
    clock = VClock()
    assert clock.inc(2) == 1
    assert clock.inc(2) == 2
    clock.reset(2, 10)
    assert clock.get(2) == 10
    clock.reset(2, 0)
    assert 2 not in clock
    assert str(clock) == "{}"


# (a, b, expected compare(a, b))
COMPARE_TABLE = [
    ({}, {}, 0),
    ({1: 1}, {}, 1),
    ({}, {1: 1}, -1),
    ({1: 5, 2: 3}, {1: 5, 2: 3}, 0),
    ({1: 5, 2: 3}, {1: 6, 2: 3}, -1),
    ({1: 5, 2: 4}, {1: 5, 2: 3}, 1),
    ({1: 5, 2: 3}, {1: 4, 2: 4}, None),
    ({1: 25, 2: 3}, {1: 26}, None),
    ({0: 9, 1: 5}, {1: 5}, 1),
    ({1: 0}, {}, 0),
]


@pytest.mark.parametrize("a,b,expected", COMPARE_TABLE)
def test_compare_partial_order(a, b, expected):
    assert VClock(a).compare(VClock(b)) == expected
    reverse = None if expected is None else -expected
    assert VClock(b).compare(VClock(a)) == reverse
    assert VClock(a).compare(b) == expected  # plain mappings work too


def test_compare_ignore0():
    assert VClock({0: 9, 1: 5}).compare({0: 1, 1: 5}, ignore0=True) == 0
    assert VClock({0: 9, 1: 5}).compare({0: 10, 1: 6}, ignore0=True) == -1


def test_rich_comparisons_follow_partial_order():
    a, b, c = VClock({1: 1}), VClock({1: 2}), VClock({2: 1})
    assert a < b and a <= b and b > a and b >= a
    assert not (a < c) and not (a > c) and not (a <= c) and not (a >= c)
    assert a == VClock({1: 1}) and a == {1: 1}
    assert a != b


def test_lex_compare_orders_incomparable_clocks():
    assert VClock({1: 2}).lex_compare(VClock({2: 5})) == 1
    assert VClock({1: 2, 2: 1}).lex_compare(VClock({1: 2, 2: 3})) == -1
    assert VClock({1: 2}).lex_compare(VClock({1: 2})) == 0


def test_copy_is_independent():
    a = VClock({1: 3})
    b = a.copy()
    b.follow(1, 4)
    assert a.get(1) == 3
    c = copy.copy(a)
    c.follow(2, 1)
    assert 2 not in a


def test_merge_and_max():
    a = VClock({1: 5, 2: 1})
    a.merge({1: 3, 2: 4, 3: 7})
    assert a.to_dict() == {1: 5, 2: 4, 3: 7}
    assert VClock.max(VClock({1: 1}), {2: 2}, VClock({1: 3})).to_dict() == {1: 3, 2: 2}


def test_min_ignore0_keeps_component_0():
    a = VClock({0: 9, 1: 5, 2: 4})
    a.min_ignore0(VClock({0: 1, 1: 3}))
    assert a.to_dict() == {0: 9, 1: 3}


def test_wire_form_drops_component_0_and_zeroes():
    clock = VClock({0: 4, 1: 25, 2: 0})
    assert clock.to_wire() == {1: 25}
    assert VClock.from_wire({0: 3, 1: 7, 2: 0}).to_dict() == {1: 7}
    with pytest.raises(ValueError):
        VClock.from_wire({32: 1})
    with pytest.raises(ValueError):
        VClock.from_wire({1: -1})
    with pytest.raises(ValueError):
        VClock.from_wire({"a": 1})


@pytest.mark.parametrize("text,expected", [
    ("{}", {}),
    ("{1: 25}", {1: 25}),
    ("{1: 25, 2: 3}", {1: 25, 2: 3}),
    ("  {  1 :25 ,2:  3 }  ", {1: 25, 2: 3}),
    ("{0: 1, 31: 9223372036854775807}", {0: 1, 31: 9223372036854775807}),
    ("{1: 0}", {1: 0}),
    ("{1: 2,}", {1: 2}),          # vclock_from_string() accepts a trailing comma
])
def test_from_string(text, expected):
    assert VClock.from_string(text).to_dict() == expected


@pytest.mark.parametrize("text", [
    "", "1: 2", "{", "{1}", "{1:}", "{1: 2", "{,}", "{32: 1}", "{1: -1}",
    "{1: 2, 1: 3}", "{1: 2} x", "{a: 1}", "{1: 9223372036854775808}", "{1: 2}}",
])
def test_from_string_rejects(text):
    with pytest.raises(VClockParseError):
        VClock.from_string(text)


def test_text_forms():
    clock = VClock({2: 3, 1: 25})
    assert str(clock) == "{1: 25, 2: 3}"
    assert clock.to_lua() == "{[1] = 25, [2] = 3}"
    assert repr(clock) == "VClock({1: 25, 2: 3})"
    assert str(VClock.from_string("{1: 0}")) == "{1: 0}"


@given(st.dictionaries(st.integers(0, VCLOCK_MAX - 1), st.integers(0, 2**63 - 1), max_size=32))
def test_text_round_trip(components):
    clock = VClock(components)
    assert VClock.from_string(str(clock)).to_dict() == clock.to_dict()
    assert clock.signature == sum(components.values())


@given(st.dictionaries(st.integers(0, 5), st.integers(0, 20), max_size=6),
       st.dictionaries(st.integers(0, 5), st.integers(0, 20), max_size=6))
def test_compare_agrees_with_componentwise_order(a, b):
    ids = set(a) | set(b)
    le = all(a.get(i, 0) <= b.get(i, 0) for i in ids)
    ge = all(a.get(i, 0) >= b.get(i, 0) for i in ids)
    expected = 0 if le and ge else -1 if le else 1 if ge else None
    assert VClock(a).compare(VClock(b)) == expected
    merged = VClock.max(a, b)
    assert merged >= VClock(a) and merged >= VClock(b)
