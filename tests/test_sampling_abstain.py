"""The abstain gate (kate.sampling.abstain): P(call) from the greedy reply's first-token logprobs, the
call dropped below tau and the answer asked again with the no-tool text prefilled."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from kate.llm.base import Completion, TokenLogprob, completion_from_text
from kate.sampling.abstain import AbstainSampler, opens_call, p_call
from kate.sampling.gate import GatedStep, GateError

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]  # fmt: skip
CALL = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
ASK = [{"role": "user", "content": "Weather in Paris?"}]


@dataclass
class FirstTokenFake:
    """Replies ``reply`` whose first token's top logprobs put ``p`` on "```" and the rest on "The";
    a prefilled request gets ``answer`` after the prefill."""

    p: float
    reply: str = CALL
    answer: str = "Paris is usually mild."
    name: str = "first-token-fake"
    options: tuple[str, ...] = ("top_logprobs", "prefill")
    requests: list[dict] = field(default_factory=list)

    def chat(self, messages, tools=None, *, n=1, temperature=0.0, max_tokens=256, seed=None, stop=None,
             logprobs=False, top_logprobs=0, prefill=None) -> list[Completion]:  # fmt: skip
        self.requests.append({"logprobs": logprobs, "top_logprobs": top_logprobs, "prefill": prefill})
        if prefill is not None:
            return [completion_from_text(prefill + self.answer)]
        top = (("```", math.log(self.p)), ("The", math.log(1 - self.p)))
        first = TokenLogprob(top[0][0] if self.p >= 0.5 else top[1][0], max(lp for _, lp in top), None, top)
        base = completion_from_text(self.reply)
        return [Completion(base.text, base.tool_calls, base.parse_error, "stop", (first,) if logprobs else None)]


def test_p_call_sums_the_first_tokens_that_open_a_call():
    assert opens_call("```") and opens_call(" {") and opens_call("<tool_call>") and opens_call("``")
    assert not opens_call("The") and not opens_call("") and not opens_call("Sure")
    top = (("```", math.log(0.6)), ("{\"", math.log(0.2)), ("To", math.log(0.2)))
    completion = Completion("x", logprobs=(TokenLogprob("```", math.log(0.6), None, top),))
    assert p_call(completion) == pytest.approx(0.8)
    assert p_call(Completion("x")) is None


def test_a_sure_call_stands_and_costs_one_request():
    model = FirstTokenFake(p=0.95)
    step = AbstainSampler(tau=0.85).act(model, ASK, TOOLS)
    assert isinstance(step, GatedStep) and [c.name for c in step.calls] == ["get_weather"]
    assert step.gate == {"belief": pytest.approx(0.95), "action": "none", "prefill": ""}
    assert model.requests == [{"logprobs": True, "top_logprobs": 20, "prefill": None}]


def test_an_unsure_call_is_asked_again_as_a_plain_answer():
    model = FirstTokenFake(p=0.7)
    gate = AbstainSampler(tau=0.85)
    step = gate.act(model, ASK, TOOLS)
    assert step.calls == () and step.text == gate.no_tool_text + model.answer
    assert step.gate["action"] == "no_tool" and step.gate["belief"] == pytest.approx(0.7)
    assert [c.text for c in step.completions] == [step.text, CALL]  # the answer, then the dropped reply
    assert model.requests[1]["prefill"] == gate.no_tool_text


def test_a_malformed_call_counts_as_a_call_and_usage_sums_both_requests():
    model = FirstTokenFake(p=0.6, reply='```json\n{"name": "get_weather", "arguments": {"city": }\n```')
    step = AbstainSampler(tau=0.85).act(model, ASK, TOOLS)
    assert step.gate["action"] == "no_tool" and step.parse_error is None and step.calls == ()
    assert step.usage.completion_tokens == sum(c.usage.completion_tokens for c in step.completions)


def test_an_answer_that_still_calls_keeps_its_call():
    model = FirstTokenFake(p=0.6, answer='\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```')
    step = AbstainSampler(tau=0.85).act(model, ASK, TOOLS)
    assert step.gate["action"] == "no_tool" and [c.name for c in step.calls] == ["get_weather"]


def test_an_empty_reply_is_no_call_and_no_error():
    model = FirstTokenFake(p=0.9, reply="")
    model.chat = lambda *a, **k: [Completion("", logprobs=())]  # no first token, so no logprobs
    step = AbstainSampler(tau=0.85).act(model, ASK, TOOLS)
    assert step.calls == () and step.gate == {"belief": None, "action": "none", "prefill": ""}


def test_a_reply_without_a_call_is_never_asked_again():
    model = FirstTokenFake(p=0.1, reply="It is sunny, I think.")
    step = AbstainSampler(tau=0.85).act(model, ASK, TOOLS)
    assert step.text == "It is sunny, I think." and step.gate["action"] == "none" and len(model.requests) == 1


def test_after_a_tool_result_or_without_tools_it_is_plain_greedy():
    after = [*ASK, {"role": "assistant", "content": CALL}, {"role": "tool", "content": "mild"}]
    for messages, tools in ((after, TOOLS), (ASK, None)):
        model = FirstTokenFake(p=0.1)
        step = AbstainSampler(tau=0.85).act(model, messages, tools)
        assert step.gate["belief"] is None and model.requests[0]["logprobs"] is False


def test_bad_settings_and_clients_are_clear_errors():
    with pytest.raises(ValueError, match="tau"):
        AbstainSampler(tau=1.5)
    with pytest.raises(ValueError, match="top_logprobs"):
        AbstainSampler(top_logprobs=0)
    model = FirstTokenFake(p=0.5, options=("prefill",))
    with pytest.raises(GateError, match="top_logprobs"):
        AbstainSampler().act(model, ASK, TOOLS)
    silent = FirstTokenFake(p=0.5)
    silent.chat = lambda *a, **k: [completion_from_text(CALL)]  # a call, but no logprobs returned
    with pytest.raises(GateError, match="no top logprobs"):
        AbstainSampler().act(silent, ASK, TOOLS)


def test_kate_eval_records_keep_the_gate():
    from kate.agent.policy import Policy
    from kate.tasks.step import step_trace

    record = step_trace(Policy(FirstTokenFake(p=0.7), AbstainSampler(tau=0.85)), ASK, TOOLS, seed=0)
    assert record["gate"]["action"] == "no_tool" and record["outputs"][1] == CALL


@pytest.mark.model
def test_the_real_default_model_gives_a_first_token_belief(default_llamacpp):
    step = AbstainSampler(tau=0.0).act(default_llamacpp, ASK, TOOLS)
    belief = step.gate["belief"]
    assert 0.5 < belief <= 1.0 and [c.name for c in step.calls] == ["get_weather"]
    if belief < 0.99:  # a closed gate (a second request's belief differs in the last digits: the prefix cache)
        closed = AbstainSampler(tau=1.0).act(default_llamacpp, ASK, TOOLS)
        assert closed.gate["action"] == "no_tool" and closed.text.startswith(AbstainSampler().no_tool_text)
