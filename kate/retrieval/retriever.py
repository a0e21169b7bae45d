"""Top-K knowledge entries with cosine >= p, filtered, de-duplicated, self hits excluded.

Filters (each a config value, see ``RetrievalConfig``):

* ``types``: entry types to return (ST, ES, SIC, TIC).
* API classes (KATE, multi-turn): with ``api_class_match="subset"`` an entry is kept when its
  classes are all among the task's (``overlap``: when it shares one); a task without classes
  keeps only entries without classes (single-turn ones).
* tools (single-turn): an entry is kept only when its calls are calls the current tools can make:
  every function offered, only its parameters, the required ones given, values of the declared
  types (``kate/retrieval/expressible.py``); single-turn entries each bring their own tools, and
  a small model copies foreign function names and value formats.
* ``include_no_call``: entries whose correct behaviour was not to call.
* ``min_task_tools``: nothing is retrieved for a task offering fewer tools (given as ``tools``);
  measured on the training folds, examples only broke single-tool requests for a small model.
* ``exclude_ids``: entry ids or source ids (a dialogue id drops everything built from that
  dialogue; ``dialogue#t<turn>`` drops that turn's entries): the self hit when building training data.
* ``only_multi_call``: a request gets knowledge only when the base's call-count predictor says it
  needs several calls (``kate/retrieval/call_count.py``), and then only examples that made several.
* ``match_function_count``: only entries calling as many distinct functions as the request offers.
* ``distinct_call_counts``: the hits made pairwise different numbers of calls (the best of each count), so
  that several examples show that the count varies with the request instead of one count to copy.

The search is exact or approximate (whatever the base's index is); it fetches more candidates
when filters reject some, and stops as soon as the next candidate is below the threshold.

A base that grows while it is served (``kate.knowledge.learn``) is followed: each search first asks
the KnowledgeBase whether its files changed on disk (one ``stat``) and reloads it in place when they
did (``KnowledgeBase.refresh``), so every Retriever sharing that object sees entries another thread
or process added, on its next call, without a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import KnowledgeEntry, check_types
from kate.knowledge.index import IndexSpec, search
from kate.knowledge.store import MANIFEST, KnowledgeBase, check_embedding
from kate.retrieval.call_count import CallCountModel
from kate.retrieval.config import RetrievalConfig
from kate.toolcall.expressible import calls_expressible, schemas_by_name


@dataclass(frozen=True)
class Hit:
    entry: KnowledgeEntry
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.entry.id, "type": self.entry.type, "score": round(self.score, 4), "text": self.entry.text}


class Retriever:
    def __init__(self, kb: KnowledgeBase, embedder: Embedder, config: RetrievalConfig | None = None) -> None:
        check_embedding(kb.manifest, embedder.identity(), (kb.path / MANIFEST) if kb.path else "knowledge base")
        self.kb, self.embedder, self.config = kb, embedder, config or RetrievalConfig()
        self._call_count: CallCountModel | None = None

    @classmethod
    def from_config(cls, config: RetrievalConfig, embedder: Embedder | None = None) -> "Retriever":
        """Open ``config.kb`` (a name under ``config.root`` or a folder) with the configured embedder."""
        path = Path(config.kb)
        if not (path.is_dir() and (path / MANIFEST).exists()):
            path = Path(config.root) / config.kb
        embedder = embedder or Embedder(**config.embedder)
        kb = KnowledgeBase.load(path, embedding=embedder.identity())
        if config.index:
            kb.configure_index(IndexSpec(**{**kb.manifest["index"]["params"], **config.index}))
        return cls(kb, embedder, config)

    # --------------------------------------------------------------------------- filters
    def call_count_model(self) -> CallCountModel:
        """The base's call-count predictor, fitted on first use (``only_multi_call``)."""
        if self._call_count is None:
            self._call_count = CallCountModel.from_entries(self.kb.view()[0])
        return self._call_count

    def _keep(self, entry: KnowledgeEntry, types: Sequence[str], api_classes: tuple[str, ...] | None,
              tools: Mapping[str, Mapping[str, Any] | None] | None, exclude: frozenset[str],
              sources: frozenset[str]) -> bool:  # fmt: skip
        c = self.config
        if entry.type not in types:
            return False
        if sources and entry.source not in sources:
            return False
        if exclude and (entry.id in exclude or not exclude.isdisjoint(entry.source_ids)):
            return False
        no_call = entry.type in ("ST", "ES") and not entry.payload.get("calls") and "code" not in entry.payload
        if no_call and not c.include_no_call:
            return False
        if c.only_multi_call and len(entry.payload.get("calls") or []) < 2:
            return False
        if c.match_function_count and tools is not None:
            if len({str(call.get("name")) for call in entry.payload.get("calls") or []}) != len(tools):
                return False
        if c.filter_api_classes and api_classes is not None:
            mine, task = set(entry.api_classes), set(api_classes)
            if not task:
                if mine:
                    return False
            elif not mine or not (mine <= task if c.api_class_match == "subset" else mine & task):
                return False
        if c.filter_tools and tools is not None:
            if not set(entry.tool_names) <= tools.keys():
                return False
            if not calls_expressible(entry.payload.get("calls") or [], tools):
                return False
        return True

    # --------------------------------------------------------------------------- search
    def retrieve(self, query: str, *, api_classes: Iterable[str] | None = None,
                 tools: Iterable[str | Mapping[str, Any]] | None = None, exclude_ids: Iterable[str] = (),
                 types: Sequence[str] | None = None, top_k: int | None = None,
                 threshold: float | None = None) -> list[Hit]:
        """The best ``top_k`` entries for ``query`` with cosine >= ``threshold`` that pass the filters.

        ``api_classes``: the task's API classes (None: no class filter). ``tools``: the current
        tools, as names or schemas (None: no tool filter)."""
        if self.config.only_multi_call and self.call_count_model().p_several(query) < self.config.multi_call_p:
            return []
        vector = self.embedder.embed_query(query)
        return self.search_vector(vector, api_classes=api_classes, tools=tools, exclude_ids=exclude_ids,
                                  types=types, top_k=top_k, threshold=threshold)

    def search_vector(self, vector: np.ndarray, *, api_classes: Iterable[str] | None = None,
                      tools: Iterable[str | Mapping[str, Any]] | None = None, exclude_ids: Iterable[str] = (),
                      types: Sequence[str] | None = None, top_k: int | None = None,
                      threshold: float | None = None) -> list[Hit]:
        c = self.config
        types = list(check_types(types)) if types is not None else list(c.types)
        top_k = c.top_k if top_k is None else int(top_k)
        threshold = c.threshold if threshold is None else float(threshold)
        classes = tuple(api_classes) if api_classes is not None else None
        current = schemas_by_name(tools) if tools is not None else None
        if c.min_task_tools and current is not None and len(current) < c.min_task_tools:
            return []
        exclude, sources = frozenset(exclude_ids), frozenset(c.sources)
        priority = {t: i for i, t in enumerate(types)}
        self.kb.refresh()
        entries, index = self.kb.view()
        total = len(entries)
        if total == 0 or top_k <= 0:
            return []
        k = min(total, max(4 * top_k, 16))
        vector = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        while True:
            scores, rows = search(index, vector, k)
            passing, exhausted = [], False
            for score, row in zip(scores[0], rows[0]):
                if row < 0:
                    continue
                if score < threshold:
                    exhausted = True  # results come best first: nothing further can pass
                    break
                entry = entries[row]
                if self._keep(entry, types, classes, current, exclude, sources):
                    passing.append(Hit(entry, float(score)))
            passing.sort(key=lambda h: (-h.score, priority[h.entry.type]))
            hits, seen, counts = [], set(), set()
            for hit in passing:
                key = hit.entry.dedupe_key
                if c.dedupe and key in seen:
                    continue
                count = len(hit.entry.payload.get("calls") or [])
                if c.distinct_call_counts and count in counts:
                    continue
                seen.add(key)
                counts.add(count)
                hits.append(hit)
            if len(hits) >= top_k or exhausted or k >= total:
                return hits[:top_k]
            k = min(total, k * 4)
