"""Knowledge with distractors, for training prompts: besides what retrieval shows for the step (as
inference shows it), a share of steps also gets examples naming functions the current tools do not
offer, so the model learns to use only what applies (shown examples of
other functions, an untrained model copies their names into its calls).

Which steps get them is decided by a hash of (seed, item ids, request), so a rebuild picks the same.
The distractor hits are marked ``"distractor": true`` in the recorded hits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kate.agent.knowledge import KnowledgeContext, Retrieved
from kate.llm.base import Message
from kate.retrieval.inject import render_knowledge
from kate.retrieval.knowledge import KnowledgeByKind, RetrievalKnowledge
from kate.retrieval.retriever import Hit


def _tool_names(tools: Any) -> set[str]:
    names = set()
    for tool in tools or ():
        if isinstance(tool, str):
            names.add(tool)
        elif isinstance(tool, Mapping):
            names.add(str(tool.get("function", tool).get("name")))
    return names


def chosen(seed: int, context: KnowledgeContext, request: str, rate: float) -> bool:
    """Whether this step gets distractors (deterministic, ~``rate`` of steps)."""
    key = f"{seed}|{'|'.join(context.exclude_ids)}|{request}".encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64 < rate


@dataclass
class DistractorKnowledge:
    """``base``'s knowledge plus, on ~``rate`` of steps, ``count`` examples of foreign functions."""

    base: KnowledgeByKind
    rate: float = 0.2
    count: int = 1
    threshold: float = 0.3
    seed: int = 0

    def foreign(self, knowledge: RetrievalKnowledge, request: str, context: KnowledgeContext) -> list[Hit]:
        offered = _tool_names(context.tools)
        candidates = knowledge.retriever.retrieve(request, exclude_ids=context.exclude_ids,
                                                  top_k=max(50, 10 * self.count), threshold=self.threshold)
        out = [h for h in candidates if h.entry.tool_names and not set(h.entry.tool_names) <= offered]
        return out[: self.count]

    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None:
        knowledge = self.base.by_kind.get(context.kind)
        if knowledge is None:
            return None
        hits, intent = knowledge.hits(user_text, history, context)
        extra: list[Hit] = []
        # only beside what retrieval shows: a step inference shows no knowledge gets none here either
        if hits and self.rate > 0 and self.count > 0 and chosen(self.seed, context, user_text, self.rate):
            seen = {h.entry.id for h in hits}
            extra = [h for h in self.foreign(knowledge, user_text, context) if h.entry.id not in seen]
        shown = list(hits)
        for hit in extra:  # at a position drawn from the same hash, so "the last example" means nothing
            key = hashlib.sha256(f"{self.seed}|{hit.entry.id}|{user_text}".encode("utf-8")).digest()
            shown.insert(key[0] % (len(shown) + 1), hit)
        text = render_knowledge(shown, knowledge.template, request=user_text)
        if not text:
            return None
        foreign_ids = {h.entry.id for h in extra}
        dicts = [{**h.to_dict(), "distractor": True} if h.entry.id in foreign_ids else h.to_dict() for h in shown]
        return Retrieved(text, tuple(dicts), intent, user_text)

    def describe(self) -> dict[str, Any]:
        return {"base": self.base.describe(), "distractors": {"rate": self.rate, "count": self.count,
                                                              "threshold": self.threshold, "seed": self.seed}}
