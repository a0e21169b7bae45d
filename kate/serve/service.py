"""One chat-completions request answered by kate's policy: the thin shell the server and the client
wrapper share (``ChatService.complete(request) -> chat.completion dict``).

Per request: the policy is kate's ``Policy`` (the same object the loop, ``kate eval`` and the
benchmarks run), made of the served model with the request's options (``RequestModel``), a
sampler for the request's width and vote, and the turn's knowledge (``ServedKnowledge``). Each of
the request's ``n`` choices is one policy step (seeds ``seed``, ``seed + 1``, ...). With width 1
and ``n > 1`` the ``n`` choices are the ``n`` samples of one engine call, as an OpenAI-compatible
server gives them, so a client that votes by itself (the wrapper over a kate server) sees the same
samples an in-process width sampler would.

Settings: ``width`` (N voted over; 1 = no vote), ``vote``, ``temperature`` of width samples
(a request's ``temperature`` overrides it; with width 1 and no temperature, decoding is greedy),
``max_tokens`` when the request gives none. ``gate``: a probe-triggered gate (``kate.sampling.gate``)
made around each request's sampler (``gate(inner=sampler)``), so the belief decides what the answer
starts with before the sampler and its vote act; a request that forces a call (``tool_choice``) is
not gated. What the gate saw and did comes back per choice in the ``kate`` field (``gate``).
``answer_repeats``: a chosen call that repeats or feeds back a call the history already made this
turn is answered instead (``kate.serve.answers``; ``kate.turn_end`` per choice says so).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings, help_meta
from kate.llm.base import ChatModel
from kate.sampling.adaptive import AdaptiveWidthSampler
from kate.sampling.policy import GreedySampler, Sampler, SamplesSampler, WidthSampler, first_call_only
from kate.serve.answers import answer_instead
from kate.serve.errors import APIError, bad_request
from kate.serve.knowledge import ServedKnowledge
from kate.serve.request import ADAPTIVE_VOTE, ChatRequest
from kate.serve.request_model import RequestModel
from kate.serve.response import choice_dict, completion_dict
from kate.toolcall.format import HERMES_OPENING



@dataclass(frozen=True)
class ServeSettings:
    width: int = field(default=8, metadata=help_meta("samples voted over per choice when a request names none; 1: no vote"))
    vote: str = field(default="valid_majority", metadata=help_meta(
        "the vote over width samples when a request names none (kate.sampling's aggregates, or adaptive)"))
    temperature: float = field(default=1.0, metadata=help_meta("temperature of width samples; a request's own wins"))
    max_tokens: int = field(default=512, metadata=help_meta("completion tokens when a request gives no max_tokens"))
    call_opening: str = field(default=HERMES_OPENING, metadata=help_meta(
        "how the engine's chat template opens a call: the prefill of a call a request forces"))
    report: bool = field(default=True, metadata=help_meta("add the kate field (vote, knowledge, turn end) to responses"))
    answer_repeats: bool = field(default=True, metadata=help_meta(
        "a chosen call that repeats or feeds back a call of the request's current turn is answered instead "
        "(kate.serve.answers); needs an engine that takes prefill="))


@dataclass
class ChatService:
    """``model_for(name)`` gives the client of a requested model (``APIError`` 404 when unknown)."""

    model_for: Callable[[str], ChatModel]
    knowledge: ServedKnowledge | None = None
    settings: ServeSettings = field(default_factory=ServeSettings)
    gate: Callable[..., Sampler] | None = None  # gate(inner=sampler) -> the gated sampler (kate.sampling.gate)

    def sampler(self, request: ChatRequest, width: int, vote: str) -> Sampler:
        max_tokens = request.max_tokens or self.settings.max_tokens
        temperature = self.settings.temperature if request.temperature is None else request.temperature
        if width == 1 and request.temperature in (None, 0, 0.0):
            return GreedySampler(max_tokens)
        if width == 1:
            temperature = request.temperature
        if vote == ADAPTIVE_VOTE:
            return AdaptiveWidthSampler(n=width, first=min(2, width), temperature=temperature, max_tokens=max_tokens)
        return WidthSampler(n=width, temperature=temperature, aggregate=vote, max_tokens=max_tokens)

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        inner = self.model_for(request.model)
        width = request.kate.n or self.settings.width
        vote = request.kate.vote or self.settings.vote
        forced = request.tool_choice == "required" or request.forced_function is not None
        if forced and vote == "critic" and width > 1:
            raise bad_request("tool_choice that forces a call cannot be combined with the critic vote", "tool_choice")
        model = RequestModel.for_request(inner, request, call_opening=self.settings.call_opening)
        knowledge = self.knowledge.for_request(request.kate) if self.knowledge is not None else None
        sampler = self.sampler(request, width, vote)
        gated = self.gate is not None and not forced
        if gated:
            sampler = self.gate(inner=sampler)  # type: ignore[misc]
        policy = Policy(model, sampler, knowledge, LoopSettings())  # one step: the served turn end is below
        tools = None if request.tool_choice == "none" else request.tools
        context = KnowledgeContext("serve", tools=tuple(t["function"] for t in request.tools or ()))
        seed = request.seed % 2**63 if request.seed is not None else random.randrange(2**31)
        one_call = not request.parallel_tool_calls
        if width == 1 and request.n > 1 and not gated:
            return self._samples(request, policy, tools, context, seed, one_call)
        choices, usage, votes, retrieved, gates, ends = [], [0, 0, 0], [], None, [], []
        for i in range(request.n):
            done = policy.step(request.messages, tools, seed=seed + i, context=context, one_call=one_call)
            step, retrieved = done.step, done.retrieved
            shown = step.completions[step.vote.chosen.samples[0] if step.vote is not None else 0]
            calls, text = self._calls(request, step.calls), step.text
            asked = None
            if self.settings.answer_repeats and not forced and tools:
                candidates = step.calls or first_call_only(shown, getattr(model, "formats", None)).tool_calls
                asked = answer_instead(model, done.prompt, tools, candidates, seed=seed + i,
                                       max_tokens=request.max_tokens or self.settings.max_tokens)  # fmt: skip
            if asked is not None:
                shown, ends_here = asked
                calls, text = (), shown.text
                usage[1] += shown.usage.completion_tokens
            ends.append(ends_here if asked is not None else None)
            choices.append(choice_dict(i, shown, calls, text, request.logprobs and asked is None))
            usage = [max(usage[0], step.usage.prompt_tokens), usage[1] + step.usage.completion_tokens,
                     max(usage[2], step.usage.cached_tokens)]  # fmt: skip
            votes.append(None if step.vote is None else step.vote.to_dict())
            if step.parse_error:
                votes[-1] = {**(votes[-1] or {}), "parse_error": step.parse_error}
            gates.append(getattr(step, "gate", None))
        report = self._report(width, vote, votes, retrieved)
        if report is not None and gated:
            report["gate"] = gates
        if report is not None and any(ends):
            report["turn_end"] = ends
        return completion_dict(request.model, choices, _usage(*usage), report)

    def _samples(self, request: ChatRequest, policy: Policy, tools, context, seed: int, one_call: bool) -> dict[str, Any]:
        """Width 1, ``n`` choices: one engine call of ``n`` samples (what an OpenAI server returns)."""
        sampler = policy.sampler
        samples = SamplesSampler(n=request.n, temperature=getattr(sampler, "temperature", 0.0),
                                 max_tokens=sampler.max_tokens, logprobs=request.logprobs)  # fmt: skip
        done = Policy(policy.model, samples, policy.knowledge, policy.settings).step(request.messages, tools, seed=seed, context=context,
                                                                   one_call=one_call)  # fmt: skip
        completions = done.step.completions
        choices = [choice_dict(i, c, self._calls(request, c.tool_calls), c.text, request.logprobs)
                   for i, c in enumerate(completions)]  # fmt: skip
        usage = _usage(done.step.usage.prompt_tokens, done.step.usage.completion_tokens, done.step.usage.cached_tokens)
        return completion_dict(request.model, choices, usage,
                               self._report(1, None, [None] * len(choices), done.retrieved))

    @staticmethod
    def _calls(request: ChatRequest, calls: tuple) -> tuple:
        if request.tool_choice == "none":
            return ()
        forced = request.forced_function
        if request.tool_choice == "required" and not calls:
            raise APIError(500, "tool_choice is 'required' but the model answered without a call", code="no_call")
        if forced is not None and (not calls or any(c.name != forced for c in calls)):
            raise APIError(500, f"tool_choice names {forced!r} but the model did not call it (only it)",
                           code="no_call")  # fmt: skip
        return calls

    def _report(self, width: int, vote: str | None, votes: list, retrieved) -> dict[str, Any] | None:
        if not self.settings.report:
            return None
        knowledge = None
        if retrieved is not None:
            knowledge = {"query": retrieved.query, "intent": retrieved.intent,
                         "hits": [{k: h.get(k) for k in ("id", "type", "score")} for h in retrieved.hits],
                         "text": retrieved.text}  # fmt: skip
            if retrieved.skipped:
                knowledge["skipped"] = retrieved.skipped
        return {"width": width, "vote": vote, "votes": votes, "knowledge": knowledge}


def _usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """OpenAI's usage object; ``prompt_tokens_details.cached_tokens``: what the engine's prefix cache held."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}  # fmt: skip
