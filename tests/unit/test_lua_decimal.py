"""The decimal module: decimal_t cdata in Lua, decimal.Decimal in Python, and the rules
of 2.6.0's decNumber contexts (facts checked against the real binary;
tests/interop/test_decimal_oracle.py compares live)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from spindle.core.iproto.msgpack import packb, unpackb
from spindle.lua.modules import decimal as natives
from spindle.lua.render import render_lua_value, render_values
from spindle.lua.serialize import DecimalText, to_display

from .test_lua_serializers import instance, lua, lua_error  # noqa: F401 - a fixture


def texts(instance, code, *args) -> list[str]:
    """The chunk's results through tostring()."""
    return lua(instance, "local r = {(function(...) " + code + " end)(...)} "
               "for i = 1, table.maxn(r) do r[i] = tostring(r[i]) end return unpack(r)",
               *args)


# ------------------------------------------------------------- Python natives

def test_strings_follow_decnumber_syntax_and_context():
    assert natives.from_text(b"1.5") == Decimal("1.5")
    assert str(natives.from_text(b"1E+2")) == "1E+2"
    assert str(natives.from_text(b"1e-40")) == "0E-38"           # subnormal: scale 38
    assert natives.from_text(b"1\x002") == Decimal(1)              # C string
    for bad in (b" 1", b"1 ", b"inf", b"nan", b"0x10", b"1_000", b"1e", b".", b"",
                b"1e40", b"123456789012345678901234567890123456789"):
        assert natives.from_text(bad) is None, bad
    # 39 digits after the point round half up to 38
    assert str(natives.from_text(b"1.234567890123456789012345678901234567850")) == \
        "1.2345678901234567890123456789012345679"


def test_ln_and_log10_round_like_decnumber():
    ln = natives.arith(b"ln", b"2.675", b"", 1)
    assert ln == (False, b"9839493803479698704519431194225596578", -37)
    log10 = natives.arith(b"log10", b"1.0000001", b"", 1)
    assert log10 == (False, b"43429446018852918013670197358779471618", -45)


def test_arith_answers_which_operand_or_the_operation_failed():
    assert natives.arith(b"add", b"15E-1", b"x", 2) == (None, 2)
    assert natives.arith(b"add", b"x", b"1", 3) == (None, 1)
    assert natives.arith(b"div", b"1E0", b"0E0", 0) == (None, 0)
    assert natives.arith(b"pow", b"-1E0", b"1000000001", 2) == (None, 0)
    assert natives.arith(b"pow", b"-1E0", b"999999999", 2) == (True, b"1", 0)
    assert natives.arith(b"ln", b"0", b"", 1) == (None, 0)        # -Infinity
    assert natives.compare(b"15E-1", b"1.50", 2) == (0,)


@pytest.mark.parametrize("value, digits, rounded, rescaled", [
    ("2.675", 2, "2.68", "2.68"),
    ("-2.675", 2, "-2.68", "-2.68"),
    ("0.1", 0, "0", "0"),
    ("0.000", 1, "0.0", "0.0"),
    ("-0.000", 1, "0.0", "0.0"),
    ("99.99", 1, "100", "100"),
    ("2.675", 5, "2.675", "2.67500"),
    ("2.675", -1, "2.675", "2.675"),
    ("2.675", 37, "2.675", "2.6750000000000000000000000000000000000"),
    ("2.675", 38, "2.675", "2.675"),
    ("0", 38, "0", "0"),
    ("1E+2", 0, "1E+2", "1E+2"),
])
def test_round_and_rescale(value, digits, rounded, rescaled):
    assert str(natives.round_value(Decimal(value), digits)) == rounded
    assert str(natives.rescale_value(Decimal(value), digits)) == rescaled


# ------------------------------------------------------------------- in Lua

def test_values_are_decimal_t_cdata(instance):
    assert texts(instance, """
        local decimal, ffi = require('decimal'), require('ffi')
        local d = decimal.new('-123456.789')
        -- (the struct's number depends on how many ctypes other modules made first)
        return type(d), ffi.sizeof(d), tostring(ffi.typeof(d)):match('^ctype<struct %d+>$') ~= nil,
               d.digits, d.exponent, d.bits, d.lsu[0], d.lsu[2], d, decimal.is_decimal(d)""") == [
        "cdata", "36", "true", "9", "-3", "128", "789", "123", "-123456.789", "true"]


def test_text_keeps_the_exponent_out(instance):
    assert texts(instance, """
        local D = require('decimal').new
        return D('1E+2'), D('0e3'), D('-0.00'), D('1e-38'), D(1/3), D(2^53)""") == [
        "100", "0000", "-0.00", "0.00000000000000000000000000000000000001",
        "0.333333333333333", "9007199254740990"]


def test_decimal_and_raw_operands_give_the_same_results(instance):
    """Decimal operands skip Python's syntax check (their exact text is trusted); a
    string or number operand goes through it: both paths agree."""
    assert lua(instance, """
        local D = require('decimal').new
        local out = {}
        for _, pair in ipairs({{'1.5', '0.25'}, {'10', '0.5'}, {'1', '3'}, {'-7', '3'}}) do
            local a, b = D(pair[1]), pair[2]
            for _, f in ipairs({function(x, y) return x + y end,
                                function(x, y) return x / y end,
                                function(x, y) return x % y end,
                                function(x, y) return x ^ 2 end}) do
                local fast, raw = f(a, D(b)), f(a, b)
                out[#out + 1] = tostring(fast) == tostring(raw) and fast == raw
            end
            out[#out + 1] = (a < D(b)) == (a < b)
        end
        return out""")[0] == [True] * 20


def test_errors_read_like_tarantools(instance):
    assert lua_error(instance, "local D = require('decimal').new "
                               "local x = D(1) / 0 return x") == \
        "test:1: decimal operation failed"
    assert lua_error(instance, "local D = require('decimal').new local x = D(1) + 'x' "
                               "return x") == \
        "test:1: incorrect value to convert to decimal as 2 argument"
    assert lua_error(instance, "local D = require('decimal').new local x = {} + D(1) "
                               "return x") == \
        "test:1: expected decimal, number or string as 1 argument"
    assert lua_error(instance, "local D = require('decimal').new local x = D(1) < nil "
                               "return x") == "test:1: attempt to compare decimal with nil"
    assert lua_error(instance, "local x = require('decimal').precision(1) return x") == \
        "test:1: expected cdata as 1 argument"
    assert lua_error(instance, "local x = require('decimal').round(1LL, 1) return x") == \
        "test:1: expected decimal as 1 argument"
    assert lua_error(instance, "return require('decimal').new()") == \
        "usage: decimal.new(value)"
    # the first operand is converted completely before the second one's type is checked
    assert lua_error(instance, "local D = require('decimal').new "
                               "local x = D('x') return x") == \
        "test:1: incorrect value to convert to decimal as 1 argument"


def test_comparisons_with_nil_and_null(instance):
    assert lua(instance, """
        local D = require('decimal').new
        return D(1) == nil, D(1) == box.NULL, D('1.5') == 1.5, 5LL == D('5.0'),
               D('-0') == D(0), D(1) <= '1'""") == [False, False, True, True, True, True]


# --------------------------------------------------------- Python <-> Lua

def test_decimals_cross_the_boundary_exactly(instance):
    values = [Decimal("1.5"), Decimal("-0.00"), Decimal("1E+2"), Decimal("0E-38"),
              Decimal("123456789012345678901234567890123456789")]
    back = lua(instance, """
        local out = {}
        for i, d in ipairs({...}) do out[i] = {require('decimal').is_decimal(d), d} end
        return out""", *values)[0]
    assert [flag for flag, _ in back] == [True] * len(values)
    assert [str(d) for _, d in back] == [str(d) for d in values]


def test_too_many_digits_fall_back_to_text(instance):
    assert lua(instance, "return type(...)", Decimal("1" * 40)) == ["string"]


def test_tuple_fields_become_decimals(instance):
    bridge = instance.runtime
    from spindle.lua.box.tuple import TupleBridge
    tuples = TupleBridge(bridge)
    assert texts(instance, "local t = ... return type(t[1]), t[1], type(t[2][1])",
                 tuples.to_lua([Decimal("-1.25"), [Decimal("1E+2")]])) == \
        ["cdata", "-1.25", "cdata"]


def test_lua_msgpack_agrees_with_the_engines_encoding(instance):
    values = ["1.5", "-1.5", "-0", "0", "100", "0.001", "1E+2", "0E+5", "-0E-5",
              "12345678901234567890123456789012345678", "1E-38", "-2E+3"]
    encoded = lua(instance, """
        local decimal, msgpack = require('decimal'), require('msgpack')
        local out = {}
        for i, v in ipairs({...}) do out[i] = msgpack.encode(decimal.new(v)) end
        return out""", *values)[0]
    # (a Lua string comes to Python as a str, its non-UTF-8 bytes as surrogate escapes)
    encoded = [text.encode("utf-8", "surrogateescape") for text in encoded]
    assert encoded == [packb(Decimal(v)) for v in values]
    decoded = lua(instance, """
        local msgpack, out = require('msgpack'), {}
        for i, v in ipairs({...}) do out[i] = msgpack.decode(v) end
        return out""", *[packb(Decimal(v)) for v in values])[0]
    assert [str(d) for d in decoded] == [str(unpackb(packb(Decimal(v)))) for v in values]


# ---------------------------------------------------------------- display

def test_display_yaml_json_and_lua_output(instance):
    def main():
        value = instance.runtime.load(
            "return require('decimal').new('-1.50')", "=t")()
        return to_display(instance.runtime, value)
    shown = instance.sched.run(main)
    assert type(shown) is DecimalText and shown == "-1.50"
    assert render_values([shown], None) == "---\n- -1.50\n...\n"
    assert render_lua_value(shown, False) == '"-1.50"'
    assert lua(instance, "local d = require('decimal').new('1E+2') "
                         "return require('json').encode({d}), require('yaml').encode(d)") == \
        ['["100"]', "--- 100\n...\n"]
