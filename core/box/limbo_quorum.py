"""replication_synchro_quorum: a number, or a formula of N (the form 2.7+ accepts).

2.6.0 takes only a number. Later versions also take an expression such as 'N/2+1',
where N is the number of replicas registered in `_cluster`; it is evaluated again
whenever `_cluster` changes. Tarantool evaluates it as Lua; here a small arithmetic
subset is parsed with Python's `ast` (numbers, N, + - * / % ^, unary minus,
parentheses, math.floor/ceil/min/max), so no code can run. The result is floored.

At box.cfg time the formula is checked for N = 1 and N = 31 (any replica set size
the vclock allows), as later versions do, so 'N+1' and 'N-1' are refused. A string
that is no formula at all gets 2.6.0's "should be of type number" (cfg.py).
"""
from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable

from spindle.core.iproto.errors import ClientError, ErrorCode

OPTION = "replication_synchro_quorum"
VCLOCK_MAX = 32
QUORUM_MIN, QUORUM_MAX = 1, VCLOCK_MAX - 1

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b if b else math.copysign(math.inf, a) if a else math.nan,
    ast.Mod: lambda a, b: a - math.floor(a / b) * b if b else math.nan,
    ast.Pow: operator.pow}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "floor": math.floor, "ceil": math.ceil, "min": min, "max": max}


class FormulaError(ValueError):
    pass


def _evaluate(node: ast.AST, n: int) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, n)
    if isinstance(node, ast.Constant) and (type(node.value) is int or type(node.value) is float):
        return node.value
    if isinstance(node, ast.Name) and node.id == "N":
        return n
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand, n)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left, n), _evaluate(node.right, n))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "math"
            and node.func.attr in _FUNCTIONS and not node.keywords and node.args):
        return _FUNCTIONS[node.func.attr](*(_evaluate(arg, n) for arg in node.args))
    raise FormulaError("Expression should return a number")


def _parse(expr: str) -> ast.Expression:
    # Lua's power operator is ^; Python's ^ is xor, so translate it.
    try:
        return ast.parse(expr.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise FormulaError(f"Invalid expression '{expr}'") from None


def evaluate_formula(expr: str, replica_count: int) -> int:
    """The quorum the formula gives for `replica_count` replicas (not clamped)."""
    value = _evaluate(_parse(expr), replica_count)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise FormulaError("Expression should return a number")
    return int(math.floor(value))


def is_formula(value: Any) -> bool:
    """A string that evaluates to a number (whatever its range)."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return False
    try:
        evaluate_formula(value, 1)
    except (FormulaError, ArithmeticError):
        return False
    return True


def _out_of_range(quorum: int, replica_count: int) -> ClientError:
    return ClientError(ErrorCode.ER_CFG, OPTION,
                       f"the formula is evaluated to the quorum {quorum} for replica "
                       f"number {replica_count}, which is out of range "
                       f"[{QUORUM_MIN};{QUORUM_MAX}]")


def check_formula(expr: str) -> None:
    """box.cfg's check of a formula: it must evaluate, in range, for 1 and 31."""
    for replica_count in (1, QUORUM_MAX):
        try:
            quorum = evaluate_formula(expr, replica_count)
        except (FormulaError, ArithmeticError) as exc:
            raise ClientError(ErrorCode.ER_CFG, OPTION, str(exc)) from None
        if not QUORUM_MIN <= quorum <= QUORUM_MAX:
            raise _out_of_range(quorum, replica_count)


def synchro_quorum(value: Any, replica_count: int) -> int:
    """The quorum in force: the number itself, or the formula for the registered
    replicas, kept within [1, 31] (a replica set may shrink below what a checked
    formula was meant for)."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            quorum = evaluate_formula(value, max(1, replica_count))
        except (FormulaError, ArithmeticError):
            quorum = QUORUM_MIN
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        quorum = int(value) if math.isfinite(value) else QUORUM_MIN
    else:
        quorum = QUORUM_MIN
    return max(QUORUM_MIN, min(QUORUM_MAX, quorum))
