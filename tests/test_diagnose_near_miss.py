"""Near-miss negatives: the generator is seeded, every prompt mentions a tool or parameter of the
tools offered with it, none asks for an action; the rung on scripted models (a caller fails, prose
naming the tool is a correct no-call that the keyword harness does not credit, malformed JSON is a
call attempt); BFCL's irrelevance entries join with the official verdict kept beside."""

from __future__ import annotations

import re

import pytest

from kate.agent.policy import Policy
from kate.diagnose.keyword import tool_names
from kate.diagnose.near_miss import (
    KINDS,
    TEMPLATES,
    NearMissTask,
    bfcl_tool_sets,
    irrelevance_entries,
    misspelled,
    near_miss_items,
    no_call_summary,
    parameters_of,
)
from kate.eval.runner import open_run, run_task
from kate.llm.fake import FakeChatModel

# Words that would ask for something a tool does; no template may contain one.
ACTION_WORDS = re.compile(r"\b(call|run|execute|invoke|use|fetch|get|find|search|look|book|send|compute|"
                          r"calculate|check|retrieve|create|delete|update|buy|order|schedule|convert)\b", re.I)


def test_templates_cover_several_kinds_and_ask_for_no_action():
    assert len(TEMPLATES) >= 12 and len(KINDS) >= 5
    assert len({t.id for t in TEMPLATES}) == len(TEMPLATES)
    for template in TEMPLATES:
        assert "{tool}" in template.text or "{param}" in template.text, template.id
        prose = re.sub(r"`[^`]*`", "", template.text)
        assert not ACTION_WORDS.search(prose), template.id


def test_generator_is_seeded_and_every_prompt_mentions_its_tools():
    sets = bfcl_tool_sets(("simple_python", "multiple"), "test", limit=15)
    items = near_miss_items(sets, seed=3, per_set=2)
    assert len(items) == 60 and len({i.id for i in items}) == 60
    assert [i.to_dict() for i in items] == [i.to_dict() for i in near_miss_items(sets, seed=3, per_set=2)]
    assert [i.question for i in items] != [i.question for i in near_miss_items(sets, seed=4, per_set=2)]
    assert {i.kind for i in items} == set(KINDS) and {i.template for i in items} == {t.id for t in TEMPLATES}
    for item in items:
        words = set(tool_names(item.tools)) | {p for t in item.tools for p in parameters_of(t)}
        assert item.mentions and set(item.mentions) <= words
        assert all(f"`{m}`" in item.question for m in item.mentions)
        assert not ACTION_WORDS.search(re.sub(r"`[^`]*`", "", item.question)), item.question
        assert item.category == "near_miss" and item.messages[-1]["role"] == "user"
    with pytest.raises(ValueError, match="offers no tools"):
        near_miss_items([("empty", [])])


def test_misspelling_differs():
    import random

    rng = random.Random(0)
    for name in ("get_weather", "math.gcd", "ab"):
        assert misspelled(name, rng) != name and sorted(misspelled(name, rng)) == sorted(name)


def run(task, model, tmp_path, name):
    store = open_run(tmp_path / name, arm=name, task=task, policy=Policy(model), seed=0, config={})
    return run_task(task, Policy(model), store)


def test_near_miss_rung_on_scripted_models(tmp_path):
    items = near_miss_items(bfcl_tool_sets(("simple_python",), "test", limit=4), seed=0)
    entries = irrelevance_entries(("irrelevance",), "test", limit=2)
    task = NearMissTask([*items, *entries], origin={"seed": 0})
    assert task.describe()["items_sha256"] == NearMissTask([*items, *entries]).describe()["items_sha256"]

    def calls_first_tool(messages, tools, n):
        return ['{"name": "%s", "arguments": {}}' % tools[0]["function"]["name"]] * n

    caller = run(task, FakeChatModel([calls_first_tool], repeat_last=True), tmp_path, "caller")
    assert not any(r["valid"] for r in caller) and all(r["called"] for r in caller)
    assert [r["official_valid"] for r in caller if "official_valid" in r] == [False, False]

    def names_the_tool(messages, tools, n):
        return [f"`{tools[0]['function']['name']}` is a function you have; nothing to run here."] * n

    talker = run(task, FakeChatModel([names_the_tool], repeat_last=True), tmp_path, "talker")
    assert all(r["valid"] and not r["attempted"] for r in talker)
    assert not any(r["keyword"] for r in talker)  # the keyword harness fails a correct answer naming the tool

    broken = run(task, FakeChatModel(['{"name": "x", "arguments": {'], repeat_last=True), tmp_path, "broken")
    assert all(r["attempted"] and not r["called"] and not r["valid"] for r in broken)
    assert [r["official_valid"] for r in broken if "official_valid" in r] == [True, True]  # BFCL counts parsed calls

    summary = no_call_summary(talker)
    assert summary["all"] == {"n": 6, "no_call": 1.0, "called": 0.0, "attempted": 0.0, "keyword": 0.0}
    assert set(summary["per_category"]) == {"near_miss", "irrelevance"}
    assert summary["per_kind"]["bfcl_irrelevance"]["n"] == 2
    assert no_call_summary(caller)["all"]["no_call"] == 0.0
    with pytest.raises(ValueError, match="not a no-call category"):
        irrelevance_entries(("simple_python",))
