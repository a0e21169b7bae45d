"""The knowledge of an evaluation arm: retrieval configs for single- and multi-turn entries (each
entry type has its own filters), turned into the runner's ``entry -> retrieve hook`` factory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.utils import instantiate

from kate.bfcl.data import BFCLEntry
from kate.eval.bfcl_runner import RetrieveFactory
from kate.llm.base import ChatModel


def build_retrieve_factory(
    knowledge: Mapping[str, Any], intent_model: ChatModel | None = None
) -> tuple[RetrieveFactory, dict[str, Any]]:
    """``knowledge``: ``{single_turn: <retrieval config>, multi_turn: <retrieval config>}``, either may
    be null (no knowledge for that kind of entry). Returns the factory and what results record."""
    from kate.retrieval.hook import bfcl_retrieve_factory
    from kate.retrieval.retriever import Retriever

    factories: dict[bool, Any] = {}
    described: dict[str, Any] = {}
    for key, multi in (("single_turn", False), ("multi_turn", True)):
        node = knowledge.get(key)
        if not node:
            continue
        config = instantiate(node)
        retriever = Retriever.from_config(config)
        factories[multi] = bfcl_retrieve_factory(retriever, intent_model=intent_model)
        described[key] = {"retrieval": config.to_dict(), "manifest": retriever.kb.manifest}

    def factory(entry: BFCLEntry):
        made = factories.get(entry.is_multi_turn)
        return made(entry) if made is not None else None

    return factory, described
