"""KMeans over question embeddings, per API class, with k chosen by the best silhouette (KATE)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClusterConfig:
    k_min: int = 2
    k_max: int = 15  # exclusive, as KATE's range(2, 15)
    random_state: int = 42
    n_init: int = 10


def choose_k(vectors: np.ndarray, config: ClusterConfig = ClusterConfig()) -> tuple[int, np.ndarray, dict[int, float]]:
    """(k, labels, silhouette per tried k). Fewer than 3 distinct points: one cluster."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = len(vectors)
    distinct = len(np.unique(np.round(vectors, 6), axis=0)) if n else 0
    candidates = [k for k in range(config.k_min, config.k_max) if k < distinct]
    if not candidates:
        return 1, np.zeros(n, dtype=int), {}
    best: tuple[float, int, np.ndarray] | None = None
    scores = {}
    for k in candidates:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels = KMeans(n_clusters=k, random_state=config.random_state, n_init=config.n_init).fit_predict(vectors)
        if len(set(labels)) < 2:
            continue
        score = float(silhouette_score(vectors, labels))
        scores[k] = score
        if best is None or score > best[0]:
            best = (score, k, labels)
    if best is None:
        return 1, np.zeros(n, dtype=int), scores
    return best[1], np.asarray(best[2]), scores
