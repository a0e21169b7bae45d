"""Tests for kate.tasks.own_tools: the tools' schemas, the questions (their expected calls run and
give their answers), the checkers on hand-made traces, and one real-model run through the runner."""

from __future__ import annotations

import json
import math

import pytest

from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.envs.python_functions import PythonFunctionsEnv
from kate.eval.runner import open_run, run_task
from kate.llm.fake import FakeChatModel
from kate.sampling.policy import GreedySampler
from kate.tasks.base import Task
from kate.tasks.own_tools import (
    OwnToolsItem,
    OwnToolsTask,
    all_items,
    answer_holds,
    calls_match,
    load_items,
    numbers_in,
    summarize,
)
from kate.tasks.own_tools_data import TOOLS
from kate.toolcall import ToolCall


def schemas() -> dict[str, dict]:
    return {s["function"]["name"]: s["function"] for s in PythonFunctionsEnv(list(TOOLS.values())).tools()}


def test_schemas():
    tools = schemas()
    assert set(tools) == {"convert_units", "element_lookup", "convert_currency", "count_text", "loan_payment"}
    units = tools["convert_units"]["parameters"]
    assert units["required"] == ["value", "from_unit", "to_unit"]
    assert units["properties"]["value"]["type"] == "number" and "km" in units["properties"]["from_unit"]["description"]
    count = tools["count_text"]["parameters"]
    assert count["required"] == ["text"]
    assert count["properties"]["what"] == {**count["properties"]["what"], "type": "string", "default": "words",
                                           "enum": ["words", "characters", "letters", "vowels"]}  # fmt: skip
    assert tools["loan_payment"]["parameters"]["properties"]["years"]["type"] == "integer"
    assert all(t["description"] for t in tools.values())


def test_splits_and_counts():
    train, test = load_items("train"), load_items("test")
    assert len(train) == len(test) == 32 and len(load_items("all")) == 64
    assert {i.index % 2 for i in train} == {0} and {i.index % 2 for i in test} == {1}
    for items in (train, test):
        kinds = [i.kind for i in items]
        assert kinds.count("no_call") >= 3 and kinds.count("two_calls") >= 3
    assert len({i.id for i in all_items()}) == 64
    assert [i.id for i in OwnToolsTask("train", limit=3).items()] == ["own_tools_00", "own_tools_02", "own_tools_04"]
    with pytest.raises(ValueError):
        load_items("dev")
    assert isinstance(OwnToolsTask(), Task)


def _derivable(value, results: list[str], item: OwnToolsItem) -> bool:
    """The expected value is in a result, or (two calls) is the sum of two results, or a string
    that is in a result or an argument of the expected calls."""
    if isinstance(value, str):
        text = json.dumps([results, [a for _, a in item.calls]]).lower()
        return value.lower() in text
    numbers = [n for r in results for n in numbers_in(r)]
    candidates = numbers + [a + b for a in numbers for b in numbers]
    return any(math.isclose(value, n, rel_tol=1e-6) for n in candidates)


@pytest.mark.parametrize("item", all_items(), ids=lambda i: i.id)
def test_expected_calls_run_and_give_the_answer(item: OwnToolsItem):
    env = PythonFunctionsEnv([TOOLS[n] for n in item.tools])
    offered = {t["function"]["name"] for t in env.tools()}
    results = []
    for call in item.expected_calls():
        assert call.name in offered
        observation = env.execute(call)
        assert observation.ok, observation.content
        results.append(observation.content)
    for value in item.answer if item.calls else ():  # a no-call answer is general knowledge
        assert _derivable(value, results, item), (item.id, value, results)
    assert calls_match(item.expected_calls(), item.expected_calls())


# --------------------------------------------------------------------------- checkers on hand-made traces

ITEM = next(i for i in all_items() if i.id == "own_tools_00")  # 10 km in miles: 6.21371
TWO = next(i for i in all_items() if i.kind == "two_calls")  # iron vs copper
NONE = next(i for i in all_items() if i.kind == "no_call" and i.answer)  # capital of Japan: Tokyo


def trace(steps: list[list[dict]], answer: str | None, end_reason: str = "answer") -> dict:
    return {"steps": [{"calls": calls, "executed": True} for calls in steps], "answer": answer,
            "end_reason": end_reason}  # fmt: skip


KM = {"name": "convert_units", "arguments": {"value": 10, "from_unit": "km", "to_unit": "mi"}}


def test_right_call_and_answer():
    score = OwnToolsTask("all").score(ITEM, trace([[KM]], "10 km is about 6.21 miles."))
    assert score["valid"] and score["call_ok"] and score["answer_ok"] and score["turn_end"] == "answered"


def test_equivalent_argument_forms():
    same = {"name": "convert_units", "arguments": {"value": 10.0, "from_unit": "Kilometers", "to_unit": "MI"}}
    assert OwnToolsTask("all").score(ITEM, trace([[same]], "6.2137 mi"))["valid"]
    iron, copper = ({"name": "element_lookup", "arguments": {"element": e}} for e in ("Fe", "COPPER"))
    score = OwnToolsTask("all").score(TWO, trace([[copper], [iron]], "Copper (29) beats iron (26)."))
    assert score["valid"]
    expected = (("count_text", {"text": "a b", "what": "words"}),)
    words = OwnToolsItem("x", 0, "train", "q", ("count_text",), expected, (2,))
    assert calls_match([ToolCall("count_text", {"text": "A  b"})], words.expected_calls())  # default filled in


def test_right_call_then_repeat_or_no_answer():
    task = OwnToolsTask("all")
    repeat = task.score(ITEM, trace([[KM], [KM], [KM]], None, "repeat"))
    assert repeat["call_ok"] and not repeat["answer_ok"] and not repeat["valid"] and repeat["turn_end"] == "repeat"
    capped = task.score(ITEM, trace([[KM]] * 3, None, "max_steps"))
    assert capped["call_ok"] and capped["turn_end"] == "max_steps" and not capped["valid"]
    sorry = task.score(ITEM, trace([[KM]], "I'm sorry, but I can't assist with that."))
    assert sorry["call_ok"] and not sorry["answer_ok"] and sorry["turn_end"] == "refusal"


def test_wrong_argument():
    wrong = {"name": "convert_units", "arguments": {"value": 10, "from_unit": "mi", "to_unit": "km"}}
    score = OwnToolsTask("all").score(ITEM, trace([[wrong]], "It is 6.21371 miles."))
    assert not score["call_ok"] and score["answer_ok"] and not score["valid"]
    extra = OwnToolsTask("all").score(ITEM, trace([[wrong], [KM]], "6.21 miles"))
    assert not extra["call_ok"] and extra["calls_covered"]


def test_prose_naming_the_tool_is_not_a_call():
    text = 'I would call convert_units(value=10, from_unit="km", to_unit="mi") to get 6.21 miles.'
    score = OwnToolsTask("all").score(ITEM, trace([], text))
    assert not score["call_ok"] and not score["valid"] and score["n_calls"] == 0


def test_call_where_none_was_due():
    task = OwnToolsTask("all")
    assert task.score(NONE, trace([], "The capital of Japan is Tokyo."))["valid"]
    called = task.score(NONE, trace([[{"name": "element_lookup", "arguments": {"element": "tokyo"}}]], "Tokyo"))
    assert not called["call_ok"] and not called["valid"]
    assert not answer_holds(("Tokyo",), "Kyoto") and answer_holds((1199.1,), "$1,199.10 per month")


def test_solve_on_a_fake_model_and_summary():
    call = json.dumps({"name": "convert_units", "arguments": {"value": 10, "from_unit": "km", "to_unit": "mi"}})
    model = FakeChatModel(script=[f"<tool_call>\n{call}\n</tool_call>", "About 6.21 miles."])
    task = OwnToolsTask("train", limit=1)
    policy = Policy(model, GreedySampler(), None, LoopSettings())
    result = task.solve(task.items()[0], policy, seed=0)
    json.dumps(result)
    assert result["results"] == ["6.21371"] and result["messages"][0]["role"] == "system"
    score = task.score(task.items()[0], result)
    assert score["valid"], score
    summary = summarize([{"id": "own_tools_00", **score}, {"id": "own_tools_01", "valid": False, "turn_end": "repeat"}])
    assert summary["train"]["n"] == 1 and summary["train"]["valid_share"] == 1.0
    assert summary["test"]["turn_ends"] == {"repeat": 1} and summary["all"]["n"] == 2


def test_kate_eval_runs_own_tools_beside_bfcl(tmp_path):
    from hydra import compose, initialize_config_dir

    from kate.cli import CONF_DIR
    from kate.eval.run_eval import run_eval
    from kate.eval.run_store import load_run

    overrides = ["llm=fake", "categories=[simple_python,own_tools]", "limit=2", "split=train", "max_steps=2",
                 f"out_dir={tmp_path}"]  # fmt: skip
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        summary = run_eval(compose("eval", overrides=overrides))
    assert set(summary["per_category"]) == {"simple_python", "own_tools"}
    meta, records = load_run(tmp_path / "own_tools" / "seed_0")
    assert meta["task"]["name"] == "own_tools" and meta["task"]["split"] == "train" and len(meta["task"]["sha256"]) == 64
    assert [r["id"] for r in records] == ["own_tools_00", "own_tools_02"]
    assert all(r["turn_end"] == "answered" and r["call_ok"] is False for r in records)  # the fake never calls
    bfcl_meta, bfcl_records = load_run(tmp_path / "seed_0")
    assert bfcl_meta["task"]["name"] == "bfcl" and {r["category"] for r in bfcl_records} == {"simple_python"}


@pytest.mark.model
def test_real_model_through_the_runner(small_llamacpp, tmp_path):
    task = OwnToolsTask("train", limit=2)
    policy = Policy(small_llamacpp, GreedySampler(max_tokens=48), None, LoopSettings(max_steps=3))
    store = open_run(tmp_path / "run", arm="direct", task=task, policy=policy, seed=0, config={})
    records = run_task(task, policy, store, seed=0)
    assert [r["id"] for r in records] == ["own_tools_00", "own_tools_02"]
    assert len((tmp_path / "run" / "records.jsonl").read_text().splitlines()) == 2
    for record in records:
        assert {"valid", "call_ok", "answer_ok", "turn_end", "steps", "messages", "answer"} <= record.keys()
        assert record["turn_end"] in ("answered", "refusal", "empty", "repeat", "max_steps", "malformed", "error")
