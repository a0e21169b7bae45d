"""The OpenAI-compatible backend: payloads and parsing as plain dicts, retries, the extra per-call
options, a caller's own client, width over a server that refuses n > 1 (a stub on 127.0.0.1), and a
real server (llama-cpp-python's, started on 127.0.0.1 by the test)."""

from __future__ import annotations

import httpx
import openai
import pytest

from kate.llm.base import EXTRA_OPTIONS, supports
from kate.llm.local_server import start_llamacpp_server
from kate.llm.openai import OpenAIChatModel, UpstreamError, UpstreamRejected, build_payload, parse_response
from kate.llm.registry import DEFAULT_AGENT_MODEL
from kate.testing import StubUpstream
from kate.toolcall import ToolCall

from .conftest import CALCULATOR

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


def _response(*choices, prompt_tokens=10, completion_tokens=6):
    return {"choices": list(choices), "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def _choice(content="", tool_calls=None, logprobs=None):
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    return {"message": message, "finish_reason": "stop", "logprobs": logprobs}


def test_payload_carries_only_what_was_asked():
    payload = build_payload("m", MESSAGES, [CALCULATOR], n=4, temperature=1.0, max_tokens=32, seed=3, stop=["\n"], logprobs=True)
    assert payload == {
        "model": "m", "messages": MESSAGES, "n": 4, "temperature": 1.0, "max_tokens": 32,
        "tools": [CALCULATOR], "seed": 3, "stop": ["\n"], "logprobs": True,
    }  # fmt: skip
    bare = build_payload("m", MESSAGES, None, n=1, temperature=0.0, max_tokens=8, seed=None, stop=None, logprobs=False)
    assert set(bare) == {"model", "messages", "n", "temperature", "max_tokens"}


def test_tool_calls_from_the_field_or_from_content():
    native = _choice(tool_calls=[{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}])
    in_content = _choice(content='```json\n{"name": "add", "arguments": {"b": 2, "a": 2}}\n```')
    prose = _choice(content="It is 4.")
    broken = _choice(content='{"name": "add", "arguments": {"a": 2}]')
    out = parse_response(_response(native, in_content, prose, broken))
    assert out[0].tool_calls == out[1].tool_calls == (ToolCall("add", {"a": 2, "b": 2}),)
    assert out[0].tool_calls[0].call_id == "c1"
    assert out[2].tool_calls == () and out[2].parse_error is None
    assert out[3].tool_calls == () and out[3].parse_error  # a recorded failure, not a crash


def test_logprobs_are_read():
    lp = {"content": [{"token": "4", "logprob": -0.5}, {"token": ".", "logprob": -0.25}]}
    [c] = parse_response(_response(_choice(content="4.", logprobs=lp)))
    assert c.sum_logprob == pytest.approx(-0.75) and c.usage.completion_tokens == 2


def _client(monkeypatch, outcomes):
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", backoff=0.0, max_retries=3)
    calls = []

    def create(**payload):
        calls.append(payload)
        outcome = outcomes[min(len(calls) - 1, len(outcomes) - 1)]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(model.client.chat.completions, "create", create)
    return model, calls


REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def test_retries_on_timeouts_and_5xx_then_succeeds(monkeypatch):
    server_error = openai.InternalServerError("boom", response=httpx.Response(503, request=REQUEST), body=None)
    model, calls = _client(monkeypatch, [openai.APITimeoutError(request=REQUEST), server_error, _response(_choice("ok"))])
    [c] = model.chat(MESSAGES)
    assert c.text == "ok" and len(calls) == 3


def test_client_errors_are_not_retried(monkeypatch):
    bad = openai.BadRequestError("bad", response=httpx.Response(400, request=REQUEST), body=None)
    model, calls = _client(monkeypatch, [bad])
    with pytest.raises(UpstreamRejected) as refused:  # a ValueError: a recorded failure of the item, like a local engine's
        model.chat(MESSAGES)
    assert len(calls) == 1 and isinstance(refused.value, ValueError) and refused.value.status == 400
    assert "127.0.0.1:9" in str(refused.value) and "HTTP 400" in str(refused.value)


def test_a_refused_key_is_an_error_of_the_run_not_of_an_item(monkeypatch):
    denied = openai.AuthenticationError("no", response=httpx.Response(401, request=REQUEST), body=None)
    model, calls = _client(monkeypatch, [denied])
    with pytest.raises(UpstreamError) as error:
        model.chat(MESSAGES)
    assert not isinstance(error.value, ValueError) and error.value.status == 401 and len(calls) == 1


def test_n_is_filled_with_single_requests_when_the_server_ignores_it(monkeypatch):
    model, calls = _client(monkeypatch, [_response(_choice("a"))])
    out = model.chat(MESSAGES, n=4, temperature=1.0, seed=10)
    assert len(out) == 4 and len(calls) == 4
    assert calls[0]["n"] == 4 and all(c["n"] == 1 for c in calls[1:])
    assert sorted(c["seed"] for c in calls[1:]) == [11, 12, 13]  # distinct seeds, distinct samples


def test_extra_options_in_the_payload():
    payload = build_payload("m", MESSAGES, [CALCULATOR], n=1, temperature=0.7, max_tokens=8, seed=None, stop=None,
                            logprobs=False, top_p=0.9, top_logprobs=3, tool_choice="required")  # fmt: skip
    assert payload["top_p"] == 0.9 and payload["top_logprobs"] == 3 and payload["logprobs"] is True
    assert payload["tool_choice"] == "required"
    no_tools = build_payload("m", MESSAGES, None, n=1, temperature=0.0, max_tokens=8, seed=None, stop=None,
                             logprobs=False, tool_choice="required")  # fmt: skip
    assert "tool_choice" not in no_tools and "top_p" not in no_tools and "top_logprobs" not in no_tools


def test_top_logprobs_are_read_into_token_logprobs():
    lp = {"content": [{"token": "4", "logprob": -0.5, "top_logprobs": [{"token": "4", "logprob": -0.5, "bytes": [52]},
                                                                       {"token": "5", "logprob": -1.5, "bytes": [53]}]}]}  # fmt: skip
    [c] = parse_response(_response(_choice(content="4", logprobs=lp)))
    assert c.logprobs[0].top == (("4", -0.5), ("5", -1.5))
    [plain] = parse_response(_response(_choice(content="4", logprobs={"content": [{"token": "4", "logprob": -0.5}]})))
    assert plain.logprobs[0].top == ()


def test_per_call_options_override_the_constructors(monkeypatch):
    model, calls = _client(monkeypatch, [_response(_choice("ok"))])
    model.tool_choice = "auto"
    assert [o for o in EXTRA_OPTIONS if supports(model, o)] == ["top_p", "top_logprobs", "tool_choice"]
    model.chat(MESSAGES, [CALCULATOR], top_p=0.5, top_logprobs=2, tool_choice="required")
    model.chat(MESSAGES, [CALCULATOR])
    assert calls[0]["tool_choice"] == "required" and calls[0]["top_p"] == 0.5 and calls[0]["top_logprobs"] == 2
    assert calls[1]["tool_choice"] == "auto" and "top_p" not in calls[1]
    with pytest.raises(ValueError, match="top_logprobs"):
        model.chat(MESSAGES, top_logprobs=21)
    with pytest.raises(ValueError, match="top_p"):
        model.chat(MESSAGES, top_p=0.0)


def test_a_callers_client_is_used_without_stacking_its_retries():
    with StubUpstream(lambda body: "from the stub") as stub:
        theirs = openai.OpenAI(base_url=stub.base_url, api_key="theirs", timeout=7.0, max_retries=3)
        model = OpenAIChatModel("m", client=theirs, max_retries=1)
        [c] = model.chat(MESSAGES)
    assert c.text == "from the stub" and len(stub.bodies) == 1
    assert theirs.max_retries == 3 and model.client.max_retries == 0  # kate's loop is the only one
    assert model.client.base_url == theirs.base_url and model.client.api_key == "theirs" and model.client.timeout == 7.0
    assert model.runtime()["base_url"] == str(theirs.base_url)


@pytest.mark.parametrize("status", [400, 422])
def test_width_over_a_server_that_refuses_n(status):
    with StubUpstream(lambda body: f"seed {body.get('seed')}", refuse_n=status) as stub:
        model = OpenAIChatModel("m", base_url=stub.base_url, backoff=0.0, max_retries=1)
        first = model.chat(MESSAGES, n=3, temperature=1.0, seed=10)
        asked_first = [b["n"] for b in stub.bodies]
        del stub.bodies[:]
        second = model.chat(MESSAGES, n=3, temperature=1.0, seed=20)
    assert asked_first == [3, 1, 1, 1]  # one refusal, then single requests
    assert sorted(c.text for c in first) == ["seed 10", "seed 11", "seed 12"]
    assert [b["n"] for b in stub.bodies] == [1, 1, 1] and model.n_refused  # remembered: no second refusal
    assert sorted(c.text for c in second) == ["seed 20", "seed 21", "seed 22"]


def test_a_refusal_that_is_not_about_n_is_raised():
    with StubUpstream(refuse_n=400) as stub:
        stub.refuse_all = 400  # e.g. a prompt longer than the server's context: n=1 is refused too
        model = OpenAIChatModel("m", base_url=stub.base_url, backoff=0.0, max_retries=1)
        with pytest.raises(UpstreamRejected):
            model.chat(MESSAGES, n=2, temperature=1.0, seed=0)
    assert [b["n"] for b in stub.bodies] == [2, 1] and not model.n_refused


@pytest.mark.model
def test_real_llamacpp_server_on_localhost():
    with start_llamacpp_server(DEFAULT_AGENT_MODEL) as server:
        model = OpenAIChatModel(server.model, base_url=server.base_url)
        out = model.chat([{"role": "user", "content": "What is 1234 * 5678?"}], [CALCULATOR], n=2, temperature=0.0, max_tokens=64)
    assert len(out) == 2
    for c in out:
        assert c.parse_error is None, c.text
        assert [call.name for call in c.tool_calls] == ["calculator"]
