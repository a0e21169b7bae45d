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
import json
from pathlib import Path
from typing import Any

from kate.agent import Policy, StaticKnowledge
from kate.bfcl.data import SINGLE_TURN, BFCLEntry, load_entries
from kate.eval.knowledge_effect import tally
from kate.io import atomic_write_json
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
