"""Can the call-count predictor's surface features give the *number* of calls, not only one vs several?
Cross-validated on the shipped base's own several-call single-turn entries (BFCL's training halves; no model,
no test half): a multinomial logistic regression on ``kate.retrieval.call_count.request_features``, counts of 5
or more pooled, 5 stratified folds, seed 0, against always answering the commonest count.

    .venv/bin/python bench/call_count_cv.py      # -> bench/results/call_count_cv.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kate.io import atomic_write_json  # noqa: E402
from kate.knowledge.embedder import Embedder  # noqa: E402
from kate.knowledge.store import KnowledgeBase  # noqa: E402
from kate.retrieval.call_count import FEATURES, call_counts, request_features  # noqa: E402

KB = ROOT / "knowledge_bases" / "bfcl_train"
POOL = 5  # counts of POOL or more are one class


def rows(kb: KnowledgeBase) -> tuple[list[str], list[int]]:
    """(question, call count pooled at POOL) of the base's several-call single-turn entries."""
    pairs = [(q, min(n, POOL)) for q, n in zip(*call_counts(kb.view()[0])) if n >= 2]
    return [q for q, _ in pairs], [n for _, n in pairs]


def main() -> None:
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415
    from sklearn.model_selection import StratifiedKFold, cross_val_predict  # noqa: PLC0415

    kb = KnowledgeBase.load(KB, embedding=Embedder(model="all-minilm-l6-v2").identity())
    questions, counts = rows(kb)
    x, y = np.array([request_features(q) for q in questions]), np.array(counts)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    predicted = cross_val_predict(LogisticRegression(C=1.0, max_iter=3000), x, y, cv=folds)
    commonest, _ = Counter(counts).most_common(1)[0]
    per_count = {str(k): {"n": int((y == k).sum()), "right": int((predicted[y == k] == k).sum())}
                 for k in sorted(set(counts))}
    out = {"kb": str(KB.relative_to(ROOT)), "features": list(FEATURES), "n": len(counts), "pooled_from": POOL,
           "exact": int((predicted == y).sum()), "commonest_count": int(commonest),
           "commonest_right": int((y == commonest).sum()), "per_count": per_count}
    atomic_write_json(ROOT / "bench" / "results" / "call_count_cv.json", out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
