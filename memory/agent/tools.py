"""Tools an agent can use without a network: arithmetic and the current time.

Both are plain functions, ready for ``ReActAgent(tools=[calculator, current_time])``.
The calculator parses the expression into a syntax tree and evaluates only
numbers and arithmetic operators, never ``eval``: a model's text is input, not code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 1000  # 10 ** 1000 is already past any float; bigger ints only burn CPU
MAX_RESULT_DIGITS = 1000

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "log": math.log,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculatorError(ValueError):
    """An expression the calculator does not accept (syntax, names, sizes)."""


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Args:
        expression: numbers with + - * / // % ** and parentheses; also sqrt, abs,
            round, log, exp, sin, cos, tan, pi and e. Example: "(3 + 4) * 2 ** 3".
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise CalculatorError(f"not an arithmetic expression: {error.msg}") from None
    value = _evaluate(tree.body)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    text = str(value)
    if len(text) > MAX_RESULT_DIGITS:
        raise CalculatorError(f"the result has more than {MAX_RESULT_DIGITS} digits")
    return text


def _evaluate(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise CalculatorError("booleans are not numbers here")
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponents above {MAX_EXPONENT} are refused")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        args = [_evaluate(arg) for arg in node.args]
        try:
            return _FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError, OverflowError) as error:
            raise CalculatorError(f"{node.func.id}: {error}") from None
    raise CalculatorError(f"not allowed in an arithmetic expression: {ast.unparse(node)!r}")


def current_time(timezone: str = "UTC") -> str:
    """The current date and time, ISO 8601, in a timezone.

    Args:
        timezone: an IANA name such as "Europe/Paris"; UTC when omitted.
    """
    try:
        zone = UTC if timezone in ("", "UTC") else ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {timezone!r}") from None
    return datetime.now(zone).isoformat(timespec="seconds")
