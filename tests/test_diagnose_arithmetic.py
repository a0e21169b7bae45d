"""The arithmetic set (seeded, 13 families, answers right by the calculator), the answer checker,
and a user's own JSONL set."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from kate.diagnose.answers import AnswerChecker, extract_boxed, parse_number
from kate.diagnose.arithmetic import (FAMILIES, FAMILY_SHARES, arithmetic_items, chain_value, family_counts,
                                      generate_problems)  # fmt: skip
from kate.diagnose.calculator import CALCULATOR_TOOL, evaluate
from kate.diagnose.items import task_set_sha256
from kate.diagnose.user_set import load_user_set


def test_same_seed_same_items_and_another_seed_others():
    assert generate_problems(130, seed=7) == generate_problems(130, seed=7)
    assert generate_problems(130, seed=7) != generate_problems(130, seed=8)
    a, b = arithmetic_items(50, seed=3), arithmetic_items(50, seed=3)
    assert task_set_sha256(a) == task_set_sha256(b) != task_set_sha256(arithmetic_items(50, seed=4))


def test_every_answer_is_what_the_calculator_says():
    problems = generate_problems(1300, seed=0)
    assert all(evaluate(p.expression) == p.answer for p in problems)
    assert len({p.expression for p in problems}) == len(problems)


def test_thirteen_families_in_the_authors_shares():
    assert len(FAMILIES) == 13 and sum(FAMILY_SHARES.values()) == 4000
    counts = Counter(p.family for p in generate_problems(4000, seed=1))
    assert counts == Counter(FAMILY_SHARES)
    assert sum(family_counts(1001).values()) == 1001
    assert family_counts(26, ("paren_mix", "small_mod")) == {"paren_mix": 14, "small_mod": 12}
    with pytest.raises(ValueError, match="unknown arithmetic families"):
        family_counts(10, ("algebra",))


def test_family_shapes():
    by = {}
    for p in generate_problems(2000, seed=2):
        by.setdefault(p.family, []).append(p.expression)
    ops = lambda e: sum(e.count(f" {o} ") for o in "+-*%")  # noqa: E731
    assert all(ops(e) == 4 for e in by["precedence_chain"])
    assert all(15 <= ops(e) <= 38 for e in by["single_digit_pm_chain"])
    assert all(20 <= ops(e) <= 26 for e in by["small_int_pm_chain"])
    assert all(e.startswith("(") and ") * (" in e for e in by["paren_mix"])
    assert all(evaluate(e) < 0 for e in by["negative_subtraction"])
    assert all(" % " in e for e in by["small_mod"])


def test_chain_value_uses_precedence():
    assert chain_value([2, 3, 4, 5], ["+", "*", "-"]) == 2 + 3 * 4 - 5
    with pytest.raises(ValueError):
        chain_value([1, 2], ["/"])


def test_items_ask_the_question_and_offer_the_calculator():
    item = arithmetic_items(5, seed=0)[0]
    assert item.question == f"What is {item.meta['expression']}?"
    assert "\\boxed{}" in item.messages[0]["content"] and item.tools == (CALCULATOR_TOOL,)
    assert item.check(f"So the answer is \\boxed{{{item.answer}}}.")
    assert not item.check(f"The answer is {item.answer}.")  # the set asks for \boxed{}
    assert not item.check(f"\\boxed{{{item.answer + 1}}}")


@pytest.mark.parametrize(
    ("reply", "right"),
    [("\\boxed{40127}", True), ("\\boxed{40,127}.", True), ("\\boxed{40127.0}", True), ("\\boxed{\\text{40127}}", True),
     ("\\boxed{= 40127}", True), ("\\boxed{40127} then \\boxed{3}", False), ("\\boxed{40128}", False), ("40127", False),
     ("\\boxed{", False), ("", False), (None, False)],
)  # fmt: skip
def test_boxed_number_checking(reply, right):
    assert AnswerChecker(kind="number", extract="boxed", tolerance=0).check(reply, 40127) is right


def test_answer_reading_helpers():
    assert extract_boxed("a \\boxed{\\frac{1}{2}} b") == "\\frac{1}{2}"
    assert parse_number("\\frac{7}{2}") == parse_number("7/2") == parse_number("3.5")
    assert parse_number("\u2212215") == -215 and parse_number("1,2345") is None and parse_number("abc") is None
    assert AnswerChecker().check("I think it is 12.", 12)  # boxed_or_text falls back to the last number
    assert AnswerChecker(kind="exact").check("\\boxed{ Paris }", "paris")
    assert AnswerChecker(kind="contains").check("It is Paris, France.", "paris")
    assert AnswerChecker(kind="regex", pattern=r"\bParis\b").check("Paris", None)
    with pytest.raises(ValueError, match="kind"):
        AnswerChecker(kind="fuzzy")
    with pytest.raises(ValueError, match="numeric answer"):
        AnswerChecker().check("1", "many")


def test_user_set_from_jsonl(tmp_path):
    path = tmp_path / "mine.jsonl"
    lines = [
        {"id": "q1", "question": "What is 17 * 23?", "answer": 391, "tools": ["calculator"], "necessary": True},
        {"question": "Capital of France?", "answer": "Paris", "checker": "contains", "system": "Be brief.",
         "tools": [{"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}]},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    first, second = load_user_set(path)
    assert first.id == "q1" and first.tools == (CALCULATOR_TOOL,) and first.necessary is True
    assert first.checker.kind == "number" and first.check("391")
    assert second.id == "line-2" and second.messages[0] == {"role": "system", "content": "Be brief."}
    assert second.tools[0]["function"]["name"] == "web_search" and second.necessary is None
    assert second.check("It is Paris.")


@pytest.mark.parametrize(
    ("line", "message"),
    [('{"answer": 1}', "'question'"), ('{"question": "q"}', "'answer' is required"),
     ('{"question": "q", "answer": "x", "checker": "number"}', "numeric answer"),
     ('{"question": "q", "answer": 1, "tools": ["search"]}', "unknown built-in tool"),
     ('{"question": "q", "answer": 1, "colour": 2}', "unknown field"),
     ('{"question": "q", "answer": 1, "necessary": "yes"}', "'necessary'"),
     ('{"question": "q", "answer": 1, "checker": {"kind": "regex"}}', "pattern"), ("not json", "not valid JSON")],
)  # fmt: skip
def test_user_set_errors_name_the_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "ok", "answer": 1}\n' + line + "\n")
    with pytest.raises(ValueError, match=message) as info:
        load_user_set(path)
    assert f"{path}:2" in str(info.value)
