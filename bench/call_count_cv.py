"""Can the call-count predictor's surface features give the *number* of calls, not only one vs several?
Cross-validated on the shipped base's own several-call single-turn entries (BFCL's training halves; no model,
no test half): a multinomial logistic regression on ``kate.retrieval.call_count.request_features``, counts of 5
or more pooled, 5 stratified folds, seed 0, against always answering the commonest count; and the count of the
nearest other several-call entry with as many distinct functions (what ``match_function_count`` retrieval shows),
by the raw question's embedding and by the question with its values masked (numbers -> N, names -> X, quoted
strings -> S), in case retrieving by the request's form, not its topic, found the example of the right count.

    .venv/bin/python bench/call_count_cv.py      # -> bench/results/call_count_cv.json
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from kate.io import atomic_write_json  # noqa: E402
from kate.knowledge.embedder import Embedder  # noqa: E402
from kate.knowledge.store import KnowledgeBase  # noqa: E402
from kate.retrieval.call_count import FEATURES, call_counts, counted_entries, request_features  # noqa: E402

KB = ROOT / "knowledge_bases" / "bfcl_train"
POOL = 5  # counts of POOL or more are one class


def rows(kb: KnowledgeBase) -> tuple[list[str], list[int]]:
    """(question, call count pooled at POOL) of the base's several-call single-turn entries."""
    pairs = [(q, min(n, POOL)) for q, n in zip(*call_counts(kb.view()[0])) if n >= 2]
    return [q for q, _ in pairs], [n for _, n in pairs]


NUMBER = re.compile(r"\$?\d[\d,]*(?:\.\d+)?%?")
NAME = re.compile(r"(?<![.?!]\s)(?<!^)\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def masked(question: str) -> str:
    """The question with its values masked: numbers -> N, capitalised names (not sentence-initial) -> X,
    quoted strings -> S."""
    return QUOTED.sub("S", NAME.sub("X", NUMBER.sub("N", question)))


def nearest_count_right(embedder: Embedder, questions: list[str], counts: np.ndarray, functions: np.ndarray) -> int:
    """How often the nearest other entry with as many distinct functions has the same call count."""
    v = np.asarray(embedder.embed(questions), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    sims[functions[:, None] != functions[None, :]] = -np.inf
    return int((counts[sims.argmax(1)] == counts).sum())


def main() -> None:
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415
    from sklearn.model_selection import StratifiedKFold, cross_val_predict  # noqa: PLC0415

    embedder = Embedder(model="all-minilm-l6-v2")
    kb = KnowledgeBase.load(KB, embedding=embedder.identity())
    questions, counts = rows(kb)
    several = [e for e in counted_entries(kb.view()[0]) if len(e.payload["calls"]) >= 2]
    raw_counts = np.array([len(e.payload["calls"]) for e in several])
    n_functions = np.array([len({c["name"] for c in e.payload["calls"]}) for e in several])
    several_q = [str(e.payload.get("question", e.text)) for e in several]
    x, y = np.array([request_features(q) for q in questions]), np.array(counts)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    predicted = cross_val_predict(LogisticRegression(C=1.0, max_iter=3000), x, y, cv=folds)
    commonest, _ = Counter(counts).most_common(1)[0]
    per_count = {str(k): {"n": int((y == k).sum()), "right": int((predicted[y == k] == k).sum())}
                 for k in sorted(set(counts))}
    out = {"kb": str(KB.relative_to(ROOT)), "features": list(FEATURES), "n": len(counts), "pooled_from": POOL,
           "exact": int((predicted == y).sum()), "commonest_count": int(commonest),
           "commonest_right": int((y == commonest).sum()), "per_count": per_count,
           "nearest_same_functions": {
               "n": len(several), "raw_question": nearest_count_right(embedder, several_q, raw_counts, n_functions),
               "masked_question": nearest_count_right(embedder, [masked(q) for q in several_q], raw_counts, n_functions)}}
    atomic_write_json(ROOT / "bench" / "results" / "call_count_cv.json", out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
