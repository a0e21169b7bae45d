"""The own-tools task's shipped knowledge (bench/own_tools_kb.py -> knowledge_bases/own_tools_train):
built from the train half only, examples shown to the turn's end (call, result, reply), reached by
the test half's questions through the task's own context, never a question's own example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kate.agent.knowledge import inject
from kate.retrieval import render_knowledge, template_from
from kate.retrieval.knowledge import make_knowledge
from kate.tasks.own_tools import OwnToolsTask

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "conf" / "retrieval" / "own_tools.yaml").read_text())
CONFIG.pop("defaults")  # the option's schema (Hydra's defaults list), not a retrieval setting
CONFIG["root"] = str(ROOT / "knowledge_bases")


@pytest.fixture(scope="module")
def knowledge():
    return make_knowledge({"single_turn": CONFIG})


def test_the_base_holds_the_train_half_only_with_results_and_replies():
    rows = [json.loads(line) for line in (ROOT / "knowledge_bases" / "own_tools_train.jsonl").open()]
    train = {item.id for item in OwnToolsTask(split="train").items()}
    assert {r["id"] for r in rows} == train and all(r["split"] == "train" for r in rows)
    called = [t for r in rows for t in r["turns"] if t["calls"]]
    assert called and all(len(t["results"]) == len(t["calls"]) and t["answer"] for t in called)
    manifest = json.loads((ROOT / "knowledge_bases" / "own_tools_train" / "manifest.json").read_text())
    assert manifest["entry_count"] == len(rows) and manifest["types"] == {"ST": 32}


def test_an_answered_example_shows_the_call_its_result_and_the_reply(knowledge):
    item = next(i for i in OwnToolsTask(split="test").items() if "gold" in i.question)
    solved: dict = {}

    class Capture:  # the task's own context, as OwnToolsTask.solve builds it
        settings = type("S", (), {"system_message": None})()

        def run_turn(self, env, messages, *, seed, context):
            solved["context"] = context
            raise ValueError("stop here")

    OwnToolsTask(split="test").solve(item, Capture(), seed=0)
    messages, retrieved = inject([{"role": "user", "content": item.question}], knowledge, solved["context"])
    assert retrieved is not None and retrieved.hits
    text = messages[-1]["content"]
    assert "Correct calls then: {\"name\": \"element_lookup\"" in text and "Result: {\"name\": " in text
    assert "Reply to that user: " in text and text.endswith(item.question)
    own = OwnToolsTask(split="train").items()[0]  # a train question never sees its own example
    _, hits = inject([{"role": "user", "content": own.question}], knowledge,
                     type(solved["context"])("single_turn", api_classes=(), tools=solved["context"].tools,
                                             exclude_ids=(own.id,)))  # fmt: skip
    assert hits is not None and all(not h["id"].startswith(f"ST:{own.id}#") for h in hits.hits)


def test_the_answered_template_without_results_says_so():
    template = template_from({"preset": "guarded_answered"})
    assert "{results}" in template.items["ST"] and "{answer}" in template.items["ST"]
    assert render_knowledge([], template) is None
