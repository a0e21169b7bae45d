"""One knowledge entry: what is embedded, what is shown, and what it may be filtered by.

Four types (KATE): ``ST`` (scenario trajectory: a solved user turn), ``ES`` (experience summary:
the same turn plus an LLM-written analysis/advice paragraph), ``SIC`` / ``TIC`` (script- and
text-style intent knowledge: one per cluster of similar questions of one API class).

``text`` is what gets embedded (the question for ST/ES, the intent label for SIC/TIC).
``payload`` holds the type's fields, as plain JSON values:

* ST:  ``question``, ``calls`` (``[{name, arguments}]``), optional ``results``, ``turn``
* ES:  the ST fields plus ``summary`` (the ~100-word analysis/advice)
* SIC: ``intent``, ``steps`` (list of script steps), ``examples`` (a few member questions), ``size``
* TIC: ``intent``, ``summary``, ``examples``, ``size``
* distilled: ``title``, ``when``, ``do``, ``avoid`` (a lesson written from judged answers,
  ``kate.knowledge.distilled``), ``category``, ``verdict``, ``cases``, ``stripped``

``tool_names``: the function names the entry's calls use (the single-turn filter: an entry is
shown only when the current tools offer all of them). ``source_ids``: the trajectory and turn ids
it was built from (``dialogue_id`` and ``dialogue_id#t<turn>``), for self-hit exclusion.
``written_by``: the model that wrote an LLM-written entry (None for ST).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kate.toolcall import ToolCall, canonical_json

TYPES = ("ST", "ES", "SIC", "TIC", "distilled")
LLM_TYPES = ("ES", "SIC", "TIC")


def check_types(types: Iterable[str]) -> tuple[str, ...]:
    out = tuple(types)
    unknown = [t for t in out if t not in TYPES]
    if unknown:
        raise ValueError(f"unknown knowledge type(s) {unknown}; known: {TYPES}")
    return out


def turn_id(trajectory_id: str, turn: int) -> str:
    return f"{trajectory_id}#t{turn}"


@dataclass(frozen=True)
class KnowledgeEntry:
    id: str
    type: str
    text: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    api_classes: tuple[str, ...] = ()
    tool_names: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    source: str = ""  # the dataset / category it came from
    written_by: str | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"entry {self.id!r}: unknown type {self.type!r}; known: {TYPES}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"entry {self.id!r}: empty text (nothing to embed)")
        for name in ("api_classes", "tool_names", "source_ids"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def calls(self) -> list[ToolCall]:
        """The entry's ground-truth calls (ST/ES), as ToolCalls."""
        return [ToolCall.from_dict(c) for c in self.payload.get("calls", [])]

    @property
    def dedupe_key(self) -> str:
        """Equal for two entries that would show the same thing: the same question and calls
        (ST and ES alike), or the same type and intent label (SIC, TIC)."""
        text = " ".join(self.text.lower().split())
        if "calls" in self.payload:
            return f"{text}|{canonical_json(list(self.payload['calls']))}"
        return f"{self.type}|{text}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "text": self.text,
            "payload": dict(self.payload),
            "api_classes": list(self.api_classes),
            "tool_names": list(self.tool_names),
            "source_ids": list(self.source_ids),
            "source": self.source,
            "written_by": self.written_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "KnowledgeEntry":
        return cls(
            id=data["id"],
            type=data["type"],
            text=data["text"],
            payload=dict(data.get("payload", {})),
            api_classes=tuple(data.get("api_classes", ())),
            tool_names=tuple(data.get("tool_names", ())),
            source_ids=tuple(data.get("source_ids", ())),
            source=data.get("source", ""),
            written_by=data.get("written_by"),
        )


def calls_payload(calls: Iterable[ToolCall]) -> list[dict[str, Any]]:
    return [call.to_dict() for call in calls]


def tool_names_of(calls: Iterable[ToolCall]) -> tuple[str, ...]:
    """Distinct function names, in first-use order."""
    return tuple(dict.fromkeys(call.name for call in calls))
