"""One item of a verifiable diagnostic set: a question with a checkable answer and the tools offered.

Every diagnostic set (the generated arithmetic, a user's own JSONL, BFCL's relevance entries seen as
call decisions) becomes a sequence of ``VerifiableItem``; the tasks in ``kate.diagnose.tasks`` run
them. ``necessary`` is set when the data itself says whether a tool is needed (BFCL relevance /
irrelevance, a user's label); otherwise it is measured per model (``kate.diagnose.necessity``).
``task_set_sha256`` names a set exactly (what the necessity cache is keyed by).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.diagnose.answers import AnswerChecker
from kate.llm.base import Message, ToolSchema


@dataclass(frozen=True)
class VerifiableItem:
    """A question (``messages``: system prompt and user turn), its answer and checker, the tools."""

    id: str
    category: str
    messages: tuple[Message, ...]
    answer: Any
    checker: AnswerChecker = field(default_factory=AnswerChecker)
    tools: tuple[ToolSchema, ...] = ()
    necessary: bool | None = None  # known from the data; None: measured per model
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. the arithmetic expression

    def __post_init__(self) -> None:
        if not self.messages or self.messages[-1].get("role") != "user":
            raise ValueError(f"item {self.id!r}: messages must end with a user message")

    def prompt(self) -> list[Message]:
        """A fresh copy of the messages (callers may extend it)."""
        return [dict(m) for m in self.messages]

    @property
    def question(self) -> str:
        return str(self.messages[-1].get("content") or "")

    def check(self, reply: str | None) -> bool:
        return self.checker.check(reply, self.answer)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "messages": list(self.messages), "answer": self.answer,
                "checker": self.checker.to_spec(), "tools": list(self.tools), "necessary": self.necessary}  # fmt: skip


def task_set_sha256(items: Sequence[VerifiableItem]) -> str:
    """The sha256 of everything that decides the items and their checking, in order."""
    text = json.dumps([item.to_dict() for item in items], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
