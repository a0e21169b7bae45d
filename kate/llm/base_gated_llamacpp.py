"""The llama.cpp client on a LoRA adapter, gated by the same client without it, made from one flat
set of settings (``conf/llm/base_gated.yaml``).

``base_gated_llamacpp(model, lora=..., **settings)`` is ``BaseGated(LlamaCppChatModel(model,
lora=lora, **settings), LlamaCppChatModel(model, **settings))``: the adapter's replies, except that
at a turn's start the base model's decision not to call is kept (kate.llm.base_gated). Flat like
``conf/llm/llamacpp.yaml``, so the overrides every arm is run with (``llm.model=<name>``,
``llm.max_parallel=8``, ``llm.lora=...``) mean the same; the weights file is mapped once and read by
both engines. Its signature is the client's parameters plus ``base_malformed`` (``check_target`` and
the schema test read it).
"""

from __future__ import annotations

import inspect
from typing import Any

from kate.llm.base_gated import BaseGated
from kate.llm.llamacpp import LlamaCppChatModel


def base_gated_llamacpp(
    model: str, *, lora: str | None = None, lora_scale: float = 1.0, base_malformed: str = "keep",
    name: str | None = None, **settings: Any,
) -> BaseGated:
    """A llama.cpp client on ``lora`` whose decision not to call, at a turn's start, is the base model's."""
    if not lora:
        raise ValueError("llm=base_gated needs llm.lora: the adapter whose calls the base model gates")
    tuned = LlamaCppChatModel(model, lora=lora, lora_scale=lora_scale, **settings)
    base = LlamaCppChatModel(model, **settings)
    return BaseGated(tuned, base, base_malformed=base_malformed, name=name)


def _signature() -> inspect.Signature:
    client = list(inspect.signature(LlamaCppChatModel).parameters.values())
    own = inspect.signature(base_gated_llamacpp).parameters["base_malformed"]
    return inspect.Signature([*client, own], return_annotation=BaseGated)


base_gated_llamacpp.__signature__ = _signature()  # type: ignore[attr-defined]
