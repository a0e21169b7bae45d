"""``kate kb``: build | query | inspect a knowledge base (Hydra config ``conf/kb.yaml``).

    kate kb action=build kb=bfcl_st                       # ST only, no model
    kate kb action=build kb=bfcl_distilled                # lessons written by `llm` from judged training runs
    kate kb action=build                                  # the shipped base; ES/SIC/TIC by `llm`
    kate kb action=query query="List my files" api_classes=[GorillaFileSystem]
    kate kb action=query query="What is the capital of Brazil?" retrieval=single_turn \\
        tools=[country_info.capital,country_info.population] retrieval.filter_tools=true
    kate kb action=inspect
"""

from __future__ import annotations

import json
from typing import Any

from omegaconf import DictConfig, OmegaConf

from kate.eval.config import instantiate

ACTIONS = ("build", "query", "inspect")


def _tuple(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    return tuple(str(v) for v in value)


def run_kb(cfg: DictConfig) -> Any:
    action = cfg.action
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
    if action == "build":
        return _build(cfg)
    if action == "inspect":
        return _inspect(cfg)
    return _query(cfg)


def _build(cfg: DictConfig):
    from kate.knowledge.build import build_knowledge_base
    from kate.knowledge.distilled import DistilledSpec, build_distilled
    from kate.knowledge.entries import LLM_TYPES

    spec = instantiate(cfg.kb)
    if isinstance(spec, DistilledSpec):  # conf/kb/bfcl_distilled.yaml: lessons written from judged runs
        kb = build_distilled(spec, writer=instantiate(cfg.llm))
        print(json.dumps({k: v for k, v in kb.stats().items() if k != "clusters"}, indent=2))
        return kb
    writer = instantiate(cfg.llm) if any(t in LLM_TYPES for t in spec.types) else None
    kb = build_knowledge_base(spec, writer=writer)
    print(json.dumps({k: v for k, v in kb.stats().items() if k != "clusters"}, indent=2))
    return kb


def _open(cfg: DictConfig):
    from kate.retrieval.retriever import Retriever

    config = instantiate(cfg.retrieval)
    if cfg.get("kb_name"):
        config.kb = cfg.kb_name
    return Retriever.from_config(config)


def _inspect(cfg: DictConfig) -> dict[str, Any]:
    retriever = _open(cfg)
    stats = retriever.kb.stats()
    stats["build_stats"] = retriever.kb.manifest.get("build_stats", {})
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    return stats


def _query(cfg: DictConfig) -> list[dict[str, Any]]:
    from kate.agent.knowledge import KnowledgeContext
    from kate.retrieval.inject import render_knowledge
    from kate.retrieval.knowledge import retrieval_knowledge

    if not cfg.get("query"):
        raise ValueError("action=query needs query=\"...\"")
    retriever = _open(cfg)
    intent_model = instantiate(cfg.llm) if retriever.config.intent.get("enabled") else None
    knowledge = retrieval_knowledge(retriever, intent_model=intent_model)
    context = KnowledgeContext("query", api_classes=_tuple(cfg.get("api_classes")), tools=_tuple(cfg.get("tools")),
                               exclude_ids=_tuple(cfg.get("exclude_ids")) or ())  # fmt: skip
    query = str(cfg.query)
    found, intent = knowledge.hits(query, [], context)
    text = render_knowledge(found, knowledge.template, request=query)
    hits = [h.to_dict() for h in found]
    if intent:
        print(f"intent: {intent}")
    print(f"{len(hits)} hit(s) for {cfg.query!r}")
    for hit in hits:
        print(f"  {hit['score']:.4f}  {hit['type']:3s}  {hit['id']}  {hit['text'][:100]}")
    if cfg.get("show_text", True) and text:
        print("\n--- injected text ---\n" + text)
    return hits
