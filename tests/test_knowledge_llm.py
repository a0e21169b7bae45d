"""LLM-written knowledge (ES, SIC, TIC): prompts, parsing, the content-hash cache, and a killed
build that resumes without re-asking. The fake model drives the logic; one short generation uses
the real default model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kate.knowledge.bfcl_source import bfcl_trajectories
from kate.knowledge.build import BuildSpec, build_knowledge_base, cache_path
from kate.knowledge.clustering import ClusterConfig, choose_k
from kate.knowledge.es import ESConfig, clean_summary, es_entries, es_messages
from kate.knowledge.intents import IntentConfig, intent_entries, parse_json_object
from kate.knowledge.llm_cache import LLMCache
from kate.llm.fake import FakeChatModel
from tests.test_knowledge_fixtures import embedder


def advice(messages, tools, n):
    """A deterministic stand-in writer: its answer depends only on the prompt."""
    question = re.search(r"Current request: (.*)", messages[-1]["content"]).group(1)
    return [f"To solve '{question[:40]}' call the right functions in order.\n\nRule: read the state first."] * n


@pytest.fixture(scope="module")
def dialogues():
    return bfcl_trajectories(["multi_turn_base"], "train", limit=3)


def test_es_prompt_holds_earlier_turns_question_and_ground_truth(dialogues):
    messages = es_messages(dialogues[0], 1)
    prompt = messages[-1]["content"]
    assert "1. User: Move 'final_report.pdf'" in prompt
    assert "Calls: cd(folder='document'); mkdir(dir_name='temp')" in prompt
    assert "Current request: Perform a detailed search using grep" in prompt
    assert "- grep(file_name='final_report.pdf', pattern='budget analysis')" in prompt
    assert "about 100 words" in prompt
    assert "(none: this is the first turn)" in es_messages(dialogues[0], 0)[-1]["content"]


def test_es_entries_from_a_fake_writer(dialogues):
    model = FakeChatModel([advice], repeat_last=True, name="fake-writer")
    entries = es_entries(dialogues, model, LLMCache(None))
    turns = sum(1 for d in dialogues for t in d.turns if t.user)
    assert len(entries) == turns == len(model.requests)
    first = entries[0]
    assert first.type == "ES" and first.id == f"ES:{dialogues[0].id}#t0" and first.written_by == "fake-writer"
    assert first.payload["summary"].startswith("To solve 'Move 'final_report.pdf'")
    assert "\n" not in first.payload["summary"]  # one paragraph
    assert first.payload["calls"][0] == {"name": "cd", "arguments": {"folder": "document"}}
    assert model.requests[0]["temperature"] == 0.7  # KATE's value, a config value
    assert es_entries(dialogues[:1], model, LLMCache(None), ESConfig(temperature=0.2)) and \
        model.requests[-1]["temperature"] == 0.2


def test_clean_summary_cuts_long_answers_at_a_sentence():
    text = "```\nParagraph: " + " ".join(["Word."] * 300) + "\n```"
    cleaned = clean_summary(text, 50)
    assert cleaned.startswith("Word.") and cleaned.endswith(".") and len(cleaned.split()) <= 50


def test_the_cache_answers_repeated_requests_and_survives_a_torn_line(tmp_path, dialogues):
    path = tmp_path / "cache.jsonl"
    model = FakeChatModel([advice], repeat_last=True, name="fake-writer")
    cache = LLMCache(path)
    es_entries(dialogues, model, cache)
    asked = len(model.requests)
    assert cache.asked == asked and len(cache) == asked
    again = LLMCache(path)
    es_entries(dialogues, model, again)
    assert len(model.requests) == asked and again.asked == 0 and again.hits == asked
    # a kill in the middle of a write leaves a torn last line: it is dropped and asked again
    data = path.read_bytes()
    path.write_bytes(data[:-25])
    torn = LLMCache(path)
    assert len(torn) == asked - 1
    es_entries(dialogues, model, torn)
    assert torn.asked == 1 and len(LLMCache(path)) == asked
    # a changed prompt is a new request
    es_entries(dialogues[:1], model, LLMCache(path), ESConfig(words=50))
    assert len(model.requests) == asked + 1 + sum(1 for t in dialogues[0].turns if t.user)


KILLED_BUILD = textwrap.dedent("""
    import re, sys, time
    from kate.knowledge.build import BuildSpec, build_knowledge_base
    from kate.llm.fake import FakeChatModel
    from tests.test_knowledge_llm import advice
    def slow(messages, tools, n):
        time.sleep(0.4)
        return advice(messages, tools, n)
    spec = BuildSpec(name="kb", root=sys.argv[1], categories=["multi_turn_base"], types=["ST", "ES"],
                     llm_categories=["multi_turn_base"], limit=4, cache_dir=sys.argv[2])
    build_knowledge_base(spec, writer=FakeChatModel([slow], repeat_last=True, name="fake-writer"))
""")


def test_a_killed_build_resumes_without_reasking(tmp_path):
    cache_dir = tmp_path / "cache"
    cache_file = cache_path(cache_dir, "fake-writer")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(tmp_path), str(cache_dir)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if cache_file.exists() and cache_file.read_text().count("\n") >= 5:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "kb").exists()  # nothing half-written where the base goes
    answered = len(LLMCache(cache_file))
    assert answered >= 5

    model = FakeChatModel([advice], repeat_last=True, name="fake-writer")
    spec = BuildSpec(name="kb", root=str(tmp_path), categories=["multi_turn_base"], types=["ST", "ES"],
                     llm_categories=["multi_turn_base"], limit=4, cache_dir=str(cache_dir))
    kb = build_knowledge_base(spec, writer=model, embedder=embedder(), log=lambda line: None)
    turns = kb.manifest["types"]["ST"]
    assert kb.manifest["types"]["ES"] == turns
    assert len(model.requests) == turns - answered  # only what the killed build had not asked
    assert kb.manifest["writers"] == {"ES": ["fake-writer"]}
    assert kb.manifest["build_stats"]["llm"] == {"writer": "fake-writer", "asked": turns - answered, "cached": answered}
    rebuilt = build_knowledge_base(spec, writer=model, embedder=embedder(), log=lambda line: None)
    assert len(model.requests) == turns - answered and len(rebuilt) == len(kb)  # a rebuild asks nothing


def test_choose_k_finds_separated_clusters():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:3] * 5
    points = np.concatenate([c + rng.normal(scale=0.1, size=(20, 8)) for c in centres])
    k, labels, scores = choose_k(points, ClusterConfig(k_min=2, k_max=8))
    assert k == 3 and len(set(labels)) == 3 and max(scores, key=scores.get) == 3
    assert choose_k(points[:2])[0] == 1  # too few points: one cluster


def test_parse_json_object_reads_fenced_and_embedded_json():
    assert parse_json_object('Sure!\n```json\n{"summary": "s", "step": []}\n```') == {"summary": "s", "step": []}
    assert parse_json_object("{broken {\"a\": 1}") == {"a": 1}
    assert parse_json_object("no json here") is None


def intent_writer(messages, tools, n):
    prompt = messages[-1]["content"]
    if "Common intent" in prompt:  # label: the first member question, shortened
        first = re.search(r"^- (.*)$", prompt, re.M).group(1)
        return [" ".join(first.split()[:12])] * n
    used = re.findall(r"^- (\w+)\(", prompt.split("Functions used:")[1], re.M)
    if not used or len(used) % 2:  # some clusters get an unreadable answer: steps derived, no TIC
        return ["I cannot write JSON today."] * n
    plan = {"summary": "Change to the folder first, then act on the file.",
            "step": [{"call": used[0], "args": {"x": "<x>"}, "save_as": "r"}, {"call": "no_such_function"}]}
    return ["```json\n" + json.dumps(plan) + "\n```"] * n


def test_intent_entries_cluster_per_api_class_and_parse_the_writer():
    dialogues = bfcl_trajectories(["multi_turn_base"], "train", limit=30)
    model = FakeChatModel([intent_writer], repeat_last=True, name="fake-writer")
    entries, report = intent_entries(dialogues, embedder().embed, model, LLMCache(None),
                                     IntentConfig(cluster=ClusterConfig(k_max=6)))
    assert set(report) <= {"GorillaFileSystem", "TwitterAPI", "MathAPI", "MessageAPI", "TicketAPI", "TradingBot",
                           "TravelAPI", "VehicleControlAPI"}
    for cls, info in report.items():
        assert sum(info["sizes"]) == info["questions"] and info["k"] == len(info["sizes"])
        assert info["k"] == 1 or max(info["silhouette"], key=info["silhouette"].get) == str(info["k"])
    sic = [e for e in entries if e.type == "SIC"]
    tic = [e for e in entries if e.type == "TIC"]
    assert len(sic) == sum(info["k"] for info in report.values())
    assert len(model.requests) == 2 * len(sic)  # one label + one script per cluster
    for entry in sic:
        assert len(entry.api_classes) == 1 and entry.written_by == "fake-writer"
        assert entry.payload["size"] >= 1 and entry.tool_names
        assert all(step["call"] != "no_such_function" for step in entry.payload["steps"])
        assert entry.payload["steps_source"] in ("llm", "derived")
    assert {e.payload["steps_source"] for e in sic} == {"llm", "derived"}
    derived = [e for e in sic if e.payload["steps_source"] == "derived"]
    assert all(step["args"] == {k: f"<{k}>" for k in step["args"]} for e in derived for step in e.payload["steps"])
    assert len(tic) == len(sic) - len(derived)  # no readable summary: no TIC entry
    assert all(e.payload["summary"] == "Change to the folder first, then act on the file." for e in tic)


@pytest.mark.model
def test_the_default_local_model_writes_an_experience_summary(default_llamacpp, tmp_path):
    [dialogue] = bfcl_trajectories(["multi_turn_base"], "train", limit=1)
    single = type(dialogue)(id=dialogue.id, tools=dialogue.tools, turns=dialogue.turns[:1], source=dialogue.source,
                            api_classes=dialogue.api_classes, tool_classes=dialogue.tool_classes)
    cache = LLMCache(tmp_path / "c.jsonl")
    [entry] = es_entries([single], default_llamacpp, cache, ESConfig(max_tokens=120, seed=0))
    assert entry.written_by == default_llamacpp.name
    assert len(entry.payload["summary"].split()) >= 20
    assert cache.asked == 1 and es_entries([single], default_llamacpp, LLMCache(tmp_path / "c.jsonl"),
                                           ESConfig(max_tokens=120, seed=0))[0].payload == entry.payload


def test_steps_written_as_whole_calls_are_read():
    from kate.knowledge.intents import valid_steps

    steps = valid_steps([{"call": "lockDoors(unlock=True, door=['driver'])"}, {"call": "setHeadlights(mode=<mode>)"},
                         {"call": "nope()"}, {"call": "startEngine", "args": {"x": 1}, "save_as": "r"}, "junk"],
                        {"lockDoors", "setHeadlights", "startEngine"})
    assert steps == [{"call": "lockDoors", "args": {"unlock": True, "door": ["driver"]}},
                     {"call": "setHeadlights", "args": {"text": "setHeadlights(mode=<mode>)"}},
                     {"call": "startEngine", "args": {"x": 1}, "save_as": "r"}]
