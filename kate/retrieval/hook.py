"""The agent loop's ``retrieve(user_text, history) -> str | None`` hook, from a retriever.

    retriever = Retriever.from_config(instantiate(cfg.retrieval))
    hook = make_retrieve_hook(retriever, api_classes=entry.involved_classes)          # multi-turn
    hook = make_retrieve_hook(retriever, tools=entry.tools)                           # single-turn
    run_dialogue(model, env, turns, sampler, retrieve=hook)
    hook.log  # per call: the query, the intent, the hits with scores, the injected text
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kate.llm.base import ChatModel, Message
from kate.retrieval.inject import Template, render_knowledge, template_from
from kate.retrieval.intent import IntentConfig, IntentRetriever, intent_config_from
from kate.retrieval.retriever import Hit, Retriever


@dataclass
class RetrieveHook:
    retriever: Retriever
    template: Template
    api_classes: tuple[str, ...] | None = None
    tools: tuple[str | Mapping[str, Any], ...] | None = None
    exclude_ids: tuple[str, ...] = ()
    intent: IntentRetriever | None = None
    log: list[dict[str, Any]] = field(default_factory=list)

    def hits(self, user_text: str, history: list[Message]) -> tuple[list[Hit], str | None]:
        hits = self.retriever.retrieve(user_text, api_classes=self.api_classes, tools=self.tools,
                                       exclude_ids=self.exclude_ids) if self.retriever.config.types else []
        intent = None
        if self.intent is not None:
            intent, intent_hits = self.intent.retrieve(user_text, history, api_classes=self.api_classes,
                                                       tools=self.tools, exclude_ids=self.exclude_ids)
            hits = hits + intent_hits
        return hits, intent

    def __call__(self, user_text: str, history: list[Message]) -> str | None:
        hits, intent = self.hits(user_text, history)
        text = render_knowledge(hits, self.template, request=user_text)
        self.log.append({"query": user_text, "intent": intent, "hits": [h.to_dict() for h in hits], "text": text})
        return text


def make_retrieve_hook(retriever: Retriever, *, template: Template | Mapping[str, Any] | None = None,
                       api_classes: Iterable[str] | None = None,
                       tools: Iterable[str | Mapping[str, Any]] | None = None, exclude_ids: Iterable[str] = (),
                       intent_model: ChatModel | None = None,
                       intent: IntentConfig | Mapping[str, Any] | None = None) -> RetrieveHook:
    """A ``retrieve(user_text, history)`` callable for ``kate.agent.run_turn`` / ``run_dialogue``.

    ``template`` and ``intent`` default to the retriever's config. Intent-level retrieval runs when
    the intent config is enabled; it needs ``intent_model`` (the policy model)."""
    config = retriever.config
    template = template_from(template if template is not None else config.template)
    intent_config = intent_config_from(intent if intent is not None else config.intent)
    intent_retriever = None
    if intent_config.enabled:
        if intent_model is None:
            raise ValueError("intent retrieval is enabled: pass intent_model= (the policy model)")
        intent_retriever = IntentRetriever(intent_model, retriever, intent_config)
    return RetrieveHook(retriever, template, tuple(api_classes) if api_classes is not None else None,
                        tuple(tools) if tools is not None else None, tuple(exclude_ids), intent_retriever)


def bfcl_retrieve_factory(retriever: Retriever, *, template: Template | Mapping[str, Any] | None = None,
                          intent_model: ChatModel | None = None, exclude_self: bool = False):
    """``entry -> hook`` for BFCL entries (``kate.eval``'s ``RetrieveFactory``): a multi-turn entry
    filters by its ``involved_classes`` (KATE), a single-turn entry by its own tools and to entries
    without API classes. ``exclude_self`` drops everything built from the entry itself (building
    training data from the training half)."""

    def factory(entry) -> RetrieveHook:
        exclude = (entry.id,) if exclude_self else ()
        if entry.is_multi_turn:
            tools = list(entry.tools) + [{"name": f["name"]} for fs in entry.missed_functions.values() for f in fs]
            return make_retrieve_hook(retriever, template=template, api_classes=entry.involved_classes, tools=tools,
                                      exclude_ids=exclude, intent_model=intent_model)
        return make_retrieve_hook(retriever, template=template, api_classes=(), tools=entry.tools,
                                  exclude_ids=exclude, intent_model=intent_model)

    return factory
