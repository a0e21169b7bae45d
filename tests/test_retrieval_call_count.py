"""Knowledge for requests that need several calls: the call-count predictor learned from the base
(kate/retrieval/call_count.py), retrieval gated by it (``only_multi_call``), and the list form of the
pattern with typed placeholders and unmappable examples left out (the guarded_pattern_list preset)."""

from __future__ import annotations

import pytest

from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.store import KnowledgeBase
from kate.retrieval import render_knowledge, template_from
from kate.retrieval.call_count import CallCountModel, request_features, training_rows
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.retriever import Hit, Retriever
from tests.test_knowledge_fixtures import embedder

CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Tokyo", "Delhi", "Quito", "Accra", "Hanoi", "Seoul", "Dakar",
          "Bern", "Riga", "Sofia", "Kyiv", "Minsk", "Baku", "Doha", "Muscat", "Amman", "Tunis", "Rabat", "Lusaka"]


def _single(i: int) -> KnowledgeEntry:
    q = f"What is the weather in {CITIES[i]} today?"
    return KnowledgeEntry(id=f"ST:one_{i}", type="ST", text=q, source="simple",
                          payload={"question": q, "calls": [{"name": "weather", "arguments": {"city": CITIES[i]}}]})


def _several(i: int) -> KnowledgeEntry:
    a, b, c = CITIES[i], CITIES[(i + 1) % len(CITIES)], CITIES[(i + 2) % len(CITIES)]
    q = f"What is the weather in {a}, {b} and {c} for the next {i + 2} days each?"
    calls = [{"name": "weather", "arguments": {"city": x, "days": i + 2}} for x in (a, b, c)]
    return KnowledgeEntry(id=f"ST:many_{i}", type="ST", text=q, source="parallel", payload={"question": q, "calls": calls})


ENTRIES = [*(_single(i) for i in range(24)), *(_several(i) for i in range(24))]


def test_the_features_count_what_the_number_of_calls_follows():
    assert request_features("BMI of 80 kg and 1.8 m, and of 60 kg, respectively") == [3.0, 2.0, 2.0, 1.0, 0.6]
    assert request_features("Hello") == [0.0, 0.0, 0.0, 0.0, 0.05]


def test_the_predictor_learns_one_call_from_several_from_the_bases_own_entries():
    questions, several = training_rows(ENTRIES + [KnowledgeEntry(id="ST:x", type="ST", text="no call", payload={})])
    assert len(questions) == 48 and sum(several) == 24  # entries without a call are not rows
    model = CallCountModel.from_entries(ENTRIES)
    assert model.several("What is the weather in Bern, Riga and Sofia for the next 3 days each?")
    assert not model.several("What is the weather in Bern today?")
    again = CallCountModel.from_entries(ENTRIES)
    assert again.coef.tolist() == model.coef.tolist()  # deterministic
    with pytest.raises(ValueError, match="20 single-turn examples of each kind"):
        CallCountModel.from_entries(ENTRIES[:30])


def test_only_multi_call_retrieves_several_call_examples_for_several_call_requests_only():
    kb = KnowledgeBase.create(ENTRIES, embedder().embed([e.text for e in ENTRIES]), embedding=embedder().identity())
    r = Retriever(kb, embedder(), RetrievalConfig(top_k=3, threshold=0.0, only_multi_call=True))
    hits = r.retrieve("Weather in Doha, Amman and Tunis for 4 days each?", api_classes=())
    assert hits and all(len(h.entry.payload["calls"]) > 1 for h in hits)
    assert r.retrieve("Weather in Doha today?", api_classes=()) == []
    strict = Retriever(kb, embedder(), RetrievalConfig(top_k=3, threshold=0.0, only_multi_call=True, multi_call_p=1.0))
    assert strict.retrieve("Weather in Doha, Amman and Tunis for 4 days each?", api_classes=()) == []
    with pytest.raises(ValueError, match="multi_call_p"):
        RetrievalConfig(multi_call_p=1.5)
    plain = Retriever(kb, embedder(), RetrievalConfig(top_k=3, threshold=0.0))
    assert any(len(h.entry.payload["calls"]) == 1 for h in plain.retrieve("Weather in Doha today?", api_classes=()))


def _tool(name: str, **types: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": t} for k, t in types.items()}, "required": list(types)}}}  # fmt: skip


def test_the_list_preset_places_example_functions_on_the_offered_ones_and_leaves_out_what_does_not_fit():
    bmi = _tool("calculate_bmi", height="number", weight="integer", unit="string")
    tax = _tool("sales_tax", amount="number", city="string")
    example = KnowledgeEntry(id="ST:p", type="ST", text="Two things?", payload={"question": "Two things?", "calls": [
        {"name": "hypot", "arguments": {"x": 3}}, {"name": "area", "arguments": {"r": 1}},
        {"name": "hypot", "arguments": {"x": 5}}]})  # fmt: skip
    template = template_from({"preset": "guarded_pattern_list"})
    text = render_knowledge([Hit(example, 0.9)], template, request="BMI and tax?", tools=[bmi, tax])
    assert "```json\n[\n" in text and "hypot" not in text and "area" not in text
    assert text.count('"name": "calculate_bmi"') == 2 and text.count('"name": "sales_tax"') == 1  # one to one, in order
    assert '"height": "<height 1>"' in text and '"height": "<height 2>"' in text
    assert render_knowledge([Hit(example, 0.9)], template, request="?", tools=[bmi]) is not None  # the only function
    three = KnowledgeEntry(id="ST:3", type="ST", text="Three?", payload={"question": "Three?", "calls": [
        {"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}, {"name": "c", "arguments": {}}]})  # fmt: skip
    assert render_knowledge([Hit(three, 0.9)], template, request="?", tools=[bmi, tax]) is None  # more than offered
    old = render_knowledge([Hit(three, 0.9)], template_from({"preset": "guarded_pattern"}), request="?", tools=[bmi, tax])
    assert "<function>" in old  # the older preset shows it
    typed = template_from({"preset": "guarded_pattern_list", "typed_placeholders": True})
    shown = render_knowledge([Hit(example, 0.9)], typed, request="?", tools=[bmi, tax])
    assert '"height": <height 1>, "weight": <weight 1>, "unit": "<unit 1>"' in shown


def test_function_count_matching_keeps_examples_shaped_like_the_request():
    kb = KnowledgeBase.create(ENTRIES, embedder().embed([e.text for e in ENTRIES]), embedding=embedder().identity())
    two = [_tool("weather", city="string"), _tool("news", city="string")]
    r = Retriever(kb, embedder(), RetrievalConfig(top_k=3, threshold=0.0, match_function_count=True))
    assert r.retrieve("Weather in Doha?", api_classes=(), tools=two) == []  # every entry calls one function
    assert r.retrieve("Weather in Doha?", api_classes=(), tools=two[:1])


def test_distinct_call_counts_shows_the_nearest_example_of_each_number_of_calls():
    def two(i: int) -> KnowledgeEntry:
        a, b = CITIES[i], CITIES[(i + 5) % len(CITIES)]
        q = f"What is the weather in {a} and {b} for the next {i + 2} days each?"
        calls = [{"name": "weather", "arguments": {"city": x, "days": i + 2}} for x in (a, b)]
        return KnowledgeEntry(id=f"ST:two_{i}", type="ST", text=q, source="parallel", payload={"question": q, "calls": calls})

    entries = [*ENTRIES, *(two(i) for i in range(24))]
    kb = KnowledgeBase.create(entries, embedder().embed([e.text for e in entries]), embedding=embedder().identity())
    query = "Weather in Doha, Amman and Tunis for 4 days each?"
    plain_hits = Retriever(kb, embedder(), RetrievalConfig(top_k=3, threshold=0.0, only_multi_call=True)).retrieve(
        query, api_classes=())
    distinct = Retriever(kb, embedder(), RetrievalConfig(top_k=3, threshold=0.0, only_multi_call=True,
                                                         distinct_call_counts=True)).retrieve(query, api_classes=())
    counts = [len(h.entry.payload["calls"]) for h in distinct]
    assert sorted(counts) == [2, 3]  # one of each count the base holds, no more
    assert distinct[0].entry.id == plain_hits[0].entry.id  # the nearest example stays first
    assert [h.score for h in distinct] == sorted((h.score for h in distinct), reverse=True)
