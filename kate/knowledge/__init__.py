"""Experiential knowledge (KATE): trajectories -> ST / ES / SIC / TIC entries -> a knowledge base
on disk (entries, embeddings, faiss index, manifest).

The names below load on first use (PEP 562), so importing a light module of this package (the entry
types, for a config schema) does not load faiss, numpy's index code or the embedder."""

from __future__ import annotations

from kate.knowledge import _quiet_faiss  # noqa: F401  (first: before faiss is imported)
from kate.lazy import lazy_names

_WHERE = {
    "BuildSpec": "specs", "DistilledSpec": "specs", "build_knowledge_base": "build", "Embedder": "embedder", "TYPES": "entries",
    "KnowledgeEntry": "entries", "IndexSpec": "index", "KnowledgeBase": "store", "KnowledgeBaseError": "store",
    "Trajectory": "trajectory", "TrajectoryTurn": "trajectory", "read_trajectories": "trajectory",
    "write_trajectories": "trajectory",
}  # fmt: skip
__all__ = sorted(_WHERE)
__getattr__ = lazy_names(__name__, _WHERE)
