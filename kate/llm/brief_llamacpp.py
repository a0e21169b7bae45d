"""The llama.cpp client with brief reasoning, made from one flat set of settings (``conf/llm/brief_reasoning.yaml``).

``brief_llamacpp(model, budget=32, ..., **settings)`` is ``BriefReasoning(LlamaCppChatModel(model,
**settings), budget=...)``. Flat rather than a nested ``model`` node so that the overrides every
arm is run with (``llm.model=<name>``, ``llm.max_parallel=8``, ``llm.lora=...``, ``llm.kv_cells``)
mean what they mean for ``conf/llm/llamacpp.yaml``. Its signature is the client's parameters plus
the wrapper's (``check_target`` and the schema test read it).
"""

from __future__ import annotations

import inspect
from typing import Any

from kate.llm.brief_reasoning import BriefReasoning
from kate.llm.llamacpp import LlamaCppChatModel

WRAPPER_PARAMETERS = ("budget", "opener", "closer")


def brief_llamacpp(
    model: str, *, budget: int = 32, opener: str = "<think>\n", closer: str = "\n</think>\n", **settings: Any
) -> BriefReasoning:
    """A llama.cpp client (``model`` and ``settings``: ``LlamaCppChatModel``'s) thinking at most
    ``budget`` tokens before each answer (kate.llm.brief_reasoning)."""
    return BriefReasoning(LlamaCppChatModel(model, **settings), budget=budget, opener=opener, closer=closer)


def _signature() -> inspect.Signature:
    client = list(inspect.signature(LlamaCppChatModel).parameters.values())
    own = inspect.signature(brief_llamacpp).parameters
    wrapper = [own[name] for name in WRAPPER_PARAMETERS]
    return inspect.Signature([*client, *wrapper], return_annotation=BriefReasoning)


brief_llamacpp.__signature__ = _signature()  # type: ignore[attr-defined]
