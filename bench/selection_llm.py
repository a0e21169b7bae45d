"""The model in the loop, on the training halves only: does injected ST knowledge help or hurt?

Same folds as ``bench/selection.py`` (knowledge: train index % 4 == 0; questions: train
index % 4 == 2). Only questions that receive knowledge under an arm can change, so each arm runs
the model on exactly those, beside the direct answer, greedy, scored by BFCL's official checker.
Per arm and category: how many received knowledge, and of those how many the knowledge fixed and
broke. One record per (question, arm) goes to ``<out>.records.jsonl``; a rerun resumes from it, adding
no record twice.

    .venv/bin/python bench/selection_llm.py --categories simple_python multiple live_simple
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

from kate.agent import KnowledgeContext, Policy, StaticKnowledge
from kate.bfcl.data import SINGLE_TURN, BFCLEntry, load_entries
from kate.io import append_jsonl, atomic_write_json, read_jsonl
from kate.knowledge.bfcl_source import bfcl_trajectories
from kate.knowledge.embedder import Embedder
from kate.knowledge.st import st_entries
from kate.knowledge.store import KnowledgeBase
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.knowledge import retrieval_knowledge
from kate.retrieval.retriever import Retriever
from kate.sampling import GreedySampler
from kate.tasks.bfcl import BFCLTask

from selection import folds  # bench/selection.py, beside this file

OUT = Path(__file__).resolve().parents[1] / "knowledge_bases" / "selection_llm.json"
FILTERED = dict(filter_api_classes=True, filter_tools=True, include_no_call=False)
ARMS = {
    "kate": (dict(filter_api_classes=False), {"preset": "kate"}),
    "guarded_python": (FILTERED, {"preset": "guarded", "call_format": "python"}),
    "guarded_json": (FILTERED, {"preset": "guarded", "call_format": "json"}),
    "guarded_masked": (FILTERED, {"preset": "guarded", "call_format": "json", "show_values": False}),
    "restated_json": (FILTERED, {"preset": "guarded_restated", "call_format": "json"}),
    "restated_masked": (FILTERED, {"preset": "guarded_restated", "call_format": "json", "show_values": False}),
}
DESCRIPTION = {
    "kate": "KATE unfiltered (no tool filter), the authors' template wording: MISSION 6's configuration",
    "guarded_python": "tools filter, no no-call entries, guarded template, example calls as python",
    "guarded_json": "tools filter, no no-call entries, guarded template, example calls as JSON",
    "guarded_masked": "tools filter, no no-call entries, guarded template, JSON calls with values masked",
    "restated_json": "as guarded_json, the user's request restated after the examples",
    "restated_masked": "as guarded_masked, the user's request restated after the examples",
}


def run(categories: list[str], limit: int | None, model, arms: list[str], records_path: Path,
        max_tokens: int = 256) -> dict[str, Any]:
    embedder = Embedder()
    single = bfcl_trajectories(categories=[c for c in load_categories()], split="train", execute=False)
    fold_a, _ = folds(single)
    entries = st_entries(fold_a)
    kb = KnowledgeBase.create(entries, embedder.embed([e.text for e in entries]), embedding=embedder.identity())
    sampler = GreedySampler(max_tokens=max_tokens)
    knowledge_of = {arm: retrieval_knowledge(Retriever(kb, embedder, RetrievalConfig(top_k=3, threshold=0.5, **ARMS[arm][0])),
                                             template=ARMS[arm][1]) for arm in arms}  # fmt: skip
    task = BFCLTask([], split="train")

    def answer(entry: BFCLEntry, knowledge: str | None) -> dict[str, Any]:
        """One greedy answer, scored by BFCL's official checker; ``knowledge`` appended to the question."""
        trace = task.solve(entry, Policy(model, sampler, StaticKnowledge(knowledge)), 0)
        return {**task.score(entry, trace), **trace}

    result: dict[str, Any] = {"model": model.name, "knowledge_entries": len(entries), "top_k": 3, "threshold": 0.5,
                              "arms_described": {a: DESCRIPTION[a] for a in arms}, "arms": {}}
    questions = {c: [e for e in load_entries(c, "train") if e.index % 4 == 2][:limit] for c in categories}
    counts = tally(questions, arms, knowledge_of, answer, records_path)
    result["arms"] = {arm: {cat: dict(c) for cat, c in per.items()} for arm, per in counts.items()}
    return result


def stored(records_path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The records a previous run wrote, keyed by (entry id, arm); a torn last line is dropped."""
    if not records_path.is_file():
        return {}
    return {(r["id"], r["arm"]): r for r in read_jsonl(records_path)}


def tally(questions: dict[str, list], arms: list[str], knowledge_of: dict[str, Any], answer,
          records_path: Path) -> dict[str, dict[str, collections.Counter]]:  # fmt: skip
    """Per arm and category, the counts over ``questions``; each (question, arm) that received knowledge
    is answered once, its record appended to ``records_path``. A rerun resumes: a pair already recorded
    there is counted from its record and neither answered nor appended again (the records carry no
    model or settings: another model or setting needs another ``--out``)."""
    done = stored(records_path)
    counts: dict[str, dict[str, collections.Counter]] = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    direct_cache: dict[str, bool] = {key[0]: bool(r["direct"]) for key, r in done.items()}
    for category, entries in questions.items():
        for entry in entries:
            for arm in arms:
                context = KnowledgeContext("single_turn", api_classes=(), tools=tuple(entry.tools))
                retrieved = knowledge_of[arm](str(entry.turns[0][-1]["content"]), [], context)
                c = counts[arm][category]
                c["questions"] += 1
                if retrieved is None:
                    continue
                if (entry.id, arm) in done:
                    before, after = bool(done[entry.id, arm]["direct"]), bool(done[entry.id, arm]["with_knowledge"])
                else:
                    if entry.id not in direct_cache:
                        direct_cache[entry.id] = bool(answer(entry, None)["valid"])
                    record = answer(entry, retrieved.text)
                    before, after = direct_cache[entry.id], bool(record["valid"])
                    append_jsonl(records_path, {"id": entry.id, "arm": arm, "direct": before, "with_knowledge": after,
                                                "hits": list(retrieved.hits), "calls": record["calls"],
                                                "outputs": record.get("outputs"), "error_type": record.get("error_type")})
                    print(f"[select] {arm[:20]} {entry.id}: direct {before} -> {after}", file=sys.stderr, flush=True)
                c["with_knowledge"] += 1
                c["direct_correct"] += before
                c["knowledge_correct"] += after
                c["fixed"] += after and not before
                c["broken"] += before and not after
    return counts


def load_categories() -> list[str]:
    return [c for c in SINGLE_TURN if c != "live_relevance"]


def main(argv: list[str] | None = None) -> None:
    from kate.llm.llamacpp import LlamaCppChatModel
    from kate.llm.registry import DEFAULT_AGENT_MODEL

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--categories", nargs="+", default=["simple_python", "multiple", "live_simple"])
    parser.add_argument("--limit", type=int, default=None, help="fold-B questions per category")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=8192, max_parallel=1, n_threads=args.threads)
    result = run(args.categories, args.limit, model, args.arms, Path(args.out).with_suffix(".records.jsonl"))
    atomic_write_json(Path(args.out), result)
    print(json.dumps(result["arms"], indent=2))


if __name__ == "__main__":
    main()
