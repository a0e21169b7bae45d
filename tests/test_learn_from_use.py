"""Learning from use (kate/knowledge/learn.py): a verified conversation becomes ST entries of a live
base; bad calls are refused with reasons; duplicates add nothing; concurrent writers (threads and
spawned processes) lose nothing; a running Retriever sees the new entries on its next call and
does not reload when nothing changed; a killed append leaves the base as it was or fully updated.
Tiny bases under tmp_path, real MiniLM embeddings (never the shipped knowledge_bases/)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import threading

import numpy as np
import pytest

from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.learn import LearnConfig, learn_trajectory, open_learning_base, trajectory_from_messages
from kate.knowledge.st import st_entries
from kate.knowledge.store import DATA_FILES, MANIFEST, KnowledgeBase, KnowledgeBaseError
from kate.knowledge.trajectory import trajectory_from_dict
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.retriever import Retriever

pytestmark = pytest.mark.model

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}  # fmt: skip
EMAIL = {"type": "function", "function": {
    "name": "send_email", "description": "Send an email.",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                   "required": ["to", "body"]}}}  # fmt: skip
TOOLS = [WEATHER, EMAIL]


def embedder():
    from tests.test_knowledge_fixtures import embedder as shared  # lazily: spawned workers load their own

    return shared()


def _call(call_id, name, arguments):
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def conversation(city="Paris", *, second=True):
    """Two user turns: the weather (one call, its result, an answer), then an email (one call)."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": f"What's the weather in {city}?"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "get_weather", {"city": city})]},
        {"role": "tool", "tool_call_id": "c1", "content": f"sunny in {city}, 21C"},
        {"role": "assistant", "content": f"It is sunny in {city}."},
    ]
    if second:
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"Email bob@example.com the {city} weather."}]},
            {"role": "assistant", "content": "",
             "tool_calls": [_call("c2", "send_email", {"to": "bob@example.com", "body": f"Sunny in {city}"})]},
            {"role": "tool", "tool_call_id": "c2", "content": "sent"},
        ]
    return messages


def seeded_base(path) -> KnowledgeBase:
    """A tiny base of ST entries from one kate-trajectory (not from use), saved at ``path``."""
    trajectory = trajectory_from_dict({"id": "seed_0", "source": "seed", "tools": [WEATHER], "turns": [
        {"user": "Tell me the weather in Berlin", "calls": [{"name": "get_weather", "arguments": {"city": "Berlin"}}]},
        {"user": "Thanks, that is all", "calls": []}]})  # fmt: skip
    entries = st_entries([trajectory])
    kb = KnowledgeBase.create(entries, embedder().embed([e.text for e in entries]),
                              embedding=embedder().identity(), name=path.name)
    kb.save(path)
    assert kb.refresh() is False  # the generation it saved itself: nothing to reload
    return KnowledgeBase.load(path, embedding=embedder().identity())


def snapshot(path) -> dict[str, str]:
    return {name: hashlib.sha256((path / name).read_bytes()).hexdigest() for name in (*DATA_FILES, MANIFEST)}


def manifest(path) -> dict:
    return json.loads((path / MANIFEST).read_text())


# --------------------------------------------------------------------------- entries
def test_a_verified_two_turn_conversation_adds_its_st_entries(tmp_path):
    path = tmp_path / "served"
    seeded_base(path)
    outcome = learn_trajectory(path, conversation("Paris"), TOOLS, source="serve", meta={"request_id": "r1"},
                               embedder=embedder())
    assert outcome.ok and outcome.skipped == () and outcome.version == 1 and outcome.entry_count == 4
    kb = KnowledgeBase.load(path, embedding=embedder().identity())  # every file matches its sha256
    first, second = (kb.entries[kb.row(entry_id)] for entry_id in outcome.added)
    assert first.text == "What's the weather in Paris?" and second.text == "Email bob@example.com the Paris weather."
    assert first.payload["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert first.payload["results"] == ["sunny in Paris, 21C"] and first.payload["answer"] == "It is sunny in Paris."
    assert second.payload["calls"] == [{"name": "send_email",
                                        "arguments": {"to": "bob@example.com", "body": "Sunny in Paris"}}]
    assert [first.payload["turn"], second.payload["turn"]] == [0, 1]
    for entry in (first, second):
        assert entry.type == "ST" and entry.source == entry.written_by == "use:serve"
        assert entry.payload["learned"]["source"] == "use:serve" and entry.payload["learned"]["at"]
        assert entry.payload["learned"]["meta"] == {"request_id": "r1"}
    # the same entries kate builds from its own trajectories, less the label
    trajectory = trajectory_from_messages(conversation("Paris"), TOOLS)
    expected = [e.to_dict() for e in st_entries([trajectory])]
    got = [dataclasses.replace(e, written_by=None,
                               payload={k: v for k, v in e.payload.items() if k != "learned"}).to_dict()
           for e in (first, second)]
    assert got == expected
    assert np.allclose(kb.embeddings[kb.row(first.id)], embedder().embed([first.text])[0], atol=1e-5)
    m = manifest(path)
    assert m["entry_count"] == 4 and m["types"] == {"ST": 4} and m["writers"] == {"ST": ["use:serve"]}
    assert m["learned"]["version"] == 1 and m["learned"]["entries"] == 2
    assert m["learned"]["by_source"] == {"use:serve": 2}
    assert m["name"] == "served" and m["index"]["kind"] == "flat"


def test_results_are_trimmed_as_st_trims_them(tmp_path):
    messages = conversation("Oslo", second=False)
    messages[3]["content"] = "x" * 1000
    outcome = learn_trajectory(tmp_path / "kb", messages, TOOLS, embedder=embedder())
    kb = KnowledgeBase.load(tmp_path / "kb")
    assert kb.entries[kb.row(outcome.added[0])].payload["results"] == ["x" * 300 + " ..."]


def _malformed_arguments(messages):
    messages[2]["tool_calls"][0]["function"]["arguments"] = '{"city": "Paris"'


def _not_offered(messages):
    messages[2]["tool_calls"][0]["function"]["name"] = "book_flight"


def _missing_required(messages):
    messages[6]["tool_calls"][0]["function"]["arguments"] = json.dumps({"to": "bob@example.com"})


def _wrong_type(messages):
    messages[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": "Paris", "days": "three"})


def _unknown_parameter(messages):
    messages[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"town": "Paris"})


def _result_for_no_call(messages):
    messages[3]["tool_call_id"] = "c9"


def _assistant_first(messages):
    messages.insert(1, {"role": "assistant", "content": "Hello!"})


@pytest.mark.parametrize("spoil,reason", [
    (_malformed_arguments, "messages[2]: tool_calls[0].function: arguments string: invalid JSON"),
    (_not_offered, "calls 'book_flight', a tool not offered"),
    (_missing_required, "messages[6]: send_email: required parameter(s) ['body'] missing"),
    (_wrong_type, "days='three' is not of its declared type 'integer'"),
    (_unknown_parameter, "['town'] not among its parameters"),
    (_result_for_no_call, "tool_call_id 'c9' answers no call"),
    (_assistant_first, "messages[1]: 'assistant' message before the first user message"),
])  # fmt: skip
def test_a_conversation_that_does_not_verify_is_refused_with_its_reason(tmp_path, spoil, reason):
    path = tmp_path / "served"
    seeded_base(path)
    before = snapshot(path)
    messages = conversation("Paris")
    spoil(messages)
    outcome = learn_trajectory(path, messages, TOOLS, embedder=embedder())
    assert not outcome.ok and reason in outcome.rejected
    assert outcome.added == () and outcome.entry_count == 2 and outcome.version == 0
    assert snapshot(path) == before
    # into a base not there yet: nothing is created either
    assert not learn_trajectory(tmp_path / "new", messages, TOOLS, embedder=embedder()).ok
    assert not (tmp_path / "new").exists()


def test_bad_tools_and_meta_are_refused(tmp_path):
    assert "tools[0]" in learn_trajectory(tmp_path / "kb", conversation(), [{"type": "function"}]).rejected
    assert "tools must be a list" in learn_trajectory(tmp_path / "kb", conversation(), "get_weather").rejected
    assert "meta is not plain JSON" in learn_trajectory(tmp_path / "kb", conversation(), TOOLS,
                                                        meta={"when": object()}).rejected
    assert "no user message" in learn_trajectory(tmp_path / "kb", [{"role": "system", "content": "hi"}], TOOLS).rejected
    assert not (tmp_path / "kb").exists()


# --------------------------------------------------------------------------- duplicates
def test_a_second_submission_adds_nothing(tmp_path):
    path = tmp_path / "served"
    seeded_base(path)
    assert len(learn_trajectory(path, conversation("Paris"), TOOLS, embedder=embedder()).added) == 2
    before = snapshot(path)
    again = learn_trajectory(path, conversation("Paris"), TOOLS, embedder=embedder())
    assert again.ok and again.added == () and again.version == 1 and again.entry_count == 4
    assert [(s.turn, s.reason) for s in again.skipped] == [(0, "duplicate"), (1, "duplicate")]
    assert snapshot(path) == before


def test_duplicates_of_existing_entries_and_within_the_conversation_are_skipped(tmp_path):
    path = tmp_path / "served"
    seeded = seeded_base(path)
    messages = [
        # the seed's question (case and spaces aside) with the same canonical call: a duplicate
        {"role": "user", "content": "tell me the   weather in BERLIN"},
        {"role": "assistant", "tool_calls": [_call("a", "get_weather", '{"city": "Berlin"}')]},
        {"role": "user", "content": "Weather in Rome, in F, for 2 days"},
        {"role": "assistant", "tool_calls": [_call("b", "get_weather", {"city": "Rome", "unit": "F", "days": 2})]},
        # asked again with the same calls (arguments in another order): a duplicate within the batch
        {"role": "user", "content": "Weather in Rome, in F, for 2 days"},
        {"role": "assistant", "tool_calls": [_call("c", "get_weather", '{"days": 2, "unit": "F", "city": "Rome"}')]},
        {"role": "user", "content": ""},  # no text: no entry
    ]
    outcome = learn_trajectory(path, messages, TOOLS, embedder=embedder())
    assert len(outcome.added) == 1 and outcome.added[0].endswith("#t1")
    assert [(s.turn, s.reason) for s in outcome.skipped] == [
        (0, "duplicate"), (2, "duplicate within this trajectory"), (3, "no user text")]
    assert outcome.skipped[0].entry_id == seeded.entries[0].id and outcome.skipped[1].entry_id == outcome.added[0]
    assert KnowledgeBase.load(path).manifest["entry_count"] == 3


# --------------------------------------------------------------------------- new bases
@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_a_new_base_is_created_where_there_is_none(tmp_path, kind):
    path = tmp_path / "bases" / "from_use"
    config = LearnConfig(index={"kind": kind})
    first = learn_trajectory(path, conversation("Paris"), TOOLS, embedder=embedder(), config=config)
    assert first.created and first.version == 1 and first.entry_count == 2
    second = learn_trajectory(path, conversation("Lima"), TOOLS, embedder=embedder(), config=config)
    assert not second.created and second.version == 2 and second.entry_count == 4
    kb = KnowledgeBase.load(path, embedding=embedder().identity())
    assert kb.manifest["index"]["kind"] == kind and kb.manifest["embedding"]["model"] == "all-minilm-l6-v2"
    assert kb.manifest["name"] == "from_use" and kb.manifest["sources"] == {"kind": "use"}
    hits = Retriever(kb, embedder(), RetrievalConfig(threshold=0.5)).retrieve("What is the weather in Lima?")
    assert hits[0].entry.id == second.added[0]


def test_an_empty_base_can_be_opened_for_learning_and_served_from_the_start(tmp_path):
    path = tmp_path / "empty"
    kb = open_learning_base(path, embedder=embedder())
    assert len(kb) == 0 and manifest(path)["learned"]["version"] == 0
    retriever = Retriever(kb, embedder(), RetrievalConfig(threshold=0.5))
    assert retriever.retrieve("What's the weather in Quito?") == []
    outcome = learn_trajectory(path, conversation("Quito"), TOOLS, embedder=embedder())
    assert not outcome.created
    assert retriever.retrieve("What's the weather in Quito?")[0].entry.id == outcome.added[0]
    assert open_learning_base(path, embedder=embedder()).manifest["entry_count"] == 2  # opened again: as it is


# --------------------------------------------------------------------------- readers follow
def test_a_running_retriever_sees_new_entries_and_reloads_only_on_change(tmp_path):
    path = tmp_path / "served"
    kb = seeded_base(path)
    config = RetrievalConfig(threshold=0.6)
    narrow, wide = Retriever(kb, embedder(), config), Retriever(kb, embedder(), dataclasses.replace(config, top_k=5))
    question = "What's the weather in Oslo?"
    assert all("Oslo" not in h.entry.text for h in narrow.retrieve(question))
    narrow.retrieve(question)
    assert kb.reloads == 0  # nothing changed: no reload
    writer = threading.Thread(target=learn_trajectory, args=(path, conversation("Oslo"), TOOLS),
                              kwargs={"embedder": embedder()})
    writer.start()
    writer.join()
    assert narrow.retrieve(question)[0].entry.text == question
    assert kb.reloads == 1
    assert narrow.retrieve(question)[0].entry.text == question and kb.reloads == 1  # unchanged: no second reload
    assert question in [h.entry.text for h in wide.retrieve(question)] and kb.reloads == 1  # shares the object
    assert len(kb) == 4 and kb.manifest["learned"]["version"] == 1


def test_a_corrupt_new_generation_fails_loudly_and_the_reader_keeps_the_old(tmp_path):
    path = tmp_path / "served"
    kb = seeded_base(path)
    retriever = Retriever(kb, embedder(), RetrievalConfig(threshold=0.5))
    learn_trajectory(path, conversation("Oslo"), TOOLS, embedder=embedder())
    data = bytearray((path / "embeddings.npy").read_bytes())
    data[-10] ^= 0xFF
    (path / "embeddings.npy").write_bytes(bytes(data))
    os.utime(path / MANIFEST, ns=(1, 1))  # the manifest's stamp moves: the reader looks again
    with pytest.raises(KnowledgeBaseError, match="embeddings.npy"):
        retriever.retrieve("What's the weather in Oslo?")
    assert len(kb) == 2 and kb.reloads == 0
    with pytest.raises(KnowledgeBaseError, match="embeddings.npy"):
        learn_trajectory(path, conversation("Lima"), TOOLS, embedder=embedder())


def test_an_embedder_other_than_the_bases_is_an_error(tmp_path):
    path = tmp_path / "served"
    seeded_base(path)
    with pytest.raises(KnowledgeBaseError, match="embedding model"):
        learn_trajectory(path, conversation("Oslo"), TOOLS, embedder=StubEmbedder({"model": "other", "sha256": "0",
                                                                                 "dim": 384, "normalized": True}))


# --------------------------------------------------------------------------- concurrency
def test_eight_writer_threads_lose_no_entry_and_a_reader_never_sees_a_broken_base(tmp_path):
    path = tmp_path / "served"
    kb = seeded_base(path)
    before = len(kb)
    query = embedder().embed_query("What's the weather in City3?")
    done, problems, outcomes = threading.Event(), [], {}

    def read():
        while not done.is_set():
            try:
                if not (path / MANIFEST).exists():
                    problems.append("the base was missing")
                kb.refresh()
                entries, index = kb.view()
                assert index.ntotal == len(entries)
            except Exception as exc:  # noqa: BLE001 - recorded, asserted below
                problems.append(repr(exc))

    def write(n):
        outcomes[n] = learn_trajectory(path, conversation(f"City{n}"), TOOLS, embedder=embedder())

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    reader.join()
    assert problems == []
    added = [entry_id for outcome in outcomes.values() for entry_id in outcome.added]
    assert len(added) == 16 == len(set(added))
    assert sorted(o.version for o in outcomes.values()) == list(range(1, 9))
    final = KnowledgeBase.load(path, embedding=embedder().identity())
    assert final.manifest["entry_count"] == len(final) == before + 16 and final.manifest["learned"]["version"] == 8
    ids = [e.id for e in final.entries]
    assert len(ids) == len(set(ids)) and set(added) <= set(ids)
    kb.refresh()
    assert [e.id for e in kb.entries] == ids
    hits = Retriever(kb, embedder(), RetrievalConfig(threshold=0.5)).search_vector(query)
    assert hits[0].entry.text == "What's the weather in City3?"


def _learn_in_a_process(args):
    """A spawned writer adding several distinct conversations. It embeds with a stand-in of the
    base's embedder (same identity, a vector per text): what is tested here is the writers' lock,
    and a MiniLM per process would cost more than the rest of this file together."""
    path, identity, worker, count = args
    mine = StubEmbedder(identity)
    return [learn_trajectory(path, conversation(f"Town{worker}x{i}", second=i % 2 == 0), TOOLS, embedder=mine).added
            for i in range(count)]


def test_writer_processes_lose_no_entry_and_a_retriever_opened_before_sees_them(tmp_path):
    path = tmp_path / "served"
    kb = seeded_base(path)
    retriever = Retriever(kb, embedder(), RetrievalConfig(threshold=0.6))
    retriever.retrieve("What's the weather in Berlin?")
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_learn_in_a_process, [(path, embedder().identity(), worker, 3) for worker in range(4)])
    added = [entry_id for worker in results for ids in worker for entry_id in ids]
    assert len(added) == 4 * (2 + 1 + 2) == len(set(added))
    final = KnowledgeBase.load(path, embedding=embedder().identity())
    assert final.manifest["entry_count"] == len(final) == 2 + len(added)
    assert final.manifest["learned"] == {**final.manifest["learned"], "version": 12, "entries": len(added)}
    ids = [e.id for e in final.entries]
    assert len(ids) == len(set(ids)) and set(added) <= set(ids)
    assert kb.reloads == 0
    target = added[-1]
    hits = retriever.search_vector(final.embeddings[final.row(target)])  # the entry's own vector finds it
    assert hits[0].entry.id == target and kb.reloads == 1 and len(kb) == len(final)
    retriever.search_vector(final.embeddings[final.row(target)])
    assert kb.reloads == 1


# --------------------------------------------------------------------------- killed mid-way
class StubEmbedder:
    """Stands in for the base's embedder (same identity) where only the write path is tested."""

    def __init__(self, identity):
        self._identity = dict(identity)

    def identity(self):
        return dict(self._identity)

    def embed(self, texts):
        seeds = [int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") for text in texts]
        rows = np.array([np.random.default_rng(seed).normal(size=self._identity["dim"]) for seed in seeds])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32).reshape(len(texts), -1)


def _die_while_saving(path, identity, when):
    """Learn, but die (as by SIGKILL: no cleanup) just before or just after the folder swap."""
    import shutil

    from kate.knowledge import store

    if when == "before the swap":
        store._swap_in = lambda tmp, target: os._exit(9)
    else:
        shutil.rmtree = lambda *args, **kwargs: os._exit(9)  # runs right after the swap
    learn_trajectory(path, conversation("Kyiv"), TOOLS, embedder=StubEmbedder(identity))
    os._exit(0)


@pytest.mark.parametrize("when", ["before the swap", "after the swap"])
def test_an_append_killed_mid_way_leaves_the_base_as_it_was_or_fully_updated(tmp_path, when):
    path = tmp_path / "served"
    kb = seeded_base(path)
    before = snapshot(path)
    process = multiprocessing.get_context("spawn").Process(target=_die_while_saving,
                                                           args=(path, embedder().identity(), when))
    process.start()
    process.join()
    assert process.exitcode == 9
    after = KnowledgeBase.load(path, embedding=embedder().identity())  # whole, whichever it is
    if when == "before the swap":
        assert snapshot(path) == before and len(after) == 2 and kb.refresh() is False
    else:
        assert len(after) == 4 and after.manifest["learned"]["version"] == 1 and kb.refresh() is True
    outcome = learn_trajectory(path, conversation("Lima"), TOOLS, embedder=embedder())  # the lock was released
    assert len(outcome.added) == 2 and KnowledgeBase.load(path).manifest["entry_count"] == len(after) + 2


def test_a_failed_save_leaves_the_base_as_it_was(tmp_path, monkeypatch):
    from kate.knowledge import store

    path = tmp_path / "served"
    seeded_base(path)
    before = snapshot(path)

    def fail(tmp, target):
        raise OSError("disk full")

    monkeypatch.setattr(store, "_swap_in", fail)
    with pytest.raises(OSError, match="disk full"):
        learn_trajectory(path, conversation("Kyiv"), TOOLS, embedder=embedder())
    assert snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".served.lock", "served"]  # no temporary folder left


def test_knowledge_entries_stay_plain(tmp_path):
    """Learned entries round-trip through the entry format like any other."""
    outcome = learn_trajectory(tmp_path / "kb", conversation("Cairo"), TOOLS, embedder=embedder())
    kb = KnowledgeBase.load(tmp_path / "kb")
    entry = kb.entries[kb.row(outcome.added[0])]
    assert KnowledgeEntry.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry
