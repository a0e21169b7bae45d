"""Rewards of step-level GRPO on hand-made completions: strict calls, never substrings."""

from __future__ import annotations

import json

from kate.train.rewards import call_correct, format_valid, no_call_penalty

TARGET = json.dumps([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}])
RIGHT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
REORDERED = '<tool_call>\n{"arguments": {"unit": "celsius", "city": "Paris"}, "name": "get_weather"}\n</tool_call>'
JSON_FENCE = '```json\n{"name": "get_weather", "arguments": {"unit": "celsius", "city": "Paris"}}\n```'
WRONG_ARG = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "celsius"}}\n</tool_call>'
PROSE = "I would call get_weather with city Paris and unit celsius."
BROKEN = '<tool_call>\n{"name": "get_weather", "arguments": {"city": '
ANSWER = "It is 18 degrees in Paris."


def _call(completions):
    return call_correct(None, completions, target_calls=[TARGET] * len(completions), kind=["call"] * len(completions))


def test_call_correct_credits_the_right_call_in_any_key_order_and_format():
    assert _call([RIGHT, REORDERED, JSON_FENCE]) == [1.0, 1.0, 1.0]


def test_call_correct_refuses_a_wrong_argument_prose_naming_the_tool_and_a_broken_call():
    assert _call([WRONG_ARG, PROSE, BROKEN, ANSWER]) == [0.0, 0.0, 0.0, 0.0]


def test_answer_steps_are_right_only_without_a_call():
    rewards = call_correct(None, [ANSWER, RIGHT, "", BROKEN], target_calls=["[]"] * 4, kind=["answer", "no_call", "answer", "no_call"])
    assert rewards == [1.0, 0.0, 0.0, 0.0]


def test_format_valid_reads_calls_and_plain_answers_and_refuses_malformed_calls():
    assert format_valid(None, [RIGHT, ANSWER, PROSE, BROKEN, ""]) == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_a_call_where_none_was_due_is_penalised():
    kinds = ["no_call", "no_call", "answer", "call"]
    assert no_call_penalty(None, [RIGHT, ANSWER, JSON_FENCE, RIGHT], kind=kinds) == [-1.0, 0.0, -1.0, 0.0]


def test_bfcl_single_turn_steps_use_the_official_checker():
    from kate.bfcl.data import load_entries
    from kate.bfcl.answers import first_possible_answer
    from kate.toolcall import to_hermes

    entry = load_entries("simple_python", "train", 1)[0]
    right = to_hermes(first_possible_answer(entry))
    target = json.dumps([c.to_dict() for c in first_possible_answer(entry)])
    rewards = call_correct(None, [right, PROSE], target_calls=[target, target], kind=["call", "call"],
                           category=[entry.category] * 2, source_id=[entry.id] * 2)
    assert rewards == [1.0, 0.0]


def test_conversational_completions_are_read_from_the_last_message():
    completion = [{"role": "assistant", "content": RIGHT}]
    assert _call([completion]) == [1.0]


def test_a_refusal_after_the_results_is_not_an_answer():
    refusal = "I'm sorry, but I can't assist with that."
    rewards = call_correct(None, [refusal, ANSWER], target_calls=["[]"] * 2, kind=["answer", "answer"])
    assert rewards == [0.0, 1.0]
