"""Brief reasoning: a bounded thought before the answer, as a ``ChatModel`` that
wraps another (modules compose by wrapping, as DSPy's do).

``BriefReasoning(model, budget=32).chat(...)`` asks ``model`` twice: first for ``n`` thoughts, each
the continuation of ``opener`` ("<think>\\n") of at most ``budget`` tokens, stopped at the closer;
then, for each thought, for the answer, prefilled with ``opener + thought + closer`` (and the
caller's own ``prefill`` after it), the ``n`` answers asked from threads at once so that a local
engine's scheduler decodes them together. The returned completions hold the answer part only: its
text (starting with the caller's prefill, as every prefilling client's does; where the model
went on thinking and wrote a closer itself, what follows its last one), the tool calls parsed
from it, its finish reason and logprobs. The thought never reaches the call or the history a loop
keeps (``Completion.to_message`` is built from the text). ``Completion`` has no field for it, so
it is not kept. Usage: the prompt once (the thought request's), both phases' generated tokens.

The inner model must take ``prefill=`` (llamacpp, hf, fake with ``options=("prefill",)``); any
other is refused when the wrapper is made. Nothing here evaluates model output.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kate.llm.base import (
    ChatModel,
    Completion,
    Message,
    ToolSchema,
    Usage,
    check_sampling_args,
    completion_from_text,
    supports,
)

DEFAULT_FORMATS = ("hermes", "json")
SEED_STRIDE = 1_000_003  # answer seeds apart from the thought's and from callers' seed + 1, seed + 2, ...


def answer_seed(seed: int, i: int) -> int:
    """The seed of answer ``i``: not the thought request's, nor another step's or draw's ``seed + k``."""
    return (seed + SEED_STRIDE * (i + 1)) % 2**63
THOUGHT_OPTIONS = ("top_p",)  # the caller's extra options the thought request takes too (the rest: the answer's)


class BriefReasoning:
    """``model`` thinking at most ``budget`` tokens before each answer; the thought is left out of
    the returned text and calls. ``name``: null gives ``<inner name>+brief<budget>``."""

    def __init__(
        self,
        model: ChatModel,
        *,
        budget: int = 32,
        opener: str = "<think>\n",
        closer: str = "\n</think>\n",
        name: str | None = None,
    ) -> None:
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise ValueError(f"budget must be a positive integer (tokens of the thought), got {budget!r}")
        if not closer.strip():
            raise ValueError("closer must hold more than whitespace: its stripped text stops the thought")
        if not supports(model, "prefill"):
            raise ValueError(
                f"brief reasoning prefills the thought and the answer, but model {getattr(model, 'name', model)!r} "
                "does not take prefill= (use a client that does: llm=llamacpp, llm=hf)"
            )
        self.model = model
        self.budget = budget
        self.opener = opener
        self.closer = closer
        self.name = name if name is not None else f"{model.name}+brief{budget}"
        self.formats = tuple(getattr(model, "formats", DEFAULT_FORMATS))
        # not stop_after_call: the answer's prefill holds the thought, which may itself hold a call's text
        self.options = tuple(dict.fromkeys(("prefill", *(o for o in getattr(model, "options", ())
                                                          if o != "stop_after_call"))))

    def __getattr__(self, item: str) -> Any:  # path, lora_sha256, close(): what identities and runs read
        if item == "model":
            raise AttributeError(item)
        return getattr(self.model, item)

    def runtime(self) -> dict[str, Any]:
        own = getattr(self.model, "runtime", None)
        info = dict(own()) if callable(own) else {}
        info["brief_reasoning"] = {"budget": self.budget, "opener": self.opener, "closer": self.closer}
        return info

    def __repr__(self) -> str:
        return f"BriefReasoning({self.model.name!r}, budget={self.budget})"

    # ----------------------------------------------------------------------------- chat
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
        **options: Any,
    ) -> list[Completion]:
        """``n`` answers, each after its own thought (see the module's docstring)."""
        check_sampling_args(n, temperature, max_tokens)
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"{self.name}: chat() got options its model does not take: {unknown}")
        thought_options = {k: v for k, v in options.items() if k in THOUGHT_OPTIONS}
        thoughts = self.model.chat(
            messages, tools, n=n, temperature=temperature, max_tokens=self.budget, seed=seed,
            stop=[self.closer.strip()], prefill=self.opener, **thought_options,
        )  # fmt: skip
        texts = [self.thought_of(t.text) for t in thoughts]
        after = prefill or ""

        def answer(i: int) -> Completion:
            [reply] = self.model.chat(
                messages, tools, n=1, temperature=temperature, max_tokens=max_tokens,
                seed=None if seed is None else answer_seed(seed, i), stop=stop, logprobs=logprobs,
                prefill=self.opener + texts[i] + self.closer + after, **options,
            )  # fmt: skip
            return reply

        if len(texts) == 1:
            replies = [answer(0)]
        else:
            with ThreadPoolExecutor(max_workers=len(texts)) as pool:
                replies = list(pool.map(answer, range(len(texts))))
        return [self._answer_only(t, r, text, after) for t, r, text in zip(thoughts, replies, texts)]

    def thought_of(self, text: str) -> str:
        """The thought a prefilled reply holds: the opener taken off, cut at the closer if it is
        there (an engine that does not honour ``stop``), surrounding whitespace stripped."""
        if text.startswith(self.opener):
            text = text[len(self.opener) :]
        end = text.find(self.closer.strip())
        if end >= 0:
            text = text[:end]
        return text.strip()

    def after_own_closer(self, answer: str, after: str) -> str:
        """A model that kept thinking in its answer and closed the thought itself: what follows its
        last closer (the caller's prefill ``after`` still first)."""
        own = answer[len(after) :] if answer.startswith(after) else answer
        mark = self.closer.strip()
        end = own.rfind(mark)
        if end < 0:
            return answer
        return after + own[end + len(mark) :].lstrip()

    def _answer_only(self, thought: Completion, reply: Completion, text: str, after: str) -> Completion:
        """The reply with the opener, thought and closer taken off its text and its calls parsed
        again from what is left; usage of both phases."""
        head = self.opener + text + self.closer
        answer = reply.text[len(head) :] if reply.text.startswith(head) else reply.text
        cut = self.after_own_closer(answer, after)
        logprobs = reply.logprobs if cut == answer else None  # they would cover the dropped thought too
        answer = cut
        usage = Usage(
            prompt_tokens=thought.usage.prompt_tokens,
            completion_tokens=thought.usage.completion_tokens + reply.usage.completion_tokens,
            cached_tokens=thought.usage.cached_tokens,
        )
        return completion_from_text(
            answer, formats=self.formats, finish_reason=reply.finish_reason, logprobs=logprobs, usage=usage,
        )  # fmt: skip
