"""`kate serve` on a real HTTP server (uvicorn on 127.0.0.1, in a thread) with a scripted model,
called with the real `openai` client: the response and stream shapes, kate's fields, the request
contract's 4xx, the queue's 429, timeouts and upstream failures as 504 / 502."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

from kate.llm.fake import FakeChatModel
from kate.llm.local_server import free_port
from kate.llm.openai import OpenAIChatModel
from kate.serve.app import ServerSettings, create_app
from kate.serve.errors import APIError
from kate.serve.process import ThreadedServer
from kate.serve.request import Limits
from kate.serve.service import ChatService, ServeSettings

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}  # fmt: skip
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}  # fmt: skip
PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TWO = PARIS + '\n<tool_call>\n{"name": "get_time", "arguments": {"city": "Paris, France"}}\n</tool_call>'
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def serve(model, *, width: int = 1, **server: object) -> ThreadedServer:
    service = ChatService(lambda name: model, None, ServeSettings(width=width))
    settings = ServerSettings(model_names=("fake",), **server)  # type: ignore[arg-type]
    return ThreadedServer(create_app(service, settings))


def client(server: ThreadedServer, key: str = "-") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=30)


def post(server: ThreadedServer, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_voted_call_comes_back_as_openai_tool_calls_with_the_vote():
    fake = FakeChatModel([[PARIS, PARIS, PARIS, "It is sunny."]])
    with serve(fake, width=4) as server:
        response = client(server).chat.completions.create(model="fake", messages=ASK, tools=[WEATHER], seed=3)
    message = response.choices[0].message
    assert response.choices[0].finish_reason == "tool_calls" and message.content is None
    (call,) = message.tool_calls
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    kate = response.model_extra["kate"]
    assert kate["width"] == 4 and kate["votes"][0]["chosen"]["votes"] == 3 and kate["votes"][0]["margin"] == 0.5
    assert fake.requests[0]["n"] == 4 and fake.requests[0]["seed"] == 3


def test_streamed_tool_calls_reach_the_client_intact_with_usage_last():
    fake = FakeChatModel([TWO, TWO], repeat_last=True)
    with serve(fake) as server:
        plain = client(server).chat.completions.create(model="fake", messages=ASK, tools=[WEATHER, TIME])
        stream = client(server).chat.completions.create(model="fake", messages=ASK, tools=[WEATHER, TIME],
                                                        stream=True, stream_options={"include_usage": True})  # fmt: skip
        chunks = list(stream)
    calls: dict[int, dict] = {}
    for chunk in chunks[:-1]:
        for delta_call in chunk.choices[0].delta.tool_calls or []:
            slot = calls.setdefault(delta_call.index, {"id": None, "name": None, "arguments": ""})
            slot["id"] = slot["id"] or delta_call.id
            slot["name"] = slot["name"] or (delta_call.function.name if delta_call.function else None)
            slot["arguments"] += (delta_call.function.arguments or "") if delta_call.function else ""
    expected = [(c.function.name, json.loads(c.function.arguments)) for c in plain.choices[0].message.tool_calls]
    assert [(calls[i]["name"], json.loads(calls[i]["arguments"])) for i in sorted(calls)] == expected
    assert all(c["id"] for c in calls.values())
    assert len(expected) == 2 and any(len(c.choices[0].delta.tool_calls or []) and c.choices[0].delta.tool_calls[0].id
                                      is None for c in chunks[:-1])  # arguments came in pieces  # fmt: skip
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


def test_text_answers_n_choices_and_one_call_when_parallel_calls_are_off():
    fake = FakeChatModel([["Hello there.", "Hi!"], TWO])
    with serve(fake) as server:
        two = client(server).chat.completions.create(model="fake", messages=ASK, n=2, temperature=0.7, seed=1)
        one = client(server).chat.completions.create(model="fake", messages=ASK, tools=[WEATHER, TIME],
                                                     parallel_tool_calls=False)  # fmt: skip
    assert [c.message.content for c in two.choices] == ["Hello there.", "Hi!"]
    assert fake.requests[0]["n"] == 2 and fake.requests[0]["temperature"] == 0.7
    assert [c.function.name for c in one.choices[0].message.tool_calls] == ["get_weather"]


def test_tool_choice_none_answers_in_text_and_required_without_a_call_is_an_error():
    fake = FakeChatModel(["Sunny, I think.", "Sunny, I think."])
    with serve(fake) as server:
        response = client(server).chat.completions.create(model="fake", messages=ASK, tools=[WEATHER], tool_choice="none")
        assert fake.requests[0]["tools"] is None and response.choices[0].message.content == "Sunny, I think."
        with pytest.raises(openai.InternalServerError, match="required"):
            client(server).chat.completions.create(model="fake", messages=ASK, tools=[WEATHER], tool_choice="required")


BAD_REQUESTS = [
    (b"{not json", 400, None),
    (json.dumps({"model": "nope", "messages": ASK}).encode(), 404, "model"),
    (json.dumps({"model": "fake", "messages": ASK, "tools": []}).encode(), 400, "tools"),
    (json.dumps({"model": "fake", "messages": ASK, "tool_choice": "auto"}).encode(), 400, "tool_choice"),
    (json.dumps({"model": "fake", "messages": ASK, "tools": [WEATHER],
                 "tool_choice": {"type": "function", "function": {"name": "get_time"}}}).encode(), 400, "tool_choice"),
    (json.dumps({"model": "fake", "messages": ASK, "stream_options": {"include_usage": True}}).encode(), 400,
     "stream_options"),
    (json.dumps({"model": "fake", "messages": []}).encode(), 400, "messages"),
    (json.dumps({"model": "fake", "messages": ASK, "n": 0}).encode(), 400, "n"),
    (json.dumps({"model": "fake", "messages": ASK, "top_logprobs": 2}).encode(), 400, "top_logprobs"),
    (json.dumps({"model": "fake", "messages": ASK, "kate": {"widht": 8}}).encode(), 400, "kate"),
    (json.dumps({"model": "fake", "messages": ASK * 9}).encode(), 413, "messages"),
    (json.dumps({"model": "fake", "messages": [{"role": "user", "content": "x" * 5000}]}).encode(), 413, None),
]


def test_bad_requests_get_the_right_status_and_openais_error_body():
    with serve(FakeChatModel(["ok"], repeat_last=True), max_body_bytes=4000, limits=Limits(max_messages=8)) as server:
        for body, status, param in BAD_REQUESTS:
            code, answer = post(server, body)
            assert code == status, (body[:80], answer)
            assert set(answer["error"]) == {"message", "type", "param", "code"} and answer["error"]["message"]
            if param is not None:
                assert answer["error"]["param"] == param, answer
        code, answer = post(server, b"{}", {"Content-Length": "999999"})
        assert code == 413
        with urllib.request.urlopen(f"{server.base_url}/models") as response:
            assert [m["id"] for m in json.loads(response.read())["data"]] == ["fake"]


def test_a_wrong_or_missing_key_is_401_and_the_right_one_passes():
    with serve(FakeChatModel(["ok"], repeat_last=True), api_key="sesame") as server:
        for key in ("wrong", "-"):
            with pytest.raises(openai.AuthenticationError):
                client(server, key).chat.completions.create(model="fake", messages=ASK)
        assert client(server, "sesame").chat.completions.create(model="fake", messages=ASK).choices[0].message.content == "ok"
        with urllib.request.urlopen(f"{server.base_url.removesuffix('/v1')}/health") as response:
            assert json.loads(response.read()) == {"status": "ok"}  # health needs no key


def _blocking_model(release: threading.Event, started: threading.Event) -> FakeChatModel:
    def answer(messages, tools, n):
        started.set()
        release.wait(30)
        return ["done"] * n

    return FakeChatModel([answer], repeat_last=True)


def test_a_full_queue_is_429_and_a_slow_model_a_504_within_the_timeout():
    release, started = threading.Event(), threading.Event()
    with serve(_blocking_model(release, started), max_concurrent=1, max_queue=0, request_timeout=1.0) as server:
        results: dict[str, object] = {}
        first = threading.Thread(target=lambda: results.update(first=post(server, json.dumps(
            {"model": "fake", "messages": ASK}).encode())))  # fmt: skip
        first.start()
        assert started.wait(10)
        code, answer = post(server, json.dumps({"model": "fake", "messages": ASK}).encode())
        assert code == 429 and answer["error"]["type"] == "rate_limit_error"
        first.join(30)
        assert results["first"][0] == 504 and results["first"][1]["error"]["code"] == "timeout"
        release.set()
        time.sleep(0.2)  # the worker ends and frees its slot
        for _ in range(50):
            code, _ = post(server, json.dumps({"model": "fake", "messages": ASK}).encode())
            if code == 200:
                break
            time.sleep(0.1)
        assert code == 200


def test_a_dead_upstream_is_a_502_within_the_timeout():
    dead = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{free_port()}/v1", timeout=2, max_retries=1, backoff=0.01)
    with serve(dead) as server:
        code, answer = post(server, json.dumps({"model": "fake", "messages": ASK}).encode())
    assert code == 502 and answer["error"]["type"] == "upstream_error"


def test_the_service_refuses_options_the_engine_cannot_honour():
    service = ChatService(lambda name: FakeChatModel(["x"]), None, ServeSettings(width=1))
    from kate.serve.request import read_request

    with pytest.raises(APIError, match="top_p"):
        service.complete(read_request({"model": "fake", "messages": ASK, "top_p": 0.5}))


def test_shutdown_lets_the_request_in_flight_finish():
    release, started = threading.Event(), threading.Event()
    server = serve(_blocking_model(release, started))
    server.__enter__()
    results: dict[str, object] = {}
    worker = threading.Thread(target=lambda: results.update(answer=post(server, json.dumps(
        {"model": "fake", "messages": ASK}).encode())))  # fmt: skip
    worker.start()
    assert started.wait(10)
    server._server.should_exit = True  # what SIGTERM / SIGINT does to uvicorn
    time.sleep(0.3)
    release.set()
    worker.join(30)
    server.__exit__(None, None, None)
    assert results["answer"][0] == 200 and results["answer"][1]["choices"][0]["message"]["content"] == "done"
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{server.base_url}/models", timeout=5)


def test_usage_says_how_many_prompt_tokens_the_cache_held():
    with serve(FakeChatModel(["It is sunny."])) as server:
        status, body = post(server, json.dumps({"model": "fake", "messages": ASK}).encode())
    usage = body["usage"]
    assert status == 200 and usage["prompt_tokens_details"] == {"cached_tokens": 0}  # the fake has no cache
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
