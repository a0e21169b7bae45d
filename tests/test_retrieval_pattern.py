"""Knowledge as a call pattern (kate/retrieval/pattern.py, the guarded_pattern template): an example's
calls rewritten onto the current tools, so the number of calls transfers and no foreign function
name or example value reaches the prompt."""

from __future__ import annotations

import json

import pytest

from kate.knowledge.entries import KnowledgeEntry
from kate.retrieval import render_knowledge, template_from
from kate.retrieval.pattern import UNKNOWN, pattern_calls, target_function
from kate.retrieval.retriever import Hit


def tool(name: str, *params: str, required: tuple[str, ...] | None = None) -> dict:
    props = {p: {"type": "string"} for p in params}
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": list(params if required is None else required)}}}  # fmt: skip


BMI = tool("calculate_bmi", "height", "weight")
TAX = tool("sales_tax", "amount", "city", "state", required=("amount", "city"))
EXAMPLE = [{"name": "math.hypot", "arguments": {"x": 3, "y": 4}}, {"name": "math.hypot", "arguments": {"x": 5, "y": 12}}]


def test_each_call_maps_to_the_same_name_the_only_function_or_the_best_parameter_overlap():
    functions = {t["function"]["name"]: t["function"] for t in (BMI, TAX)}
    assert target_function({"name": "sales_tax", "arguments": {}}, functions) == "sales_tax"
    assert target_function({"name": "other", "arguments": {"city": "x"}}, functions) == "sales_tax"
    assert target_function({"name": "other", "arguments": {"weight": 1}}, functions) == "calculate_bmi"
    assert target_function({"name": "other", "arguments": {"zzz": 1}}, functions) == UNKNOWN
    assert target_function({"name": "other", "arguments": {"zzz": 1}}, {"only": BMI["function"]}) == "only"


def test_the_pattern_keeps_the_number_of_calls_and_hides_every_name_and_value():
    text = pattern_calls(EXAMPLE, [BMI])
    rows = [json.loads(line) for line in text.splitlines()]
    assert rows == [{"name": "calculate_bmi", "arguments": {"height": "<height 1>", "weight": "<weight 1>"}},
                    {"name": "calculate_bmi", "arguments": {"height": "<height 2>", "weight": "<weight 2>"}}]  # fmt: skip
    assert "hypot" not in text and "12" not in text
    assert json.loads(pattern_calls([{"name": "x", "arguments": {"amount": 1}}], [TAX]))["arguments"] == {
        "amount": "<amount 1>", "city": "<city 1>"}  # required parameters only


def test_the_guarded_pattern_template_renders_on_the_current_tools():
    entry = KnowledgeEntry(id="ST:parallel_1#t0", type="ST", text="Hypotenuse of 3, 4 and of 5, 12?",
                           payload={"question": "Hypotenuse of 3, 4 and of 5, 12?", "calls": EXAMPLE})  # fmt: skip
    template = template_from({"preset": "guarded_pattern"})
    text = render_knowledge([Hit(entry, 0.9)], template, request="BMI of two people?", tools=[BMI])
    assert text.count('{"name": "calculate_bmi"') == 2 and "math.hypot" not in text
    assert text.endswith("BMI of two people?") and "ANOTHER user" in text
    plain = render_knowledge([Hit(entry, 0.9)], template, request="BMI of two people?")  # no tools: as stored
    assert "math.hypot" in plain


def test_a_fenced_list_shows_the_calls_as_one_reply_with_several_calls():
    entry = KnowledgeEntry(id="ST:parallel_1#t0", type="ST", text="Hypotenuse of 3, 4 and of 5, 12?",
                           payload={"question": "Hypotenuse of 3, 4 and of 5, 12?", "calls": EXAMPLE})  # fmt: skip
    template = template_from({"preset": "guarded_pattern", "call_block": "fenced_list"})
    text = render_knowledge([Hit(entry, 0.9)], template, request="BMI of two people?", tools=[BMI])
    start = text.index("```json\n") + len("```json\n")
    block = text[start:text.index("\n```", start)]
    calls = json.loads(block)
    assert [c["name"] for c in calls] == ["calculate_bmi", "calculate_bmi"] and "hypot" not in block
    shown = render_knowledge([Hit(entry, 0.9)], template_from({"call_format": "json", "call_block": "fenced_list"}))
    assert '{"name": "math.hypot", "arguments": {"x": 5, "y": 12}}' in shown  # not a pattern: as stored
    with pytest.raises(ValueError, match="call_block"):
        template_from({"call_block": "table"})
    with pytest.raises(ValueError, match="needs call_format=json"):
        template_from({"call_block": "fenced_list", "call_format": "python"})
