"""Plan vs execute on a scripted model: the plan is parsed strictly (a malformed one is a recorded
failure), the execution is the acting task's own parsed call, and the summary compares both with
necessity."""

from __future__ import annotations

import pytest

from kate.agent.policy import Policy
from kate.diagnose.arithmetic import arithmetic_items
from kate.diagnose.plan_execute import (PlanError, PlanExecuteTask, parse_plan, plan_execute_summary,
                                        plan_prompt)  # fmt: skip
from kate.diagnose.tasks import VerifiableTask
from kate.eval.runner import open_run, run_task
from kate.llm.fake import FakeChatModel

TOOLS = ["calculator"]


def test_valid_plans_parse():
    plan = parse_plan('{"call": true, "tool": "calculator", "arguments": {"expression": "3 * 4"}}', TOOLS)
    assert plan.to_dict() == {"call": True, "tool": "calculator", "arguments": {"expression": "3 * 4"}}
    fenced = parse_plan('```json\n{"call": false, "tool": null, "arguments": {}}\n```', TOOLS)
    assert fenced.call is False and fenced.tool is None
    assert parse_plan('{"call": false, "tool": null}', TOOLS).arguments == {}


@pytest.mark.parametrize("text, says", [
    ("", "empty"),
    ("I will use the calculator.", "not one JSON object"),
    ('{"call": true, "tool": "calculator"} and then I answer', "not one JSON object"),
    ('["call"]', "must be a JSON object"),
    ('{"call": "yes", "tool": "calculator", "arguments": {}}', "'call' must be true or false"),
    ('{"call": true, "tool": "search", "arguments": {}}', "must name an offered tool"),
    ('{"call": false, "tool": "calculator", "arguments": {}}', "does not call"),
    ('{"call": true, "tool": "calculator", "arguments": "3*4"}', "'arguments' must be an object"),
    ('{"call": true, "tool": "calculator", "arguments": {}, "why": "hard"}', "unknown plan field"),
])  # fmt: skip
def test_malformed_plans_are_errors_that_say_why(text, says):
    with pytest.raises(PlanError, match=says):
        parse_plan(text, TOOLS)


def test_plan_prompt_describes_tools_in_text():
    items = arithmetic_items(1, seed=0)
    prompt = plan_prompt(items[0].messages, items[0].tools)
    assert prompt[0] == items[0].messages[0]
    assert prompt[-1]["content"].startswith(items[0].question) and '"name": "calculator"' in prompt[-1]["content"]
    assert items[0].messages[-1]["content"] == items[0].question  # the item is not changed


ITEMS = arithmetic_items(4, seed=3)
PLANS = [
    '{"call": true, "tool": "calculator", "arguments": {"expression": "1"}}',  # plans a call, calls
    '{"call": true, "tool": "calculator", "arguments": {}}',  # plans a call, answers
    "I think I will just answer.",  # malformed plan, answers
    '{"call": false, "tool": null, "arguments": {}}',
]  # plans no call, calls
CALLS = [True, False, False, True]


def scripted(messages, tools, n):
    """The plan request (no tools offered, the instruction in the text) or the acting request."""
    index = next(i for i, item in enumerate(ITEMS) if messages[-1]["content"].startswith(item.question))
    if tools is None:
        return [PLANS[index]] * n
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1 + 1"}}\n</tool_call>'
    return [call if CALLS[index] else f"\\boxed{{{ITEMS[index].answer}}}"] * n


def test_plan_then_execute_through_the_runner(tmp_path):
    model = FakeChatModel([scripted], repeat_last=True)
    task = PlanExecuteTask(VerifiableTask(ITEMS, act="step"))
    policy = Policy(model)
    records = run_task(task, policy, open_run(tmp_path / "plan", arm="plan", task=task, policy=policy, seed=0,
                                              config={}), seed=0)  # fmt: skip
    assert [r["plan_ok"] for r in records] == [True, True, False, True]
    assert "not one JSON object" in records[2]["plan_request"]["error"]
    assert [r["called"] for r in records] == CALLS
    assert [r["followed"] for r in records] == [True, False, False, False]
    necessary = {ITEMS[0].id: True, ITEMS[1].id: True, ITEMS[2].id: False, ITEMS[3].id: False}
    summary = plan_execute_summary(records, necessary)
    assert summary["n"] == 4 and summary["plans_parsed"] == 3
    assert summary["plan_accuracy"] == 0.75  # right on 0, 1, 3; the malformed plan counts wrong
    assert summary["execution_accuracy"] == 0.5  # right on 0 and 2
    assert summary["gap"] == 0.25
    assert summary["follow_rate"] == pytest.approx(1 / 3)
    assert summary["said_call_did_not"] == 1 and summary["said_no_call_called"] == 1
    with pytest.raises(ValueError, match="no necessity label"):
        plan_execute_summary(records, {})


def test_the_execution_is_read_from_the_breakdowns_records(tmp_path):
    """The acting solve recorded once (the breakdown) is not generated again; only the plan is asked."""
    acting = VerifiableTask(ITEMS, act="step")
    first = FakeChatModel([scripted], repeat_last=True)
    policy = Policy(first)
    acted = run_task(acting, policy, open_run(tmp_path / "breakdown", arm="breakdown", task=acting, policy=policy,
                                              seed=0, config={}), seed=0)  # fmt: skip
    model = FakeChatModel([scripted], repeat_last=True)
    task = PlanExecuteTask(acting, executions={r["id"]: r for r in acted})
    policy = Policy(model)
    records = run_task(task, policy, open_run(tmp_path / "plan", arm="plan", task=task, policy=policy, seed=0,
                                              config={}), seed=0)  # fmt: skip
    assert len(model.requests) == len(ITEMS) and all(q["tools"] is None for q in model.requests)  # plans only
    assert [r["called"] for r in records] == CALLS and all(r["from"] == "breakdown" for r in records)
    assert [r["valid"] for r in records] == [r["valid"] for r in acted]
    assert task.describe() != PlanExecuteTask(acting).describe()
