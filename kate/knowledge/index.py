"""faiss indexes over unit vectors, scored by inner product (= cosine).

``flat`` (exact, the default), ``hnsw`` and ``ivf`` (approximate, for large bases; their recall
against exact is measured by ``recall_at_k``). All are plain faiss indexes, saved with faiss.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

INDEX_KINDS = ("flat", "hnsw", "ivf")


@dataclass(frozen=True)
class IndexSpec:
    """Which faiss index, and its parameters (ignored by kinds that do not use them)."""

    kind: str = "flat"
    hnsw_m: int = 32  # graph degree
    hnsw_ef_construction: int = 80
    hnsw_ef_search: int = 64  # search breadth (raised to k when k is larger)
    ivf_nlist: int | None = None  # lists; None: about 4 * sqrt(n), at least 39 points per list
    ivf_nprobe: int = 16

    def __post_init__(self) -> None:
        if self.kind not in INDEX_KINDS:
            raise ValueError(f"index kind must be one of {INDEX_KINDS}, got {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _as_matrix(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {vectors.shape}")
    return vectors


def build_index(vectors: np.ndarray, spec: IndexSpec = IndexSpec()) -> faiss.Index:
    vectors = _as_matrix(vectors)
    n, dim = vectors.shape
    if spec.kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif spec.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec.hnsw_ef_construction
        index.hnsw.efSearch = spec.hnsw_ef_search
    else:
        nlist = spec.ivf_nlist or max(1, min(int(4 * math.sqrt(max(n, 1))), n // 39))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        if n:
            index.train(vectors)
        index.nprobe = min(spec.ivf_nprobe, nlist)
    if n:
        index.add(vectors)
    return index


def configure(index: faiss.Index, spec: IndexSpec) -> faiss.Index:
    """Apply the search-time parameters of ``spec`` to a loaded index."""
    if isinstance(index, faiss.IndexHNSW):
        index.hnsw.efSearch = spec.hnsw_ef_search
    elif isinstance(index, faiss.IndexIVF):
        index.nprobe = min(spec.ivf_nprobe, index.nlist)
    return index


def kind_of(index: faiss.Index) -> str:
    if isinstance(index, faiss.IndexHNSW):
        return "hnsw"
    if isinstance(index, faiss.IndexIVF):
        return "ivf"
    if isinstance(index, faiss.IndexFlat):
        return "flat"
    return type(index).__name__


def search(index: faiss.Index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids), each (len(queries), k'), best first; k' = min(k, ntotal); ids are row numbers."""
    queries = _as_matrix(queries)
    k = min(int(k), index.ntotal)
    if k <= 0:
        empty = np.zeros((len(queries), 0))
        return empty.astype(np.float32), empty.astype(np.int64)
    if isinstance(index, faiss.IndexHNSW) and index.hnsw.efSearch < k:
        index.hnsw.efSearch = k
    scores, ids = index.search(queries, k)
    return scores, ids


def recall_at_k(approximate: faiss.Index, exact: faiss.Index, queries: np.ndarray, k: int) -> float:
    """Mean fraction of the exact top-k that the approximate index also returns."""
    _, truth = search(exact, queries, k)
    _, found = search(approximate, queries, k)
    hits = [len(set(t[t >= 0]) & set(f[f >= 0])) / max(1, (t >= 0).sum()) for t, f in zip(truth, found)]
    return float(np.mean(hits)) if hits else 1.0


def save_index(index: faiss.Index, path: str | os.PathLike[str]) -> None:
    faiss.write_index(index, str(path))


def load_index(path: str | os.PathLike[str]) -> faiss.Index:
    return faiss.read_index(str(Path(path)))
