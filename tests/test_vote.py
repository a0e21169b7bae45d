"""Tests for kate.sampling.vote: canonical majority voting, tie-breaking, the critic."""

from __future__ import annotations

import json

import pytest

from kate.llm.base import Completion, TokenLogprob, Usage, completion_from_text
from kate.llm.fake import FakeChatModel
from kate.sampling.vote import AGGREGATORS, NO_CALL_TEXT, critic_vote, majority_vote, parse_choice
from kate.toolcall import ToolCall

ADD12 = ToolCall("add", {"a": 1, "b": 2})
ADD21 = ToolCall("add", {"b": 2, "a": 1})  # same call, other argument order
MUL = ToolCall("mul", {"a": 3, "b": 4})


def calls(*tool_calls: ToolCall, logprob: float | None = None, text: str = "") -> Completion:
    lp = None if logprob is None else (TokenLogprob("x", logprob),)
    return Completion(text=text or json.dumps([c.to_dict() for c in tool_calls]), tool_calls=tool_calls, logprobs=lp)


def answer(text: str = "the answer", logprob: float | None = None) -> Completion:
    lp = None if logprob is None else (TokenLogprob("x", logprob),)
    return Completion(text=text, logprobs=lp)


def broken(logprob: float | None = None) -> Completion:
    lp = None if logprob is None else (TokenLogprob("x", logprob),)
    return Completion(text='{"name": "add", "arguments": {', parse_error="malformed JSON", logprobs=lp)


def test_argument_order_never_changes_the_vote():
    vote = majority_vote([calls(ADD12), calls(ADD21), calls(MUL)])
    assert vote.chosen.calls == (ADD12,)
    assert vote.chosen.votes == 2 and vote.chosen.samples == (0, 1)
    assert len(vote.candidates) == 2
    assert vote.method == "majority" and vote.n == 3 and vote.n_failed == 0 and not vote.failed


def test_parallel_calls_vote_as_a_multiset():
    vote = majority_vote([calls(ADD12, MUL), calls(MUL, ADD21), calls(ADD12)])
    assert vote.chosen.votes == 2
    assert vote.chosen.calls == (ADD12, MUL)  # as the earliest sample wrote them
    assert set(vote.chosen.key) == {ADD12.canonical, MUL.canonical}


def test_duplicate_parallel_calls_are_counted_not_collapsed():
    vote = majority_vote([calls(ADD12, ADD12), calls(ADD12), calls(ADD12)])
    assert vote.chosen.calls == (ADD12,) and vote.chosen.votes == 2
    assert {c.votes for c in vote.candidates} == {1, 2}


def test_tie_broken_by_logprob():
    vote = majority_vote([calls(ADD12, logprob=-5.0), calls(MUL, logprob=-1.0)])
    assert vote.chosen.calls == (MUL,)
    assert vote.chosen.best_logprob == -1.0
    assert [c.calls for c in vote.candidates] == [(MUL,), (ADD12,)]


def test_logprob_is_the_max_over_a_candidates_samples():
    vote = majority_vote([calls(ADD12, logprob=-9.0), calls(MUL, logprob=-3.0), calls(ADD21, logprob=-0.5),
                          calls(MUL, logprob=-4.0)])
    assert vote.chosen.calls == (ADD12,) and vote.chosen.best_logprob == -0.5


def test_unknown_logprob_loses_a_tie_and_then_earliest_index_wins():
    assert majority_vote([calls(ADD12), calls(MUL, logprob=-50.0)]).chosen.calls == (MUL,)
    assert majority_vote([calls(MUL), calls(ADD12)]).chosen.calls == (MUL,)
    assert majority_vote([calls(ADD12, logprob=-1.0), calls(MUL, logprob=-1.0)]).chosen.calls == (ADD12,)


def test_no_call_is_a_candidate_and_can_win():
    vote = majority_vote([answer("4"), calls(ADD12), answer("four")])
    assert vote.chosen.calls == () and vote.chosen.kind == "no_call"
    assert vote.chosen.key == () and vote.chosen.votes == 2 and vote.chosen.samples == (0, 2)


def test_malformed_is_never_chosen_while_something_parsed():
    vote = majority_vote([broken(), broken(), broken(), calls(ADD12)])
    assert vote.chosen.calls == (ADD12,) and not vote.failed
    assert vote.n_failed == 3
    assert vote.candidates[0].kind == "malformed" and vote.candidates[0].votes == 3
    assert vote.margin == pytest.approx(1 / 4)  # runner-up among choosable candidates: none


def test_all_samples_failed():
    vote = majority_vote([broken(), broken()])
    assert vote.failed and vote.chosen.calls == () and vote.chosen.kind == "malformed"
    assert vote.n_failed == 2 and vote.margin == 0.0


def test_margin_values():
    assert majority_vote([calls(ADD12)] * 4).margin == 1.0
    assert majority_vote([calls(ADD12)] * 3 + [calls(MUL)]).margin == pytest.approx(0.5)
    assert majority_vote([calls(ADD12), calls(MUL), answer(), answer()]).margin == pytest.approx(0.25)
    assert majority_vote([calls(ADD12), calls(MUL)]).margin == 0.0


def test_empty_is_an_error_and_to_dict_is_json():
    with pytest.raises(ValueError):
        majority_vote([])
    vote = majority_vote([calls(ADD12, logprob=-1.0), broken(), answer()])
    data = json.loads(json.dumps(vote.to_dict(), allow_nan=False))
    assert data["chosen"]["calls"] == [{"name": "add", "arguments": {"a": 1, "b": 2}}]
    assert data["n"] == 3 and data["n_failed"] == 1 and data["method"] == "majority"
    assert [c["kind"] for c in data["candidates"]] == ["call", "malformed", "no_call"]


def test_votes_on_parsed_fake_outputs():
    texts = ['{"name": "add", "arguments": {"a": 1, "b": 2}}', '<tool_call>\n{"name": "add", "arguments": '
             '{"b": 2, "a": 1.0}}\n</tool_call>', "It is 3."]
    vote = majority_vote([completion_from_text(t) for t in texts])
    assert vote.chosen.calls == (ADD12,) and vote.chosen.votes == 2


def test_parse_choice_is_strict():
    assert parse_choice("2", 3) == 2
    assert parse_choice("Candidate 3 is best", 3) == 3
    assert parse_choice("4", 3) is None
    assert parse_choice("0", 3) is None
    assert parse_choice("1.5", 3) is None
    assert parse_choice("the second", 3) is None
    assert parse_choice("", 3) is None


def test_critic_picks_a_candidate():
    model = FakeChatModel(script=["2"])
    completions = [calls(ADD12), calls(ADD21), calls(MUL)]
    vote = critic_vote(model, [{"role": "user", "content": "3*4?"}], None, completions)
    assert vote.chosen.calls == (MUL,) and vote.method == "critic" and not vote.critic_fallback
    request = model.requests[0]
    assert request["n"] == 1 and request["temperature"] == 0.0
    prompt = request["messages"][-1]
    assert prompt["role"] == "user"
    assert '1. [{"name": "add"' in prompt["content"] and '2. [{"name": "mul"' in prompt["content"]
    assert request["messages"][0] == {"role": "user", "content": "3*4?"}
    assert vote.critic_reply == "2" and vote.usage.completion_tokens == 1


def test_critic_lists_no_call_and_skips_malformed():
    model = FakeChatModel(script=["1"])
    vote = critic_vote(model, [], None, [answer(), calls(MUL), broken(), broken()])
    content = model.requests[0]["messages"][-1]["content"]
    assert f"1. {NO_CALL_TEXT}" in content and '2. [{"name": "mul"' in content
    assert "3." not in content  # the malformed samples are not a choice
    assert "(1 to 2)" in content
    assert vote.chosen.kind == "no_call" and not vote.failed


def test_critic_falls_back_to_majority_on_unreadable_reply():
    model = FakeChatModel(script=["I think the best is the mul one"])
    vote = critic_vote(model, [], None, [calls(ADD12), calls(ADD21), calls(MUL)])
    assert vote.critic_fallback and vote.chosen.calls == (ADD12,)
    assert vote.to_dict()["critic_fallback"] is True


def test_critic_makes_no_request_for_a_single_candidate():
    model = FakeChatModel(script=[])
    vote = critic_vote(model, [], None, [calls(ADD12), calls(ADD21), broken()])
    assert model.requests == [] and vote.chosen.calls == (ADD12,) and vote.method == "critic"


def test_registry():
    assert set(AGGREGATORS) == {"majority", "valid_majority", "filled_majority", "critic"}
    vote = AGGREGATORS["majority"](None, [], None, [calls(ADD12)], max_tokens=8, seed=0)
    assert vote.chosen.calls == (ADD12,)
    assert Usage() == vote.usage


def test_one_call_mode_keeps_the_first_call_and_forgives_a_cut_tail():
    from kate.llm.fake import FakeChatModel
    from kate.sampling.policy import GreedySampler, WidthSampler

    run_on = '{"name": "ls", "arguments": {"a": true}}\n{"name": "ls", "arguments": {"a": true}}\n{"name": "l'
    step = GreedySampler().act(FakeChatModel([run_on]), [{"role": "user", "content": "x"}], None, one_call=True)
    assert step.calls == (ToolCall("ls", {"a": True}),) and step.parse_error is None
    strict = GreedySampler().act(FakeChatModel([run_on]), [{"role": "user", "content": "x"}], None)
    assert strict.calls == () and strict.parse_error  # the default stays strict
    broken_first = '{"name": "ls", "arguments": {"a": tru'
    step = GreedySampler().act(FakeChatModel([broken_first]), [{"role": "user", "content": "x"}], None, one_call=True)
    assert step.calls == () and step.parse_error
    width = WidthSampler(n=3).act(FakeChatModel([[run_on, run_on, "plain"]]), [{"role": "user", "content": "x"}], None,
                                 one_call=True)
    assert width.calls == (ToolCall("ls", {"a": True}),) and width.vote.chosen.votes == 2


def test_a_greedy_one_call_step_stops_at_its_first_whole_call_where_the_client_can():
    from kate.sampling.policy import GreedySampler, WidthSampler
    from kate.toolcall import first_call_complete, first_call_end

    run_on = 'Sure: {"name": "ls", "arguments": {"a": {"b": 1}}}\n{"name": "ls", "arguments": {"a": true}}\n{"na'
    assert first_call_end(run_on) == run_on.index("}}}") + 3
    assert not first_call_complete(run_on[: run_on.index("}}}") + 2]) and first_call_end('{"name": "l') is None
    ask = [{"role": "user", "content": "x"}]
    stopping = FakeChatModel([run_on], options=("stop_after_call",), repeat_last=True)
    step = GreedySampler().act(stopping, ask, None, one_call=True)
    assert step.text == run_on[: first_call_end(run_on)] and step.calls == (ToolCall("ls", {"a": {"b": 1}}),)
    assert stopping.requests[-1]["stop_after_call"] is True
    GreedySampler().act(stopping, ask, None)  # a step that keeps every call: not stopped
    assert stopping.requests[-1]["stop_after_call"] is False
    WidthSampler(n=2).act(stopping, ask, None, one_call=True)  # ties break by whole samples' likelihood: not stopped
    assert stopping.requests[-1]["stop_after_call"] is False
    plain = GreedySampler().act(FakeChatModel([run_on]), ask, None, one_call=True)  # a client without the option
    assert plain.text == run_on and plain.calls == step.calls
    with pytest.raises(TypeError, match="stop_after_call"):
        FakeChatModel([run_on]).chat(ask, stop_after_call=True)


ADD_TOOL = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}


def test_schema_valid_vote_sets_aside_calls_the_tools_cannot_make():
    wrong_type = ToolCall("add", {"a": "1", "b": 2})
    unknown_parameter = ToolCall("add", {"a": 1, "b": 2, "c": 3})
    samples = [calls(wrong_type), calls(wrong_type), calls(unknown_parameter), calls(MUL), calls(ADD12)]
    assert majority_vote(samples).chosen.calls == (wrong_type,)
    vote = AGGREGATORS["valid_majority"](None, [], [ADD_TOOL], samples)
    assert vote.method == "valid_majority" and vote.chosen.calls == (ADD12,) and vote.chosen.valid
    assert vote.margin == pytest.approx(-1 / 5)  # chosen over an invalid candidate with more votes
    assert [c.valid for c in vote.candidates] == [True, False, False, False]
    assert vote.to_dict()["chosen"]["valid"] is True


def test_schema_valid_vote_prefers_no_call_to_an_invalid_call_and_falls_back_to_majority():
    assert AGGREGATORS["valid_majority"](None, [], [ADD_TOOL], [calls(MUL), calls(MUL), answer()]).chosen.calls == ()
    only_invalid = [calls(MUL), calls(MUL), calls(ToolCall("add", {"a": 1}))]
    assert AGGREGATORS["valid_majority"](None, [], [ADD_TOOL], only_invalid).chosen.calls == (MUL,)
    assert AGGREGATORS["valid_majority"](None, [], None, [calls(MUL), calls(MUL), calls(ADD12)]).chosen.calls == (MUL,)


TEXT_TOOL = {"type": "function", "function": {"name": "setup", "parameters": {
    "type": "object", "properties": {"controller": {"type": "string"}}, "required": ["controller"]}}}


def test_filled_vote_sets_aside_a_copied_example_placeholder():
    copied, filled = ToolCall("setup", {"controller": "<controller 1>"}), ToolCall("setup", {"controller": "main"})
    samples = [calls(copied), calls(copied), calls(copied), calls(filled)]
    assert AGGREGATORS["valid_majority"](None, [], [TEXT_TOOL], samples).chosen.calls == (copied,)  # a string fits
    vote = AGGREGATORS["filled_majority"](None, [], [TEXT_TOOL], samples)
    assert vote.method == "filled_majority" and vote.chosen.calls == (filled,) and vote.chosen.valid
    assert AGGREGATORS["filled_majority"](None, [], [TEXT_TOOL], [calls(copied)]).chosen.calls == (copied,)  # fallback
    wrong_type = ToolCall("add", {"a": "1", "b": 2})  # with no placeholder it is the schema-valid vote
    assert AGGREGATORS["filled_majority"](None, [], [ADD_TOOL], [calls(wrong_type)] * 2 + [calls(ADD12)]).chosen.calls \
        == (ADD12,)
    assert AGGREGATORS["filled_majority"](None, [], None, samples).chosen.calls == (filled,)  # no tools: placeholders only
