"""The model kate's defaults run: the default local model (``registry.DEFAULT_AGENT_MODEL``) with the
adapter kate ships for it (``DEFAULT_ADAPTER``, trained to answer after tool results), gated by the
base model at each turn's start (``kate.llm.base_gated``: the base decides whether to call, the adapter
what to call). The Python API's ``default_model()``, ``kate serve``'s ``llm: base_gated`` and the quickstart
are this one configuration; why it is the default, with its measurements: docs/training.md."""

from __future__ import annotations

from typing import Any

from kate.llm.base_gated import BaseGated
from kate.llm.base_gated_llamacpp import base_gated_llamacpp
from kate.llm.registry import DEFAULT_AGENT_MODEL

DEFAULT_ADAPTER = "qwen2.5-coder-0.5b-grpo-answers"  # kate.llm.adapters.ADAPTERS, sha256 pinned


def default_model(**settings: Any) -> BaseGated:
    """The default model as a chat client: two llama.cpp engines on the default model's file (the
    shipped adapter's and the base's), both verified; ``settings`` are ``LlamaCppChatModel``'s
    (``n_ctx``, ``max_parallel``, ...) and ``base_malformed``."""
    return base_gated_llamacpp(DEFAULT_AGENT_MODEL, lora=DEFAULT_ADAPTER, **settings)
