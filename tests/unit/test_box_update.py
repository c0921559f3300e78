"""UPDATE/UPSERT operations (outcomes and messages measured on 2.6.0)."""
from __future__ import annotations

import decimal

import pytest
from hypothesis import given, settings, strategies as st

from spindle.core.box.update import check_ops, decode_ops, update_tuple, upsert_tuple
from spindle.core.iproto.errors import ClientError, ErrorCode

BASE = (1, "abc", 10, 1.5, "hello", [1, 2])
NAMES = {"id": 0, "name": 1, "n": 2}

# (ops, result tuple or error message)
CASES = [
    ([["+", 3, 1]], (1, "abc", 11, 1.5, "hello", [1, 2])),
    ([["+", 3, 1.5]], (1, "abc", 11.5, 1.5, "hello", [1, 2])),
    ([["-", 4, 0.5]], (1, "abc", 10, 1.0, "hello", [1, 2])),
    ([["+", "n", -100]], (1, "abc", -90, 1.5, "hello", [1, 2])),
    ([["+", 2, 1]], "Argument type in operation '+' on field 2 does not match field type: expected a number"),
    ([["+", 3, "x"]], "Argument type in operation '+' on field 3 does not match field type: expected a number"),
    ([["+", 3, True]], "Argument type in operation '+' on field 3 does not match field type: expected a number"),
    ([["+", 10, 1]], "Field 10 was not found in the tuple"),
    ([["+", -1, 1]], "Argument type in operation '+' on field 6 does not match field type: expected a number"),
    ([["+", -7, 1]], "Field -7 was not found in the tuple"),
    ([["+", 0, 1]], "Field 0 was not found in the tuple"),
    ([["+", "name", 1]], "Argument type in operation '+' on field 'name' does not match field type: expected a number"),
    ([["+", "x", 1]], "Field 'x' was not found in the tuple"),
    ([["+", "[3]", 1]], (1, "abc", 11, 1.5, "hello", [1, 2])),
    ([["&", 3, 6]], (1, "abc", 2, 1.5, "hello", [1, 2])),
    ([["|", 3, 5]], (1, "abc", 15, 1.5, "hello", [1, 2])),
    ([["^", 3, 10]], (1, "abc", 0, 1.5, "hello", [1, 2])),
    ([["&", 4, 3]], "Argument type in operation '&' on field 4 does not match field type: expected a positive integer"),
    ([["|", 3, -1]], "Argument type in operation '|' on field 3 does not match field type: expected a positive integer"),
    ([["^", 3, 1.5]], "Argument type in operation '^' on field 3 does not match field type: expected a positive integer"),
    ([[":", 5, 2, 1, "XY"]], (1, "abc", 10, 1.5, "hXYllo", [1, 2])),
    ([[":", 5, -1, 0, "END"]], (1, "abc", 10, 1.5, "helloEND", [1, 2])),
    ([[":", 5, 100, 0, "!"]], (1, "abc", 10, 1.5, "hello!", [1, 2])),
    ([[":", 5, -100, 0, "!"]], "SPLICE error on field 5: offset is out of bound"),
    ([[":", 5, 0, 0, "!"]], "SPLICE error on field 5: offset is out of bound"),
    ([[":", 5, 2, -1, "Q"]], (1, "abc", 10, 1.5, "hQo", [1, 2])),
    ([[":", 5, 2, -100, "Q"]], (1, "abc", 10, 1.5, "hQello", [1, 2])),
    ([[":", 5, 2, 100, ""]], (1, "abc", 10, 1.5, "h", [1, 2])),
    ([[":", 5, -6, 0, ">"]], (1, "abc", 10, 1.5, ">hello", [1, 2])),
    ([[":", 3, 1, 1, "x"]], "Argument type in operation ':' on field 3 does not match field type: expected a string"),
    ([[":", 5, 1, 1, 5]], "Argument type in operation ':' on field 5 does not match field type: expected a string"),
    ([[":", 5, "a", 1, "x"]], "Argument type in operation ':' on field 5 does not match field type: expected an integer"),
    ([[":", 5, 2 ** 32, 1, "x"]], "Argument type in operation ':' on field 5 does not match field type: expected an integer"),
    ([[":", 5, 1, 1]], "Unknown UPDATE operation #1: wrong number of arguments, expected 5, got 4"),
    ([["!", 2, "new"]], (1, "new", "abc", 10, 1.5, "hello", [1, 2])),
    ([["!", 7, "end"]], (1, "abc", 10, 1.5, "hello", [1, 2], "end")),
    ([["!", 8, "x"]], "Field 8 was not found in the tuple"),
    ([["!", -1, "last"]], (1, "abc", 10, 1.5, "hello", [1, 2], "last")),
    ([["!", -7, "first"]], ("first", 1, "abc", 10, 1.5, "hello", [1, 2])),
    ([["!", -8, "x"]], "Field -8 was not found in the tuple"),
    ([["#", 5, 1]], (1, "abc", 10, 1.5, [1, 2])),
    ([["#", 5, 100]], (1, "abc", 10, 1.5)),
    ([["#", -1, 1]], (1, "abc", 10, 1.5, "hello")),
    ([["#", 5, 0]], "Field 5 UPDATE error: cannot delete 0 fields"),
    ([["#", 3, -1]], "Argument type in operation '#' on field 3 does not match field type: expected a positive integer"),
    ([["#", -20, 1]], "Field -20 was not found in the tuple"),
    ([["=", 1, 2]], (2, "abc", 10, 1.5, "hello", [1, 2])),
    ([["=", 7, 1]], (1, "abc", 10, 1.5, "hello", [1, 2], 1)),
    ([["=", 8, 1]], "Field 8 was not found in the tuple"),
    ([["=", 3, None]], (1, "abc", None, 1.5, "hello", [1, 2])),
    ([["%", 3, 1]], 'Unknown UPDATE operation #1: "%"'),
    ([["++", 3, 1]], 'Unknown UPDATE operation #1: "++"'),
    ([["+", 3]], "Unknown UPDATE operation #1: wrong number of arguments, expected 3, got 2"),
    ([[]], "Illegal parameters, update operation must be an array {op,..}, got empty array"),
    (["x"], "Illegal parameters, update operation must be an array {op,..}"),
    ([[1, 1, 1]], "Illegal parameters, update operation name must be a string"),
    ([["+", 1.5, 1]], "Illegal parameters, field id must be a number or a string"),
    ("x", "Illegal parameters, update operations must be an array {{op,..}, {op,..}}"),
    ([], BASE),
    ([["+", 3, 1], ["+", 3, 1]], "Field 3 UPDATE error: double update of the same field"),
    ([["=", 3, 5], ["-", 3, 10]], "Field 3 UPDATE error: double update of the same field"),
    ([["=", 3, 5], ["=", 3, 7]], (1, "abc", 7, 1.5, "hello", [1, 2])),
    ([["-", 3, 5], ["=", 3, 7]], (1, "abc", 7, 1.5, "hello", [1, 2])),
    ([["#", 3, 1], ["+", 3, 1]], (1, "abc", 2.5, "hello", [1, 2])),
    ([["!", 3, 1], ["+", 3, 1]], (1, "abc", 2, 10, 1.5, "hello", [1, 2])),
    ([["=", 7, 5], ["+", 7, 1]], (1, "abc", 10, 1.5, "hello", [1, 2], 6)),
    ([["+", 99, 1], ["%", 1, 1]], 'Unknown UPDATE operation #2: "%"'),
    ([["=", 3, 2 ** 64 - 1], ["+", 4, 1]], (1, "abc", 2 ** 64 - 1, 2.5, "hello", [1, 2])),
    ([["-", 3, 2 ** 64 - 1]], "Integer overflow when performing '-' operation on field 3"),
    ([["+", 3, 2 ** 64 - 11]], (1, "abc", 2 ** 64 - 1, 1.5, "hello", [1, 2])),
    ([["+", 3, 2 ** 64 - 10]], "Integer overflow when performing '+' operation on field 3"),
    ([["-", 3, 2 ** 63 + 10]], (1, "abc", -2 ** 63, 1.5, "hello", [1, 2])),
    ([["+", 3, 2 ** 64]], "Argument type in operation '+' on field 3 does not match field type: expected a number"),
    ([["+", 3, decimal.Decimal("0.5")]], (1, "abc", decimal.Decimal("10.5"), 1.5, "hello", [1, 2])),
    ([["+", 4, decimal.Decimal("1")]], (1, "abc", 10, decimal.Decimal("2.5"), "hello", [1, 2])),
]


@pytest.mark.parametrize("ops, expected", CASES, ids=[repr(c[0])[:60] for c in CASES])
def test_update(ops, expected):
    if isinstance(expected, str):
        with pytest.raises(ClientError) as e:
            update_tuple(BASE, ops, field_names=NAMES)
        assert str(e.value) == expected
    else:
        result = update_tuple(BASE, ops, field_names=NAMES)
        assert result == expected
        assert [type(v) for v in result] == [type(v) for v in expected]


def test_error_codes():
    def code(ops):
        with pytest.raises(ClientError) as e:
            update_tuple(BASE, ops)
        return e.value.code
    assert code([["+", 2, 1]]) == ErrorCode.ER_UPDATE_ARG_TYPE
    assert code([["+", 10, 1]]) == ErrorCode.ER_NO_SUCH_FIELD_NO
    assert code([["+", "z", 1]]) == ErrorCode.ER_NO_SUCH_FIELD_NAME
    assert code([["%", 1, 1]]) == ErrorCode.ER_UNKNOWN_UPDATE_OP
    assert code([["#", 1, 0]]) == ErrorCode.ER_UPDATE_FIELD
    assert code([[":", 5, 0, 0, ""]]) == ErrorCode.ER_UPDATE_SPLICE
    assert code([["=", 3, 2 ** 64 - 1], ["+", 3, 1]]) == ErrorCode.ER_UPDATE_FIELD
    assert code([[]]) == ErrorCode.ER_ILLEGAL_PARAMS


def test_named_field_missing_in_tuple_quotes_twice():
    # 2.6.0 quotes the name once in the path and once in the template.
    with pytest.raises(ClientError) as e:
        update_tuple((1, "a"), [["+", "n", 1]], field_names=NAMES)
    assert str(e.value) == "Field ''n'' was not found in the tuple"


def test_index_base_zero():
    assert update_tuple((1, 2, 3), [["=", 0, 9]], index_base=0) == (9, 2, 3)
    assert update_tuple((1, 2, 3), [["+", 2, 1]], index_base=0) == (1, 2, 4)
    assert update_tuple(("abc",), [[":", 0, 0, 1, "X"]], index_base=0) == ("Xbc",)
    assert update_tuple((1, 2, 3), [["=", 3, 4]], index_base=0) == (1, 2, 3, 4)
    # Messages always number fields from 1 (xrow_update_err_no_such_field).
    with pytest.raises(ClientError, match="Field 5 was not found"):
        update_tuple((1, 2, 3), [["=", 4, 1]], index_base=0)


def test_splice_counts_bytes():
    result = update_tuple(("h\u00e9llo",), [[":", 1, 3, 1, "X"]])
    assert result[0].encode("utf-8", "surrogateescape") == b"h\xc3Xllo"
    assert update_tuple(("h\u00e9llo",), [[":", 1, 2, 2, "e"]]) == ("hello",)


def test_too_many_operations():
    with pytest.raises(ClientError, match="too many operations for update"):
        decode_ops([["=", 1, 1]] * 4001)
    decode_ops([["=", 1, 1]] * 4000)


def test_json_paths():
    """(tests/interop/test_update_path_oracle.py checks them against 2.6.0)"""
    names = {"m": 1}
    assert update_tuple((1, {"a": 1}), [["=", "m.a", 2]], field_names=names) == (1, {"a": 2})
    # one operation: a new key goes first; an existing one stays in place
    result = update_tuple((1, {"a": 1, "b": 2}), [["=", "m.z", 0], ["=", "[1]", 5]],
                          field_names=names)
    assert list(result[1]) == ["z", "a", "b"] and result[0] == 5
    # several: the keys they touch first
    result = update_tuple((1, {"a": 1, "b": 2, "c": 3}), [["=", "[2].c", 9], ["+", "m.a", 1]],
                          field_names=names)
    assert list(result[1].items()) == [("c", 9), ("a", 2), ("b", 2)]
    with pytest.raises(ClientError) as e:
        update_tuple((1, {"a": 1}), [["=", "m..a", 2]], field_names=names)
    assert str(e.value) == "Field 'm..a' UPDATE error: invalid JSON in position 3"
    with pytest.raises(ClientError) as e:
        update_tuple((1, {"a": 1}), [["=", "m.q.r", 2]], field_names=names)
    assert e.value.code == ErrorCode.ER_NO_SUCH_FIELD_NAME
    assert str(e.value) == "Field ''m.q.r'' was not found in the tuple"


def test_upsert_skips_failing_operations():
    errors = []
    result = upsert_tuple(BASE, [["+", 2, 1], ["+", 3, 1], ["#", 99, 1], ["=", 7, "x"]],
                          on_error=errors.append)
    assert result == (1, "abc", 11, 1.5, "hello", [1, 2], "x")
    assert [str(e) for e in errors] == [
        "Argument type in operation '+' on field 2 does not match field type: expected a number",
        "Field 99 was not found in the tuple"]
    with pytest.raises(ClientError, match="Unknown UPDATE operation #2"):
        upsert_tuple(BASE, [["+", 3, 1], ["?", 1, 1]])
    check_ops([["+", 3, 1]])
    with pytest.raises(ClientError, match="expected 3, got 2"):
        check_ops([["+", 3]])


def test_decimal_overflow_and_nan():
    big = decimal.Decimal("9" * 38 + "E+999999")
    with pytest.raises(ClientError) as e:
        update_tuple((big,), [["+", 1, big]])
    assert e.value.code == ErrorCode.ER_UPDATE_DECIMAL_OVERFLOW
    with pytest.raises(ClientError, match="expected a number convertible to decimal"):
        update_tuple((decimal.Decimal(1),), [["+", 1, float("nan")]])


@settings(max_examples=300, deadline=None)
@given(st.integers(-2 ** 63, 2 ** 64 - 1), st.integers(-2 ** 63, 2 ** 64 - 1),
       st.sampled_from("+-"))
def test_integer_arithmetic_range(a, b, op):
    exact = a + b if op == "+" else a - b
    if -2 ** 63 <= exact <= 2 ** 64 - 1:
        assert update_tuple((a,), [[op, 1, b]]) == (exact,)
    else:
        with pytest.raises(ClientError, match="Integer overflow"):
            update_tuple((a,), [[op, 1, b]])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=8), st.integers(-12, 12), st.integers(-12, 12), st.text(max_size=3))
def test_splice_matches_reference(s, offset, cut, paste):
    data = s.encode()
    n = len(data)
    if offset == 0 or (offset < 0 and -offset > n + 1):
        with pytest.raises(ClientError, match="offset is out of bound"):
            update_tuple((s,), [[":", 1, offset, cut, paste]])
        return
    start = min(offset - 1, n) if offset > 0 else offset + n + 1
    rest = n - start
    length = (0 if -cut > rest else cut + rest) if cut < 0 else min(cut, rest)
    expected = data[:start] + paste.encode() + data[start + length:]
    result = update_tuple((s,), [[":", 1, offset, cut, paste]])[0]
    assert result.encode("utf-8", "surrogateescape") == expected
