"""An adapter gated by its base model (kate/llm/base_gated.py): at a request's first step with tools
offered both are asked and the base's reply is kept where it declines to call (its malformed call
kept too, or left to the tuned model, as configured), else the tuned model's calls, a tuned sample
that declines giving way to the base's call; the loop's note on a kept malformed call gets the tuned
samples held from the turn's start; after a tool result, after the loop's note on another unreadable
reply, or with no tools the tuned model answers alone; with n samples the base decides once, greedy;
each token counted once; the name and identity say what ran; bad settings are refused; two real
engines run a turn through the loop."""

from __future__ import annotations

import pytest

from kate.llm.base import ChatModel
from kate.llm.base_gated import BaseGated, declines, opens_turn
from kate.llm.base_gated_llamacpp import base_gated_llamacpp  # at import: the client's signature unpatched
from kate.llm.fake import FakeChatModel
from kate.llm.identity import model_identity
from kate.sampling.policy import GreedySampler

from .conftest import CALCULATOR

USER = [{"role": "user", "content": "What is 2 + 3?"}]
AFTER_RESULT = [*USER, {"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "5"}]
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>'
OTHER_CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>'
MALFORMED = '<tool_call>\n{"name": "calculator", "arguments": \n</tool_call>'


def _gated(tuned: list, base: list) -> tuple[BaseGated, FakeChatModel, FakeChatModel]:
    t, b = FakeChatModel(script=tuned, name="tuned"), FakeChatModel(script=base, name="base")
    return BaseGated(t, b), t, b


def test_the_base_declining_at_a_turn_start_is_kept():
    model, tuned, base = _gated([CALL], ["No tool fits this."])
    [c] = model.chat(USER, [CALCULATOR])
    assert c.text == "No tool fits this." and not c.tool_calls
    assert len(tuned.requests) == len(base.requests) == 1
    both = [m.chat(USER, [CALCULATOR])[0].usage for m in (FakeChatModel(script=[CALL]),
                                                          FakeChatModel(script=["No tool fits this."]))]
    assert c.usage.completion_tokens == sum(u.completion_tokens for u in both)  # both replies were computed


def test_where_the_base_calls_the_tuned_call_is_kept_and_a_tuned_answer_gives_way_to_the_base_call():
    model, _, _ = _gated([OTHER_CALL, "It is 5.", MALFORMED], [CALL, CALL, CALL])
    [c] = model.chat(USER, [CALCULATOR])
    assert c.text == OTHER_CALL and c.tool_calls[0].arguments == {"expression": "2+3"}
    [c] = model.chat(USER, [CALCULATOR])
    assert c.text == CALL and c.tool_calls  # the tuned model answered where the base calls: the base's call
    [c] = model.chat(USER, [CALCULATOR])
    assert c.text == MALFORMED  # the tuned model tried to call: its attempt stands
    model, _, _ = _gated([[OTHER_CALL, "It is 5."]], [CALL])
    assert [c.text for c in model.chat(USER, [CALCULATOR], n=2, temperature=1.0)] == [OTHER_CALL, CALL]  # per sample


def test_with_base_several_the_bases_several_calls_stand_against_a_tuned_sample_with_fewer():
    two = f"{CALL}\n{OTHER_CALL}"
    three = f"{CALL}\n{OTHER_CALL}\n{CALL}"
    # a malformed sample reads as no calls: fewer than the base's, which stand; without base_several it stands
    for base_several, want in ((True, [two, three, two]), (False, [OTHER_CALL, three, MALFORMED])):
        t, b = FakeChatModel(script=[[OTHER_CALL, three, MALFORMED]]), FakeChatModel(script=[two])
        model = BaseGated(t, b, base_several=base_several)
        assert [c.text for c in model.chat(USER, [CALCULATOR], n=3, temperature=1.0)] == want
    t, b = FakeChatModel(script=[OTHER_CALL]), FakeChatModel(script=[CALL])
    [c] = BaseGated(t, b, base_several=True).chat(USER, [CALCULATOR])
    assert c.text == OTHER_CALL  # one base call: the tuned call, as without base_several
    unknown = f"{CALL}\n" + '<tool_call>\n{"name": "calculator", "arguments": {"params": "2+3"}}\n</tool_call>'
    t, b = FakeChatModel(script=[OTHER_CALL]), FakeChatModel(script=[unknown])
    [c] = BaseGated(t, b, base_several=True).chat(USER, [CALCULATOR])
    assert c.text == OTHER_CALL  # several base calls that the tool cannot make (a parameter it lacks) do not stand
    assert BaseGated(FakeChatModel(script=[], name="tuned"), b, base_several=True).name == "tuned+base-gate+several"
    python = FakeChatModel(script=[], formats=("hermes", "json", "python_list"))
    assert BaseGated(t, python).formats == ("hermes", "json", "python_list")  # a loop reads the base's form too
    replies = BaseGated(FakeChatModel(script=[CALL]), FakeChatModel(script=["[calculator(expression='1+1'), "
                        "calculator(expression='2+2')]"], formats=("python_list",)), base_several=True)
    step = GreedySampler().act(replies, USER, [CALCULATOR], one_call=True)
    assert [c.arguments for c in step.calls] == [{"expression": "1+1"}]  # one-call loops keep its first call


def test_where_no_tool_fits_the_base_answers_without_tools_and_the_tuned_model_is_not_asked():
    seen = []

    def fits(messages, tools):
        seen.append((messages[-1]["content"], [t["function"]["name"] for t in tools]))
        return "2 + 3" in messages[-1]["content"]

    t, b = FakeChatModel(script=[CALL, OTHER_CALL]), FakeChatModel(script=["Paris is in France.", CALL])
    model = BaseGated(t, b, tools_fit=fits)
    replies = model.chat([{"role": "user", "content": "Where is Paris?"}], [CALCULATOR], n=2, temperature=1.0)
    assert [c.text for c in replies] == ["Paris is in France."] * 2 and not replies[0].tool_calls
    assert b.requests[-1]["tools"] is None and not t.requests  # asked without tools; the tuned model not at all
    assert replies[1].usage.completion_tokens == 0  # one reply drawn, counted once
    [c] = model.chat(USER, [CALCULATOR])  # a request a tool fits: the gate as before
    assert c.text == CALL and seen[-1] == ("What is 2 + 3?", ["calculator"])
    assert len(model.chat(AFTER_RESULT, [CALCULATOR])) == 1 and len(seen) == 2  # not asked after a tool result
    assert model.runtime()["base_gate"]["tools_fit"].startswith("<function")
    with pytest.raises(TypeError, match="tools_fit must be callable"):
        BaseGated(t, b, tools_fit="yes")


def test_a_malformed_base_call_is_kept_or_left_to_the_tuned_model_as_configured():
    model, _, _ = _gated([CALL], [MALFORMED])
    [c] = model.chat(USER, [CALCULATOR])
    assert c.text == MALFORMED and c.parse_error is not None  # keep: a reply with no call, as BFCL scores it
    model = BaseGated(FakeChatModel(script=[CALL]), FakeChatModel(script=[MALFORMED]), base_malformed="tuned")
    [c] = model.chat(USER, [CALCULATOR])
    assert c.text == CALL  # tuned: the base's malformed call is an attempt
    malformed = FakeChatModel(script=[MALFORMED]).chat(USER, [CALCULATOR])[0]
    assert declines(malformed) and not declines(malformed, "tuned")
    with pytest.raises(ValueError, match="base_malformed"):
        BaseGated(FakeChatModel(script=["x"]), FakeChatModel(script=["y"]), base_malformed="maybe")


def test_after_a_tool_result_or_without_tools_the_tuned_model_answers_alone():
    model, tuned, base = _gated(["The answer is 5.", "Hi."], ["unused"])
    assert model.chat(AFTER_RESULT, [CALCULATOR])[0].text == "The answer is 5."
    assert model.chat(USER, None)[0].text == "Hi."
    assert len(tuned.requests) == 2 and base.requests == []
    assert opens_turn(USER) and not opens_turn(AFTER_RESULT) and not opens_turn([])


def test_the_loop_feedback_on_a_kept_malformed_call_gets_the_tuned_samples_of_the_turn_start():
    from kate.agent import Policy
    from kate.envs import PythonFunctionsEnv

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return "5"

    model, tuned, base = _gated([CALL, "It is 5."], [MALFORMED])  # CALL: drawn beside the base, held
    turn = Policy(model).run_dialogue(PythonFunctionsEnv([calculator]), ["What is 2 + 3?"]).turns[0]
    assert len(base.requests) == 1  # asked once: at the request, not after kate's note on its malformed call
    assert turn.steps[0].parse_error is not None  # the base's malformed call, kept
    assert turn.steps[1].text == CALL and turn.steps[1].usage.completion_tokens == 0  # held: counted at step 0
    assert [c.name for c in turn.calls] == ["calculator"] and turn.answer == "It is 5."
    assert len(tuned.requests) == 2 and tuned.requests[1]["messages"][-1]["role"] == "tool"  # never shown the note
    note = [*USER, {"role": "assistant", "content": MALFORMED}, {"role": "user", "content": "Unreadable."}]
    assert not opens_turn(note)
    later_turn = [*note, {"role": "assistant", "content": "It is 5."}, {"role": "user", "content": "And 3 + 4?"}]
    assert opens_turn(later_turn)  # a new request after an answer is gated again


def test_feedback_on_a_reply_not_held_goes_to_the_tuned_model():
    model, tuned, base = _gated([CALL, OTHER_CALL, CALL], [MALFORMED])
    model.chat(USER, [CALCULATOR])  # the base's malformed call kept; CALL held for this turn start
    other = [{"role": "user", "content": "What is 3 + 4?"}]
    note = [{"role": "assistant", "content": MALFORMED}, {"role": "user", "content": "Unreadable."}]
    assert model.chat([*other, *note], [CALCULATOR])[0].text == OTHER_CALL  # another turn: asked
    assert model.chat([*USER, *note], [CALCULATOR], n=2, temperature=1.0)[0].text == CALL  # another n: asked
    assert len(tuned.requests) == 3 and len(base.requests) == 1
    tuned_rule = BaseGated(FakeChatModel(script=[CALL, "It is 5."]), FakeChatModel(script=[MALFORMED]),
                           base_malformed="tuned")  # fmt: skip
    assert tuned_rule.chat(USER, [CALCULATOR])[0].text == CALL and not tuned_rule._held  # nothing to hold


def test_with_n_samples_the_base_decides_once_greedy():
    model, tuned, base = _gated([[CALL, "It is 5."], [CALL, OTHER_CALL]], ["None fits.", CALL])
    replies = model.chat(USER, [CALCULATOR], n=2, temperature=1.0, seed=3)
    assert [c.text for c in replies] == ["None fits.", "None fits."]  # the base declined: for every sample
    assert tuned.requests[0]["n"] == 2 and tuned.requests[0]["seed"] == 3  # the caller's settings, unchanged
    assert base.requests[0]["n"] == 1 and base.requests[0]["temperature"] == 0.0 and base.requests[0]["seed"] is None
    replies = model.chat(USER, [CALCULATOR], n=2, temperature=1.0, seed=4)
    assert [c.text for c in replies] == [CALL, OTHER_CALL]  # the base called: the tuned model's samples
    alone = FakeChatModel(script=[[CALL, OTHER_CALL]]).chat(USER, [CALCULATOR], n=2)
    base_cost = FakeChatModel(script=[CALL]).chat(USER, [CALCULATOR])[0].usage
    assert replies[0].usage == alone[0].usage + base_cost and replies[1].usage == alone[1].usage  # counted once


def test_name_identity_and_refusals():
    model, _, _ = _gated(["x"], ["y"])
    assert isinstance(model, ChatModel) and model.name == "tuned+base-gate"
    assert model_identity(model)["name"] == "tuned+base-gate"
    assert BaseGated(FakeChatModel(script=["x"]), FakeChatModel(script=["y"]), name="mine").name == "mine"
    with pytest.raises(TypeError, match="base must be a chat model"):
        BaseGated(FakeChatModel(script=["x"]), "not a model")
    with pytest.raises(ValueError, match="needs llm.lora"):
        base_gated_llamacpp("qwen2.5-coder-0.5b-instruct-q4_k_m")


@pytest.mark.model
def test_two_real_engines_gate_a_turn_and_the_loop_runs(small_llamacpp):
    from kate.agent import Policy
    from kate.envs import PythonFunctionsEnv
    from kate.llm.llamacpp import LlamaCppChatModel
    from kate.llm.registry import SMALL_TEST_MODEL

    other = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=2048, max_parallel=4)
    try:
        model = BaseGated(other, small_llamacpp)
        [gated] = model.chat(USER, [CALCULATOR], max_tokens=48)
        [own] = small_llamacpp.chat(USER, [CALCULATOR], max_tokens=48)
        assert gated.text == own.text  # the same weights greedy: whichever is kept, the same text
        assert gated.usage.prompt_tokens == 2 * own.usage.prompt_tokens
        assert model_identity(model)["sha256"] == model_identity(small_llamacpp)["sha256"]
        def add(a: int, b: int) -> int:
            """Sum of two integers."""
            return a + b

        turn = Policy(model).run_dialogue(PythonFunctionsEnv([add]), ["What is 2 + 3?"]).turns[0]
        assert turn.steps  # a whole turn through the one loop, the gated step first
    finally:
        other.close()


def test_the_gate_does_not_offer_to_stop_replies_at_their_first_call():
    from kate.llm.base import supports
    from kate.llm.brief_reasoning import BriefReasoning

    both = ("prefill", "stop_after_call")
    gated = BaseGated(FakeChatModel(["x"], options=both), FakeChatModel(["x"], options=both))
    assert supports(gated, "prefill") and not supports(gated, "stop_after_call")  # it counts whole replies' calls
    brief = BriefReasoning(FakeChatModel(["x"], options=both))
    assert supports(brief, "prefill") and not supports(brief, "stop_after_call")  # its prefill holds the thought
