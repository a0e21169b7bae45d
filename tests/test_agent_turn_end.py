"""How a turn ends when the model does not end it (kate/agent/turn_end.py): a result fed back into
the same call counts as a repeat, and the loop asks for the answer, prefilled. On a fake model;
the transformers client's prefill on the 135M model."""

from __future__ import annotations

import json

import pytest

from kate.agent import LoopSettings, Policy
from kate.agent.turn_end import echoes_result, fed_from, no_answer
from kate.envs import Observation, PythonFunctionsEnv
from kate.llm.fake import FakeChatModel
from kate.sampling import GreedySampler
from kate.toolcall import ToolCall


def convert(amount: float, currency: str = "EUR") -> float:
    """Convert US dollars to another currency.

    Args:
        amount: dollars
        currency: the target currency code
    """
    return round(amount * 0.92, 2)


def call(amount: float, currency: str = "EUR") -> str:
    return json.dumps({"name": "convert", "arguments": {"amount": amount, "currency": currency}})


ASK = [{"role": "user", "content": "How much is 100 dollars in euros?"}]


def run(script, **settings):
    model = FakeChatModel(script=list(script), options=("prefill",))
    policy = Policy(model, GreedySampler(), None, LoopSettings(system_prompt=None, **settings))
    return model, policy.run_turn(PythonFunctionsEnv([convert]), ASK)


def test_a_call_is_fed_from_a_result_when_its_changed_arguments_hold_the_results_values():
    done = [(0, ToolCall("convert", {"amount": 100, "currency": "EUR"}), Observation("92.0"))]
    assert fed_from(ToolCall("convert", {"amount": 92, "currency": "EUR"}), done) == done[0]
    assert fed_from(ToolCall("convert", {"amount": 100, "currency": "EUR"}), done) == done[0]  # exact
    assert fed_from(ToolCall("convert", {"amount": 92, "currency": "GBP"}), done) is None  # a new request
    assert fed_from(ToolCall("convert", {"amount": 50, "currency": "EUR"}), done) is None
    assert fed_from(ToolCall("other", {"amount": 92, "currency": "EUR"}), done) is None
    text = [(0, ToolCall("f", {"x": "a"}), Observation("b"))]
    assert fed_from(ToolCall("f", {"x": "b"}), text) == text[0] and fed_from(ToolCall("f", {"x": "c"}), text) is None


def test_repeat_policy_answer_asks_for_the_answer_with_the_prefill_and_ends_the_turn():
    model, turn = run([call(100), call(100), "92 euros."], repeat_policy="answer", answer_prefill="So: ")
    assert turn.end_reason == "answer" and turn.answer == "So: 92 euros."
    executed, repeat, asked = turn.steps
    assert executed.executed and repeat.repeat_of == 0 and not repeat.executed
    assert asked.prefill == "So: " and asked.to_dict()["prefill"] == "So: " and "prefill" not in executed.to_dict()
    assert model.requests[2]["prefill"] == "So: " and model.requests[2]["temperature"] == 0.0
    assert model.requests[2]["messages"] == model.requests[1]["messages"]  # asked where the repeat was written
    assert turn.messages[-1] == {"role": "assistant", "content": "So: 92 euros."}
    assert [c.to_dict()["arguments"]["amount"] for c in turn.calls] == [100]


def test_a_fed_call_is_a_repeat_only_under_repeat_match_fed():
    _, exact = run([call(100), call(92.0), "done"], repeat_policy="answer")
    assert [s.executed for s in exact.steps] == [True, True, False] and exact.answer == "done"  # 92 was run
    _, fed = run([call(100), call(92.0), "92 euros."], repeat_policy="answer", repeat_match="fed")
    assert [s.executed for s in fed.steps] == [True, False, False] and fed.steps[1].repeat_of == 0
    assert fed.answer == "Based on the result, 92 euros." and len(fed.calls) == 1


def test_under_warn_a_fed_call_gets_the_earlier_result_and_a_second_repeat_ends_the_turn():
    model, turn = run([call(100), call(92.0), call(92.0)], repeat_policy="warn", repeat_match="fed")
    assert turn.end_reason == "repeat" and [s.executed for s in turn.steps] == [True, False, False]
    note = model.requests[2]["messages"][-1]
    assert note["role"] == "tool" and "Not executed again" in note["content"] and "92.0" in note["content"]


def test_answer_at_max_steps_asks_once_at_the_cap():
    _, turn = run([call(1), call(2), "the answer"], max_steps=2, answer_at_max_steps=True)
    assert turn.end_reason == "answer" and turn.steps[-1].index == 2 and turn.steps[-1].prefill
    _, capped = run([call(1), call(2)], max_steps=2)
    assert capped.end_reason == "max_steps" and capped.answer is None


def test_an_asked_answer_that_is_still_a_call_ends_the_turn_without_an_answer():
    _, turn = run([call(100), call(100), call(100)], repeat_policy="answer", answer_prefill="")
    assert turn.end_reason == "repeat" and turn.answer is None and turn.steps[-1].calls


def test_a_client_without_prefill_is_refused_before_any_step():
    model = FakeChatModel(script=[call(1)])
    with pytest.raises(TypeError, match="prefill"):  # when the policy is made, before any item runs
        Policy(model, GreedySampler(), None, LoopSettings(system_prompt=None, repeat_policy="answer"))
    policy = Policy(model, GreedySampler(), None, LoopSettings(system_prompt=None))
    object.__setattr__(policy, "settings", LoopSettings(system_prompt=None, answer_at_max_steps=True))
    with pytest.raises(TypeError, match="prefill"):  # and by the loop itself (a dialogue stops, no error record)
        policy.run_dialogue(PythonFunctionsEnv([convert]), ["How much is 100 dollars in euros?"])
    assert model.requests == []


def test_settings_check_the_new_fields_and_keep_old_fingerprints():
    assert LoopSettings().to_dict() == {"max_steps": 20, "repeat_policy": "warn", "system_prompt": "kate",
                                        "one_call": False, "max_malformed": None}  # fmt: skip
    assert LoopSettings(repeat_match="fed").to_dict()["repeat_match"] == "fed"
    with pytest.raises(ValueError, match="repeat_match"):
        LoopSettings(repeat_match="fuzzy")
    with pytest.raises(ValueError, match="off"):
        LoopSettings(repeat_match="fed", repeat_policy="off")
    assert LoopSettings(answer_at_max_steps=True).asks_answers and not LoopSettings().asks_answers
    assert set(LoopSettings.help()) >= {"repeat_match", "answer_prefill", "answer_at_max_steps", "echo_policy"}
    assert LoopSettings(echo_policy="answer").to_dict()["echo_policy"] == "answer"
    assert LoopSettings(echo_policy="answer").asks_answers
    with pytest.raises(ValueError, match="echo_policy"):
        LoopSettings(echo_policy="drop")


def test_a_reply_that_writes_a_tool_result_again_is_an_echo():
    history = [*ASK, {"role": "assistant", "content": ""}, {"role": "tool", "content": "None"},
               {"role": "tool", "content": '{"error": "User not authenticated."}'}]
    assert echoes_result("None", history) and echoes_result("  None\n", history)
    assert echoes_result('<tool_response>\n{"error": "User not authenticated."}\n</tool_response>', history)
    assert echoes_result("<tool_response>{}</tool_response>", ASK)  # a made-up result is no answer either
    assert not echoes_result("None", ASK)  # no tool result says None here
    answered = [*ASK, {"role": "assistant", "content": "Done: 1 call was made."}, {"role": "user", "content": "Next?"}]
    assert echoes_result("Done: 1 call was made.", answered)  # an earlier answer copied into a new turn
    calling = [*ASK, {"role": "assistant", "content": "None", "tool_calls": [{"id": "c"}]}]
    assert not echoes_result("None", calling)  # the text beside a call is no answer
    assert not echoes_result("The folder was created; None of the files moved.", history)
    assert not echoes_result("", history)
    assert no_answer("", ASK) and no_answer(" \n", ASK) and no_answer("None", history) and not no_answer("92.", ASK)


def test_echo_policy_answer_asks_for_the_answer_in_place_of_an_echoed_result():
    model, turn = run([call(100), "92.0", "it is 92 euros."], echo_policy="answer", answer_prefill="So: ")
    executed, echo, asked = turn.steps
    assert executed.executed and echo.echo and echo.to_dict()["echo"] is True and "echo" not in asked.to_dict()
    assert turn.end_reason == "answer" and turn.answer == "So: it is 92 euros." and asked.prefill == "So: "
    assert turn.messages[-1] == {"role": "assistant", "content": "So: it is 92 euros."}
    assert all(m.get("content") != "92.0" for m in turn.messages if m["role"] == "assistant")  # the echo is not kept
    _, kept = run([call(100), "92.0"])  # the default keeps it as the answer
    assert kept.answer == "92.0" and not kept.steps[-1].echo
    _, empty = run([call(100), "", "92 euros."], echo_policy="answer")  # an empty reply is no answer either
    assert empty.steps[1].echo and empty.answer == "Based on the result, 92 euros."


def test_the_transformers_client_starts_its_reply_with_the_prefill(small_hf):
    from kate.llm.base import supports

    assert supports(small_hf, "prefill")
    [c] = small_hf.chat([{"role": "user", "content": "Say hello to Ada."}], max_tokens=6, prefill="Dear Ada,")
    assert c.text.startswith("Dear Ada,") and len(c.text) > len("Dear Ada,")


def test_the_default_model_answers_after_its_call_when_the_loop_asks(default_llamacpp):
    """The measured failure on the real 0.5B model: the right call, then the call again; with the
    turn-end settings the turn ends with a prefilled plain answer instead."""
    from kate.tasks.own_tools import OwnToolsTask

    item = next(i for i in OwnToolsTask(split="train").items() if "500 grams" in i.question)
    policy = Policy(default_llamacpp, GreedySampler(), None,
                    LoopSettings(max_steps=3, repeat_policy="answer", repeat_match="fed", answer_at_max_steps=True))
    trace = OwnToolsTask(split="train").solve(item, policy, seed=0)
    assert trace["end_reason"] == "answer" and trace["answer"].startswith("Based on the result, ")
    assert trace["steps"][0]["executed"] and trace["steps"][-1]["prefill"] == "Based on the result, "


def test_echo_policy_act_asks_a_turn_without_calls_for_a_call_and_then_for_the_answer():
    prefix = '<tool_call>\n{"name": "'
    rest = 'convert", "arguments": {"amount": 100, "currency": "EUR"}}\n</tool_call>'
    history = [*ASK, {"role": "assistant", "content": "92 euros."}, {"role": "user", "content": "And 100 again?"}]
    model = FakeChatModel(script=["92 euros.", rest, "92.0", "again 92 euros."], options=("prefill",))
    policy = Policy(model, GreedySampler(), None, LoopSettings(system_prompt=None, echo_policy="act", one_call=True))
    turn = policy.run_turn(PythonFunctionsEnv([convert]), history)
    echo, asked_call, echo_after, asked_answer = turn.steps
    assert echo.echo and not echo.executed and asked_call.index == echo.index == 0
    assert asked_call.prefill == prefix and asked_call.executed and asked_call.text.startswith(prefix)
    assert [c.to_dict()["arguments"]["amount"] for c in turn.calls] == [100]
    assert model.requests[1]["prefill"] == prefix and model.requests[1]["temperature"] == 0.0
    assert echo_after.echo and asked_answer.prefill == "Based on the result, "  # after a call: the answer
    assert turn.answer == "Based on the result, again 92 euros." and turn.end_reason == "answer"
    assert sum(m["role"] == "assistant" and m.get("content") == "92 euros." for m in turn.messages) == 1


def test_the_default_model_writes_a_call_when_the_loop_asks_for_one(default_llamacpp):
    """``ask_call`` on the real 0.5B model: the reply starts with the call prefix of the Qwen chat
    template and is read as a call of the offered tool."""
    from kate.agent.settings import CALL_PREFILL
    from kate.agent.turn_end import ask_call

    env = PythonFunctionsEnv([convert])
    step = ask_call(default_llamacpp, list(ASK), env.tools(), prefill=CALL_PREFILL, seed=0, max_tokens=64, one_call=True)
    assert step.text.startswith(CALL_PREFILL) and step.parse_error is None
    assert [c.name for c in step.calls] == ["convert"] and step.calls[0].arguments["amount"] == 100
