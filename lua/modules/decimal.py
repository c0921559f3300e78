"""Tarantool's `decimal` module (lua/modules/decimal.lua): decimal_t cdata values whose
arithmetic Python's decimal module does with the contexts of 2.6.0's decNumber.

decNumber's context in Tarantool: 38 digits, ROUND_HALF_UP, emax 37 (a result of 39
integer digits overflows) and emin -1, which makes every result with more than 38
digits after the point subnormal and rounds it to a scale of 38 (1e-40 is 0E-38).
decNumber's ln and log10 round differently (measured against 2.6.0): ln as with emin
0 (at most 37 digits after the point), log10 with no exponent limit at all.

The natives take texts: exact decimals as '-15E-1' (decimal.lua's decimal_sci), and
"raw" operands (strings, numbers printed with %.15g, int64 cdata) that are checked
against decNumber's syntax and rounded to the context first, as decimal_from_string
does. They answer (negative, digits, exponent), or (nil, what failed): 0 when the
operation failed, N when the N-th operand is not a valid decimal.
"""
from __future__ import annotations

import re
from decimal import (ROUND_HALF_UP, Context, Decimal, DivisionByZero, InvalidOperation,
                     Overflow)

from ..convert import decimal_parts
from ..runtime import Multi, read_source
from ..serialize import core

MAX_DIGITS = 38
_TRAPS = [InvalidOperation, DivisionByZero, Overflow]
_MIN_EMIN = -999999999999999999


def _context(emin: int, prec: int = MAX_DIGITS) -> Context:
    return Context(prec=prec, rounding=ROUND_HALF_UP, Emax=MAX_DIGITS - 1, Emin=emin,
                   traps=_TRAPS)


CONTEXT = _context(-1)
_LN_CONTEXT = _context(0)
_LOG10_CONTEXT = _context(_MIN_EMIN)

# decNumberFromString's syntax (no blanks, infinities, NaNs or hexadecimal).
_SYNTAX = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

_FAILED = Multi((None, 0))
_MAX_POWER_INT = 999999999     # decNumber raises to integer powers of up to 9 digits


def _power(x: Decimal, y: Decimal) -> Decimal:
    """decNumberPower: a negative base needs an integer exponent of at most 9 digits
    (beyond that decNumber goes through ln, which refuses it)."""
    if x < 0 and abs(y) > _MAX_POWER_INT:
        raise InvalidOperation("negative base, exponent beyond 9 digits")
    return CONTEXT.power(x, y)

_OPERATIONS = {
    b"add": CONTEXT.add,
    b"sub": CONTEXT.subtract,
    b"mul": CONTEXT.multiply,
    b"div": CONTEXT.divide,
    b"mod": CONTEXT.remainder,
    b"pow": _power,
    b"unm": lambda x, _: CONTEXT.minus(x),
    b"abs": lambda x, _: CONTEXT.abs(x),
    b"sqrt": lambda x, _: CONTEXT.sqrt(x),
    b"exp": lambda x, _: CONTEXT.exp(x),
    b"ln": lambda x, _: _LN_CONTEXT.ln(x),
    b"log10": lambda x, _: _LOG10_CONTEXT.log10(x),
}


def from_text(text: bytes) -> Decimal | None:
    """decimal_from_string: the text up to a NUL, rounded to the context; None when it
    is not a decimal or overflows."""
    text = text.split(b"\0", 1)[0]
    if _SYNTAX.fullmatch(text) is None:
        return None
    try:
        return CONTEXT.create_decimal(text.decode())
    except ArithmeticError:
        return None


def _operand(text: bytes, raw: bool) -> Decimal | None:
    return from_text(text) if raw else Decimal(text.decode())


def _answer(value: Decimal) -> Multi:
    parts = decimal_parts(value) if value.is_finite() else None
    return _FAILED if parts is None else Multi(parts)


def parse(text: bytes) -> Multi | None:
    value = from_text(text)
    return None if value is None else _answer(value)


def _operands(a: bytes, b: bytes, raw) -> tuple[Decimal | None, Decimal | None, int]:
    """Both operands (b may be empty: a unary function); the failing one's number."""
    raw = int(raw)
    x = _operand(a, raw & 1)
    if x is None:
        return None, None, 1
    y = _operand(b, raw & 2) if b else None
    if b and y is None:
        return None, None, 2
    return x, y, 0


def arith(op: bytes, a: bytes, b: bytes, raw) -> Multi:
    x, y, failed = _operands(a, b, raw)
    if failed:
        return Multi((None, failed))
    try:
        return _answer(_OPERATIONS[op](x, y))
    except ArithmeticError:
        return _FAILED


def compare(a: bytes, b: bytes, raw) -> Multi:
    x, y, failed = _operands(a, b, raw)
    if failed:
        return Multi((None, failed))
    return Multi(((x > y) - (x < y),))


def precision(value: Decimal) -> int:
    digits, exponent = len(value.as_tuple().digits), value.as_tuple().exponent
    return max(digits, -exponent) if exponent <= 0 else digits + exponent


def scale(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    return -exponent if exponent < 0 else 0


def round_value(value: Decimal, digits: int) -> Decimal:
    """decimal_round: `digits` after the point, half up. A scale out of 0..38, or not
    below the value's own, leaves it as it is. decNumber rounds to the digits the
    result keeps, in a context whose emin is -1 (0 when rounding to an integer): what
    falls below the wanted scale is subnormal and rounded off (0.000 rounded to 1 is
    0.0, 99.99 rounded to 1 is 100)."""
    own = scale(value)
    if digits < 0 or digits > MAX_DIGITS or digits >= own:
        return value
    keep = max(precision(value) - own + digits, 1)
    return _context(-1 if digits else 0, keep).plus(value)


def rescale_value(value: Decimal, digits: int) -> Decimal:
    """decimal_rescale: round to a smaller scale, pad with zeros to a larger one; a
    result that would show over 38 digits (zeros too) leaves the value as it is."""
    own = scale(value)
    if digits <= own:
        return round_value(value, digits)
    if precision(value) - own + digits > MAX_DIGITS:
        return value
    try:
        return CONTEXT.quantize(value, Decimal((0, (1,), -digits)))
    except ArithmeticError:
        return value


def round_native(a: bytes, digits, rescale) -> Multi:
    value = Decimal(a.decode())
    digits = int(digits)
    return _answer(rescale_value(value, digits) if rescale else round_value(value, digits))


def build(instance):
    runtime = instance.runtime
    lua_core = core(runtime)
    natives = {"parse": parse, "arith": arith, "compare": compare, "round": round_native}
    bridged = runtime.table({name: runtime.bridge(fn, convert_args=False)
                             for name, fn in natives.items()})
    runtime.convert.install_decimal(
        runtime.load(_SCI_OF, "=decimal")(lua_core.table), lua_core.table[b"make_decimal"])
    chunk = runtime.load(read_source("modules/decimal.lua"), "@decimal.lua")
    return chunk(lua_core.table, bridged)


_SCI_OF = """
local core = ...
local is_decimal, decimal_sci = core.is_decimal, core.decimal_sci
return function(value)
    if is_decimal(value) then
        return decimal_sci(value)
    end
end
"""
