"""Brief reasoning (kate/llm/brief_reasoning.py): a bounded thought before each answer, asked with the
budget and the closer as its stop, kept out of the returned text, calls and history; n thoughts
give n answers; usage sums both phases; a model without prefill= is refused; a caller's prefill
still starts the answer."""

from __future__ import annotations

import pytest

from kate.llm.base import ChatModel, Usage, supports
from kate.llm.brief_reasoning import BriefReasoning, answer_seed
from kate.llm.fake import FakeChatModel

from .conftest import CALCULATOR

MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}]
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>'
THOUGHT = "The user wants a sum: call calculator."


def _fake(*script, repeat_last=False):
    return FakeChatModel(script=list(script), options=("prefill",), repeat_last=repeat_last)


def test_the_thought_never_reaches_the_text_or_the_calls():
    inner = _fake(THOUGHT, CALL)
    model = BriefReasoning(inner, budget=32)
    assert isinstance(model, ChatModel) and supports(model, "prefill")
    [c] = model.chat(MESSAGES, [CALCULATOR], max_tokens=128, seed=7)
    assert c.text == CALL and "think" not in c.text and THOUGHT not in c.text
    assert [(t.name, t.arguments) for t in c.tool_calls] == [("calculator", {"expression": "2 + 3"})]
    assert c.parse_error is None
    assert "think" not in str(c.to_message())  # the history a loop keeps
    # the answer was asked after the thought, closed
    assert inner.requests[1]["prefill"] == "<think>\n" + THOUGHT + "\n</think>\n"


def test_the_budget_and_the_stop_are_passed_and_the_answer_gets_its_own():
    inner = _fake(THOUGHT, "no call needed")
    BriefReasoning(inner, budget=8).chat(MESSAGES, None, temperature=0.7, max_tokens=99, seed=3, stop=["END"])
    thought, answer = inner.requests
    assert (thought["max_tokens"], thought["stop"], thought["prefill"]) == (8, ["</think>"], "<think>\n")
    assert (thought["temperature"], thought["seed"]) == (0.7, 3)
    assert (answer["max_tokens"], answer["stop"], answer["temperature"]) == (99, ["END"], 0.7)
    assert answer["seed"] == answer_seed(3, 0) != 3  # not the thought's stream
    assert answer["n"] == 1 and answer["messages"] == MESSAGES


def test_n_thoughts_give_n_answers_each_after_its_own_thought():
    thoughts = ["first idea", "second idea", "third idea"]
    inner = _fake(thoughts, CALL, repeat_last=True)  # the answers run concurrently: each gets CALL
    out = BriefReasoning(inner, budget=16).chat(MESSAGES, [CALCULATOR], n=3, temperature=1.0, seed=10)
    assert len(out) == 3 and all(c.text == CALL and len(c.tool_calls) == 1 for c in out)
    assert inner.requests[0]["n"] == 3
    answers = inner.requests[1:]
    assert sorted(r["prefill"] for r in answers) == sorted(f"<think>\n{t}\n</think>\n" for t in thoughts)
    assert sorted(r["seed"] for r in answers) == [answer_seed(10, i) for i in range(3)]
    assert not {r["seed"] for r in answers} & {10, 11, 12, 13}  # apart from callers' seed + k
    assert all(r["n"] == 1 for r in answers)


def test_usage_counts_the_prompt_once_and_both_phases_tokens():
    inner = _fake(THOUGHT, CALL)
    [c] = BriefReasoning(inner).chat(MESSAGES, [CALCULATOR])
    prompt = len(MESSAGES[0]["content"])  # the fake's prompt tokens: characters of the messages
    thought_tokens = len("<think>\n" + THOUGHT)  # the fake counts its returned text, prefill included
    answer_tokens = len("<think>\n" + THOUGHT + "\n</think>\n" + CALL)
    assert c.usage == Usage(prompt_tokens=prompt, completion_tokens=thought_tokens + answer_tokens)


def test_a_model_without_prefill_is_refused():
    with pytest.raises(ValueError, match="prefill"):
        BriefReasoning(FakeChatModel(script=["x"]))
    with pytest.raises(ValueError, match="budget"):
        BriefReasoning(_fake("x"), budget=0)


def test_a_callers_prefill_comes_after_the_closer_and_starts_the_answer():
    opening = '<tool_call>\n{"name": "'
    rest = 'calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>'
    inner = _fake(THOUGHT, rest)
    [c] = BriefReasoning(inner).chat(MESSAGES, [CALCULATOR], prefill=opening)
    assert inner.requests[0]["prefill"] == "<think>\n"  # the thought itself is not prefilled with it
    assert inner.requests[1]["prefill"] == "<think>\n" + THOUGHT + "\n</think>\n" + opening
    assert c.text == opening + rest and c.tool_calls[0].name == "calculator"


def test_a_closer_in_the_thought_text_cuts_it_and_unknown_options_fail():
    model = BriefReasoning(_fake("x"))
    assert model.thought_of("<think>\n  plan it </think> junk") == "plan it"
    assert model.name == "fake+brief32" and model.runtime()["brief_reasoning"]["budget"] == 32
    with pytest.raises(TypeError, match="top_p"):
        model.chat(MESSAGES, None, top_p=0.9)


def test_a_model_that_goes_on_thinking_in_its_answer_keeps_only_what_follows_its_own_closer():
    inner = _fake(THOUGHT, "more thinking\n</think>\n\n" + CALL)
    [c] = BriefReasoning(inner).chat(MESSAGES, [CALCULATOR])
    assert c.text == CALL and len(c.tool_calls) == 1
    inner = _fake(THOUGHT, 'x</think> calculator", "arguments": {}}\n</tool_call>')
    [c] = BriefReasoning(inner).chat(MESSAGES, [CALCULATOR], prefill='<tool_call>\n{"name": "')
    assert c.text == '<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>'


@pytest.mark.model
def test_brief_reasoning_on_the_small_model(small_llamacpp):
    model = BriefReasoning(small_llamacpp, budget=8)
    [c] = model.chat(MESSAGES, [CALCULATOR], max_tokens=16, seed=0)
    assert "</think>" not in c.text and not c.text.startswith("<think>")
    assert c.usage.completion_tokens <= 8 + 16
    assert c.usage.prompt_tokens > 0 and c.finish_reason in {"stop", "length"}


def test_the_brief32_arm_runs_through_the_one_runner_and_no_thought_reaches_a_record(tmp_path):
    import json

    from kate.bfcl.data import load_entries
    from kate.cli import CONF_DIR
    from kate.eval.arms import compose_arm, run_composed
    from kate.tasks.bfcl import BFCLTask

    c = compose_arm("brief32", ["max_steps=2"], conf_dir=CONF_DIR)
    assert c["llm"]["budget"] == 32 and c["knowledge"] is None
    secret = "SECRET-THOUGHT"
    inner = FakeChatModel(script=[secret, "I cannot help with that."], options=("prefill",), repeat_last=True)
    model = BriefReasoning(inner, budget=c["llm"]["budget"])
    task = BFCLTask(load_entries("irrelevance", "test", 2), "test")
    records = run_composed(c, model, task, tmp_path / "seed_0", arm="brief32")
    assert len(records) == 2 and secret not in json.dumps(records)
    thoughts = [r for r in inner.requests if r["prefill"] == "<think>\n"]
    assert thoughts and all(r["max_tokens"] == 32 and r["stop"] == ["</think>"] for r in thoughts)
    assert all(secret not in json.dumps(r["messages"]) for r in inner.requests)  # never in a later prompt
