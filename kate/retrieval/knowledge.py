"""A policy's knowledge from a knowledge base: top-K entries for the user turn under the item's
filters, rendered with a template (``kate.agent.knowledge.Knowledge``).

    knowledge = make_knowledge({"single_turn": single_cfg, "multi_turn": multi_cfg}, intent_model=model)
    policy = Policy(model, sampler, knowledge=knowledge)

One ``RetrievalKnowledge`` serves every item: the filters come with each call, in the
``KnowledgeContext`` the task gives (API classes, the tools on offer, the item's own id to
exclude). ``KnowledgeByKind`` picks per-kind settings (BFCL single-turn and multi-turn entries are
filtered differently). A config's ``beside`` adds a second base's hits after its own (distilled lessons
beside ST examples), one injection in the first's template.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kate.agent.knowledge import KnowledgeContext, Retrieved
from kate.llm.base import ChatModel, Message
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.inject import Template, render_knowledge, template_from
from kate.retrieval.intent import IntentConfig, IntentRetriever, intent_config_from
from kate.retrieval.retriever import Hit, Retriever

VOLATILE_MANIFEST_KEYS = ("created", "build_stats")


@dataclass
class RetrievalKnowledge:
    retriever: Retriever
    template: Template
    intent: IntentRetriever | None = None
    beside: "RetrievalKnowledge | None" = None  # a second base's hits, after these (RetrievalConfig.beside)

    def hits(self, user_text: str, history: list[Message], context: KnowledgeContext) -> tuple[list[Hit], str | None]:
        filters = dict(api_classes=context.api_classes, tools=context.tools, exclude_ids=context.exclude_ids)
        hits = self.retriever.retrieve(user_text, **filters) if self.retriever.config.types else []
        intent = None
        if self.intent is not None:
            intent, intent_hits = self.intent.retrieve(user_text, history, **filters)
            hits = hits + intent_hits
        if self.beside is not None:
            hits = hits + self.beside.hits(user_text, history, context)[0]
        return hits, intent

    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None:
        hits, intent = self.hits(user_text, history, context)
        tools = [t for t in context.tools or () if isinstance(t, Mapping)]
        text = render_knowledge(hits, self.template, request=user_text, tools=tools)
        if not text:
            return None
        return Retrieved(text, tuple(h.to_dict() for h in hits), intent, user_text)

    def describe(self) -> dict[str, Any]:
        """The retrieval settings and the knowledge base's manifest, less when and how fast it was
        built (``created``, ``build_stats``): the same entries, embeddings and index are the same knowledge."""
        manifest = {k: v for k, v in self.retriever.kb.manifest.items() if k not in VOLATILE_MANIFEST_KEYS}
        out = {"retrieval": self.retriever.config.to_dict(), "manifest": manifest}
        if self.beside is not None:
            out["beside"] = self.beside.describe()
        return out


@dataclass
class KnowledgeByKind:
    """Per-kind knowledge (``context.kind``); a kind without an entry gets none."""

    by_kind: Mapping[str, RetrievalKnowledge]

    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None:
        knowledge = self.by_kind.get(context.kind)
        return knowledge(user_text, history, context) if knowledge is not None else None

    def describe(self) -> dict[str, Any]:
        return {kind: knowledge.describe() for kind, knowledge in self.by_kind.items()}


def retrieval_knowledge(retriever: Retriever, *, template: Template | Mapping[str, Any] | None = None,
                        intent: IntentConfig | Mapping[str, Any] | None = None,
                        intent_model: ChatModel | None = None) -> RetrievalKnowledge:
    """``template`` and ``intent`` default to the retriever's config. Intent-level retrieval runs
    when the intent config is enabled; it needs ``intent_model`` (the policy model)."""
    config = retriever.config
    template = template_from(template if template is not None else config.template)
    intent_config = intent_config_from(intent if intent is not None else config.intent)
    intent_retriever = None
    if intent_config.enabled:
        if intent_model is None:
            raise ValueError("intent retrieval is enabled: pass intent_model= (the policy model)")
        intent_retriever = IntentRetriever(intent_model, retriever, intent_config)
    beside = None
    if (second := config.beside_config()) is not None:
        same = second.embedder == config.embedder
        beside_retriever = Retriever.from_config(second, embedder=retriever.embedder if same else None)
        beside = retrieval_knowledge(beside_retriever, template=template, intent_model=intent_model)
    return RetrievalKnowledge(retriever, template, intent_retriever, beside)


def make_knowledge(configs: Mapping[str, RetrievalConfig | Mapping[str, Any] | None] | None,
                   intent_model: ChatModel | None = None) -> KnowledgeByKind | None:
    """``{kind: retrieval config}`` (a config may be null: no knowledge for that kind) -> the
    policy's knowledge, or None when no kind has any. Each knowledge base is opened once."""
    by_kind = {}
    for kind, config in (configs or {}).items():
        if not config:
            continue
        if not isinstance(config, RetrievalConfig):
            config = RetrievalConfig(**{k: v for k, v in dict(config).items() if not k.startswith("_")})
        by_kind[kind] = retrieval_knowledge(Retriever.from_config(config), intent_model=intent_model)
    return KnowledgeByKind(by_kind) if by_kind else None
