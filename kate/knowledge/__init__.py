"""Experiential knowledge (KATE): trajectories -> ST / ES / SIC / TIC entries -> a knowledge base
on disk (entries, embeddings, faiss index, manifest)."""

from kate.knowledge import _quiet_faiss  # noqa: F401  (first: before faiss is imported)
from kate.knowledge.build import BuildSpec, build_knowledge_base
from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import TYPES, KnowledgeEntry
from kate.knowledge.index import IndexSpec
from kate.knowledge.store import KnowledgeBase, KnowledgeBaseError
from kate.knowledge.trajectory import Trajectory, TrajectoryTurn, read_trajectories, write_trajectories

__all__ = [
    "TYPES", "BuildSpec", "Embedder", "IndexSpec", "KnowledgeBase", "KnowledgeBaseError", "KnowledgeEntry",
    "Trajectory", "TrajectoryTurn", "build_knowledge_base", "read_trajectories", "write_trajectories",
]
