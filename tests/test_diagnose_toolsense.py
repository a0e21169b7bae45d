"""ToolSense's pieces: the catalogue and its pools, the tier generator's checks (an answer naming a
tool outside the pool is rejected), the cache (a rebuild re-asks nothing), MCQ / QA probes,
recall@k and NDCG@k on known inputs, free-answer parsing, and constrained selection (only
catalogue names come out) on a tiny random Llama and on the 135M model."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from kate.diagnose.toolsense import (POOL_SIZE, Tool, ToolIndex, bfcl_catalogue, catalogue_from_tools, load_catalogue,
                                     save_catalogue)  # fmt: skip
from kate.diagnose.toolsense_catalogue import catalogue_mcq, catalogue_qa
from kate.diagnose.toolsense_checks import TIERS, check_mcq, check_qa, check_query, names_tool
from kate.diagnose.toolsense_gen import ProbeWriter, generate
from kate.diagnose.toolsense_score import (constrained_ranking, ndcg_at_k, parse_tool_names, recall_at_k,
                                           selection_messages, selection_table)  # fmt: skip
from kate.diagnose.toolsense_tasks import parse_letter, parse_yes_no
from kate.knowledge.llm_cache import LLMCache
from kate.llm.fake import FakeChatModel

VERBS = ("get", "set", "find", "book", "send", "convert", "list", "delete", "update", "search")
NOUNS = ("weather", "flight", "hotel", "email", "currency", "calendar")


class WordEmbedder:
    """Hashed bag of words, unit rows: a deterministic stand-in for kate's embedder."""

    def __init__(self, model: str = "words", dim: int = 64) -> None:
        self.model, self.dim = model, dim

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("_", " ").replace(":", " ").split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    embed_queries = embed


def catalogue(n: int = 20) -> list[Tool]:
    pairs = [(v, o) for o in NOUNS for v in VERBS][:n]
    return [Tool(f"{v}_{o}", f"{v.capitalize()} the {o} records of a user account.") for v, o in pairs]


def test_catalogues_convert_dedupe_and_round_trip(tmp_path):
    tools = catalogue_from_tools([{"type": "function", "function": {"name": "a", "description": "A.", "parameters":
                                   {"type": "object", "properties": {}}}}, {"name": "a", "description": "A."},
                                  {"name": "a", "description": "Another a."}])  # fmt: skip
    assert [(t.name, t.description) for t in tools] == [("a", "A."), ("a", "Another a.")]
    save_catalogue(tmp_path / "c.jsonl", tools)
    assert load_catalogue(tmp_path / "c.jsonl") == tools
    (tmp_path / "tools.json").write_text(json.dumps({"tools": [{"function": {"name": "b", "description": "B."}}]}))
    assert load_catalogue(tmp_path / "tools.json") == [Tool("b", "B.")]
    bfcl = bfcl_catalogue(("simple_python", "multiple"))
    assert len(bfcl) > 300 and len({(t.name, t.description) for t in bfcl}) == len(bfcl)


class CountingEmbedder(WordEmbedder):
    calls = 0

    def embed(self, texts):
        CountingEmbedder.calls += 1
        return super().embed(texts)


def test_pools_hold_the_seed_and_13_neighbours_one_per_name(tmp_path):
    tools = catalogue() + [Tool("get_weather", "Another weather tool.")]
    index = ToolIndex(tools, CountingEmbedder(), cache=tmp_path / "vectors.npz")
    again = ToolIndex(tools, CountingEmbedder(), cache=tmp_path / "vectors.npz")  # the vectors read back
    assert CountingEmbedder.calls == 1 and np.array_equal(again.vectors, index.vectors)
    ToolIndex(tools[:-1], CountingEmbedder(), cache=tmp_path / "vectors.npz")  # another catalogue: embedded anew
    assert CountingEmbedder.calls == 2
    pool = index.pool(0)
    names = [tools[r].name for r in pool]
    assert len(pool) == POOL_SIZE and pool[0] == 0 and len(set(names)) == POOL_SIZE
    assert index.rank("weather records", pool)[0].endswith("_weather")
    assert len(index.rank("weather")) == len({t.name for t in tools})


def _answer(query, tools):
    return json.dumps({"query": query, "relevant_tools": tools})


def test_the_tier_checks_reject_a_tool_outside_the_pool_then_the_judge_decides(tmp_path):
    pool = ["get_weather", "get_flight", "book_hotel"]
    tier1, tier2, tier3 = TIERS[1], TIERS[2], TIERS[3]
    assert check_query(_answer("Weather in Paris?", ["send_email"]), pool, tier1) == (None, "a tool outside the pool")
    assert check_query("no json here", pool, tier1)[1] == "not JSON"
    for named in ("Run get_weather for Paris", "GET_WEATHER(city='Paris')", "api.get_flight please"):
        assert check_query(_answer(named, ["get_weather"]), pool, tier1)[1] == "the query names a tool"
    assert names_tool("ask ProjectApi now", "project_api.ProjectApi") and not names_tool("search it", "tools.search")
    assert not names_tool("get weather in Paris", "get_weather")
    assert check_query(_answer("Weather and flights?", ["get_weather"]), pool, tier2)[1] == "wrong tool count for the tier"
    assert check_query(_answer(" ".join(["word"] * 20), ["get_weather"]), pool, tier1)[1] == "too many words"
    assert check_query(_answer("Plan my trip.", pool), pool, tier3)[1] == "wrong tool count for the tier"
    assert check_query(_answer("Weather in Paris?", ["get_weather"]), pool, tier1)[0]["relevant_tools"] == ["get_weather"]
    index = ToolIndex(catalogue(), WordEmbedder())
    seed_name = index.tools[0].name
    writer = FakeChatModel([_answer("What is in my account?", ["not_a_tool"]), _answer("Show my records", [seed_name]),
                            "No."], name="writer")  # fmt: skip
    author = ProbeWriter(writer, LLMCache(tmp_path / "cache.jsonl"), attempts=2)
    assert author.query(index, 0, tier1) is None  # passed the checks on the second try, then the judge said no
    assert author.stats["query_t1"] == {"a tool outside the pool": 1, "ok": 1, "judge no": 1}
    writer = FakeChatModel([_answer("Show my records", [seed_name]), "Yes, exactly."], name="writer2")
    probe = ProbeWriter(writer, LLMCache(None)).query(index, 0, tier1)
    assert probe.relevant == (seed_name,) and probe.pool[0] == seed_name and probe.writer == "writer2"
    assert probe.judge == "writer2" and len(probe.pool) == POOL_SIZE


def scripted_writer(messages, tools, n):
    """Valid answers to every generation prompt (the pool's first tools; the wanted Yes/No)."""
    text = messages[-1]["content"]
    if "Candidate tools:" in text:
        names = [line[2:].split(":")[0] for line in text.splitlines() if line.startswith("- ")]
        count = 1 if "exactly 1" in text else 2 if "2 or 3" in text else 4
        return [_answer(f"Please sort out the {names[0].split('_')[-1]} records", names[:count])] * n
    if text.startswith("Tools:"):
        return ["yes"] * n
    name = text.split("`")[1]
    if "Which of these statements" in text:  # the MCQ judge: the option the writer made correct
        return [next(line[0] for line in text.splitlines() if line[1:3] == ") " and "It handles" in line)] * n
    if "multiple-choice" in text:
        return [json.dumps({"correct": f"It handles {name}.", "wrong": ["It bakes.", "It sings.", "It flies."]})] * n
    wanted = "Yes" if "answer is Yes" in text else "No"
    return [json.dumps({"question": f"Does `{name}` handle records?", "answer": wanted})] * n


def test_generation_keeps_checked_probes_and_a_rebuild_re_asks_nothing(tmp_path):
    index = ToolIndex(catalogue(), WordEmbedder())
    writer = FakeChatModel([scripted_writer], name="scripted-writer", repeat_last=True)
    author = ProbeWriter(writer, LLMCache(tmp_path / "cache.jsonl"))
    sets = generate(index, author, queries_per_tier=2, mcq=3, qa=4, seed=1)
    assert sorted(q.tier for q in sets["queries"]) == [1, 1, 2, 2, 3, 3]
    assert all(len(q.relevant) == {1: 1, 2: 2, 3: 4}[q.tier] and set(q.relevant) <= set(q.pool) for q in sets["queries"])
    assert len(sets["mcq"]) == 3 and all(m.options[m.answer].startswith("It handles") for m in sets["mcq"])
    assert author.stats["mcq"] == {"ok": 3, "judge yes": 3}
    assert [q.answer for q in sets["qa"]] == ["Yes", "No", "Yes", "No"]
    asked = len(writer.requests)
    silent = FakeChatModel([], name="scripted-writer")  # any request would raise
    again = generate(index, ProbeWriter(silent, LLMCache(tmp_path / "cache.jsonl")), queries_per_tier=2, mcq=3, qa=4,
                     seed=1)  # fmt: skip
    assert again == sets and silent.requests == [] and asked == 6 * 2 + 3 * 2 + 4


def flaky_writer(messages, tools, n):
    """``scripted_writer``, except that the get_ and send_ tools never get a valid answer."""
    text = messages[-1]["content"]
    if "`" in text and text.split("`")[1].startswith(("get_", "send_")):
        return ["not json"] * n
    return scripted_writer(messages, tools, n)


@pytest.mark.parametrize("workers", [1, 3])
def test_workers_write_at_once_and_keep_exact_counts_and_balanced_qa(tmp_path, workers):
    index = ToolIndex(catalogue(), WordEmbedder())
    writer = FakeChatModel([flaky_writer], name="flaky", repeat_last=True)
    author = ProbeWriter(writer, LLMCache(tmp_path / "cache.jsonl"), attempts=1)
    sets = generate(index, author, queries_per_tier=2, mcq=3, qa=5, seed=1, workers=workers)
    assert sorted(q.tier for q in sets["queries"]) == [1, 1, 2, 2, 3, 3]
    assert not any(q.seed_tool.startswith(("get_", "send_")) for q in sets["queries"])
    assert len(sets["mcq"]) == 3 and [q.answer for q in sets["qa"]].count("Yes") == 3 and len(sets["qa"]) == 5
    assert sum(author.stats["query_t1"].values()) + sum(author.stats["mcq"].values()) > 0
    assert len(LLMCache(tmp_path / "cache.jsonl")) == len(writer.requests)  # every answer written, none torn


def test_catalogue_probes_take_the_tools_own_description_against_its_farthest_pool_neighbours(tmp_path):
    index = ToolIndex(catalogue(), WordEmbedder())
    tool, pool = index.tools[3], index.pool(3)
    mcq = catalogue_mcq(index, 3, seed=0)
    assert mcq.options[mcq.answer] == tool.description and mcq.writer == "catalogue"
    farthest = [index.tools[r].description for r in reversed(pool[1:])][:3]
    assert sorted(o for i, o in enumerate(mcq.options) if i != mcq.answer) == sorted(farthest)
    yes, no = catalogue_qa(index, 3, "Yes"), catalogue_qa(index, 3, "No")
    assert (yes.answer, no.answer) == ("Yes", "No") and tool.description.rstrip(".") in yes.question
    assert farthest[0].rstrip(".") in no.question and f"`{tool.name}`" in no.question
    assert catalogue_mcq(ToolIndex([tool, Tool("x", tool.description)], WordEmbedder()), 0) is None  # no distractor
    noted = ToolIndex([Tool("a", "Book a room. Note that the provided function is in Python 3 syntax."),
                       *[Tool(f"t{i}", f"Tool number {i}.") for i in range(4)]], WordEmbedder())  # fmt: skip
    assert "Book a room." in catalogue_mcq(noted, 0).options and "Note that" not in catalogue_qa(noted, 0, "Yes").question
    writer = FakeChatModel([scripted_writer], name="scripted-writer", repeat_last=True)
    sets = generate(index, ProbeWriter(writer, LLMCache(None)), queries_per_tier=1, mcq=4, qa=3, seed=1, workers=2,
                    mcq_of=lambda row: catalogue_mcq(index, row), qa_of=lambda row, want: catalogue_qa(index, row, want))
    assert len(sets["mcq"]) == 4 and [q.answer for q in sets["qa"]] == ["Yes", "No", "Yes"]
    assert all("Candidate tools:" in r["messages"][-1]["content"] or r["messages"][-1]["content"].startswith("Tools:")
               for r in writer.requests)  # the writer wrote only the queries  # fmt: skip


def test_the_mcq_judge_drops_a_question_whose_wrong_options_are_right(tmp_path):
    tool = catalogue(1)[0]
    mcq = json.dumps({"correct": "It gets records.", "wrong": ["It fetches records.", "It bakes.", "It sings."]})
    writer = FakeChatModel([mcq, "A, B"], name="w")  # the judge finds two correct options
    assert ProbeWriter(writer, LLMCache(None), attempts=1).mcq(tool) is None
    writer = FakeChatModel([mcq, "B"], name="w")
    found = ProbeWriter(writer, LLMCache(None), attempts=1, judge_mcq=False).mcq(tool)
    assert found.options[found.answer] == "It gets records." and len(writer.requests) == 1


def test_mcq_and_qa_checks_and_answer_parsing():
    assert check_mcq(json.dumps({"correct": "x", "wrong": ["y", "z"]}))[1] == "not three wrong options"
    assert check_mcq(json.dumps({"correct": "x", "wrong": ["y", "z", "X"]}))[1] == "options repeat"
    assert check_qa(json.dumps({"question": "Is it?", "answer": "Yes"}), "get_x", "Yes")[1] == "the question does not name the tool"
    assert check_qa(json.dumps({"question": "Does t run?", "answer": "No"}), "t", "Yes")[1] == "wrong answer"
    assert check_qa(json.dumps({"question": "What does `t` return?", "answer": "Yes"}), "t", "Yes")[1] == (
        "not a yes/no question")
    options = ("Bakes bread.", "Sends email.", "Books flights.", "Sings.")
    assert parse_letter("B", options) == 1 and parse_letter("The answer is C.", options) == 2
    assert parse_letter("It sends email.", options) == 1 and parse_letter("no idea", options) is None
    assert parse_yes_no("Yes, it does.") == "Yes" and parse_yes_no("no") == "No" and parse_yes_no("maybe") is None


def test_recall_and_ndcg_on_known_inputs():
    ranked, relevant = ["a", "x", "b", "y"], ["a", "b"]
    assert recall_at_k(ranked, relevant, 1) == 0.5 and recall_at_k(ranked, relevant, 3) == 1.0
    assert ndcg_at_k(ranked, relevant, 1) == 1.0
    assert ndcg_at_k(ranked, relevant, 3) == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["x", "a"], ["a"], 2) == pytest.approx(1 / math.log2(3)) and ndcg_at_k([], ["a"], 5) == 0.0
    rows = {"free": [{"tier": 1, "recall@1": 0.5, "ndcg@1": 0.5}], "constrained": [{"tier": 1, "recall@1": 1.0,
                                                                                     "ndcg@1": 1.0}]}  # fmt: skip
    table = selection_table(rows, ks=(1,))
    assert table["internalization"]["tier1"]["recall@1"] == 0.5 and table["methods"]["free"]["all"]["n"] == 1


def test_free_answers_are_parsed_against_the_catalogue_names():
    names = ["get_weather", "get_weather_forecast", "book_hotel"]
    text = "First `get_weather_forecast`, then book_hotel; also get_weather. Not my.book_hotel2."
    assert parse_tool_names(text, names) == ["get_weather_forecast", "book_hotel", "get_weather"]
    assert parse_tool_names("nothing", names) == []


def _constrained_is_only_candidates(model, candidates):
    messages = selection_messages("Weather in Paris tomorrow?", None)
    ranked = constrained_ranking(model, messages, candidates)
    assert sorted(n for n, _ in ranked) == sorted(candidates)
    assert all(s <= 0 for _, s in ranked) and [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    return ranked, messages


def test_constrained_selection_produces_only_catalogue_names_and_matches_a_full_forward():
    import torch

    from tests.test_diagnose_cmd import TinyHF

    model = TinyHF()
    candidates = [t.name for t in catalogue(14)]
    ranked, messages = _constrained_is_only_candidates(model, candidates)
    prompt = model.tokenizer(model.render(messages, None)).input_ids
    name = ranked[-1][0]
    ids = model.tokenizer(name).input_ids
    with torch.no_grad():  # the same score without the cache
        logits = torch.log_softmax(model.model(torch.tensor([prompt + ids])).logits[0].float(), -1)
    full = sum(float(logits[len(prompt) - 1 + j, t]) for j, t in enumerate(ids)) / len(ids)
    assert ranked[-1][1] == pytest.approx(full, abs=1e-4)


def test_constrained_selection_on_the_135m_model(small_hf):
    candidates = ["get_weather", "book_hotel", "send_email", "convert_currency"]
    ranked, _ = _constrained_is_only_candidates(small_hf, candidates)
    assert len(ranked) == 4
