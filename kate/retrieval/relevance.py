"""Does any offered tool fit the request? A gate read off sentence embeddings, before any model runs.

Why: the 0.5B model calls a tool on many requests that none of the offered tools fits (BFCL's
irrelevance and live_irrelevance), and neither its first token's probability of a call nor the two
models of the base gate separate those requests well enough (docs/evaluation.md, "The abstain gate";
docs/training.md). What does separate them, in part, is whether the request reads like any tool's
description at all: ``ToolRelevanceGate`` embeds the request (``call_count.request_text``: the last
user message up to kate's knowledge) and each offered tool as ``"<name>: <description>"`` with the
embedder of kate's knowledge bases (all-MiniLM-L6-v2, unit vectors) and says a tool may fit where the
highest cosine similarity reaches ``tau``. Below it, no tool is offered to the model for that step
(kate.llm.base_gated's ``tools_fit``). Its threshold is chosen on BFCL's training halves
(bench/tool_relevance.py: the largest at which every call-due category of 20 or more training
entries keeps 95% of them above it). Tool texts are embedded once and kept (the last 4,096 at most).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.knowledge.embedder import Embedder
from kate.retrieval.call_count import request_text


CACHED_TOOLS = 4096  # tool texts kept embedded
TAU = 0.04  # bench/tool_relevance.py's choice on the training halves (bench/results/tool_relevance.json)


def tool_text(tool: Mapping[str, Any]) -> str:
    """A tool (an OpenAI tool schema or a bare function doc) as ``"<name>: <description>"``."""
    function = tool.get("function", tool)
    return f"{function.get('name', '')}: {function.get('description', '')}"


def best_similarity(embedder: Embedder, query: Any, tools: Sequence[Mapping[str, Any]],
                    cache: dict[str, Any] | None = None) -> float:  # fmt: skip
    """The highest cosine similarity between an embedded request (``query``, a unit vector) and the
    offered tools' texts (-1 with no tools); the tools' vectors are kept in ``cache``."""
    texts = [tool_text(t) for t in tools]
    if not texts:
        return -1.0
    cache = {} if cache is None else cache
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if len(cache) + len(missing) > CACHED_TOOLS:  # a long-lived server sees ever new tools: start over
        cache.clear()
        missing = list(dict.fromkeys(texts))
    cache.update(zip(missing, embedder.embed(missing)))
    return max(float(cache[t] @ query) for t in texts)


@dataclass
class ToolRelevanceGate:
    """``gate(messages, tools)``: whether any tool may fit the request (best similarity >= ``tau``)."""

    tau: float = TAU
    model: str = "all-minilm-l6-v2"
    embedder: Embedder | None = field(default=None, repr=False, compare=False)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not -1.0 <= self.tau <= 1.0:
            raise ValueError(f"the tool-relevance gate's tau is a cosine similarity in [-1, 1], got {self.tau!r}")
        self.embedder = self.embedder or Embedder(self.model)

    def similarity(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> float:
        return self.similarity_to(self.embedder.embed([request_text(messages)])[0], tools)

    def similarity_to(self, query: Any, tools: Sequence[Mapping[str, Any]]) -> float:
        """``similarity`` for a request already embedded (a benchmark embeds many in one batch)."""
        return best_similarity(self.embedder, query, tools, self._cache)

    def __call__(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> bool:
        return bool(tools) and self.similarity(messages, tools) >= self.tau

    def describe(self) -> dict[str, Any]:
        """What the gate is, for a run's fingerprint: the embedder (its weights' sha256) and the threshold."""
        return {"model": self.model, "sha256": self.embedder.sha256, "tau": self.tau}
