"""Retrieval settings, one dataclass (Hydra: ``conf/retrieval/*.yaml`` instantiate it).

Defaults are KATE's published values (top-K = 3 at cosine >= p = 0.5, API-class filter, intent
K = 1); the shipped presets and the values chosen on the training halves are in
``knowledge_bases/README.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kate.knowledge.entries import check_types

CLASS_MATCHES = ("subset", "overlap")


@dataclass
class RetrievalConfig:
    kb: str = "bfcl_train"  # a name under `root`, or a path to a knowledge base folder (bfcl_train ships)
    root: str = "knowledge_bases"
    types: Sequence[str] = ("ST",)  # entry types to retrieve, in tie-break priority order
    top_k: int = 3
    threshold: float = 0.5  # cosine >= threshold
    filter_api_classes: bool = True  # only entries of the task's API classes (multi-turn, KATE)
    api_class_match: str = "subset"  # entry classes within the task's | any class shared
    filter_tools: bool = False  # only entries whose calls the current tools can express (single-turn)
    include_no_call: bool = True  # entries whose correct behaviour was no call
    min_task_tools: int = 0  # retrieve only when the task offers at least this many tools (a choice to make)
    sources: Sequence[str] = ()  # only entries from these sources (e.g. BFCL categories); empty: all
    # retrieve only for a request the base's call-count predictor says needs several calls, and only examples
    # that made several (kate/retrieval/call_count.py); other requests get no knowledge
    only_multi_call: bool = False
    multi_call_p: float = 0.5  # the predictor's probability of several calls at which a request counts as needing them
    # only entries with as many distinct functions as the current request offers (tools given): the structure
    # of a reply that uses each offered function (BFCL parallel: one function; parallel_multiple: all of them)
    match_function_count: bool = False
    # the hits made pairwise different numbers of calls (the nearest of each count): with top_k >= 2 the examples
    # show that the number of calls follows the request (the 0.5B model copies one example's count)
    distinct_call_counts: bool = False
    dedupe: bool = True  # one hit per (question, calls)
    intent: Mapping[str, Any] = field(default_factory=dict)  # IntentConfig fields; enabled: false -> off
    template: Mapping[str, Any] = field(default_factory=dict)  # Template fields (kate.retrieval.inject)
    embedder: Mapping[str, Any] = field(default_factory=dict)  # Embedder kwargs (query fast path, threads)
    index: Mapping[str, Any] = field(default_factory=dict)  # search-time IndexSpec fields (ef_search, nprobe)

    def __post_init__(self) -> None:
        self.types = list(check_types(self.types))
        self.sources = list(self.sources)
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if not -1.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold is a cosine in [-1, 1], got {self.threshold}")
        if not 0.0 <= self.multi_call_p <= 1.0:
            raise ValueError(f"multi_call_p is a probability in [0, 1], got {self.multi_call_p}")
        if self.api_class_match not in CLASS_MATCHES:
            raise ValueError(f"api_class_match must be one of {CLASS_MATCHES}, got {self.api_class_match!r}")
        self.intent, self.template = dict(self.intent), dict(self.template)
        self.embedder, self.index = dict(self.embedder), dict(self.index)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
