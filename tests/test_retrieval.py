"""Retrieval on real MiniLM embeddings and faiss: top-K at cosine >= p, filters, de-duplication,
self-hit exclusion, hand-checked BFCL neighbours, intent retrieval, injection, the agent hook."""

from __future__ import annotations

import numpy as np
import pytest

from kate.agent import KnowledgeContext, Policy
from kate.bfcl.data import load_entries
from kate.envs import PythonFunctionsEnv
from kate.knowledge.bfcl_source import bfcl_trajectories
from kate.knowledge.intents import intent_entries
from kate.knowledge.llm_cache import LLMCache
from kate.knowledge.store import KnowledgeBase
from kate.llm.fake import FakeChatModel
from kate.retrieval import (
    GUARDED,
    KATE,
    IntentConfig,
    RetrievalConfig,
    Retriever,
    render_knowledge,
    retrieval_knowledge,
    template_from,
)
from kate.sampling import GreedySampler
from tests.test_knowledge_fixtures import bfcl_st_kb, embedder
from tests.test_knowledge_llm import intent_writer

FS = ["GorillaFileSystem"]
QUERIES = [
    "Display all the files in the temp directory, hidden ones included.",
    "Find the roots of a quadratic equation with coefficients 1, -3 and 2.",
    "Post a tweet about my new project and mention my friend.",
    "What's the weather like in Paris tomorrow?",
]


def retriever(**config) -> Retriever:
    return Retriever(bfcl_st_kb(), embedder(), RetrievalConfig(**config))


def brute_force(query: str, keep, k: int, p: float) -> list[tuple[str, float]]:
    """Exact top-k by numpy over the entries ``keep`` accepts (no de-duplication)."""
    kb = bfcl_st_kb()
    scores = kb.embeddings @ embedder().embed_query(query)[0]
    ranked = [(kb.entries[i].id, float(scores[i])) for i in np.argsort(-scores) if keep(kb.entries[i])]
    return [(i, s) for i, s in ranked if s >= p][:k]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("k,p", [(1, 0.3), (3, 0.5), (5, 0.6), (8, 0.2)])
def test_top_k_at_threshold_is_the_exact_answer(query, k, p):
    hits = retriever(top_k=k, threshold=p, dedupe=False).retrieve(query)
    assert len(hits) <= k and all(h.score >= p for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    expected = brute_force(query, lambda e: True, k, p)
    exact = dict(brute_force(query, lambda e: True, len(bfcl_st_kb()), -1.0))
    # the same scores as the exact answer, each the hit's true cosine (ties may come in any order)
    assert np.allclose([h.score for h in hits], [s for _, s in expected], atol=1e-5)
    assert all(abs(exact[h.entry.id] - h.score) < 1e-5 for h in hits)


def test_a_threshold_above_every_score_returns_nothing_and_a_low_one_fills_k():
    assert retriever(threshold=0.99).retrieve(QUERIES[3]) == []
    assert len(retriever(top_k=7, threshold=-1.0).retrieve(QUERIES[3])) == 7


def test_api_class_filter_subset_and_overlap():
    task = ["GorillaFileSystem", "TwitterAPI"]
    hits = retriever(top_k=20, threshold=0.0).retrieve(QUERIES[2], api_classes=task)
    assert hits and all(h.entry.api_classes and set(h.entry.api_classes) <= set(task) for h in hits)
    only_fs = retriever(top_k=20, threshold=0.0).retrieve(QUERIES[2], api_classes=FS)
    assert all(h.entry.api_classes == ("GorillaFileSystem",) for h in only_fs)
    overlap = retriever(top_k=50, threshold=0.0, api_class_match="overlap").retrieve(QUERIES[2], api_classes=FS)
    assert all("GorillaFileSystem" in h.entry.api_classes for h in overlap)
    assert any(len(h.entry.api_classes) > 1 for h in overlap)  # turns that use two classes
    # a task without API classes (single-turn) gets only entries without classes
    single = retriever(top_k=20, threshold=0.0).retrieve(QUERIES[0], api_classes=())
    assert single and all(h.entry.api_classes == () for h in single)
    # the filter off: anything
    assert {bool(h.entry.api_classes) for h in retriever(top_k=40, threshold=0.0, filter_api_classes=False)
            .retrieve(QUERIES[0])} == {True, False}


def test_tool_filter_keeps_only_what_the_current_tools_express():
    tools = [{"type": "function", "function": {"name": "solve_quadratic", "parameters": {}}}]
    r = retriever(top_k=10, threshold=0.0, filter_tools=True, include_no_call=False)
    hits = r.retrieve(QUERIES[1], api_classes=(), tools=tools)
    assert [h.entry.tool_names for h in hits] == [("solve_quadratic",)]
    unfiltered = retriever(top_k=3, threshold=0.0).retrieve(QUERIES[1], api_classes=())
    assert {n for h in unfiltered for n in h.entry.tool_names} - {"solve_quadratic"}  # what the filter keeps out
    with_no_call = retriever(top_k=10, threshold=0.0, filter_tools=True, include_no_call=True)
    names = {h.entry.tool_names for h in with_no_call.retrieve(QUERIES[1], api_classes=(), tools=tools)}
    assert names == {("solve_quadratic",), ()}  # irrelevance entries: no call, always expressible


def _solar_tools(panel_area_type: str) -> list[dict]:
    point = {"type": "array", "items": {"type": "number"}}
    solar = {"coordinates": point, "panelArea": {"type": panel_area_type}, "month": {"type": "string"}}
    wind = {"coordinates": point, "turbineCount": {"type": "float"}, "month": {"type": "string"}}
    return [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props,
             "required": list(props)}}} for name, props in (("solarFarm.potential", solar), ("windFarm.potential", wind))]


def test_tool_filter_checks_parameters_and_value_types_not_only_names():
    """BFCL's parallel_multiple_70 passes panelArea as a float (its own tool says float); a task
    whose solarFarm.potential takes an integer cannot make that call, so it is not shown there."""
    from kate.knowledge.entries import KnowledgeEntry

    def entry(name, area):
        call = {"name": "solarFarm.potential", "arguments": {"coordinates": [37.77, -122.42], "panelArea": area,
                                                             "month": "July"}}  # fmt: skip
        return KnowledgeEntry(name, "ST", "Solar farm output at 37.77, -122.42, 50000 sq ft, July?",
                              {"question": "q", "calls": [call]}, tool_names=("solarFarm.potential",))  # fmt: skip

    entries = [entry("float_area", 50000.0), entry("int_area", 50000)]
    kb = KnowledgeBase.create(entries, embedder().embed([e.text for e in entries]), embedding=embedder().identity())
    r = Retriever(kb, embedder(), RetrievalConfig(top_k=5, threshold=0.3, filter_tools=True, include_no_call=False, dedupe=False))
    query = "Estimate the energy output of a solar farm at coordinates 37.77, -122.42 with 50000 sq ft of panels in July"
    assert {h.entry.id for h in r.retrieve(query, api_classes=(), tools=_solar_tools("float"))} == {"float_area", "int_area"}
    assert {h.entry.id for h in r.retrieve(query, api_classes=(), tools=_solar_tools("integer"))} == {"int_area"}


def test_expressible_calls():
    from kate.toolcall.expressible import calls_expressible, schemas_by_name

    tools = schemas_by_name(_solar_tools("integer") + ["bare_name"])
    call = {"name": "solarFarm.potential", "arguments": {"coordinates": [1, 2.5], "panelArea": 3, "month": "May"}}
    assert calls_expressible([call], tools)
    assert not calls_expressible([{**call, "arguments": {**call["arguments"], "panelArea": 3.0}}], tools)
    assert not calls_expressible([{**call, "arguments": {**call["arguments"], "panelArea": True}}], tools)
    assert not calls_expressible([{**call, "arguments": {**call["arguments"], "extra": 1}}], tools)
    assert not calls_expressible([{**call, "arguments": {"panelArea": 3, "month": "May"}}], tools)  # required missing
    assert calls_expressible([{"name": "bare_name", "arguments": {"anything": 1}}], tools)
    assert not calls_expressible([{"name": "other", "arguments": {}}], tools)
    assert calls_expressible([], tools)


def test_min_task_tools_skips_tasks_without_a_choice():
    one = [{"type": "function", "function": {"name": "solve_quadratic", "parameters": {}}}]
    two = one + [{"type": "function", "function": {"name": "calculate_area", "parameters": {}}}]
    r = retriever(top_k=3, threshold=0.3, filter_tools=True, include_no_call=False, min_task_tools=2)
    assert r.retrieve(QUERIES[1], api_classes=(), tools=one) == []
    assert r.retrieve(QUERIES[1], api_classes=(), tools=two)
    assert r.retrieve(QUERIES[1], api_classes=())  # no tools given: no such filter


def test_types_sources_and_exclusion():
    kb = bfcl_st_kb()
    assert retriever(types=["ES"], threshold=0.0).retrieve(QUERIES[0]) == []
    hits = retriever(top_k=10, threshold=0.0, sources=["multiple"]).retrieve(QUERIES[1])
    assert hits and {h.entry.source for h in hits} == {"multiple"}
    own = kb.entries[5]  # a query that is a training question itself finds itself first
    r = retriever(top_k=3, threshold=0.0)
    assert r.retrieve(own.text)[0].entry.id == own.id and r.retrieve(own.text)[0].score > 0.999
    assert own.id not in [h.entry.id for h in r.retrieve(own.text, exclude_ids=[own.id])]
    dialogue = own.source_ids[0]
    assert all(dialogue not in h.entry.source_ids for h in r.retrieve(own.text, exclude_ids=[dialogue]))


def test_duplicates_are_shown_once():
    # multi_turn_base, miss_param and long_context repeat the same questions and calls
    kb = Retriever.from_config(RetrievalConfig(kb=str(bfcl_st_kb().path)), embedder=embedder()).kb
    texts = [e.text for e in kb.entries]
    repeated = next(t for t in texts if texts.count(t) > 1) if len(set(texts)) < len(texts) else None
    if repeated is None:  # the small base has one category per question: make a duplicate
        entry = kb.entries[0]
        dup = type(entry)(**{**entry.to_dict(), "id": "copy", "api_classes": tuple(entry.api_classes),
                             "tool_names": tuple(entry.tool_names), "source_ids": ("other",)})
        kb = KnowledgeBase.create([*kb.entries, dup], np.vstack([kb.embeddings, kb.embeddings[:1]]),
                                  embedding=kb.embedding)
        repeated = entry.text
    plain = Retriever(kb, embedder(), RetrievalConfig(top_k=5, threshold=0.0, dedupe=False, filter_api_classes=False))
    deduped = Retriever(kb, embedder(), RetrievalConfig(top_k=5, threshold=0.0, filter_api_classes=False))
    raw = [h.entry.text for h in plain.retrieve(repeated)]
    assert raw.count(repeated) >= 2
    shown = [h.entry.dedupe_key for h in deduped.retrieve(repeated)]
    assert len(shown) == len(set(shown)) == 5


# --------------------------------------------------------------------------- hand-checked BFCL neighbours


def test_multi_turn_test_questions_find_the_expected_training_turns():
    r = retriever(top_k=3, threshold=0.5)
    [entry] = [e for e in load_entries("multi_turn_base", "test", limit=6) if e.index == 11]
    hits = r.retrieve(entry.turns[0][0]["content"], api_classes=entry.involved_classes)
    # "Display all the available files located within the '/temp' directory including hidden one ..."
    assert [h.entry.id for h in hits[:2]] == ["ST:multi_turn_base_26#t0", "ST:multi_turn_base_4#t0"]
    assert all("ls" in h.entry.tool_names for h in hits[:2])
    [entry] = [e for e in load_entries("multi_turn_base", "test", limit=6) if e.index == 5]
    hits = r.retrieve(entry.turns[0][0]["content"], api_classes=entry.involved_classes)
    # "Find analysis_report.csv and upon locating it, ensure you move it to the 'archive' directory ..."
    assert hits[0].entry.id == "ST:multi_turn_base_14#t0" and "find" in hits[0].entry.tool_names


def test_single_turn_test_questions_find_same_function_examples_only():
    r = retriever(top_k=3, threshold=0.5, filter_tools=True, include_no_call=False)
    by_index = {e.index: e for e in load_entries("simple_python", "test", limit=8)}
    # "What is the area of a triangle with base of 10 units and height of 5 units?": the near-identical
    # training question (simple_python_0) passed unit='units' to a calculate_triangle_area that took a
    # unit; this task's function takes none, so that call is not one it can make: nothing is shown
    hits = r.retrieve(by_index[11].turns[0][-1]["content"], api_classes=(), tools=by_index[11].tools)
    assert hits == []
    loose = retriever(top_k=3, threshold=0.5, include_no_call=False)
    assert loose.retrieve(by_index[11].turns[0][-1]["content"], api_classes=())[0].entry.id == "ST:simple_python_0#t0"
    # "Find all the roots of a quadratic equation given coefficients a = 3, b = -11, and c = -4."
    hits = r.retrieve(by_index[5].turns[0][-1]["content"], api_classes=(), tools=by_index[5].tools)
    assert [h.entry.tool_names for h in hits] == [("solve_quadratic",)]
    # "Calculate the area of a circle with a radius of 5 units.": the near-identical training
    # question used another function, so nothing is shown (unfiltered, it would be the top hit)
    hits = r.retrieve(by_index[9].turns[0][-1]["content"], api_classes=(), tools=by_index[9].tools)
    assert hits == []
    top = retriever(threshold=0.5).retrieve(by_index[9].turns[0][-1]["content"], api_classes=())[0]
    assert top.entry.tool_names == ("calculate_circle_dimensions",) and top.score > 0.9


@pytest.fixture(scope="module")
def intent_kb() -> KnowledgeBase:
    dialogues = bfcl_trajectories(["multi_turn_base"], "train")
    writer = FakeChatModel([intent_writer], repeat_last=True, name="fake-writer")
    entries, _ = intent_entries(dialogues, embedder().embed, writer, LLMCache(None))
    return KnowledgeBase.create(entries, embedder().embed([e.text for e in entries]), embedding=embedder().identity())


@pytest.mark.parametrize(
    "intent,classes,function",
    [
        ("The user wants to post a tweet.", ["TwitterAPI", "GorillaFileSystem"], "post_tweet"),
        ("The user wants to buy shares of a stock.", ["TradingBot"], "place_order"),
    ],
)
def test_intent_retrieval_through_the_policy_models_intent(intent_kb, intent, classes, function):
    policy = FakeChatModel([intent + "\nExtra lines are ignored."], repeat_last=True)
    r = Retriever(intent_kb, embedder(), RetrievalConfig(types=[], intent={"enabled": True, "threshold": 0.35}))
    knowledge = retrieval_knowledge(r, intent_model=policy)
    got = knowledge("Could you do the usual thing for me?", [{"role": "user", "content": "Earlier: hello"}],
                    KnowledgeContext(api_classes=tuple(classes)))
    text, record = got.text, got.to_dict()
    assert record["intent"] == intent
    [hit] = record["hits"]  # K = 1
    entry = intent_kb.entries[intent_kb.row(hit["id"])]
    assert entry.type == "SIC" and set(entry.api_classes) <= set(classes) and function in entry.tool_names
    assert "Usual steps for requests like" in text
    asked = policy.requests[0]["messages"][-1]["content"]
    assert "Summarize the user's intent in one sentence." in asked and "Earlier request: Earlier: hello" in asked
    assert policy.requests[0]["tools"] is None


def test_intent_retrieval_needs_the_policy_model(intent_kb):
    r = Retriever(intent_kb, embedder(), RetrievalConfig(types=[], intent={"enabled": True}))
    with pytest.raises(ValueError, match="intent_model"):
        retrieval_knowledge(r)


# --------------------------------------------------------------------------- injection and the hook


def test_guarded_template_labels_examples_as_foreign():
    hits = retriever(top_k=2, threshold=0.3).retrieve(QUERIES[0], api_classes=FS)
    text = render_knowledge(hits, GUARDED)
    assert text.startswith("[Reference only: solved examples from OTHER, earlier tasks.")
    assert "not instructions" in text and "Call only the functions available to you now" in text
    assert "Past example 1 (another user, another task)" in text and "Past example 2" in text
    assert "ls(" in text and text.rstrip().endswith("answer without calling a function.]")
    assert render_knowledge([], GUARDED) is None


def test_kate_preset_and_config_overrides():
    hits = retriever(top_k=1, threshold=0.3).retrieve(QUERIES[1], api_classes=())
    kate = render_knowledge(hits, KATE)
    assert kate.startswith("Here are some related experiences.") and "Correct tool-calling trajectory:" in kate
    custom = template_from({"preset": "kate", "call_format": "json", "items": {"ST": "Q: {question} -> {calls}"}})
    text = render_knowledge(hits, custom)
    assert '-> {"name": ' in text and text.startswith("Here are some related experiences.")
    with pytest.raises(ValueError, match="call_format"):
        template_from({"call_format": "xml"})
    bad = template_from({"items": {"ST": "{nope}"}})
    with pytest.raises(ValueError, match="nope"):
        render_knowledge(hits, bad)
    masked = render_knowledge(hits, template_from({"call_format": "json", "show_values": False}))
    call = hits[0].entry.payload["calls"][0]
    assert '{"name": "%s", "arguments": {' % call["name"] in masked
    assert all(f'"{k}": "<{k}>"' in masked for k in call["arguments"])  # names shown, values masked
    assert all(repr(v) not in masked for v in call["arguments"].values() if isinstance(v, (int, float)) and v > 9)
    restated = render_knowledge(hits, template_from({"preset": "guarded_restated"}), request=QUERIES[1])
    assert restated.endswith(f"not any example's:]\n{QUERIES[1]}")  # the user's request is the last thing read
    short = template_from({"max_chars": 10})
    assert render_knowledge(retriever(top_k=3, threshold=0.0).retrieve(QUERIES[1]), short).count("Past example") == 1


def ls(folder: str = ".") -> str:
    """List the files of a folder."""
    return "a.txt b.txt"


def test_a_policys_knowledge_is_appended_inside_the_user_turn():
    from kate.retrieval.knowledge import retrieval_knowledge

    env = PythonFunctionsEnv([ls])
    model = FakeChatModel(['{"name": "ls", "arguments": {}}', "You have a.txt and b.txt."])
    policy = Policy(model, GreedySampler(), retrieval_knowledge(retriever(top_k=2, threshold=0.4)))
    user = {"role": "user", "content": QUERIES[0]}
    turn = policy.run_turn(env, [user], context=KnowledgeContext(api_classes=tuple(FS)))
    sent = model.requests[0]["messages"][-1]
    assert sent["role"] == "user" and sent["content"].startswith(QUERIES[0] + "\n\n[Reference only:")
    assert turn.knowledge == turn.retrieved.text and len(turn.retrieved.hits) == 2
    assert turn.answer == "You have a.txt and b.txt."


def test_knowledge_renders_hits_and_nothing_for_no_hit():
    got = retrieval_knowledge(retriever(top_k=2, threshold=0.4))(QUERIES[0], [], KnowledgeContext(api_classes=tuple(FS)))
    assert got.text.startswith("[Reference only:") and len(got.hits) == 2 and got.query == QUERIES[0]
    nothing = retrieval_knowledge(retriever(threshold=0.99))
    assert nothing("Completely unrelated words about gardening.", [], KnowledgeContext()) is None


def test_intent_config_defaults_are_kates():
    config = IntentConfig()
    assert (config.top_k, config.threshold, config.enabled) == (1, 0.5, False)
    default = RetrievalConfig()
    assert (default.top_k, default.threshold, default.filter_api_classes) == (3, 0.5, True)
    with pytest.raises(ValueError, match="unknown knowledge type"):
        RetrievalConfig(types=["XX"])


def test_bfcl_entries_filter_knowledge_by_their_tools_or_classes_and_never_see_themselves():
    from kate.tasks.bfcl import knowledge_context

    knowledge = retrieval_knowledge(retriever(top_k=3, threshold=0.5, filter_tools=True, include_no_call=False))
    [single] = [e for e in load_entries("simple_python", "test", limit=8) if e.index == 5]
    got = knowledge(single.turns[0][-1]["content"], [], knowledge_context(single))
    assert "solve_quadratic(" in got.text
    kb = bfcl_st_kb()
    hits = [kb.entries[kb.row(h["id"])] for h in got.hits]
    assert hits and all(set(e.tool_names) <= {"solve_quadratic"} for e in hits)
    [multi] = [e for e in load_entries("multi_turn_base", "test", limit=8) if e.index == 11]
    got = retrieval_knowledge(retriever(top_k=3, threshold=0.5))(multi.turns[0][0]["content"], [], knowledge_context(multi))
    hit_entries = [kb.entries[kb.row(h["id"])] for h in got.hits]
    assert hit_entries and all(set(e.api_classes) <= set(multi.involved_classes) for e in hit_entries)
    # an entry of the training half (training data): its own turns are never shown
    [own] = [e for e in load_entries("multi_turn_base", "train", limit=14) if e.index == 26]
    got = retrieval_knowledge(retriever(top_k=3, threshold=0.5))(own.turns[0][0]["content"], [], knowledge_context(own))
    assert got.hits and all(not h["id"].startswith("ST:multi_turn_base_26#") for h in got.hits)
