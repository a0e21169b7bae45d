"""The four-way breakdown on hand-made labels, and the action run it reads: "called" is a parsed
call on the first step, never a substring; in a turn the safe calculator really runs."""

from __future__ import annotations

import pytest

from kate.agent.policy import Policy
from kate.diagnose.arithmetic import arithmetic_items
from kate.diagnose.breakdown import classify, four_way, four_way_by, markdown_table
from kate.diagnose.tasks import OfferedTools, VerifiableTask
from kate.llm.fake import FakeChatModel
from kate.toolcall import ToolCall

NECESSARY = {"a": True, "b": True, "c": True, "d": False, "e": False, "f": False, "g": False, "h": True}
CALLED = {"a": True, "b": False, "c": True, "d": True, "e": False, "f": False, "g": False, "h": False}


def test_four_way_on_hand_made_labels():
    table = four_way(NECESSARY, CALLED)
    assert table.counts() == {"N-C": 2, "N-NC": 2, "UN-C": 1, "UN-NC": 3}
    assert table.n == 8 and table.mismatch == 3 / 8
    assert table.underuse == 2 / 8 and table.overuse == 1 / 8
    assert table.underuse_among_necessary == 2 / 4 and table.overuse_among_unnecessary == 1 / 4
    assert table.to_dict()["call_rate"] == 3 / 8
    assert [classify(True, True), classify(True, False), classify(False, True), classify(False, False)] == [
        "N-C", "N-NC", "UN-C", "UN-NC"]  # fmt: skip


def test_per_group_tables_and_markdown():
    groups = {i: ("x" if i in "abcd" else "y") for i in NECESSARY}
    by = four_way_by(NECESSARY, CALLED, groups)
    assert by["x"].counts() == {"N-C": 2, "N-NC": 1, "UN-C": 1, "UN-NC": 0}
    assert by["y"].counts() == {"N-C": 0, "N-NC": 1, "UN-C": 0, "UN-NC": 3}
    text = markdown_table({"all": four_way(NECESSARY, CALLED), **by})
    assert "| all | 8 | 2 | 2 | 1 | 3 | 37.5% | 25.0% | 12.5% |" in text
    assert four_way({}, {}).mismatch is None


def test_labels_must_cover_the_same_items():
    with pytest.raises(ValueError, match="different items"):
        four_way({"a": True}, {"b": False})


ITEM = arithmetic_items(1, seed=0)[0]
CALL = '```json\n{"name": "calculator", "arguments": {"expression": "%s"}}\n```' % ITEM.meta["expression"]


def test_a_turn_runs_the_calculator_and_checks_the_final_answer():
    def answer_from_result(messages, tools, n):
        assert messages[-1]["role"] == "tool"
        return [f"The result is \\boxed{{{messages[-1]['content']}}}."]

    model = FakeChatModel([CALL, answer_from_result])
    task = VerifiableTask([ITEM])
    trace = task.solve(ITEM, Policy(model), seed=0)
    assert trace["called"] and trace["first_step"]["calls"][0]["name"] == "calculator"
    assert trace["steps"][0]["observations"][0]["content"] == str(ITEM.answer)
    assert task.score(ITEM, trace) == {"valid": True, "correct": True, "called": True}
    assert model.requests[0]["tools"] == list(ITEM.tools)


def test_named_tools_in_prose_are_not_a_call_and_malformed_calls_are_attempts():
    prose = FakeChatModel([f"I would use the calculator tool here. \\boxed{{{ITEM.answer}}}"])
    task = VerifiableTask([ITEM], act="step")
    trace = task.solve(ITEM, Policy(prose), 0)
    assert not trace["called"] and not trace["attempted"] and task.score(ITEM, trace)["correct"]
    broken = FakeChatModel(['{"name": "calculator", "arguments": {"expression": 1'])
    trace = task.solve(ITEM, Policy(broken), 0)
    assert not trace["called"] and trace["attempted"] and trace["first_step"]["parse_error"]
    assert task.score(ITEM, trace) == {"valid": False, "correct": False, "called": False}


def test_offered_tools_without_a_function_cannot_run():
    env = OfferedTools([{"type": "function", "function": {"name": "web_search", "parameters": {}}}], {})
    assert "cannot be run" in env.execute(ToolCall("web_search", {"query": "x"})).content
    assert "unknown function" in env.execute(ToolCall("other", {})).content
    with pytest.raises(ValueError, match="act"):
        VerifiableTask([ITEM], act="plan")
