"""Per-step action selection: a ``Sampler`` turns the history into one ``Step`` (calls or answer).

Greedy (one sample, temperature 0), width (ONE request with ``n=N``, then a vote) and depth (a
depth prompt before acting; it wraps greedy by default, or any other sampler). ``one_call`` is an
argument of ``act``, not a field, so that a sampler wrapping another passes it on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, Usage, supports
from kate.sampling.depth import ALL_KINDS, normalize_kinds, with_depth_prompt
from kate.sampling.vote import AGGREGATORS, Vote
from kate.toolcall import ToolCall, parse_first_call
from kate.toolcall.parse_python import starts_python_call


@dataclass(frozen=True)
class Step:
    """What a sampler decided: ``calls`` (empty = answer with ``text``) and what it saw.

    ``parse_error`` is set when the chosen output was a malformed call (no calls then).
    ``usage``: the request's prompt tokens once, the completion tokens of every sample, plus
    the aggregation's own cost (a critic request).
    """

    calls: tuple[ToolCall, ...]
    text: str
    completions: tuple[Completion, ...]
    vote: Vote | None = None
    usage: Usage = Usage()
    parse_error: str | None = None


@runtime_checkable
class Sampler(Protocol):
    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step: ...


def request_usage(completions: Sequence[Completion], extra: Usage = Usage()) -> Usage:
    """One request's cost: its prompt tokens once, every sample's completion tokens, plus ``extra``."""
    prompt = max((c.usage.prompt_tokens for c in completions), default=0)
    cached = max((c.usage.cached_tokens for c in completions), default=0)
    completion = sum(c.usage.completion_tokens for c in completions)
    return Usage(prompt + extra.prompt_tokens, completion + extra.completion_tokens, cached + extra.cached_tokens)


def one_call_options(model: ChatModel, one_call: bool) -> dict[str, bool]:
    """A greedy one-call step's extra ``chat`` option: the reply ends at its first whole call where the
    client can stop there (``stop_after_call``). Nothing after that call is part of the step, so the
    step is the same (bench/results/first_call_stop.json replays the committed dialogues)."""
    return {"stop_after_call": True} if one_call and supports(model, "stop_after_call") else {}


def _require(completions: list[Completion], model: ChatModel, one_call: bool = False) -> tuple[Completion, ...]:
    if not completions:
        raise RuntimeError(f"model {getattr(model, 'name', model)!r} returned no completion")
    formats = getattr(model, "formats", None)
    return tuple(first_call_only(c, formats) for c in completions) if one_call else tuple(completions)


def first_call_only(completion: Completion, formats: Sequence[str] | None = None) -> Completion:
    """The completion's action reduced to its first call (what follows it is not part of the step).

    Small models asked for one call often write a run of them until the token limit cuts the
    last one; in one-call mode only the first call counts, and a cut tail is not a failure.
    ``formats``: the model's call formats; a reply in the Python form (``python_list``) keeps its first call.
    """
    if formats is not None and "python_list" in formats and (tuple(formats) == ("python_list",)
                                                             or starts_python_call(completion.text)):
        return replace(completion, tool_calls=completion.tool_calls[:1])
    if completion.text and ("<tool_call>" in completion.text or "{" in completion.text):
        parsed = parse_first_call(completion.text)
        return replace(completion, tool_calls=parsed.calls, parse_error=parsed.error)
    return replace(completion, tool_calls=completion.tool_calls[:1])


@dataclass(frozen=True)
class GreedySampler:
    """One sample at temperature 0."""

    max_tokens: int = field(default=256, metadata={"help": "token limit of the sample"})

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        completions = _require(
            model.chat(messages, tools, n=1, temperature=0.0, max_tokens=self.max_tokens, seed=seed,
                       **one_call_options(model, one_call)),
            model,
            one_call,
        )
        first = completions[0]
        return Step(first.tool_calls, first.text, completions, None, request_usage(completions[:1]), first.parse_error)


@dataclass(frozen=True)
class WidthSampler:
    """``n`` samples from ONE request (``n=N``), aggregated by ``aggregate``: "valid_majority"
    (the most votes among the candidates that fit the tools' schemas), "filled_majority" (and carry
    no placeholder copied from a shown example), "majority" or "critic".

    Log-probabilities are requested so that vote ties break by sequence likelihood (of the whole sample:
    samples are not stopped at their first call, as a greedy one-call step's is, which would change ties).
    """

    n: int = field(default=8, metadata={"help": "samples drawn in the one request and voted over"})
    temperature: float = field(default=1.0, metadata={"help": "temperature of the samples"})
    aggregate: str = field(default="valid_majority", metadata={"help": (
        "the vote: valid_majority (calls that fit the tools' schemas first) | filled_majority (and carry no "
        "copied example placeholder) | majority | critic (the model picks)")})
    max_tokens: int = field(default=256, metadata={"help": "token limit of each sample"})
    logprobs: bool = field(default=True, metadata={"help": "request log-probabilities: vote ties break by sequence "
                                                           "likelihood"})
    critic_max_tokens: int = field(default=16, metadata={"help": "token limit of the critic's pick (aggregate=critic)"})

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATORS:
            raise ValueError(f"unknown aggregate {self.aggregate!r}; known: {sorted(AGGREGATORS)}")
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be a positive integer, got {self.n!r}")

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        completions = _require(
            model.chat(messages, tools, n=self.n, temperature=self.temperature, max_tokens=self.max_tokens,
                       seed=seed, logprobs=self.logprobs),
            model,
            one_call,
        )
        vote = AGGREGATORS[self.aggregate](
            model, messages, tools, completions, max_tokens=self.critic_max_tokens, seed=seed
        )
        shown = completions[vote.chosen.samples[0]]
        usage = request_usage(completions, vote.usage)
        if vote.failed:
            return Step((), shown.text, completions, vote, usage, shown.parse_error)
        return Step(vote.chosen.calls, shown.text, completions, vote, usage, None)


@dataclass(frozen=True)
class SamplesSampler:
    """``n`` samples of one request, not voted: the step is the first sample and ``completions``
    holds all ``n`` (what an OpenAI-compatible server returns for ``n`` choices)."""

    n: int = 1
    temperature: float = 0.0
    max_tokens: int = 256
    logprobs: bool = False

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        completions = _require(
            model.chat(messages, tools, n=self.n, temperature=self.temperature, max_tokens=self.max_tokens,
                       seed=seed, logprobs=self.logprobs),
            model,
            one_call,
        )
        first = completions[0]
        return Step(first.tool_calls, first.text, completions, None, request_usage(completions), first.parse_error)


@dataclass(frozen=True)
class DepthSampler:
    """The depth prompt appended for the request only; then ``inner`` (greedy by default) acts."""

    kinds: tuple[str, ...] = field(default=ALL_KINDS, metadata={"help": "depth prompts appended: state | reflection | intent"})
    max_tokens: int = field(default=256, metadata={"help": "token limit of the default (greedy) inner sampler"})
    inner: Sampler | None = field(default=None, metadata={"help": "the sampler that acts on the prompted request "
                                                                  "(a conf/sampling/ node); null: greedy"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", normalize_kinds(self.kinds))

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        inner = self.inner if self.inner is not None else GreedySampler(self.max_tokens)
        return inner.act(model, with_depth_prompt(messages, self.kinds), tools, seed=seed, one_call=one_call)
