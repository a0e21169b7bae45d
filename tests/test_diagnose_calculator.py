"""The safe calculator: plain arithmetic evaluates exactly; anything else is refused with a reason,
and nothing is ever handed to eval."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kate.diagnose.calculator import CALCULATOR_TOOL, CalculatorError, CalculatorLimits, calculator, evaluate
from kate.envs.python_functions import PythonFunctionsEnv
from kate.toolcall import ToolCall


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2 + 3 * 4", "14"), ("(84 + 23) * (87 - 69)", "1926"), ("7 / 2", "3.5"), ("0.1 + 0.2", "0.3"),
     ("-5 // 2", "-3"), ("135 % 7", "2"), ("2 ** 10", "1024"), ("2 ** -2", "0.25"), ("--3", "3"), ("+4", "4"),
     ("95 + 26 * 38 - 22 * 59", "-215"), (" 12 \u00d7 3 \u2212 1 ", "35")],
)  # fmt: skip
def test_arithmetic_evaluates_exactly(expression, value):
    assert calculator(expression) == value


def test_exact_fractions():
    assert evaluate("1 / 3 + 1 / 6") == Fraction(1, 2)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [("x + 1", "names"), ("__import__('os').system('true')", "function calls"), ("(1).real", "attributes"),
     ("'a' * 3", "only numbers"), ("b'1'", "only numbers"), ("True + 1", "only numbers"), ("1j", "only numbers"),
     ("[1, 2]", "List"), ("{1: 2}", "Dict"), ("1 < 2", "Compare"), ("1 if 1 else 2", "IfExp"),
     ("2 ^ 3", "write '\\*\\*'"),
     ("1 << 2", "LShift"), ("~1", "Invert"), ("not 1", "Not"), ("lambda: 1", "Lambda"), ("(1, 2)", "Tuple"),
     ("1 = 1", "not a valid expression"), ("", "empty"), ("1e999", "finite"), ("1 / 0", "division by zero"),
     ("5 % 0", "division by zero"), ("0 ** -1", "division by zero"), ("2 ** 0.5", "whole-number exponents"),
     ("2 ** 100000", "exponent"), ("10 ** 10 ** 10", "exponent"), ("999 ** 999", "bits"),
     ("(" * 300 + "1" + ")" * 300, "nested|valid"), ("1+" * 400 + "1", "parts")],
)  # fmt: skip
def test_everything_but_arithmetic_is_refused(expression, reason):
    with pytest.raises(CalculatorError, match=reason):
        evaluate(expression)


def test_limits_are_configurable_and_text_is_required():
    with pytest.raises(CalculatorError, match="longer than 5"):
        evaluate("1 + 2 + 3", CalculatorLimits(max_chars=5))
    with pytest.raises(CalculatorError, match="must be text"):
        evaluate(12)  # type: ignore[arg-type]


def test_the_tool_schema_is_the_functions_own_and_errors_become_observations():
    env = PythonFunctionsEnv([calculator])
    assert env.tools() == [CALCULATOR_TOOL]
    assert env.execute(ToolCall("calculator", {"expression": "6 * 7"})).content == "42"
    refused = env.execute(ToolCall("calculator", {"expression": "open('/etc/passwd')"}))
    assert not refused.ok and "function calls are not allowed" in refused.content
