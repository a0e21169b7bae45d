"""The llama.cpp client on a LoRA adapter, gated by the same client without it, made from one flat
set of settings (``conf/llm/base_gated.yaml``).

``base_gated_llamacpp(model, lora=..., **settings)`` is ``BaseGated(LlamaCppChatModel(model,
lora=lora, **settings), LlamaCppChatModel(model, **settings))``: the adapter's replies, except that
at a turn's start the base model's decision not to call is kept (kate.llm.base_gated). Flat like
``conf/llm/llamacpp.yaml``, so the overrides every arm is run with (``llm.model=<name>``,
``llm.max_parallel=8``, ``llm.lora=...``) mean the same; the weights file is mapped once and read by
both engines. ``base_tool_prompt`` and ``base_several_calls`` are the base's own ``tool_prompt`` and
``several_calls`` (default: the shared ones): with ``base_tool_prompt="both"`` the base is also asked in
BFCL's Python form where the several-calls gate expects several calls, and its reply with several calls
stands against an adapter reply with fewer (``BaseGated``'s ``base_several``). Its signature is the
client's parameters plus these three and ``tools_fit`` (``BaseGated``'s; ``check_target`` and the schema
test read it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from kate.llm.base import Message
from kate.llm.base_gated import BaseGated, ToolsFit
from kate.llm.llamacpp import LlamaCppChatModel


def base_gated_llamacpp(
    model: str, *, lora: str | None = None, lora_scale: float = 1.0, base_malformed: str = "keep",
    base_tool_prompt: str | None = None, base_several_calls: Callable[[list[Message]], bool] | None = None,
    tools_fit: ToolsFit | None = None, name: str | None = None, **settings: Any,
) -> BaseGated:
    """A llama.cpp client on ``lora`` whose decision not to call, at a turn's start, is the base model's."""
    if not lora:
        raise ValueError("llm=base_gated needs llm.lora: the adapter whose calls the base model gates")
    own = {"tool_prompt": base_tool_prompt, "several_calls": base_several_calls}
    base_settings = {**settings, **{k: v for k, v in own.items() if v is not None}}
    tuned = LlamaCppChatModel(model, lora=lora, lora_scale=lora_scale, **settings)
    base = LlamaCppChatModel(model, **base_settings)
    return BaseGated(tuned, base, base_malformed=base_malformed, base_several=base.tool_prompt == "both",
                     tools_fit=tools_fit, name=name)


def _signature() -> inspect.Signature:
    client = list(inspect.signature(LlamaCppChatModel).parameters.values())
    mine = inspect.signature(base_gated_llamacpp).parameters
    own = [mine[k] for k in ("base_malformed", "base_tool_prompt", "base_several_calls", "tools_fit")]
    return inspect.Signature([*client, *own], return_annotation=BaseGated)


base_gated_llamacpp.__signature__ = _signature()  # type: ignore[attr-defined]
