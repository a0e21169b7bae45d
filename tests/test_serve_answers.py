"""The served turn's end (``kate.serve.answers``): a chosen call that repeats, or feeds back, a call
the request's history already made this turn is answered instead, where the engine takes a prefill;
a new call, a forced call, and an engine without prefill pass through unchanged."""

from __future__ import annotations

import json

import pytest

from kate.llm.fake import FakeChatModel
from kate.serve.answers import executed_this_turn
from kate.serve.request import read_request
from kate.serve.service import ChatService, ServeSettings
from kate.toolcall import ToolCall

CURRENCY = {"type": "function", "function": {
    "name": "convert_currency", "description": "Convert an amount between currencies",
    "parameters": {"type": "object", "properties": {
        "amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
        "required": ["amount", "from_currency", "to_currency"]}}}  # fmt: skip
FIRST = {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}
HISTORY = [
    {"role": "user", "content": "Convert 100 US dollars to euros."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "convert_currency", "arguments": '{"amount": 100, "from_currency": "USD", "to_currency": "EUR"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "92.0"},
]  # fmt: skip


def call_text(arguments: dict) -> str:
    return '<tool_call>\n{"name": "convert_currency", "arguments": ' + json.dumps(arguments) + "}\n</tool_call>"


def complete(model, settings: ServeSettings = ServeSettings(width=1), **body):
    service = ChatService(lambda name: model, None, settings)
    return service.complete(read_request({"model": "fake", "messages": HISTORY, "tools": [CURRENCY], **body}))


def test_the_history_gives_this_turns_calls_with_their_results():
    (step, call, observation), = executed_this_turn(read_request({"model": "m", "messages": HISTORY}).messages)
    assert call == ToolCall("convert_currency", FIRST) and observation.content == "92.0" and step == 0
    later = HISTORY + [{"role": "assistant", "content": "92 euros."}, {"role": "user", "content": "And 5?"}]
    assert executed_this_turn(read_request({"model": "m", "messages": later}).messages) == []


@pytest.mark.parametrize("again", [FIRST, {**FIRST, "amount": 92.0}], ids=["repeat", "fed"])
def test_a_repeated_or_fed_call_is_answered_instead(again):
    model = FakeChatModel([call_text(again), "100 US dollars are 92.0 euros."], options=("prefill",))
    response = complete(model)
    choice = response["choices"][0]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    assert choice["message"]["content"] == "Based on the result, 100 US dollars are 92.0 euros."
    (end,) = response["kate"]["turn_end"]
    assert end["replaced"] == [{"name": "convert_currency", "arguments": again}]
    assert model.requests[-1]["prefill"] == "Based on the result, "


def test_a_new_call_a_forced_call_and_an_engine_without_prefill_pass_through():
    new = {**FIRST, "to_currency": "GBP"}
    model = FakeChatModel([call_text(new)], options=("prefill",))
    assert complete(model)["choices"][0]["finish_reason"] == "tool_calls"
    no_prefill = FakeChatModel([call_text(FIRST)])
    response = complete(no_prefill)
    assert response["choices"][0]["finish_reason"] == "tool_calls" and "turn_end" not in response["kate"]
    forced = FakeChatModel([call_text(FIRST).split('"name": "', 1)[1]], options=("prefill",))  # after the call's prefill
    assert complete(forced, tool_choice="required")["choices"][0]["finish_reason"] == "tool_calls"
    off = FakeChatModel([call_text(FIRST)], options=("prefill",))
    assert complete(off, ServeSettings(width=1, answer_repeats=False))["choices"][0]["finish_reason"] == "tool_calls"


def test_an_asked_reply_that_is_still_a_call_keeps_the_step():
    model = FakeChatModel([call_text(FIRST), call_text(FIRST)], options=("prefill",))
    assert complete(model)["choices"][0]["finish_reason"] == "tool_calls"


def test_a_reply_that_writes_the_same_call_twice_as_bare_json_is_read_by_its_first_call():
    twice = call_text(FIRST)[len("<tool_call>\n"):-len("\n</tool_call>")] + "\n" + '{"name": "convert_currency", "argu'
    model = FakeChatModel([twice, "92.0 euros."], options=("prefill",))
    assert complete(model)["choices"][0]["message"]["content"] == "Based on the result, 92.0 euros."


@pytest.mark.model
def test_the_default_model_behind_the_server_answers_after_its_result(default_llamacpp):
    """Without the served turn end the default model writes its call again (as JSON text); with it,
    the response is the answer, holding the result."""
    plain = complete(default_llamacpp, ServeSettings(width=1, answer_repeats=False), max_tokens=64, seed=0)
    assert "turn_end" not in plain["kate"] and "convert_currency" in (plain["choices"][0]["message"]["content"] or
                                                                      str(plain["choices"][0]["message"]))
    response = complete(default_llamacpp, max_tokens=64, seed=0)
    choice = response["choices"][0]
    assert choice["finish_reason"] == "stop" and "92" in choice["message"]["content"]
    assert response["kate"]["turn_end"][0]["replaced"][0]["name"] == "convert_currency"
