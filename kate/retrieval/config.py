"""Retrieval settings, one dataclass (Hydra: ``conf/retrieval/*.yaml`` instantiate it).

Defaults are KATE's published values (top-K = 3 at cosine >= p = 0.5, API-class filter, intent
K = 1); the shipped presets and the values chosen on the training halves are in
``knowledge_bases/README.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kate.agent.settings import help_meta
from kate.knowledge.entries import check_types

CLASS_MATCHES = ("subset", "overlap")



@dataclass
class RetrievalConfig:
    kb: str = field(default="bfcl_train", metadata=help_meta("a name under root, or a path to a knowledge base folder "
                                                         "(bfcl_train ships)"))
    root: str = field(default="knowledge_bases", metadata=help_meta("the folder knowledge base names are under"))
    types: Sequence[str] = field(default=("ST",), metadata=help_meta("entry types to retrieve (ST | ES | SIC | TIC | "
                                                                 "distilled), in tie-break priority order"))
    top_k: int = field(default=3, metadata=help_meta("most entries injected"))
    threshold: float = field(default=0.5, metadata=help_meta("cosine similarity an entry needs (>=)"))
    filter_api_classes: bool = field(default=True, metadata=help_meta("only entries of the task's API classes "
                                                                  "(multi-turn, KATE)"))
    api_class_match: str = field(default="subset", metadata=help_meta("subset (entry classes within the task's) | "
                                                                  "overlap (any class shared)"))
    filter_tools: bool = field(default=False, metadata=help_meta("only entries whose calls the current tools can express "
                                                             "(single-turn)"))
    include_no_call: bool = field(default=True, metadata=help_meta("entries whose correct behaviour was no call"))
    min_task_tools: int = field(default=0, metadata=help_meta("retrieve only when the task offers at least this many tools"))
    sources: Sequence[str] = field(default=(), metadata=help_meta("only entries from these sources (e.g. BFCL "
                                                              "categories); empty: all"))
    only_multi_call: bool = field(default=False, metadata=help_meta(
        "retrieve only for a request the base's call-count predictor says needs several calls, and only examples "
        "that made several (kate/retrieval/call_count.py); other requests get none"))
    multi_call_p: float = field(default=0.5, metadata=help_meta("the predictor's probability of several calls at which "
                                                            "a request counts as needing them"))
    match_function_count: bool = field(default=False, metadata=help_meta(
        "only entries with as many distinct functions as the request offers (tools given): the structure of a reply "
        "that uses each offered function (BFCL parallel: one function; parallel_multiple: all of them)"))
    distinct_call_counts: bool = field(default=False, metadata=help_meta(
        "the hits made pairwise different numbers of calls (the nearest of each count): with top_k >= 2 the "
        "examples show that the number of calls follows the request"))
    dedupe: bool = field(default=True, metadata=help_meta("one hit per (question, calls)"))
    intent: Mapping[str, Any] = field(default_factory=dict, metadata=help_meta(
        "intent-level retrieval (IntentConfig's fields: enabled, types, top_k, threshold, prompt); enabled: false -> off"))
    template: Mapping[str, Any] = field(default_factory=dict, metadata=help_meta(
        "how hits are written into the user turn (kate.retrieval.inject.Template's fields: preset, call_format, ...)"))
    embedder: Mapping[str, Any] = field(default_factory=dict, metadata=help_meta(
        "Embedder keywords of the query side (model, query_quantization, threads)"))
    index: Mapping[str, Any] = field(default_factory=dict, metadata=help_meta(
        "search-time IndexSpec fields (hnsw_ef_search, ivf_nprobe)"))
    beside: Mapping[str, Any] = field(default_factory=dict, metadata=help_meta(
        "a second retrieval (RetrievalConfig's fields: its own kb, types, top_k, threshold, filters) whose hits "
        "follow this one's, written with this template (e.g. distilled lessons beside ST); empty: none"))

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
        # a node (Hydra instantiates its _target_) or plain fields; kept as the full fields, so both read alike.
        # A bad key or value in it fails here, before any base is opened
        second = self.beside if isinstance(self.beside, RetrievalConfig) else (
            RetrievalConfig(**{k: v for k, v in dict(self.beside).items() if not str(k).startswith("_")})
            if self.beside else None)  # fmt: skip
        self.beside = second.to_dict() if second is not None else {}

    def beside_config(self) -> "RetrievalConfig | None":
        return RetrievalConfig(**self.beside) if self.beside else None

    def to_dict(self) -> dict[str, Any]:
        """The fields; ``beside`` only when set (so configs without one describe themselves as before)."""
        out = asdict(self)
        if not out["beside"]:
            del out["beside"]
        return out
