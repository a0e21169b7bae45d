"""The act-first adaptive vote on the fake model: when it stops, what it does with no-call samples."""

import pytest

from kate.llm.fake import FakeChatModel
from kate.sampling.adaptive import AdaptiveWidthSampler

TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]
USER = [{"role": "user", "content": "2 + 3?"}]


def call(a: int, b: int = 3) -> str:
    return f'<tool_call>\n{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'


def test_agreeing_first_draw_stops_after_two_samples():
    model = FakeChatModel([[call(2), call(2)]])
    step = AdaptiveWidthSampler(n=8, first=2).act(model, USER, TOOLS, seed=0)
    assert [c.to_dict() for c in step.calls] == [{"name": "add", "arguments": {"a": 2, "b": 3}}]
    assert step.vote.adaptive["drawn"] == 2 and step.vote.adaptive["stop"] == "agreed"
    assert len(model.requests) == 1 and model.requests[0]["n"] == 2


def test_disagreement_draws_more_until_decided():
    model = FakeChatModel([[call(2), call(4)], [call(2), call(2)], [call(2), call(2)]])
    step = AdaptiveWidthSampler(n=8, first=2, step=2).act(model, USER, TOOLS, seed=1)
    assert step.calls[0].arguments == {"a": 2, "b": 3}
    adaptive = step.vote.adaptive
    assert adaptive["draws"] == [2, 2, 2] and adaptive["drawn"] == 6
    assert adaptive["stop"] == "decided"  # 5 votes against 1 with 2 left: nothing can change it
    assert len({r["seed"] for r in model.requests}) == 3  # every draw its own seed


def test_draws_stop_at_n():
    model = FakeChatModel([[call(1), call(2)], [call(3), call(4)]])
    step = AdaptiveWidthSampler(n=4, first=2, step=2).act(model, USER, TOOLS, seed=0)
    assert step.vote.adaptive == {**step.vote.adaptive, "drawn": 4, "stop": "max"}


def test_act_first_calls_win_over_pooled_answers():
    # 3 answers in words (one candidate) against 4 calls split 2/1/1: pooled, "no call" wins;
    # acting first, the calls outnumber the answers and the leading call is chosen.
    texts = ["It is 5.", "It is 5.", "It is 5.", call(2), call(2), call(1), call(7), "It is 5."]
    pooled = AdaptiveWidthSampler(n=8, first=8, act_first=False).act(FakeChatModel([texts[:7] + [call(9)]]), USER, TOOLS)
    assert pooled.calls == ()
    acting = AdaptiveWidthSampler(n=8, first=8).act(FakeChatModel([texts[:7] + [call(9)]]), USER, TOOLS)
    assert acting.calls[0].arguments == {"a": 2, "b": 3}
    assert acting.vote.adaptive["acts"] == 5 and acting.vote.adaptive["answers"] == 3


def test_answers_that_outnumber_calls_answer():
    model = FakeChatModel([["It is 5.", "It is 5.", "Five.", call(2)]])
    step = AdaptiveWidthSampler(n=4, first=4).act(model, USER, TOOLS)
    assert step.calls == () and step.vote.chosen.kind == "no_call"


class LogprobModel(FakeChatModel):
    """The fake model, its completions carrying a fixed per-token log-probability."""

    logprob: float = -0.01

    def chat(self, *args, **kwargs):
        from dataclasses import replace

        from kate.llm.base import TokenLogprob

        return [replace(c, logprobs=(TokenLogprob("x", self.logprob, 0, ()),) * 4)
                for c in super().chat(*args, **kwargs)]


def test_confident_greedy_call_draws_nothing_else():
    model = LogprobModel([call(2)], repeat_last=True)
    step = AdaptiveWidthSampler(n=8, gate_logprob=-0.1).act(model, USER, TOOLS, seed=0)
    assert step.vote.adaptive["stop"] == "confident" and step.vote.adaptive["drawn"] == 1
    assert len(model.requests) == 1 and model.requests[0]["temperature"] == 0.0


def test_unsure_greedy_call_goes_on_sampling():
    model = LogprobModel([call(2)], repeat_last=True)
    model.logprob = -2.0
    step = AdaptiveWidthSampler(n=8, gate_logprob=-0.1).act(model, USER, TOOLS, seed=0)
    assert step.vote.adaptive["stop"] == "agreed" and step.vote.adaptive["drawn"] == 3  # greedy + first draw


def test_gate_without_logprobs_never_commits():
    model = FakeChatModel([call(2)], repeat_last=True)
    step = AdaptiveWidthSampler(n=8, gate_logprob=-10.0).act(model, USER, TOOLS, seed=0)
    assert step.vote.adaptive["stop"] != "confident" and model.requests[0]["temperature"] == 0.0


def test_invalid_agreement_keeps_drawing():
    bad = '<tool_call>\n{"name": "add", "arguments": {"a": "two"}}\n</tool_call>'
    model = FakeChatModel([[bad, bad], [call(2), call(2)], [call(2), call(2)]])
    step = AdaptiveWidthSampler(n=6, first=2).act(model, USER, TOOLS, seed=0)
    assert step.calls[0].arguments == {"a": 2, "b": 3}
    assert step.vote.adaptive["drawn"] >= 4


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"first": 9, "n": 8}, {"aggregate": "critic"}, {"step": 0}])
def test_bad_settings_fail_when_made(kwargs):
    with pytest.raises(ValueError):
        AdaptiveWidthSampler(**kwargs)


def test_kate_serve_takes_the_adaptive_vote_per_request():
    """The same sampler behind `kate serve` (a real server on 127.0.0.1, the real openai client)."""
    import openai

    from kate.serve.app import ServerSettings, create_app
    from kate.serve.process import ThreadedServer
    from kate.serve.service import ChatService, ServeSettings

    model = FakeChatModel([[call(2), call(2)]])
    service = ChatService(lambda name: model, None, ServeSettings(width=8))
    with ThreadedServer(create_app(service, ServerSettings(model_names=("fake",)))) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0, timeout=30)
        response = client.chat.completions.create(model="fake", messages=USER, tools=TOOLS, seed=1,
                                                  extra_body={"kate": {"vote": "adaptive"}})
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="fake", messages=USER, tools=TOOLS,
                                           extra_body={"kate": {"vote": "adaptve"}})
    (tool_call,) = response.choices[0].message.tool_calls
    assert tool_call.function.name == "add"
    vote = response.model_extra["kate"]["votes"][0]
    assert vote["adaptive"]["drawn"] == 2 and vote["adaptive"]["stop"] == "agreed"
    assert [r["n"] for r in model.requests] == [2]
