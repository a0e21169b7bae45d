"""An act-first adaptive vote: draw a few samples, commit as soon as the outcome is settled, draw
more otherwise, up to ``n`` (after adaptive-consistency and TrACE).

Draws. The first draw has ``first`` samples (at ``first_temperature``, or ``temperature``); each
further draw ``step`` more at ``temperature``, until ``n``. With ``gate_logprob`` set, a greedy
sample comes first: when it is a schema-valid call (or an answer, if ``gate_answers``) whose mean
token log-probability is at least ``gate_logprob``, it is the step (``stop: "confident"``) and
nothing is sampled; otherwise it stays in the pool as one more sample.

Act first. Pooled with the calls, every answer-in-words sample is one candidate whatever its text,
while calls split by their arguments; so "no call" can win a plain majority when most samples
call. Here the step first decides between acting and answering: the samples whose candidate is a
choosable call (schema-valid under ``valid_majority``) against the no-call samples, ties to acting;
then, when it acts, the calls are voted among themselves (the aggregate's order). ``act_first=False``
keeps the plain pooled vote.

Stops (recorded on the vote as ``adaptive``: samples drawn, each draw's size, the stop reason):
``agreed`` (every choosable sample so far in one candidate, at least ``first`` of them),
``decided`` (the remaining samples could not change the outcome), ``max`` (``n`` drawn),
``confident`` (the gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema
from kate.sampling.policy import Step, _require, request_usage
from kate.sampling.vote import AGGREGATORS, Candidate, Vote

ADAPTIVE_AGGREGATES = ("valid_majority", "filled_majority", "majority")


def _choosable_calls(candidates: tuple[Candidate, ...]) -> list[Candidate]:
    return [c for c in candidates if c.kind == "call" and c.valid is not False]


def act_first(vote: Vote) -> tuple[Vote, int, int]:
    """(the vote with the act-or-answer decision applied, acting samples, answering samples)."""
    calls = _choosable_calls(vote.candidates)
    answer = next((c for c in vote.candidates if c.kind == "no_call"), None)
    acts, answers = sum(c.votes for c in calls), answer.votes if answer else 0
    if vote.failed:
        return vote, acts, answers
    if calls and acts >= answers and vote.chosen.kind != "call":
        return replace(vote, chosen=calls[0]), acts, answers
    if answer is not None and answers > acts and vote.chosen.kind == "call":
        return replace(vote, chosen=answer), acts, answers
    return vote, acts, answers


def settled(vote: Vote, remaining: int, acts: int, answers: int, use_act_first: bool) -> bool:
    """Whether ``remaining`` more samples could not change the chosen candidate (votes only)."""
    choosable = [c for c in vote.candidates if not c.malformed and c.valid is not False]
    if not choosable:
        return remaining == 0
    if not use_act_first:
        runner = max((c.votes for c in choosable if c.key != vote.chosen.key), default=0)
        return vote.chosen.votes - runner > remaining
    if vote.chosen.kind == "call":
        runner = max((c.votes for c in _choosable_calls(vote.candidates) if c.key != vote.chosen.key), default=0)
        return acts - answers >= remaining and vote.chosen.votes - runner > remaining
    return answers - acts > remaining


def _mean_logprob(completion: Completion) -> float | None:
    lps = [t.logprob for t in completion.logprobs or ()]
    return sum(lps) / len(lps) if lps else None


@dataclass(frozen=True)
class AdaptiveWidthSampler:
    """Up to ``n`` samples, drawn ``first`` then ``step`` at a time, voted after every draw; stops
    when the samples agree or the rest could not change the outcome (module docstring)."""

    n: int = field(default=8, metadata={"help": "most samples a step draws"})
    first: int = field(default=2, metadata={"help": "samples in the first draw"})
    step: int = field(default=2, metadata={"help": "samples in each further draw"})
    temperature: float = field(default=1.0, metadata={"help": "temperature of the draws after the first"})
    first_temperature: float | None = field(default=None, metadata={"help": "the first draw's temperature; null: "
                                                                           "temperature"})
    aggregate: str = field(default="valid_majority", metadata={"help": "the vote within calls: valid_majority | "
                                                                      "filled_majority | majority"})
    act_first: bool = field(default=True, metadata={"help": "decide acting vs answering over all samples first "
                                                            "(ties: act)"})
    gate_logprob: float | None = field(default=None, metadata={"help": "a greedy sample first, committed when its "
                                                                      "mean token logprob >= this; null: off"})
    gate_answers: bool = field(default=False, metadata={"help": "the gate may also commit a greedy answer in words "
                                                                "(not only a valid call)"})
    max_tokens: int = field(default=256, metadata={"help": "token limit of each sample"})
    logprobs: bool = field(default=True, metadata={"help": "request log-probabilities: vote ties break by sequence "
                                                           "likelihood"})

    def __post_init__(self) -> None:
        if self.aggregate not in ADAPTIVE_AGGREGATES:
            raise ValueError(f"unknown aggregate {self.aggregate!r}; the adaptive vote takes {ADAPTIVE_AGGREGATES}")
        for name in ("n", "first", "step"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.first > self.n:
            raise ValueError(f"first ({self.first}) must not exceed n ({self.n})")

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        logprobs = self.logprobs or self.gate_logprob is not None

        def draw(k: int, temperature: float, index: int) -> tuple[Completion, ...]:
            draw_seed = None if seed is None else seed * 1009 + index  # every draw its own samples
            return _require(model.chat(messages, tools, n=k, temperature=temperature, max_tokens=self.max_tokens,
                                       seed=draw_seed, logprobs=logprobs), model, one_call)  # fmt: skip

        def vote(pool: list[Completion]) -> Vote:
            return AGGREGATORS[self.aggregate](model, messages, tools, pool, seed=seed)

        return self.decide(draw, vote)

    def replay(self, samples: list[Completion], tools: list[ToolSchema] | None) -> Step:
        """What ``act`` would choose had the model written ``samples``, in order (stored width-N
        samples: kate.eval.revote). The greedy gate needs the model, so it cannot be replayed."""
        if self.gate_logprob is not None:
            raise ValueError("the greedy gate cannot be replayed from stored samples")
        if len(samples) < self.n:
            raise ValueError(f"{len(samples)} stored samples, the rule may draw {self.n}")
        taken = 0

        def draw(k: int, temperature: float, index: int) -> tuple[Completion, ...]:
            nonlocal taken
            taken += k
            return tuple(samples[taken - k : taken])

        return self.decide(draw, lambda pool: AGGREGATORS[self.aggregate](None, [], tools, pool))

    def decide(self, draw, vote_of) -> Step:
        """The draws and votes: ``draw(k, temperature, index)`` gives k samples, ``vote_of(pool)`` a Vote."""
        pool: list[Completion] = []
        draws: list[int] = []
        gate: dict[str, Any] | None = None
        if self.gate_logprob is not None:
            greedy = draw(1, 0.0, 0)
            pool += greedy
            draws.append(1)
            vote, acts, answers = self._act_first(vote_of(pool))
            confidence = _mean_logprob(greedy[0])
            gate = {"mean_logprob": confidence}
            fits = vote.chosen.kind == "call" and vote.chosen.valid is not False
            fits = fits or (self.gate_answers and vote.chosen.kind == "no_call")
            if fits and confidence is not None and confidence >= self.gate_logprob:
                return self._step(vote, pool, draws, "confident", acts, answers, gate)
        k, temperature, stop = min(self.first, self.n - len(pool)), self.first_temperature, "max"
        while k > 0:
            pool += draw(k, self.temperature if temperature is None else temperature, len(draws) + 1)
            draws.append(k)
            vote, acts, answers = self._act_first(vote_of(pool))
            remaining = self.n - len(pool)
            agreed = len({c.key for c in vote.candidates if not c.malformed}) == 1 and vote.chosen.valid is not False
            if agreed and not vote.failed and remaining > 0:
                stop = "agreed"
                break
            if remaining > 0 and settled(vote, remaining, acts, answers, self.act_first):
                stop = "decided"
                break
            k, temperature = min(self.step, remaining), None
        return self._step(vote, pool, draws, stop, acts, answers, gate)

    def _act_first(self, vote: Vote) -> tuple[Vote, int, int]:
        if self.act_first:
            return act_first(vote)
        calls = _choosable_calls(vote.candidates)
        answer = next((c for c in vote.candidates if c.kind == "no_call"), None)
        return vote, sum(c.votes for c in calls), answer.votes if answer else 0

    def _step(self, vote: Vote, pool: list[Completion], draws: list[int], stop: str, acts: int, answers: int,
              gate: dict[str, Any] | None) -> Step:  # fmt: skip
        adaptive = {"drawn": len(pool), "draws": draws, "stop": stop, "acts": acts, "answers": answers,
                    **({"gate": gate} if gate else {})}  # fmt: skip
        vote = replace(vote, method=f"adaptive_{self.aggregate}", adaptive=adaptive)
        shown = pool[vote.chosen.samples[0]]
        usage = request_usage(pool, vote.usage)
        if vote.failed:
            return Step((), shown.text, tuple(pool), vote, usage, shown.parse_error)
        return Step(vote.chosen.calls, shown.text, tuple(pool), vote, usage, None)
