"""A tuned model whose decision to call at all is its base model's, as a ``ChatModel`` that wraps
two others (modules compose by wrapping, as DSPy's do).

A model tuned to answer after tool results (the GRPO-answers adapter) also learned to call where
no tool is due; its base model still declines there. ``BaseGated(tuned, base).chat(...)`` asks:

* at the start of a user turn (the last message is the user's) with tools offered: the tuned model
  for its ``n`` samples and the base model for one greedy reply, at once (two threads: two local
  engines decode side by side). Where the base's reply makes no call and is not a malformed call
  (the base declines: no tool is due), that reply is returned ``n`` times; otherwise the tuned
  model's samples (each of which may itself decline). So a no-call stands wherever either model
  declines, every call made is the tuned model's, and the base's decision does not depend on the
  sampling temperature (one greedy reply, whatever ``n``).
* anywhere else (after a tool result, with no tools): the tuned model alone.

Usage: the first returned reply carries the base's tokens as well as its own; the other replies
their own, so summed over the replies, each computed token is counted once. Nothing here
evaluates model output.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, check_sampling_args

def opens_turn(messages: list[Message]) -> bool:
    """Whether the model is asked for the first step of a user turn: the last message is the user's."""
    return bool(messages) and messages[-1].get("role") == "user"


def declines(reply: Completion) -> bool:
    """A reply that makes no call and did not try to (a malformed call is an attempt)."""
    return not reply.tool_calls and reply.parse_error is None


def gate_replies(tuned: list[Completion], base: Completion) -> list[Completion]:
    """The base's reply (once per sample) where it declines, else the tuned model's samples; the first
    carries the base's usage too."""
    out = [replace(base, usage=t.usage) for t in tuned] if declines(base) else list(tuned)
    return [replace(out[0], usage=out[0].usage + base.usage), *out[1:]]


class BaseGated:
    """``tuned``'s replies, except that at a turn's start a reply of ``base`` that declines to call
    is kept (see the module's docstring). ``name``: null gives ``<tuned name>+base-gate``."""

    def __init__(self, tuned: ChatModel, base: ChatModel, *, name: str | None = None) -> None:
        for role, model in (("tuned", tuned), ("base", base)):
            if not callable(getattr(model, "chat", None)):
                raise TypeError(f"BaseGated: {role} must be a chat model (a chat() method), got {model!r}")
        self.model = tuned
        self.base = base
        self.name = name if name is not None else f"{tuned.name}+base-gate"
        self.formats = tuple(getattr(tuned, "formats", ("hermes", "json")))
        self.options = tuple(o for o in getattr(tuned, "options", ()) if o in getattr(base, "options", ()))

    def __getattr__(self, item: str) -> Any:  # path, lora_sha256, tool_prompt: what identities and runs read
        if item in ("model", "base"):
            raise AttributeError(item)
        return getattr(self.model, item)

    def runtime(self) -> dict[str, Any]:
        own = getattr(self.model, "runtime", None)
        info = dict(own()) if callable(own) else {}
        info["base_gate"] = {"base": getattr(self.base, "name", repr(self.base))}
        return info

    def close(self) -> None:
        for model in (self.model, self.base):
            close = getattr(model, "close", None)
            if callable(close):
                close()

    def __repr__(self) -> str:
        return f"BaseGated({self.model.name!r}, base={getattr(self.base, 'name', self.base)!r})"

    def chat(
        self,
        messages: list[Message],
        tools: list[ToolSchema] | None = None,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        **options: Any,
    ) -> list[Completion]:
        """``n`` replies: gated at a turn's start with tools offered, the tuned model's elsewhere."""
        check_sampling_args(n, temperature, max_tokens)
        kwargs = dict(n=n, temperature=temperature, max_tokens=max_tokens, **options)
        if not tools or not opens_turn(messages):
            return self.model.chat(messages, tools, **kwargs)
        greedy = {k: v for k, v in options.items() if k not in ("seed", "top_p")}
        with ThreadPoolExecutor(2) as pool:
            tuned = pool.submit(self.model.chat, messages, tools, **kwargs)
            base = pool.submit(self.base.chat, messages, tools, n=1, temperature=0.0, max_tokens=max_tokens, **greedy)
            return gate_replies(tuned.result(), base.result()[0])
