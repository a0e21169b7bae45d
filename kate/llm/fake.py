"""A scripted chat model for unit tests of logic (loops, votes, retrieval hooks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.llm.base import Completion, Message, ToolSchema, Usage, check_sampling_args, completion_from_text
from kate.toolcall import first_call_end

Script = str | Sequence[str] | Callable[[list[Message], list[ToolSchema] | None, int], Sequence[str]]


@dataclass
class FakeChatModel:
    """Answers each ``chat`` call with the next item of ``script``.

    An item is a string (every one of the n completions gets it), a list of n strings, or a
    callable ``(messages, tools, n) -> list[str]``. When the script runs out, the last item repeats
    if ``repeat_last`` is set, otherwise the call raises (a test asked more than it scripted).
    Every request is kept in ``requests`` for assertions.
    """

    script: list[Script] = field(default_factory=list)
    name: str = "fake"
    repeat_last: bool = False
    formats: tuple[str, ...] = ("hermes", "json")
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The extra chat() keywords it claims to take (kate.llm.base.supports); ("prefill",) makes it
    # return the prefill followed by the scripted text, as the local engines do.
    options: tuple[str, ...] = ()  # ("stop_after_call",): each text cut at its first whole call, as the engine stops

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
        prefill: str | None = None,
        stop_after_call: bool = False,
    ) -> list[Completion]:
        check_sampling_args(n, temperature, max_tokens)
        if prefill is not None and "prefill" not in self.options:
            raise TypeError("FakeChatModel: prefill= given, but 'prefill' is not in options")
        if stop_after_call and "stop_after_call" not in self.options:
            raise TypeError("FakeChatModel: stop_after_call= given, but 'stop_after_call' is not in options")
        self.requests.append(
            {
                "messages": [dict(m) for m in messages],
                "tools": tools,
                "n": n,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "seed": seed,
                "stop": stop,
                "logprobs": logprobs,
                "prefill": prefill,
                "stop_after_call": stop_after_call,
            }
        )
        index = len(self.requests) - 1
        if index >= len(self.script):
            if not (self.repeat_last and self.script):
                raise IndexError(f"FakeChatModel: request {index + 1} but only {len(self.script)} scripted")
            index = len(self.script) - 1
        texts = [(prefill or "") + t for t in self._texts(self.script[index], messages, tools, n)]
        if stop_after_call:  # as the local engine: each text ends at its first whole call
            texts = [t[: first_call_end(t, len(prefill or "")) or len(t)] for t in texts]
        usage = Usage(prompt_tokens=sum(len(str(m.get("content") or "")) for m in messages))
        return [
            completion_from_text(
                text,
                formats=self.formats,
                finish_reason="stop",
                usage=Usage(usage.prompt_tokens, len(text)),
            )
            for text in texts
        ]

    @staticmethod
    def _texts(item: Script, messages: list[Message], tools: list[ToolSchema] | None, n: int) -> list[str]:
        if isinstance(item, str):
            return [item] * n
        texts = list(item(messages, tools, n)) if callable(item) else list(item)
        if len(texts) != n:
            raise ValueError(f"FakeChatModel: scripted {len(texts)} completions for n={n}")
        return texts
