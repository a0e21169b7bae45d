"""Strict vs keyword scoring: prose that names the right tool is credited by the lenient keyword
harness and refused by BFCL's official checker (kate's strict score)."""

from __future__ import annotations

from kate.bfcl.checkers import score_single_turn
from kate.bfcl.data import load_entries
from kate.diagnose.keyword import compare, keyword_verdict, tool_names
from kate.llm.base import completion_from_text


def test_prose_naming_the_tool_is_credited_by_keywords_but_not_strictly():
    entry = load_entries("simple_python", "test", 1)[0]  # math.factorial of 5
    names = tool_names(entry.tools)
    prose = "You can use math.factorial with number=5 to get the answer."
    completion = completion_from_text(prose)
    assert not score_single_turn(entry, list(completion.tool_calls), completion.parse_error)["valid"]
    assert keyword_verdict(prose, names).credited and keyword_verdict(prose, names).reason == "tool named"
    call = '{"name": "math.factorial", "arguments": {"number": 5}}'
    assert score_single_turn(entry, list(completion_from_text(call).tool_calls))["valid"]
    assert keyword_verdict(call, names).reason == "name pattern"
    assert not keyword_verdict("I cannot help with that.", names).credited


def test_irrelevance_is_credited_by_keywords_when_no_tool_is_named():
    assert keyword_verdict("The weather is nice.", ["get_weather"], expects_call=False).credited
    assert not keyword_verdict("I would call get_weather.", ["get_weather"], expects_call=False).credited


def test_compare_counts_agreements_and_lists_disagreements():
    records = [
        {"id": "a", "category": "simple_python", "valid": False, "outputs": ["use f(x=1)"], "vote": None},
        {"id": "b", "category": "simple_python", "valid": True, "outputs": ['{"name": "f", "arguments": {}}'], "vote": None},
        {"id": "c", "category": "irrelevance", "valid": True, "outputs": ["no idea", "f"],
         "vote": {"chosen": {"samples": [0, 1]}}},
    ]  # fmt: skip
    result = compare(records, {"a": ["f"], "b": ["f"], "c": ["f"]})
    assert result["all"] == {"n": 3, "strict": 2, "keyword": 3, "keyword_only": 1, "strict_only": 0}
    assert [d["id"] for d in result["disagreements"]] == ["a"] and result["disagreements"][0]["keyword_reason"] == "tool named"
