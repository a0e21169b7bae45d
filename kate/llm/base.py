"""The one model-client seam: ``ChatModel.chat(messages, tools, n, ...) -> list[Completion]``.

Every part of kate that needs a model takes a ``ChatModel`` as an argument; nothing reaches for a
global. Backends (``openai``, ``hf``, ``llamacpp``, ``fake``) are small files beside this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kate.toolcall import Parsed, ToolCall, parse_model_output

Message = dict[str, Any]  # OpenAI chat message: {"role": ..., "content": ..., ...}
ToolSchema = dict[str, Any]  # OpenAI tool: {"type": "function", "function": {name, description, parameters}}


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    token_id: int | None = None
    top: tuple[tuple[str, float], ...] = ()  # the most likely tokens here and their logprobs (top_logprobs)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, those the engine's prefix cache held (not computed again)

    def __add__(self, other: "Usage") -> "Usage":
        """Both requests' tokens (a reply that cost two requests, e.g. two prompt forms or two models)."""
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.cached_tokens + other.cached_tokens)


@dataclass(frozen=True)
class Completion:
    """One sampled answer: its text, the tool calls parsed from it, and what it cost.

    ``parse_error`` is set when the model tried to call a tool and the call was malformed: a
    recorded failure, never an exception.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    parse_error: str | None = None
    finish_reason: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    usage: Usage = field(default_factory=Usage)

    @property
    def sum_logprob(self) -> float | None:
        """Summed log-probability of the sampled tokens (a tie-breaker for votes), when known."""
        if self.logprobs is None:
            return None
        return sum(t.logprob for t in self.logprobs)

    def to_message(self) -> Message:
        """The assistant message to append to a chat history."""
        from kate.toolcall import to_openai_tool_calls

        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = to_openai_tool_calls(self.tool_calls)
        return message


class EngineError(RuntimeError):
    """The local engine failed on one request (a decode that found no room, a closed model): that
    request's failure; a run records it for its item and redoes the item on resume."""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model client. ``n`` completions of one prompt per call."""

    name: str

    def chat(
        self,
        messages: list[Message],
        tools: list[ToolSchema] | None = None,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        stop: list[str] | None = None,
        logprobs: bool = False,
    ) -> list[Completion]: ...


# Per-call options beyond the protocol's, that a client may take as keyword arguments of ``chat``.
# A client lists the ones it honours in ``options``; ``supports`` asks. The server and the client
# wrapper pass a request's ``top_p``, ``top_logprobs``, ``tool_choice`` or an assistant ``prefill``
# (text the answer must start with; the returned text includes it) only to clients that take them.
# ``stop_after_call``: end each sample once its text holds a whole first call (kate.toolcall.first_call_complete);
# a one-call step's samplers ask for it, since nothing after the first call is part of the step.
EXTRA_OPTIONS = ("top_p", "top_logprobs", "prefill", "tool_choice", "stop_after_call")


def supports(model: object, option: str) -> bool:
    """Whether ``model.chat`` takes the extra keyword ``option`` (one of ``EXTRA_OPTIONS``)."""
    if option not in EXTRA_OPTIONS:
        raise ValueError(f"unknown option {option!r}; known: {EXTRA_OPTIONS}")
    return option in getattr(model, "options", ())


def completion_from_text(
    text: str,
    *,
    formats: tuple[str, ...] = ("hermes", "json"),
    finish_reason: str | None = None,
    logprobs: tuple[TokenLogprob, ...] | None = None,
    usage: Usage | None = None,
    tools: list[ToolSchema] | None = None,
) -> Completion:
    """Build a Completion, parsing tool calls out of the text with the strict parsers (``tools``: the
    offered tools, whose parameter order binds positional arguments of Python calls)."""
    positional = {f["name"]: list((f.get("parameters") or {}).get("properties") or {})
                  for f in (t.get("function", t) for t in tools or []) if isinstance(f, dict) and "name" in f
                  } if "python_list" in formats else None  # only Python calls take positional arguments
    parsed: Parsed = parse_model_output(text, formats=formats, positional=positional or None)
    return Completion(
        text=text,
        tool_calls=parsed.calls,
        parse_error=parsed.error,
        finish_reason=finish_reason,
        logprobs=logprobs,
        usage=usage or Usage(),
    )


def check_sampling_args(n: int, temperature: float, max_tokens: int) -> None:
    """Clear errors at the boundary instead of an engine's cryptic one."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
