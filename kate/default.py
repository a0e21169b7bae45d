"""The model kate's defaults run: the default local model (``registry.DEFAULT_AGENT_MODEL``) with the
adapter kate ships for it (``DEFAULT_ADAPTER``, trained to answer after tool results), gated by the
base model at each turn's start (``kate.llm.base_gated``: the base decides whether to call, the adapter
what to call);

* the base is also asked in BFCL's Python form where the call-count predictor of the training halves'
  knowledge base (``SEVERAL_CALLS_KB``) expects several calls, and its reply with several calls stands
  against an adapter reply with fewer;
* where no offered tool reads like the request (the tool-relevance gate, ``RELEVANCE_TAU``), the base
  answers without tools.

The Python API's ``default_model()``, ``conf/llm/default.yaml`` (``kate serve``, ``kate main``'s
``adapter`` arm) and the quickstart are this one configuration; why it is the default, with its
measurements: docs/training.md. A module above ``kate.llm``: its gates are fitted and embedded by
``kate.retrieval``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kate.llm.base_gated import BaseGated
from kate.llm.base_gated_llamacpp import base_gated_llamacpp
from kate.llm.registry import DEFAULT_AGENT_MODEL
from kate.retrieval.call_count import SeveralCallsGate
from kate.retrieval.relevance import TAU as RELEVANCE_TAU
from kate.retrieval.relevance import ToolRelevanceGate

DEFAULT_ADAPTER = "qwen2.5-coder-0.5b-grpo-answers"  # kate.llm.adapters.ADAPTERS, sha256 pinned
BASE_TOOL_PROMPT = "both"  # the base's tool prompt (kate.llm.tool_prompt)
SEVERAL_CALLS_KB = Path(__file__).resolve().parents[1] / "knowledge_bases" / "bfcl_train"  # committed


def default_model(**settings: Any) -> BaseGated:
    """The default model as a chat client: two llama.cpp engines on the default model's file (the
    shipped adapter's and the base's), both verified; ``settings`` are ``LlamaCppChatModel``'s
    (``n_ctx``, ``max_parallel``, ...) and ``base_gated_llamacpp``'s (``base_malformed``, ...)."""
    gates = {"base_tool_prompt": BASE_TOOL_PROMPT}
    if "base_several_calls" not in settings:
        gates["base_several_calls"] = SeveralCallsGate(str(SEVERAL_CALLS_KB))
    if "tools_fit" not in settings:
        gates["tools_fit"] = ToolRelevanceGate(tau=RELEVANCE_TAU)
    return base_gated_llamacpp(DEFAULT_AGENT_MODEL, lora=DEFAULT_ADAPTER, **{**gates, **settings})
