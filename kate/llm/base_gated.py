"""A tuned model whose decision to call at all is its base model's, as a ``ChatModel`` that wraps
two others (modules compose by wrapping, as DSPy's do).

A model tuned to answer after tool results (the GRPO-answers adapter) also learned to call where
no tool is due; its base model still declines there. ``BaseGated(tuned, base).chat(...)`` asks:

* at the first step of a user request with tools offered (the last message is the user's, and not
  a loop's feedback on an unreadable reply, such as kate's note after a malformed call): the tuned
  model for its ``n`` samples and the base model for one greedy reply, at once (two threads: two
  local engines decode side by side). Where the base's reply makes no call (it declines: no tool
  is due), that reply is returned ``n`` times; otherwise the tuned model's samples, except that a
  sample with no call (a plain answer, where the base would call) is replaced by the base's reply.
  So whether to call is the base's decision, not dependent on the temperature, and what to call
  is the tuned model's wherever it made a call. (The GRPO-answers adapter sometimes answers from
  memory where a tool is due: "The price of ACME stock is $100.")
* anywhere else (after a tool result or such feedback, with no tools): the tuned model alone.

``base_several``: where the base's reply makes several calls that the offered tools can make (each
names a tool, with its parameters and their types) and a tuned sample fewer (a malformed sample
counts none), the base's reply stands for that sample. Meant for a base asked in both tool
forms (``tool_prompt=both`` with the several-calls gate, kate.llm.tool_prompt): the base writes
several calls in BFCL's Python form where a request needs them, and the adapter, trained on one-call
JSON replies, often writes one. Chosen on the training half (bench/base_gate_replay.py,
docs/training.md).

``tools_fit``: a gate on the request and the offered tools (kate.retrieval.relevance.ToolRelevanceGate:
does the request read like any tool's description?). Where it says no tool fits, at a turn's start,
the base model is asked without the tools and its reply is returned ``n`` times; the tuned model is
not asked.

``base_malformed`` says what a malformed call of the base is: ``keep`` (a reply with no readable
call, kept, as BFCL scores it) or ``tuned`` (an attempt to call: the tuned model's samples at once).
Under ``keep``, when a loop then sends the kept reply back with its feedback (kate's note on an
unreadable reply), the step is the tuned model's samples for the turn's start, the ones drawn beside
the base, not a reply to the note: the broken text is the base's, and the tuned model was never
trained on such notes (shown one, the GRPO-answers adapter called another tool). They are kept for
the last 64 kept replies; a reply sent back after that is answered by the tuned model as any other.

Usage: the first returned reply carries the base's tokens as well as its own; the other replies
their own, so summed over the replies, each computed token is counted once. Nothing here
evaluates model output.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, Usage, check_sampling_args, completion_from_text
from kate.toolcall.expressible import calls_expressible, schemas_by_name

ToolsFit = Callable[[list[Message], list[ToolSchema]], bool]  # does any offered tool fit the request?


def opens_turn(messages: list[Message], formats: tuple[str, ...] = ("hermes", "json")) -> bool:
    """Whether the model is asked for the first step of a user request: the last message is the user's,
    and not feedback on an unreadable reply (the assistant message before it holds no malformed call)."""
    if not messages or messages[-1].get("role") != "user":
        return False
    before = messages[-2] if len(messages) > 1 else {}
    if before.get("role") != "assistant" or before.get("tool_calls"):
        return True
    return completion_from_text(str(before.get("content") or ""), formats=formats).parse_error is None


BASE_MALFORMED = ("keep", "tuned")
KEPT_REPLIES = 64  # the last kept malformed replies whose tuned samples are held for the loop's retry


def turn_key(messages: list[Message], tools: list[ToolSchema] | None, text: str) -> str:
    """A digest of a turn's start (its messages and tools) and the reply kept there."""
    blob = json.dumps([messages, tools, text], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def declines(reply: Completion, base_malformed: str = "keep") -> bool:
    """A reply that makes no call; with ``base_malformed="tuned"`` also one that did not try to (no
    malformed call)."""
    return not reply.tool_calls and (base_malformed == "keep" or reply.parse_error is None)


def gate_replies(tuned: list[Completion], base: Completion, base_malformed: str = "keep",
                 base_several: bool = False, tools: list[ToolSchema] | None = None) -> list[Completion]:  # fmt: skip
    """The base's reply (once per sample) where it declines, else the tuned model's samples, each one
    that makes no call (nor a malformed one) replaced by the base's reply, and with ``base_several``
    each one with fewer calls than the base's several (calls ``tools`` can make; any, without tools);
    the first reply carries the base's usage too."""
    base_declined = declines(base, base_malformed)
    several = base_several and len(base.tool_calls) >= 2 and (
        tools is None or calls_expressible([c.to_dict() for c in base.tool_calls], schemas_by_name(tools)))

    def base_stands(t: Completion) -> bool:
        return base_declined or not attempts_call(t) or (several and len(t.tool_calls) < len(base.tool_calls))

    out = [replace(base, usage=t.usage) if base_stands(t) else t for t in tuned]
    return [replace(out[0], usage=out[0].usage + base.usage), *out[1:]]


def attempts_call(reply: Completion) -> bool:
    """A reply that calls, or tries to (a malformed call)."""
    return bool(reply.tool_calls) or reply.parse_error is not None


class BaseGated:
    """``tuned``'s replies, except that at a turn's start ``base`` decides whether to call (see the
    module's docstring). ``name``: null gives ``<tuned name>+base-gate``."""

    def __init__(self, tuned: ChatModel, base: ChatModel, *, base_malformed: str = "keep",
                 base_several: bool = False, tools_fit: ToolsFit | None = None,
                 name: str | None = None) -> None:  # fmt: skip
        if base_malformed not in BASE_MALFORMED:
            raise ValueError(f"base_malformed must be one of {BASE_MALFORMED}, got {base_malformed!r}")
        self.base_malformed = base_malformed
        self.base_several = bool(base_several)
        if tools_fit is not None and not callable(tools_fit):
            raise TypeError(f"BaseGated: tools_fit must be callable (messages, tools) -> bool, got {tools_fit!r}")
        self.tools_fit = tools_fit
        for role, model in (("tuned", tuned), ("base", base)):
            if not callable(getattr(model, "chat", None)):
                raise TypeError(f"BaseGated: {role} must be a chat model (a chat() method), got {model!r}")
        self.model = tuned
        self.base = base
        self.name = name if name is not None else f"{tuned.name}+base-gate{'+several' if self.base_several else ''}"
        # what the replies are read as: the tuned model's formats, then the base's (its Python form, where asked)
        own = (*getattr(tuned, "formats", ("hermes", "json")), *getattr(base, "formats", ()))
        self.formats = tuple(dict.fromkeys(own))
        self._held: OrderedDict[str, list[Completion]] = OrderedDict()  # turn_key -> the tuned samples
        self._lock = threading.Lock()
        # not stop_after_call: the gate compares whole replies' call counts (base_several), which a stop would cut
        self.options = tuple(o for o in getattr(tuned, "options", ())
                             if o in getattr(base, "options", ()) and o != "stop_after_call")  # fmt: skip

    def __getattr__(self, item: str) -> Any:  # path, lora_sha256, tool_prompt: what identities and runs read
        if item in ("model", "base", "_held", "_lock", "tools_fit"):
            raise AttributeError(item)
        return getattr(self.model, item)

    def runtime(self) -> dict[str, Any]:
        own = getattr(self.model, "runtime", None)
        info = dict(own()) if callable(own) else {}
        base = getattr(self.base, "name", repr(self.base))
        info["base_gate"] = {"base": base, "base_malformed": self.base_malformed}
        if self.base_several:
            info["base_gate"]["base_several"] = True
            info["base_gate"]["base_tool_prompt"] = getattr(self.base, "tool_prompt", None)
        if self.tools_fit is not None:
            describe = getattr(self.tools_fit, "describe", None)
            info["base_gate"]["tools_fit"] = describe() if callable(describe) else repr(self.tools_fit)
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
        held = self._held_for(messages, tools, n)
        if held is not None:
            return held
        if not tools or not opens_turn(messages, self.formats):
            return self.model.chat(messages, tools, **kwargs)
        greedy = {k: v for k, v in options.items() if k not in ("seed", "top_p")}
        if self.tools_fit is not None and not self.tools_fit(messages, tools):  # no tool fits: none is offered
            [reply] = self.base.chat(messages, None, n=1, temperature=0.0, max_tokens=max_tokens, **greedy)
            return [reply, *[replace(reply, usage=Usage()) for _ in range(n - 1)]]
        with ThreadPoolExecutor(2) as pool:
            tuned = pool.submit(self.model.chat, messages, tools, **kwargs)
            base = pool.submit(self.base.chat, messages, tools, n=1, temperature=0.0, max_tokens=max_tokens, **greedy)
            tuned_replies, base_reply = tuned.result(), base.result()[0]
        if self.base_malformed == "keep" and declines(base_reply) and attempts_call(base_reply):  # kept, malformed
            self._hold(turn_key(messages, tools, base_reply.text), tuned_replies)
        return gate_replies(tuned_replies, base_reply, self.base_malformed, self.base_several, tools)

    def _hold(self, key: str, replies: list[Completion]) -> None:
        """Keep the tuned samples of a turn whose kept reply is the base's malformed call (no tokens
        counted again when they are returned: they were counted when drawn)."""
        with self._lock:
            self._held[key] = [replace(c, usage=Usage()) for c in replies]
            while len(self._held) > KEPT_REPLIES:
                self._held.popitem(last=False)

    def _held_for(self, messages: list[Message], tools: list[ToolSchema] | None, n: int) -> list[Completion] | None:
        """The held samples when ``messages`` send a kept malformed reply back with feedback on it."""
        if len(messages) < 3 or messages[-1].get("role") != "user" or messages[-2].get("role") != "assistant":
            return None
        key = turn_key(messages[:-2], tools, str(messages[-2].get("content") or ""))
        with self._lock:
            held = self._held.pop(key, None)
        return held if held is not None and len(held) == n else None
