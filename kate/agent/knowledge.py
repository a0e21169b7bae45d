"""The knowledge seam of a policy: what may be retrieved for an item, what came back, and the one
place where it enters the prompt (appended inside the user message, as KATE does).

A ``Knowledge`` is any callable ``(user_text, history, context) -> Retrieved | None``; kate's own
(``kate.retrieval.knowledge``) retrieves top-K entries from a knowledge base under the context's
filters and renders them with a template.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kate.llm.base import Message


@dataclass(frozen=True)
class KnowledgeContext:
    """What the task says about one item: which knowledge may be shown for it.

    ``kind`` routes to per-kind retrieval settings (e.g. ``single_turn`` / ``multi_turn`` / ``code``);
    ``api_classes`` and ``tools`` filter entries; ``exclude_ids`` drops entries built from these
    items (an item never sees knowledge made from itself); ``query`` replaces the user text as the
    retrieval query (AppWorld retrieves by the task instruction, not the whole task message)."""

    kind: str = "default"
    api_classes: tuple[str, ...] | None = None
    tools: tuple[str | Mapping[str, Any], ...] | None = None
    exclude_ids: tuple[str, ...] = ()
    query: str | None = None


@dataclass(frozen=True)
class Retrieved:
    """What knowledge a turn got: the text injected, and the hits behind it."""

    text: str
    hits: tuple[dict[str, Any], ...] = ()
    intent: str | None = None
    query: str = ""
    skipped: str | None = None  # why nothing was injected (text empty), when the knowledge says

    def to_dict(self) -> dict[str, Any]:
        out = {"query": self.query, "intent": self.intent, "hits": list(self.hits), "text": self.text}
        return {**out, "skipped": self.skipped} if self.skipped else out


@runtime_checkable
class Knowledge(Protocol):
    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None: ...


def last_user_index(messages: Sequence[Message]) -> int:
    indices = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not indices:
        raise ValueError("the messages hold no user message to answer")
    return indices[-1]


def inject(messages: Sequence[Message], knowledge: Knowledge | None,
           context: KnowledgeContext | None = None) -> tuple[list[Message], Retrieved | None]:
    """A copy of ``messages`` whose last user message carries the retrieved knowledge after a blank
    line; the knowledge is asked with that message's text and the history before it."""
    messages = [dict(m) for m in messages]
    if knowledge is None:
        return messages, None
    context = context or KnowledgeContext()
    last = last_user_index(messages)
    user_text = str(messages[last].get("content") or "")
    retrieved = knowledge(context.query or user_text, messages[:last], context)
    if retrieved is None or not retrieved.text:  # nothing injected; a stated reason is passed on
        return messages, retrieved if retrieved is not None and retrieved.skipped else None
    messages[last] = {**messages[last], "content": f"{user_text}\n\n{retrieved.text}"}
    return messages, retrieved


@dataclass(frozen=True)
class StaticKnowledge:
    """The same text for every turn (tests, and a user's own fixed hints)."""

    text: str | None
    hits: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None:
        return Retrieved(self.text, self.hits, None, user_text) if self.text else None

    def describe(self) -> dict[str, Any]:
        return {"static": self.text}
