"""Intent-level retrieval (KATE): the policy model first summarizes the user's intent in one
sentence; the intent is embedded and the best SIC/TIC entry (K = 1, cosine >= p) is retrieved."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kate.llm.base import ChatModel, Message
from kate.retrieval.retriever import Hit, Retriever

INTENT_PROMPT = "Summarize the user's intent in one sentence."


@dataclass(frozen=True)
class IntentConfig:
    enabled: bool = False
    types: Sequence[str] = ("SIC",)
    top_k: int = 1
    threshold: float = 0.5
    prompt: str = INTENT_PROMPT
    history_turns: int = 3  # earlier user turns shown to the model with the current one
    max_tokens: int = 48
    temperature: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", tuple(self.types))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def intent_messages(user_text: str, history: Sequence[Message], config: IntentConfig) -> list[Message]:
    earlier = [str(m.get("content") or "") for m in history if m.get("role") == "user" and m.get("content")]
    earlier = earlier[-config.history_turns:] if config.history_turns else []
    context = "".join(f"Earlier request: {text}\n" for text in earlier)
    return [{"role": "user", "content": f"{context}Current request: {user_text}\n\n{config.prompt}"}]


def infer_intent(model: ChatModel, user_text: str, history: Sequence[Message], config: IntentConfig) -> str:
    """The model's one-sentence intent (first line of its answer; the request itself if empty)."""
    [completion] = model.chat(intent_messages(user_text, history, config), None, n=1,
                              temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed)
    lines = [line.strip() for line in completion.text.strip().splitlines() if line.strip()]
    return lines[0] if lines else user_text


@dataclass
class IntentRetriever:
    model: ChatModel
    retriever: Retriever
    config: IntentConfig = field(default_factory=IntentConfig)

    def retrieve(self, user_text: str, history: Sequence[Message] = (), *, api_classes: Iterable[str] | None = None,
                 tools: Iterable[str | Mapping[str, Any]] | None = None,
                 exclude_ids: Iterable[str] = ()) -> tuple[str, list[Hit]]:
        intent = infer_intent(self.model, user_text, history, self.config)
        hits = self.retriever.retrieve(intent, api_classes=api_classes, tools=tools, exclude_ids=exclude_ids,
                                       types=self.config.types, top_k=self.config.top_k,
                                       threshold=self.config.threshold)
        return intent, hits


def intent_config_from(values: Mapping[str, Any] | IntentConfig | None) -> IntentConfig:
    return values if isinstance(values, IntentConfig) else IntentConfig(**dict(values or {}))
