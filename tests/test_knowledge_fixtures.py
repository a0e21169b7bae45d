"""Shared, cached objects for the knowledge and retrieval tests (real MiniLM, real faiss).

Plain cached functions rather than fixtures, so every test module shares one embedder and one
small BFCL base per session.
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

from kate.knowledge.build import BuildSpec, build_knowledge_base
from kate.knowledge.embedder import Embedder
from kate.knowledge.store import KnowledgeBase

SMALL_CATEGORIES = ("multi_turn_base", "simple_python", "multiple", "irrelevance")
_ROOT = Path(tempfile.mkdtemp(prefix="kate-kb-tests-"))


@lru_cache(maxsize=None)
def embedder() -> Embedder:
    return Embedder("all-minilm-l6-v2")


@lru_cache(maxsize=None)
def bfcl_st_kb() -> KnowledgeBase:
    """ST from the training halves of a few categories (about 790 entries), saved under a temp root."""
    spec = BuildSpec(name="bfcl_small", root=str(_ROOT), categories=SMALL_CATEGORIES, types=["ST"])
    kb = build_knowledge_base(spec, embedder=embedder(), log=lambda line: None)
    return KnowledgeBase.load(kb.path, embedding=embedder().identity())


def kb_path() -> Path:
    return bfcl_st_kb().path


def test_the_shared_base_covers_its_categories():
    stats = bfcl_st_kb().stats()
    assert set(stats["per_source"]) == set(SMALL_CATEGORIES)
    assert stats["types"] == {"ST": len(bfcl_st_kb())}
