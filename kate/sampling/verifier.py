"""Width votes ranked by a trained verifier (``kate train verifier``, ``docs/verifier.md``).

A ``Scorer`` scores candidate texts for one prompt: ``score(messages, tools, texts) -> [float]``
(higher: more likely right); ``kate.train.verifier_model.Verifier`` is the trained one (a verifier
folder: ``final/`` of the job, or a checkpoint), passed in explicitly. A candidate's text is what the verifier trained on: the canonical ``to_json_text`` of its
calls, or the raw text of its first sample when it makes no call (``candidate_text``).

Two aggregates over the candidates of ``majority_vote`` (schema validity checked, as
``valid_majority`` does), the scorer passed explicitly:

* ``best``: the candidate with the highest score (best-of-N);
* ``weighted``: the most votes weighted by ``sigmoid(score)``: ``votes * sigmoid(score)``.

With ``valid_first`` (the default) a candidate whose calls the tools cannot make never outranks one
that fits, as in ``valid_majority``; ties keep the majority order. Malformed samples are never scored
nor chosen unless every sample failed. The result is a ``VerifiedVote``: a ``Vote`` whose record
(``to_dict``) adds each candidate's ``score`` and a ``verifier`` block. ``VerifierSampler`` is a
``WidthSampler``'s request (its ``n``, temperature, token limit) with this vote; the existing
aggregates (``AGGREGATORS``) are untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from kate.llm.base import ChatModel, Completion, Message, ToolSchema
from kate.sampling.policy import Step, WidthSampler, _require, request_usage
from kate.sampling.vote import Candidate, Vote, majority_vote, schema_valid
from kate.toolcall.format import to_json_text

MODES = ("best", "weighted")


@runtime_checkable
class Scorer(Protocol):
    def score(self, messages: list[Message], tools: list[ToolSchema] | None, texts: Sequence[str]) -> list[float]: ...


def candidate_text(candidate: Candidate, completions: Sequence[Completion]) -> str:
    """The text the verifier reads for a candidate (as ``kate.train.verifier_data.candidate_text``)."""
    if candidate.calls:
        return to_json_text(candidate.calls)
    return completions[candidate.samples[0]].text or ""


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@dataclass(frozen=True)
class VerifiedVote(Vote):
    """A ``Vote`` chosen by verifier scores; ``scores`` align with ``candidates`` (None: not scored)."""

    scores: tuple[float | None, ...] = ()
    verifier_mode: str = "best"

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for entry, score in zip(out["candidates"], self.scores):
            entry["score"] = score
        chosen = next((s for c, s in zip(self.candidates, self.scores) if c is self.chosen), None)
        out["chosen"]["score"] = chosen
        out["verifier"] = {"mode": self.verifier_mode, "chosen_score": chosen}
        return out


def verifier_vote(scorer: Scorer, messages: list[Message], tools: list[ToolSchema] | None,
                  completions: Sequence[Completion], *, mode: str = "best", valid_first: bool = True) -> VerifiedVote:
    """The candidates of the (schema-checked) majority vote, the chosen one by ``scorer`` (see the module)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    method = f"verifier_{mode}"
    base = majority_vote(completions, schema_valid(tools) if tools else None, method=method)
    plain = {f.name: getattr(base, f.name) for f in fields(Vote)}
    choosable = [c for c in base.candidates if not c.malformed]
    if not choosable:
        return VerifiedVote(**plain, scores=tuple(None for _ in base.candidates), verifier_mode=mode)
    got = scorer.score(messages, tools, [candidate_text(c, completions) for c in choosable])
    if len(got) != len(choosable) or not all(isinstance(s, (int, float)) and math.isfinite(s) for s in got):
        raise ValueError(f"the verifier returned {got!r} for {len(choosable)} candidates (finite numbers expected)")
    by_id = {id(c): float(s) for c, s in zip(choosable, got)}
    scores = tuple(by_id.get(id(c)) for c in base.candidates)

    def rank(item: tuple[int, Candidate]) -> tuple[bool, float, int]:
        index, c = item
        value = by_id[id(c)] if mode == "best" else c.votes * _sigmoid(by_id[id(c)])
        return (valid_first and c.valid is False, -value, index)

    chosen = min(enumerate(choosable), key=rank)[1]
    plain["chosen"] = chosen
    return VerifiedVote(**plain, scores=scores, verifier_mode=mode)


@dataclass(frozen=True)
class VerifierSampler:
    """``width``'s request (one request, ``n`` samples), its candidates ranked by ``verifier``."""

    verifier: Any = field(metadata={"help": "the scorer: a kate.train.verifier_model.Verifier (or anything with score())"})
    mode: str = field(default="best", metadata={"help": "best (highest score) | weighted (votes x sigmoid(score))"})
    width: WidthSampler = field(default_factory=WidthSampler, metadata={"help": "n, temperature and token limit of "
                                                                                "the request (its aggregate unused)"})
    valid_first: bool = field(default=True, metadata={"help": "schema-invalid candidates never outrank valid ones"})

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.verifier, Scorer):
            raise TypeError(f"verifier must have a score(messages, tools, texts) method, got {type(self.verifier)}")

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        w = self.width
        completions = _require(model.chat(messages, tools, n=w.n, temperature=w.temperature, max_tokens=w.max_tokens,
                                          seed=seed, logprobs=w.logprobs), model, one_call)  # fmt: skip
        vote = verifier_vote(self.verifier, messages, tools, completions, mode=self.mode, valid_first=self.valid_first)
        shown = completions[vote.chosen.samples[0]]
        usage = request_usage(completions, vote.usage)
        if vote.failed:
            return Step((), shown.text, completions, vote, usage, shown.parse_error)
        return Step(vote.chosen.calls, shown.text, completions, vote, usage, None)
