"""The server's knowledge: its knowledge bases, opened once, and the same knowledge for every request
of one user turn.

A client's history never holds the knowledge an earlier request injected (kate appends it inside
the user message it sends to the model, not in what the client keeps), so each request of a turn
(the user message, then the same history plus tool results) asks for it again. Retrieval for a turn
is cached by what defines the turn (the user message, the history before it, the tools offered and
the request's K, p and base), so every request of that turn gets the same text, a stable prompt
prefix, as kate's in-process loop does, even while learning from use adds entries to the base.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kate.agent.knowledge import KnowledgeContext, Retrieved
from kate.llm.base import ChatModel, Message
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.knowledge import VOLATILE_MANIFEST_KEYS, retrieval_knowledge
from kate.retrieval.retriever import Retriever
from kate.serve.errors import bad_request
from kate.serve.request import KateOptions


logger = logging.getLogger("kate.serve")


def turn_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class ServedKnowledge:
    """Knowledge bases a request may name (``kate.kb``), searched with the server's retrieval
    settings and the request's own K and p. A base that does not exist yet (one that learning from
    use will create) gives no knowledge until it does."""

    def __init__(self, retrieval: RetrievalConfig, *, bases: Sequence[str] = (), default: str | None = None,
                 enabled: bool = True, intent_model: ChatModel | None = None, cache_size: int = 4096) -> None:  # fmt: skip
        self.retrieval = retrieval
        self.default = default or retrieval.kb
        self.bases = list(dict.fromkeys([self.default, *bases]))
        self.enabled = enabled
        self.intent_model = intent_model
        self.cache_size = cache_size
        self._retrievers: dict[str, Retriever] = {}
        self._embedder = None
        self._cache: OrderedDict[str, Retrieved | None] = OrderedDict()
        self._lock = threading.RLock()
        self.cache_hits = 0

    def path_of(self, name: str) -> Path:
        """A base's folder: a name under the retrieval root, or a folder the server was configured with."""
        return Path(name) if Path(name).is_dir() else Path(self.retrieval.root) / name

    def retriever(self, name: str) -> Retriever | None:
        """The base's retriever (opened on first use), or None while the base does not exist."""
        with self._lock:
            if name in self._retrievers:
                return self._retrievers[name]
            path = self.path_of(name)
            if not (path / "manifest.json").exists():
                return None
            config = replace(self.retrieval, kb=str(path))
            retriever = Retriever.from_config(config, self._embedder)
            self._embedder = retriever.embedder
            self._retrievers[name] = retriever
            return retriever

    def open_all(self) -> None:
        """Open every base that exists now (at start: a corrupt base fails before the first request)."""
        for name in self.bases:
            self.retriever(name)

    def for_request(self, options: KateOptions) -> "TurnKnowledge | None":
        enabled = self.enabled if options.knowledge is None else options.knowledge
        if not enabled:
            return None
        name = options.kb or self.default
        if name not in self.bases:
            raise bad_request(f"unknown knowledge base {name!r}; this server has {self.bases}", "kate.kb")
        top_k = options.top_k or self.retrieval.top_k
        threshold = self.retrieval.threshold if options.threshold is None else options.threshold
        return TurnKnowledge(self, name, top_k, threshold)

    def cached(self, key: str, compute) -> Retrieved | None:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return self._cache[key]
            value = compute()
            self._cache[key] = value
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return value

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"retrieval": self.retrieval.to_dict(), "default": self.default, "enabled": self.enabled,
                               "bases": {}}  # fmt: skip
        for name in self.bases:
            retriever = self.retriever(name)
            manifest = retriever.kb.manifest if retriever is not None else None
            out["bases"][name] = None if manifest is None else {
                k: v for k, v in manifest.items() if k not in VOLATILE_MANIFEST_KEYS}  # fmt: skip
        return out


@dataclass(frozen=True)
class TurnKnowledge:
    """One request's knowledge (``kate.agent.knowledge.Knowledge``): base ``name`` at K and p, cached per turn."""

    served: ServedKnowledge
    name: str
    top_k: int
    threshold: float

    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None:
        key = turn_key(self.name, self.top_k, self.threshold, user_text, history, context.tools, context.api_classes)

        def compute() -> Retrieved | None:
            base = self.served.retriever(self.name)
            if base is None:
                return self.skip(user_text, f"knowledge base {self.name!r} does not exist yet")
            offered, least = len(context.tools or ()), base.config.min_task_tools
            if least and offered < least:
                return self.skip(user_text, f"the request offers {offered} tool(s); this server retrieves for "
                                            f"requests with at least {least} (retrieval.min_task_tools)")  # fmt: skip
            config = replace(base.config, top_k=self.top_k, threshold=self.threshold)
            knowledge = retrieval_knowledge(Retriever(base.kb, base.embedder, config), intent_model=self.served.intent_model)
            found = knowledge(user_text, history, context)
            return found or self.skip(user_text, f"no entry of {self.name!r} passed the filters at similarity >= "
                                                 f"{self.threshold}")  # fmt: skip

        return self.served.cached(key, compute)

    def skip(self, user_text: str, reason: str) -> Retrieved:
        """No knowledge for this turn, and why (the response's ``kate.knowledge.skipped`` and the log)."""
        logger.info("knowledge skipped: %s", reason)
        return Retrieved("", (), None, user_text, skipped=reason)

    def describe(self) -> dict[str, Any]:
        return {"kb": self.name, "top_k": self.top_k, "threshold": self.threshold}
