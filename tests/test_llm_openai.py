"""The OpenAI-compatible backend: payloads and parsing as plain dicts, retries, and a real server
(llama-cpp-python's, started on 127.0.0.1 by the test)."""

from __future__ import annotations

import httpx
import openai
import pytest

from kate.llm.local_server import start_llamacpp_server
from kate.llm.openai import OpenAIChatModel, build_payload, parse_response
from kate.llm.registry import DEFAULT_AGENT_MODEL
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
    with pytest.raises(openai.BadRequestError):
        model.chat(MESSAGES)
    assert len(calls) == 1


def test_n_is_filled_with_single_requests_when_the_server_ignores_it(monkeypatch):
    model, calls = _client(monkeypatch, [_response(_choice("a"))])
    out = model.chat(MESSAGES, n=4, temperature=1.0, seed=10)
    assert len(out) == 4 and len(calls) == 4
    assert calls[0]["n"] == 4 and all(c["n"] == 1 for c in calls[1:])
    assert sorted(c["seed"] for c in calls[1:]) == [11, 12, 13]  # distinct seeds, distinct samples


def test_real_llamacpp_server_on_localhost():
    with start_llamacpp_server(DEFAULT_AGENT_MODEL) as server:
        model = OpenAIChatModel(server.model, base_url=server.base_url)
        out = model.chat([{"role": "user", "content": "What is 1234 * 5678?"}], [CALCULATOR], n=2, temperature=0.0, max_tokens=64)
    assert len(out) == 2
    for c in out:
        assert c.parse_error is None, c.text
        assert [call.name for call in c.tool_calls] == ["calculator"]
