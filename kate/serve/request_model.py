"""A request's own sampling options laid over a model client: a ``ChatModel`` that wraps another.

The sampler decides ``n``, temperature and ``max_tokens``; what a request adds (``stop``,
``top_p``, ``logprobs`` / ``top_logprobs``, and a forced call through ``tool_choice``) rides on
every ``chat`` call of that request. Options reach only clients that take them
(``kate.llm.base.supports``); a request asking an engine for what it cannot do is a 400, not an
option silently dropped. A forced call is passed on as ``tool_choice`` to clients that take it (an
upstream server) or prefilled as the opening of a call in the model's own format (local engines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, supports
from kate.serve.errors import bad_request
from kate.serve.request import ChatRequest
from kate.toolcall.format import HERMES_OPENING


def call_prefill(function: str | None, opening: str = HERMES_OPENING) -> str:
    """The text a forced call starts with: up to the function's name (any function: ``tool_choice``
    ``required``), or up to its arguments (a named function). The opening alone is not enough: the
    default model, prefilled with it, ends its turn right there."""
    if function is None:
        return f'{opening}{{"name": "'
    return f'{opening}{{"name": {json.dumps(function)}, "arguments": '


@dataclass
class RequestModel:
    """``inner`` with ``request``'s options applied to each call."""

    inner: ChatModel
    extra: dict[str, Any] = field(default_factory=dict)
    stop: list[str] | None = None
    logprobs: bool = False

    @property
    def name(self) -> str:
        return self.inner.name

    def __getattr__(self, item: str) -> Any:  # runtime(), path, ...: what identity and metas read
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    @classmethod
    def for_request(cls, inner: ChatModel, request: ChatRequest, *, call_opening: str = HERMES_OPENING) -> "RequestModel":
        extra: dict[str, Any] = {}
        if request.top_p is not None and request.top_p < 1.0:
            if not supports(inner, "top_p"):
                raise bad_request(f"this server's engine ({inner.name}) does not take top_p", "top_p")
            extra["top_p"] = request.top_p
        if request.top_logprobs:
            if not supports(inner, "top_logprobs"):
                raise bad_request(f"this server's engine ({inner.name}) does not give top_logprobs", "top_logprobs")
            extra["top_logprobs"] = request.top_logprobs
        forced = request.tool_choice == "required" or request.forced_function is not None
        if forced and supports(inner, "tool_choice"):
            extra["tool_choice"] = request.tool_choice
        elif forced and supports(inner, "prefill"):
            extra["prefill"] = call_prefill(request.forced_function, call_opening)
        return cls(inner, extra, list(request.stop) or None, request.logprobs)

    def chat(self, messages: list[Message], tools: list[ToolSchema] | None = None, *, n: int = 1,
             temperature: float = 0.0, max_tokens: int = 256, seed: int | None = None,
             stop: list[str] | None = None, logprobs: bool = False, **options: Any) -> list[Completion]:  # fmt: skip
        """``options`` from a sampler that uses them (a gate's ``prefill``) pass on; the request's own
        (a forced call) win."""
        return self.inner.chat(
            messages, tools, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed,
            stop=self.stop or stop, logprobs=logprobs or self.logprobs, **{**options, **self.extra},
        )  # fmt: skip
