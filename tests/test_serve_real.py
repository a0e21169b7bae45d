"""`kate serve` as a user starts it (a child process on 127.0.0.1) with real models, called with the
real `openai` client: the 135M model alone for the contract (tools, n, streamed tool calls, logprobs,
kate's fields), the default model (the 0.5B with kate's adapter, gated by the base) where tools matter
(a forced call, and the client wrapper giving the server's calls for the same seed)."""

from __future__ import annotations

import json

import openai
import pytest

from kate.llm.registry import SMALL_TEST_MODEL
from kate.serve import wrap
from kate.serve.process import start_kate_server

pytestmark = pytest.mark.model

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}  # fmt: skip
CURRENCY = {"type": "function", "function": {
    "name": "convert_currency", "description": "Convert an amount of money between currencies",
    "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "from_currency": {"type": "string"},
                   "to_currency": {"type": "string"}}, "required": ["amount", "from_currency", "to_currency"]}}}  # fmt: skip
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
DEFAULT = "kate-default"  # the served name of kate serve's default model (kate.default)


@pytest.fixture(scope="module")
def small():
    server = start_kate_server(["llm=llamacpp", f"llm.model={SMALL_TEST_MODEL}", "llm.n_ctx=4096", "llm.max_parallel=8",
                                "width=2", "max_tokens=40", "served_model_name=kate-small"])  # fmt: skip
    yield openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0, timeout=300)
    server.stop()


@pytest.fixture(scope="module")
def default():
    server = start_kate_server(["llm.n_ctx=8192", "llm.max_parallel=8", "width=1", "knowledge.enabled=false",
                                "max_tokens=64", f"served_model_name={DEFAULT}"])  # fmt: skip
    yield openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0, timeout=300)
    server.stop()


def test_the_small_model_behind_kate_serve_answers_the_openai_client(small):
    assert [m.id for m in small.models.list().data] == ["kate-small", SMALL_TEST_MODEL]
    response = small.chat.completions.create(model="kate-small", messages=ASK, tools=[WEATHER], n=2, seed=0)
    assert len(response.choices) == 2 and response.usage.completion_tokens > 0
    for choice in response.choices:
        assert choice.finish_reason in {"tool_calls", "stop", "length"}
        assert (choice.message.tool_calls is None) == (choice.finish_reason != "tool_calls")
    kate = response.model_extra["kate"]
    assert kate["width"] == 2 and len(kate["votes"]) == 2 and kate["votes"][0]["n"] == 2


def test_logprobs_with_the_top_alternatives(small):
    greedy = small.chat.completions.create(model="kate-small", messages=ASK, logprobs=True, top_logprobs=3,
                                           max_tokens=8, extra_body={"kate": {"n": 1}})  # fmt: skip
    tokens = greedy.choices[0].logprobs.content
    assert tokens and all(len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token for t in tokens)


def test_forced_calls_stream_intact(default):
    for choice in ({"type": "function", "function": {"name": "get_weather"}}, "required"):
        stream = default.chat.completions.create(model=DEFAULT, messages=ASK, tools=[WEATHER, CURRENCY],
                                                 tool_choice=choice, stream=True, seed=1,
                                                 stream_options={"include_usage": True})  # fmt: skip
        chunks = list(stream)
        name, arguments = None, ""
        for chunk in chunks[:-1]:
            for call in chunk.choices[0].delta.tool_calls or []:
                name = name or call.function.name
                arguments += call.function.arguments or ""
        assert name == "get_weather" and json.loads(arguments) == {"city": "Paris"}
        assert chunks[-2].choices[0].finish_reason == "tool_calls" and chunks[-1].usage.completion_tokens > 0


def test_the_default_model_calls_the_users_tool_and_the_wrapper_gives_the_servers_calls(default):
    messages = [{"role": "user", "content": "Convert 250 US dollars to euros."}]
    by_server = default.chat.completions.create(model=DEFAULT, messages=messages, tools=[WEATHER, CURRENCY],
                                                seed=5, max_tokens=64, extra_body={"kate": {"n": 4}})  # fmt: skip
    by_wrapper = wrap(default, width=4).chat.completions.create(model=DEFAULT, messages=messages,
                                                                 tools=[WEATHER, CURRENCY], seed=5, max_tokens=64)  # fmt: skip

    def calls(response):
        return [(c.function.name, json.loads(c.function.arguments)) for c in response.choices[0].message.tool_calls or []]

    assert calls(by_server) == calls(by_wrapper)
    (name, arguments), = calls(by_server)
    assert name == "convert_currency" and arguments["amount"] == 250
    # the same samples and votes; a sequence's logprob may differ in late digits (the engine's prompt
    # cache makes the second request's prefill a different batch shape)
    chosen = [{k: v for k, v in r.model_extra["kate"]["votes"][0]["chosen"].items() if k != "best_logprob"}
              for r in (by_server, by_wrapper)]  # fmt: skip
    assert chosen[0] == chosen[1]
