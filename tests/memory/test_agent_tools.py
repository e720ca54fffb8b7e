"""The offline tools: a calculator that never evaluates code, and the clock."""

from __future__ import annotations

from datetime import datetime

import pytest

from memory import calculator, current_time
from memory.agent import tool_schema
from memory.agent.tools import CalculatorError


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("(3 + 4) * 2 ** 3", "56"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("-5 % 3", "1"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(pi, 2)", "3.14"),
        ("1e3 + 1", "1001"),
    ],
)
def test_the_calculator_does_arithmetic(expression: str, result: str) -> None:
    assert calculator(expression) == result


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("__import__('os').system('true')", "not allowed"),
        ("open('/etc/passwd')", "not allowed"),
        ("(1).__class__", "not allowed"),
        ("x + 1", "not allowed"),
        ("1 / 0", "division by zero"),
        ("9 ** 9 ** 9", "exponents above"),
        ("'a' * 3", "not allowed"),
        ("True + 1", "booleans"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 501, "longer than 500"),
    ],
)
def test_the_calculator_refuses_anything_but_arithmetic(expression: str, error: str) -> None:
    with pytest.raises(CalculatorError, match=error):
        calculator(expression)


def test_the_current_time_is_iso_8601_in_the_timezone_asked() -> None:
    paris = datetime.fromisoformat(current_time("Europe/Paris"))
    utc = datetime.fromisoformat(current_time())
    assert paris.utcoffset() is not None
    assert utc.tzname() == "UTC"
    assert abs((paris - utc).total_seconds()) < 5
    with pytest.raises(ValueError, match="unknown timezone"):
        current_time("Mars/Olympus_Mons")


def test_both_tools_describe_themselves_to_the_model() -> None:
    schema = tool_schema(calculator)["function"]
    assert schema["parameters"]["required"] == ["expression"]
    assert "arithmetic" in schema["description"]
    assert tool_schema(current_time)["function"]["parameters"]["required"] == []
