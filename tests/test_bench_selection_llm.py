"""kate.eval.knowledge_effect's tally (bench/selection_llm.py runs it) on a fake answerer and fake
retrieval: each (question, arm) that receives knowledge is answered and recorded once; a rerun answers
nothing, appends nothing, and counts the same."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kate.eval.knowledge_effect import stored, tally


def _entry(i: int) -> SimpleNamespace:
    return SimpleNamespace(id=f"simple_python_{i}", tools=[], turns=[[{"role": "user", "content": f"question {i}"}]])


def _knowledge(hit_every: int):
    def retrieve(question: str, history: list, context) -> SimpleNamespace | None:
        i = int(question.split()[-1])
        return SimpleNamespace(text=f"example for {i}", hits=(f"st_{i}",)) if i % hit_every == 0 else None

    return retrieve


def test_a_rerun_adds_no_record_twice_and_counts_the_same(tmp_path):
    records = tmp_path / "selection_llm.records.jsonl"
    questions = {"simple_python": [_entry(i) for i in range(6)]}
    knowledge_of = {"a": _knowledge(2), "b": _knowledge(3)}
    asked = []

    def answer(entry, knowledge):
        asked.append((entry.id, knowledge))
        return {"valid": knowledge is not None and entry.id.endswith("0"), "calls": []}

    first = tally(questions, ["a", "b"], knowledge_of, answer, records)
    lines = records.read_text().splitlines()
    keys = [(json.loads(line)["id"], json.loads(line)["arm"]) for line in lines]
    assert len(keys) == len(set(keys)) == 5  # a: 0, 2, 4; b: 0, 3
    assert sum(k is None for _, k in asked) == 4  # the direct answer once per question that got knowledge
    asked.clear()

    second = tally(questions, ["a", "b"], knowledge_of, answer, records)
    assert asked == [] and records.read_text().splitlines() == lines
    as_dicts = lambda counts: {arm: {cat: dict(c) for cat, c in per.items()} for arm, per in counts.items()}  # noqa: E731
    assert as_dicts(second) == as_dicts(first)
    assert as_dicts(first)["a"]["simple_python"] == {"questions": 6, "with_knowledge": 3, "direct_correct": 0,
                                                     "knowledge_correct": 1, "fixed": 1, "broken": 0}  # fmt: skip


def test_a_torn_last_line_is_answered_again_and_replaced(tmp_path):
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"id": "simple_python_0", "arm": "a", "direct": False, "with_knowledge": True})
                       + "\n" + '{"id": "simple_python_2", "ar')  # fmt: skip
    with pytest.warns(UserWarning, match="truncated last line"):
        assert set(stored(records)) == {("simple_python_0", "a")}
    questions = {"simple_python": [_entry(0), _entry(2)]}
    with pytest.warns(UserWarning, match="truncated last line"):
        tally(questions, ["a"], {"a": _knowledge(2)}, lambda entry, k: {"valid": True, "calls": []}, records)
    assert [(r["id"], r["arm"]) for r in map(json.loads, records.read_text().splitlines())] == [
        ("simple_python_0", "a"), ("simple_python_2", "a")]
