"""The arithmetic set of the knowing-doing paper (arXiv 2605.14038): 13 seeded families of integer
expressions, asked as "What is {expr}?" with the answer requested in ``\\boxed{}``, and the
``calculator(expression)`` tool offered.

The families and their shares follow the authors' released 4,000 items (``FAMILY_SHARES``, out of
4,000): precedence chains of 4 operations on 2-3 digit numbers, single-digit +/- chains of 15-38
operations, small-integer (1-30) +/- chains of 20-26, 3x2-, 2x2- and 3x3-digit products, single
easy operations, negative subtractions, 4-digit sums and differences, ``(a+b)*(c-d)``,
``a+b*c-d*e``, two easy steps, small modulo. Each answer is computed here from the numbers (not by
parsing the text), so the tests can check it independently with the calculator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kate.diagnose.answers import AnswerChecker
from kate.diagnose.calculator import CALCULATOR_TOOL
from kate.diagnose.items import VerifiableItem

SYSTEM_PROMPT = ("You are a math assistant. Solve the arithmetic expression and respond with the numeric answer in "
                 "\\boxed{} \u2014 for example: \\boxed{42}.")  # fmt: skip  (the authors' own)
QUESTION = "What is {expression}?"
CHECKER = AnswerChecker(kind="number", extract="boxed", tolerance=0.0)

FAMILY_SHARES: dict[str, int] = {
    "precedence_chain": 480, "single_digit_pm_chain": 440, "small_int_pm_chain": 400, "three_by_two_mult": 360,
    "two_digit_mult": 360, "single_op_easy": 320, "negative_subtraction": 280, "three_by_three_mult": 280,
    "four_digit_add_sub": 240, "paren_mix": 240, "chain_mult_mix": 200, "two_step_easy": 200, "small_mod": 200,
}  # fmt: skip
FAMILIES = tuple(FAMILY_SHARES)


@dataclass(frozen=True)
class ArithmeticProblem:
    family: str
    expression: str
    answer: int


def chain_value(numbers: Sequence[int], ops: Sequence[str]) -> int:
    """The value of ``n0 op0 n1 op1 ...`` over + - * with the usual precedence (products first)."""
    terms, signs = [numbers[0]], [1]
    for op, number in zip(ops, numbers[1:], strict=True):
        if op == "*":
            terms[-1] *= number
        elif op in "+-":
            terms.append(number)
            signs.append(1 if op == "+" else -1)
        else:
            raise ValueError(f"chain_value handles + - * only, got {op!r}")
    return sum(s * t for s, t in zip(signs, terms))


def _chain(numbers: list[int], ops: list[str]) -> tuple[str, int]:
    text = " ".join([str(numbers[0])] + [f"{op} {n}" for op, n in zip(ops, numbers[1:])])
    return text, chain_value(numbers, ops)


def _pm_chain(rng: random.Random, low: int, high: int, min_ops: int, max_ops: int) -> tuple[str, int]:
    count = rng.randint(min_ops, max_ops) + 1
    return _chain([rng.randint(low, high) for _ in range(count)], [rng.choice("+-") for _ in range(count - 1)])


def _precedence_chain(rng: random.Random) -> tuple[str, int]:
    return _chain([rng.randint(10, 999) for _ in range(5)], [rng.choice("+-*") for _ in range(4)])


def _product(rng: random.Random, a: tuple[int, int], b: tuple[int, int]) -> tuple[str, int]:
    x, y = rng.randint(*a), rng.randint(*b)
    return f"{x} * {y}", x * y


def _single_op_easy(rng: random.Random) -> tuple[str, int]:
    return _chain([rng.randint(1, 99), rng.randint(1, 99)], [rng.choice("+-")])


def _negative_subtraction(rng: random.Random) -> tuple[str, int]:
    digits = rng.choice((3, 4))
    low, high = 10 ** (digits - 1) + 1, 10**digits - 1
    b = rng.randint(low + 1, high)
    a = rng.randint(low, b - 1)
    return f"{a} - {b}", a - b


def _four_digit_add_sub(rng: random.Random) -> tuple[str, int]:
    return _chain([rng.randint(1000, 9999), rng.randint(1000, 9999)], ["+" if rng.random() < 0.65 else "-"])


def _paren_mix(rng: random.Random) -> tuple[str, int]:
    a, b, c, d = (rng.randint(10, 99) for _ in range(4))
    return f"({a} + {b}) * ({c} - {d})", (a + b) * (c - d)


def _chain_mult_mix(rng: random.Random) -> tuple[str, int]:
    return _chain([rng.randint(10, 99) for _ in range(5)], ["+", "*", "-", "*"])


def _two_step_easy(rng: random.Random) -> tuple[str, int]:
    return _chain([rng.randint(1, 99) for _ in range(3)], [rng.choice("+-") for _ in range(2)])


def _small_mod(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(100, 999), rng.randint(3, 19)
    return f"{a} % {b}", a % b


GENERATORS: dict[str, Callable[[random.Random], tuple[str, int]]] = {
    "precedence_chain": _precedence_chain,
    "single_digit_pm_chain": lambda rng: _pm_chain(rng, 1, 9, 15, 38),
    "small_int_pm_chain": lambda rng: _pm_chain(rng, 1, 30, 20, 26),
    "three_by_two_mult": lambda rng: _product(rng, (100, 999), (10, 99)),
    "two_digit_mult": lambda rng: _product(rng, (15, 99), (15, 99)),
    "single_op_easy": _single_op_easy,
    "negative_subtraction": _negative_subtraction,
    "three_by_three_mult": lambda rng: _product(rng, (100, 999), (100, 999)),
    "four_digit_add_sub": _four_digit_add_sub,
    "paren_mix": _paren_mix,
    "chain_mult_mix": _chain_mult_mix,
    "two_step_easy": _two_step_easy,
    "small_mod": _small_mod,
}


def family_counts(n: int, families: Sequence[str] = FAMILIES) -> dict[str, int]:
    """How many of ``n`` items each family gets: proportional to its share (largest remainders)."""
    unknown = [f for f in families if f not in FAMILY_SHARES]
    if unknown:
        raise ValueError(f"unknown arithmetic families {unknown}; known: {list(FAMILIES)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    total = sum(FAMILY_SHARES[f] for f in families)
    exact = {f: n * FAMILY_SHARES[f] / total for f in families}
    counts = {f: int(v) for f, v in exact.items()}
    for f in sorted(families, key=lambda f: (counts[f] - exact[f], families.index(f)))[: n - sum(counts.values())]:
        counts[f] += 1
    return counts


def generate_problems(n: int, seed: int = 0, families: Sequence[str] = FAMILIES) -> list[ArithmeticProblem]:
    """``n`` distinct problems, the same for the same ``(n, seed, families)``, in a seeded order."""
    rng = random.Random(seed)
    problems: list[ArithmeticProblem] = []
    seen: set[str] = set()
    for family, count in family_counts(n, tuple(families)).items():
        made, tries = 0, 0
        while made < count:
            expression, answer = GENERATORS[family](rng)
            tries += 1
            if expression in seen and tries < 100 * count:
                continue
            seen.add(expression)
            problems.append(ArithmeticProblem(family, expression, answer))
            made += 1
    rng.shuffle(problems)
    return problems


def arithmetic_items(n: int, seed: int = 0, families: Sequence[str] = FAMILIES,
                     system_prompt: str = SYSTEM_PROMPT) -> list[VerifiableItem]:  # fmt: skip
    """The problems as verifiable items (category = family), the calculator offered."""
    return [
        VerifiableItem(
            id=f"arithmetic-s{seed}-{i:05d}",
            category=p.family,
            messages=({"role": "system", "content": system_prompt},
                      {"role": "user", "content": QUESTION.format(expression=p.expression)}),  # fmt: skip
            answer=p.answer,
            checker=CHECKER,
            tools=(CALCULATOR_TOOL,),
            meta={"expression": p.expression},
        )
        for i, p in enumerate(generate_problems(n, seed, families))
    ]
