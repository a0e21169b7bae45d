"""The server's knowledge (the shipped base, the real MiniLM embedder): the same text for every
request of one user turn, switched per request; and the client wrapper over a real HTTP server,
sync and async, giving the calls the server gives for the same seed."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest

from kate.llm.fake import FakeChatModel
from kate.retrieval.config import RetrievalConfig
from kate.serve import wrap
from kate.serve.app import ServerSettings, create_app
from kate.serve.knowledge import ServedKnowledge
from kate.serve.process import ThreadedServer
from kate.serve.service import ChatService, ServeSettings

AREA = {"type": "function", "function": {
    "name": "calculate_triangle_area", "description": "Area of a triangle from its base and height.",
    "parameters": {"type": "object", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
                   "required": ["base", "height"]}}}  # fmt: skip
QUESTION = "Find the area of a triangle with a base of 10 units and height of 5 units."
CALL = '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'
RETRIEVAL = RetrievalConfig(kb="bfcl_train", root="knowledge_bases", filter_api_classes=False, filter_tools=False,
                            min_task_tools=0, threshold=0.3)  # fmt: skip


@pytest.fixture(scope="module")
def served() -> ServedKnowledge:
    knowledge = ServedKnowledge(RETRIEVAL)
    knowledge.open_all()
    return knowledge


def _user_message(request: dict) -> str:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def test_every_request_of_a_turn_gets_the_same_knowledge_and_a_request_can_turn_it_off(served):
    fake = FakeChatModel([CALL, "The area is 25 square units.", CALL])
    service = ChatService(lambda name: fake, served, ServeSettings(width=1))
    with ThreadedServer(create_app(service, ServerSettings(model_names=("fake",)))) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
        history = [{"role": "user", "content": QUESTION}]
        first = client.chat.completions.create(model="fake", messages=history, tools=[AREA])
        call = first.choices[0].message.tool_calls[0]
        history += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                    {"role": "tool", "tool_call_id": call.id, "content": "25"}]  # fmt: skip
        hits_before = served.cache_hits
        second = client.chat.completions.create(model="fake", messages=history, tools=[AREA])
        off = client.chat.completions.create(model="fake", messages=history[:1], tools=[AREA],
                                             extra_body={"kate": {"knowledge": False}})  # fmt: skip
    knowledge = first.model_extra["kate"]["knowledge"]
    assert knowledge["hits"] and all(h["score"] >= 0.3 for h in knowledge["hits"])
    assert second.model_extra["kate"]["knowledge"] == knowledge and served.cache_hits == hits_before + 1
    assert _user_message(fake.requests[0]) == _user_message(fake.requests[1]) == f"{QUESTION}\n\n{knowledge['text']}"
    assert fake.requests[1]["messages"][-1] == {"role": "tool", "content": "25", "tool_call_id": call.id}
    assert second.choices[0].message.content == "The area is 25 square units."
    assert off.model_extra["kate"]["knowledge"] is None and _user_message(fake.requests[2]) == QUESTION


def test_a_request_may_only_name_the_servers_bases(served):
    from kate.serve.errors import APIError
    from kate.serve.request import read_request

    service = ChatService(lambda name: FakeChatModel([CALL]), served, ServeSettings(width=1))
    body = {"model": "fake", "messages": [{"role": "user", "content": QUESTION}], "kate": {"kb": "../etc"}}
    with pytest.raises(APIError, match="unknown knowledge base"):
        service.complete(read_request(body))


def _samples(messages, tools, n):
    """n samples of one request: a majority for base 10, a minority for base 5."""
    return [CALL if i % 3 else CALL.replace('"base": 10', '"base": 5') for i in range(n)]


def test_the_wrapper_votes_over_a_plain_server_like_the_server_itself():
    fake = FakeChatModel([_samples], repeat_last=True)
    plain = ChatService(lambda name: fake, None, ServeSettings(width=1))
    with ThreadedServer(create_app(plain, ServerSettings(model_names=("fake",)))) as server:
        upstream = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
        messages = [{"role": "user", "content": QUESTION}]
        by_server = upstream.chat.completions.create(model="fake", messages=messages, tools=[AREA], seed=7,
                                                     extra_body={"kate": {"n": 6}})  # fmt: skip
        wrapped = wrap(upstream, width=6)
        by_wrapper = wrapped.chat.completions.create(model="fake", messages=messages, tools=[AREA], seed=7)
        streamed = list(wrapped.chat.completions.create(model="fake", messages=messages, tools=[AREA], seed=7,
                                                        stream=True))  # fmt: skip
        assert [m.id for m in wrapped.models.list().data] == ["fake"]  # the rest is the wrapped client's own

        async def run_async():
            client = wrap(openai.AsyncOpenAI(base_url=server.base_url, api_key="-", max_retries=0), width=6)
            response = await client.chat.completions.create(model="fake", messages=messages, tools=[AREA], seed=7)
            stream = await client.chat.completions.create(model="fake", messages=messages, tools=[AREA], seed=7,
                                                          stream=True)  # fmt: skip
            return response, [chunk async for chunk in stream]

        by_async, async_chunks = asyncio.run(run_async())

    def calls(response):
        return [(c.function.name, json.loads(c.function.arguments)) for c in response.choices[0].message.tool_calls]

    assert calls(by_server) == calls(by_wrapper) == calls(by_async) == [("calculate_triangle_area", {"base": 10, "height": 5})]
    assert by_wrapper.model_extra["kate"]["votes"][0]["chosen"]["votes"] == 4
    assert [r["n"] for r in fake.requests[-4:]] == [6, 6, 6, 6] and {r["seed"] for r in fake.requests} == {7}
    assert isinstance(by_wrapper, openai.types.chat.ChatCompletion)
    for chunks in (streamed, async_chunks):
        assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_the_wrapper_raises_the_sdks_errors_for_bad_requests():
    client = wrap(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="-"))
    with pytest.raises(openai.BadRequestError, match="tools"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=[])


def test_skipped_knowledge_says_why_in_the_response():
    """Too few tools offered (retrieval.min_task_tools), or no entry above the threshold: nothing is
    injected, and the response's kate.knowledge says why instead of being null."""
    from dataclasses import replace

    fake = FakeChatModel([CALL], repeat_last=True)
    odd = "What is the area of a triangle drawn by my grandmother in 1961 on a napkin?"
    for retrieval, reason, question in ((replace(RETRIEVAL, min_task_tools=2), "min_task_tools", QUESTION),
                                        (replace(RETRIEVAL, threshold=0.99), "similarity >= 0.99", odd)):  # fmt: skip
        knowledge = ServedKnowledge(retrieval)
        service = ChatService(lambda name: fake, knowledge, ServeSettings(width=1))
        with ThreadedServer(create_app(service, ServerSettings(model_names=("fake",)))) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
            response = client.chat.completions.create(model="fake", messages=[{"role": "user", "content": question}],
                                                      tools=[AREA])  # fmt: skip
        said = response.model_extra["kate"]["knowledge"]
        assert said["hits"] == [] and said["text"] == "" and reason in said["skipped"]
        assert _user_message(fake.requests[-1]) == question  # nothing injected
