"""The shipped base, knowledge_bases/bfcl_train: what its manifest promises, and hand-checked
queries (ST, ES, and intent retrieval through a scripted policy model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kate.bfcl.data import CATEGORIES, data_sha256
from kate.knowledge.store import KnowledgeBase
from kate.llm.fake import FakeChatModel
from kate.agent import KnowledgeContext
from kate.retrieval import RetrievalConfig, Retriever
from kate.retrieval.knowledge import retrieval_knowledge
from tests.test_knowledge_fixtures import embedder

SHIPPED = Path(__file__).resolve().parents[1] / "knowledge_bases" / "bfcl_train"
WRITER = "qwen2.5-coder-0.5b-instruct-q4_k_m"


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase.load(SHIPPED, embedding=embedder().identity())


def test_the_manifest_says_what_is_inside_and_who_wrote_it(kb):
    m = kb.manifest
    assert m["types"]["ST"] == 3405 and m["types"]["ES"] == 373 and m["types"]["SIC"] >= 8 and m["types"]["TIC"] >= 1
    assert m["writers"] == {"ES": [WRITER], "SIC": [WRITER], "TIC": [WRITER]}
    assert all(e.written_by == WRITER for e in kb.entries if e.type != "ST")
    assert all(e.written_by is None for e in kb.entries if e.type == "ST")
    assert m["sources"]["split"] == "train" and m["sources"]["data_sha256"] == data_sha256(CATEGORIES)
    assert m["build_config"]["llm_categories"] == ["multi_turn_base"]
    per_source = kb.stats()["per_source"]
    assert {c for c in CATEGORIES if c != "live_relevance"} == set(per_source)  # ST for every category
    assert all(e.source == "multi_turn_base" for e in kb.entries if e.type == "ES")
    assert sum(f["bytes"] for f in m["files"].values()) < 30e6  # small enough to commit


def test_every_shipped_entry_comes_from_the_training_half(kb):
    for entry in kb.entries:
        for source in entry.source_ids:
            index = int(source.split("#")[0].rsplit("_", 1)[1].split("-")[0])
            assert index % 2 == 0, entry.id


def test_st_and_es_hand_checked(kb):
    st = Retriever(kb, embedder(), RetrievalConfig(types=["ST"], top_k=2, threshold=0.5, include_no_call=False))
    es = Retriever(kb, embedder(), RetrievalConfig(types=["ES"], top_k=2, threshold=0.5))
    query = "Display all the available files located within the '/temp' directory including hidden one."
    classes = ["TwitterAPI", "GorillaFileSystem"]
    # the same dialogue recurs in base / miss_param / long_context: shown once, whichever copy (miss_func's
    # copy, answered without a call because the function was missing then, is left out by include_no_call)
    st_hits = st.retrieve(query, api_classes=classes)
    assert [h.entry.id.rsplit("_", 1)[1] for h in st_hits] == ["26#t0", "4#t0"]
    assert all(h.entry.id.startswith("ST:multi_turn_") for h in st_hits)
    hits = es.retrieve(query, api_classes=classes)
    assert [h.entry.id for h in hits] == ["ES:multi_turn_base_26#t0", "ES:multi_turn_base_4#t0"]
    assert all(len(h.entry.payload["summary"].split()) >= 20 for h in hits)


@pytest.mark.parametrize(
    "intent,classes,function",
    [
        ("The user wants to buy shares of a stock.", ["TradingBot"], "place_order"),
        ("The user wants to check the tire pressure of the car.", ["VehicleControlAPI"], "check_tire_pressure"),
        ("The user wants to send a message to a friend.", ["MessageAPI"], "send_message"),
        ("The user wants to post a tweet about something.", ["TwitterAPI", "GorillaFileSystem"], "post_tweet"),
    ],
)
def test_intent_retrieval_hand_checked(kb, intent, classes, function):
    policy = FakeChatModel([intent], repeat_last=True)
    r = Retriever(kb, embedder(), RetrievalConfig(types=[], intent={"enabled": True, "types": ["SIC"]}))
    got = retrieval_knowledge(r, intent_model=policy)("Please help me with this.", [], KnowledgeContext(api_classes=tuple(classes)))
    assert got is not None and got.text
    [hit] = got.hits
    entry = kb.entries[kb.row(hit["id"])]
    assert entry.type == "SIC" and set(entry.api_classes) <= set(classes) and function in entry.tool_names
    assert hit["score"] >= 0.5


def test_the_several_call_preset_reaches_a_parallel_request_and_not_a_simple_one(kb):
    """conf/retrieval/single_turn_multi_call.yaml on the shipped base and BFCL's own test-half entries: a
    parallel request gets a several-call example as a ```json list on its own function; a simple one nothing."""
    from omegaconf import OmegaConf

    from kate.bfcl.data import load_entries
    from kate.tasks.bfcl import knowledge_context

    values = OmegaConf.to_container(OmegaConf.load(SHIPPED.parents[1] / "conf/retrieval/single_turn_multi_call.yaml"))
    config = RetrievalConfig(**{k: v for k, v in values.items() if not k.startswith("_") and k != "defaults"})
    knowledge = retrieval_knowledge(Retriever(kb, embedder(), config))
    parallel = load_entries("parallel", "test", 2)[1]  # parallel_3: protein sequences of three hemoglobins
    request = " ".join(m["content"] for m in parallel.turns[0] if m["role"] == "user")
    got = knowledge(request, [], knowledge_context(parallel))
    assert got is not None and "```json\n[\n" in got.text
    name = parallel.tools[0]["function"]["name"]
    assert got.text.count(f'"name": "{name}"') >= 2
    simple = load_entries("simple_python", "test", 1)[0]
    request = " ".join(m["content"] for m in simple.turns[0] if m["role"] == "user")
    assert knowledge(request, [], knowledge_context(simple)) is None


def test_a_training_dialogue_never_retrieves_its_own_turn_through_a_sibling_variant(kb):
    """BFCL's miss_func / miss_param / long_context N repeat base N's turns: excluding only the entry's
    own id showed multi_turn_base_0 its own answer, stored under multi_turn_long_context_0."""
    from omegaconf import OmegaConf

    from kate.bfcl.data import load_entries
    from kate.tasks.bfcl import knowledge_context

    values = OmegaConf.to_container(OmegaConf.load(SHIPPED.parents[1] / "conf/retrieval/multi_turn_kate.yaml"))
    retriever = Retriever(kb, embedder(), RetrievalConfig(**{k: v for k, v in values.items() if not k.startswith("_") and k != "defaults"}))
    entry = load_entries("multi_turn_base", "train", 1)[0]
    context = knowledge_context(entry)
    assert set(context.exclude_ids) == {f"{c}_0" for c in ("multi_turn_base", "multi_turn_miss_func",
                                                           "multi_turn_miss_param", "multi_turn_long_context")}
    request = " ".join(m["content"] for m in entry.turns[0] if m["role"] == "user")
    leaked = retriever.retrieve(request, api_classes=context.api_classes, exclude_ids=("multi_turn_base_0",))
    index = lambda source: source.split("#")[0].rsplit("_", 1)[1]  # noqa: E731
    assert any(index(h.entry.source_ids[0]) == "0" for h in leaked)  # the leak this guards against
    hits = retriever.retrieve(request, api_classes=context.api_classes, exclude_ids=context.exclude_ids)
    assert hits and not any(index(s) == "0" for h in hits for s in h.entry.source_ids)
