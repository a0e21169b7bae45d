"""Choosing retrieval filters and thresholds on the training halves only (two folds), without a model.

BFCL's training half (even index) is split again: fold A (index % 4 == 0) becomes the knowledge
base, fold B (index % 4 == 2) the queries. For each setting (filters), threshold p and K, every
fold-B question is answered from fold A and each hit is judged against the question's own ground
truth, a proxy for "helps rather than misleads":

* relevant: the example's calls use only functions the correct answer uses (or both make no call);
* related: the example shares at least one function with the correct answer (or both make no
  call), a looser proxy for multi-turn, where an example with one extra step can still help;
* foreign: the example uses a function the current tools do not offer (what a model that copies
  the example then calls; unfiltered, 39% of hits at K = 3, p = 0.5 in knowledge_bases/selection.json);
* coverage: questions with at least one hit; clean: questions whose hits are all relevant.

    .venv/bin/python bench/selection.py     # writes knowledge_bases/selection.json
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


from kate.bfcl.data import CATEGORIES, MULTI_TURN  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402
from kate.knowledge.bfcl_source import bfcl_trajectories  # noqa: E402
from kate.knowledge.embedder import Embedder  # noqa: E402
from kate.knowledge.st import st_entries  # noqa: E402
from kate.knowledge.store import KnowledgeBase  # noqa: E402
from kate.knowledge.trajectory import Trajectory  # noqa: E402
from kate.retrieval.config import RetrievalConfig  # noqa: E402
from kate.retrieval.retriever import Retriever  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "knowledge_bases" / "selection.json"

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
SINGLE_SETTINGS = {
    "unfiltered (KATE as measured in MISSION 6)": dict(filter_api_classes=False),
    "single-turn entries only": dict(filter_api_classes=True),
    "tools filter": dict(filter_api_classes=True, filter_tools=True),
    "tools filter, no no-call entries": dict(filter_api_classes=True, filter_tools=True, include_no_call=False),
}
MULTI_SETTINGS = {
    "unfiltered": dict(filter_api_classes=False),
    "API classes, overlap": dict(filter_api_classes=True, api_class_match="overlap"),
    "API classes, subset (KATE)": dict(filter_api_classes=True, api_class_match="subset"),
    "API classes subset + tools filter": dict(filter_api_classes=True, filter_tools=True),
    "API classes subset, no no-call entries": dict(filter_api_classes=True, include_no_call=False),
}


@dataclass
class Query:
    text: str
    category: str
    classes: tuple[str, ...]
    tools: tuple[str, ...]
    truth: frozenset[str]  # function names of the correct calls
    source_id: str
    schemas: tuple[dict[str, Any], ...] = ()  # the tools' schemas: the tools filter checks parameters and types


def _index(trajectory: Trajectory) -> int:
    return int(trajectory.id.rsplit("_", 1)[1].split("-")[0])


def folds(trajectories: Sequence[Trajectory]) -> tuple[list[Trajectory], list[Trajectory]]:
    return ([t for t in trajectories if _index(t) % 4 == 0], [t for t in trajectories if _index(t) % 4 == 2])


def queries_of(trajectories: Sequence[Trajectory]) -> list[Query]:
    out = []
    for t in trajectories:
        tools = t.tool_names()
        classes = tuple(t.api_classes) if t.source in MULTI_TURN else ()
        for number, turn in enumerate(t.turns):
            if turn.user.strip():
                out.append(Query(turn.user, t.source, classes, tools, frozenset(c.name for c in turn.calls),
                                 f"{t.id}#t{number}", tuple(t.tools)))
    return out


def judge(retriever: Retriever, queries: list[Query], vectors: np.ndarray, top_k: int, p: float,
          categories: Sequence[str]) -> dict[str, Any]:
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for query, vector in zip(queries, vectors):
        hits = retriever.search_vector(vector, api_classes=query.classes, tools=query.schemas or query.tools,
                                       top_k=top_k, threshold=p)  # fmt: skip
        c = per[query.category]
        c["queries"] += 1
        c["covered"] += bool(hits)
        relevant = [bool(h.entry.tool_names) == bool(query.truth) and set(h.entry.tool_names) <= query.truth
                    for h in hits]
        related = [bool(h.entry.tool_names) == bool(query.truth) and
                   (not query.truth or bool(set(h.entry.tool_names) & query.truth)) for h in hits]
        c["related"] += sum(related)
        c["hits"] += len(hits)
        c["relevant"] += sum(relevant)
        c["foreign"] += sum(not set(h.entry.tool_names) <= set(query.tools) for h in hits)
        c["clean"] += bool(hits) and all(relevant)
        c["misled"] += bool(hits) and not any(relevant)
    total = collections.Counter()
    for category in categories:
        total.update(per.get(category, {}))

    def rates(c: collections.Counter) -> dict[str, float]:
        n, hits = max(c["queries"], 1), max(c["hits"], 1)
        return {"queries": c["queries"], "coverage": round(c["covered"] / n, 3),
                "hits_per_covered": round(c["hits"] / max(c["covered"], 1), 2),
                "relevant_of_hits": round(c["relevant"] / hits, 3) if c["hits"] else None,
                "related_of_hits": round(c["related"] / hits, 3) if c["hits"] else None,
                "foreign_of_hits": round(c["foreign"] / hits, 3) if c["hits"] else None,
                "clean_of_queries": round(c["clean"] / n, 3), "misled_of_queries": round(c["misled"] / n, 3)}

    return {"all": rates(total), "per_category": {k: rates(v) for k, v in sorted(per.items())}}


def run(categories: Sequence[str] = CATEGORIES, top_ks: Sequence[int] = (1, 3), thresholds=THRESHOLDS,
        embedder: Embedder | None = None) -> dict[str, Any]:
    embedder = embedder or Embedder()
    trajectories = bfcl_trajectories(categories, "train", execute=False)
    fold_a, fold_b = folds(trajectories)
    entries = st_entries(fold_a)
    kb = KnowledgeBase.create(entries, embedder.embed([e.text for e in entries]), embedding=embedder.identity())
    queries = queries_of(fold_b)
    vectors = embedder.embed([q.text for q in queries])
    single = [c for c in categories if c not in MULTI_TURN]
    multi = [c for c in categories if c in MULTI_TURN]
    result: dict[str, Any] = {"folds": {"A (knowledge)": "train index % 4 == 0", "B (queries)": "train index % 4 == 2"},
                              "entries": len(entries), "queries": len(queries), "single_turn": {}, "multi_turn": {}}
    for group, settings, cats in (("single_turn", SINGLE_SETTINGS, single), ("multi_turn", MULTI_SETTINGS, multi)):
        group_queries = [(q, v) for q, v in zip(queries, vectors) if q.category in cats]
        qs, vs = [q for q, _ in group_queries], np.array([v for _, v in group_queries], dtype=np.float32)
        for name, flags in settings.items():
            retriever = Retriever(kb, embedder, RetrievalConfig(**flags))
            for k in top_ks:
                for p in thresholds:
                    result[group][f"{name} | K={k} | p={p}"] = judge(retriever, qs, vs, k, p, cats)
    return result


def table(result: dict[str, Any]) -> str:
    lines = []
    for group in ("single_turn", "multi_turn"):
        lines.append(f"\n{group}: setting | K | p -> coverage, relevant/hits, related/hits, foreign/hits, clean, misled")
        for key, value in result[group].items():
            a = value["all"]
            lines.append(f"  {key:70s} cov {a['coverage']:.3f}  rel {a['relevant_of_hits']}  related "
                         f"{a['related_of_hits']}  foreign "
                         f"{a['foreign_of_hits']}  clean {a['clean_of_queries']:.3f}  misled {a['misled_of_queries']:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    result = run()
    atomic_write_json(Path(args.out), result)
    print(table(result))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
