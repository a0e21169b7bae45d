"""A safe arithmetic evaluator and the ``calculator(expression)`` tool the arithmetic set offers.

The expression is parsed with ``ast`` (``mode="eval"``) and walked over an allowlist: numbers
(int, decimal), ``+ - * / // % **``, unary ``-``/``+`` and parentheses. Everything else (names,
calls, attributes, subscripts, strings, comparisons, bit operators, ...) is rejected with a
``CalculatorError`` that says what was found. Nothing is ever passed to ``eval``.

Arithmetic is exact (``fractions.Fraction``): ``0.1 + 0.2`` is ``0.3``, ``7 / 2`` is ``3.5``, an
integral result is an int. Sizes are bounded so that no input can take the machine down: the
text's length, the number of nodes, an exponent's size and every intermediate result's size.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from fractions import Fraction

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
_UNARY = {ast.USub: "-", ast.UAdd: "+"}
_HINTS = {ast.BitXor: "'^' is not a power here: write '**'", ast.Name: "names are not allowed",
          ast.Call: "function calls are not allowed", ast.Attribute: "attributes are not allowed"}  # fmt: skip


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or its value is out of bounds; the message says why."""


@dataclass(frozen=True)
class CalculatorLimits:
    """Bounds on what one expression may cost."""

    max_chars: int = field(default=2000, metadata={"help": "longest expression text accepted"})
    max_nodes: int = field(default=500, metadata={"help": "most syntax-tree nodes accepted"})
    max_exponent: int = field(default=1000, metadata={"help": "largest |exponent| of a power"})
    max_bits: int = field(default=4096, metadata={"help": "largest numerator or denominator of any value, in bits"})


def _check_size(value: Fraction, limits: CalculatorLimits) -> Fraction:
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > limits.max_bits:
        raise CalculatorError(f"a value exceeds {limits.max_bits} bits")
    return value


def _power(base: Fraction, exponent: Fraction, limits: CalculatorLimits) -> Fraction:
    if exponent.denominator != 1:
        raise CalculatorError("only whole-number exponents are supported")
    e = exponent.numerator
    if abs(e) > limits.max_exponent:
        raise CalculatorError(f"exponent {e} is larger than {limits.max_exponent}")
    size = max(base.numerator.bit_length(), base.denominator.bit_length())
    if size > 1 and (size - 1) * abs(e) > limits.max_bits:  # |base| >= 2: the result would be too large
        raise CalculatorError(f"a value exceeds {limits.max_bits} bits")
    if base == 0 and e < 0:
        raise CalculatorError("division by zero")
    return _check_size(base**e, limits)


def _binary(op: str, left: Fraction, right: Fraction, limits: CalculatorLimits) -> Fraction:
    if op in ("/", "//", "%") and right == 0:
        raise CalculatorError("division by zero")
    if op == "+":
        return _check_size(left + right, limits)
    if op == "-":
        return _check_size(left - right, limits)
    if op == "*":
        return _check_size(left * right, limits)
    if op == "/":
        return _check_size(left / right, limits)
    if op == "//":
        return Fraction(left // right)
    if op == "%":
        return _check_size(left % right, limits)
    return _power(left, right, limits)


def _walk(node: ast.AST, limits: CalculatorLimits) -> Fraction:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CalculatorError(f"only numbers are allowed, found {type(value).__name__} {value!r:.40}")
        if isinstance(value, float) and not math.isfinite(value):
            raise CalculatorError("only finite numbers are allowed")
        return _check_size(Fraction(str(value)) if isinstance(value, float) else Fraction(value), limits)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _binary(_BINARY[type(node.op)], _walk(node.left, limits), _walk(node.right, limits), limits)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        value = _walk(node.operand, limits)
        return -value if isinstance(node.op, ast.USub) else value
    kind = type(node.op if isinstance(node, (ast.BinOp, ast.UnaryOp)) else node)
    hint = _HINTS.get(kind, f"{kind.__name__} is not arithmetic")
    raise CalculatorError(f"unsupported expression: {hint}")


def evaluate(expression: str, limits: CalculatorLimits = CalculatorLimits()) -> Fraction:
    """The exact value of an arithmetic expression; ``CalculatorError`` for anything else."""
    if not isinstance(expression, str):
        raise CalculatorError(f"the expression must be text, got {type(expression).__name__}")
    text = expression.strip().replace("\u2212", "-").replace("\u00d7", "*").replace("\u00f7", "/")
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) > limits.max_chars:
        raise CalculatorError(f"the expression is longer than {limits.max_chars} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not a valid expression ({exc.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise CalculatorError("the expression is nested too deeply or too large") from None
    if sum(1 for _ in ast.walk(tree)) > limits.max_nodes:
        raise CalculatorError(f"the expression has more than {limits.max_nodes} parts")
    try:
        return _walk(tree.body, limits)
    except RecursionError:
        raise CalculatorError("the expression is nested too deeply") from None


def format_number(value: Fraction) -> str:
    """An int when the value is whole, else a decimal (``repr`` of the nearest float)."""
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


def calculator(expression: str) -> str:
    """Evaluate a mathematical expression and return the numeric result. Use this tool for any arithmetic
    computation.

    Args:
        expression: A valid arithmetic expression to evaluate (e.g. '3 + 5 * 2', '(10 - 4) * 7').
    """
    return format_number(evaluate(expression))


# The schema the arithmetic set offers (the knowing-doing paper's own description of the tool).
CALCULATOR_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate a mathematical expression and return the numeric result. "
        "Use this tool for any arithmetic computation.",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "A valid arithmetic expression to evaluate (e.g. '3 + 5 * 2', '(10 - 4) * 7').",
                }
            },
            "required": ["expression"],
        },
    },
}
