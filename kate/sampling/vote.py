"""Width aggregation: N sampled completions of one step -> one chosen set of calls.

A sample votes with the canonical form of its *whole* set of calls (``canonical_call_set``): the
argument order never matters and parallel calls vote as a multiset. "No call" (a direct answer)
is the empty key, a candidate like any other. Samples whose call could not be parsed form one
"malformed" candidate that is never chosen unless every sample failed.

The schema-valid vote (``"valid_majority"``) first sets aside candidates whose calls the offered
tools cannot make (an unknown function or parameter, a required one missing, a value of the wrong
type: ``kate.toolcall.expressible``); they win only when no candidate is valid. Such a call fails
on execution and under BFCL's checkers whatever its votes, so it should never outvote one that fits.
``"filled_majority"`` also sets aside calls that carry a placeholder copied from a shown example
(``"<controller 1>"``: ``kate.toolcall.placeholder``), a value no request asked for.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, Usage
from kate.toolcall import ToolCall, canonical_call_set
from kate.toolcall.expressible import calls_expressible, schemas_by_name
from kate.toolcall.placeholder import carries_placeholder

MALFORMED_KEY: tuple[str, ...] = ("<malformed>",)
NO_CALL_TEXT = "no call: answer directly"
CRITIC_PROMPT = (
    "Candidate next actions for the conversation above:\n{candidates}\n\n"
    "Which candidate is the best next action for the user's request? "
    "Reply with just the number of the best candidate (1 to {k}), nothing else."
)


@dataclass(frozen=True)
class Candidate:
    """One distinct answer among the samples: its calls (as the earliest sample wrote them)."""

    calls: tuple[ToolCall, ...]
    key: tuple[str, ...]
    votes: int
    samples: tuple[int, ...]
    best_logprob: float | None = None
    malformed: bool = False
    valid: bool | None = None  # fits the tools' schemas (None: not checked)

    @property
    def kind(self) -> str:
        """``"malformed"``, ``"no_call"`` or ``"call"``."""
        return "malformed" if self.malformed else ("call" if self.calls else "no_call")

    def to_dict(self) -> dict[str, Any]:
        logprob = self.best_logprob if self.best_logprob is not None and math.isfinite(self.best_logprob) else None
        return {
            "kind": self.kind,
            "calls": [call.to_dict() for call in self.calls],
            "key": list(self.key),
            "votes": self.votes,
            "samples": list(self.samples),
            "best_logprob": logprob,
            **({} if self.valid is None else {"valid": self.valid}),
        }


@dataclass(frozen=True)
class Vote:
    """The outcome of aggregating ``n`` samples (recorded in the trajectory via ``to_dict``).

    ``margin`` = (chosen votes - runner-up votes) / n over choosable (non-malformed) candidates; 0
    when every sample failed (``failed=True``, ``chosen`` is the malformed candidate, calls ``()``);
    negative when the schema-valid vote chose a candidate over an invalid one with more votes.
    ``critic_fallback`` is set when a critic's reply could not be read and the majority choice stood.
    ``usage`` is the extra cost of aggregating (the critic's request), not of the samples.
    """

    chosen: Candidate
    candidates: tuple[Candidate, ...]
    margin: float
    n: int
    n_failed: int
    method: str
    failed: bool = False
    critic_fallback: bool = False
    critic_reply: str | None = None
    usage: Usage = Usage()
    adaptive: dict[str, Any] | None = None  # an adaptive vote's draws: samples drawn, why it stopped

    def to_dict(self) -> dict[str, Any]:
        return {
            **({} if self.adaptive is None else {"adaptive": self.adaptive}),
            "method": self.method,
            "chosen": self.chosen.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "margin": self.margin,
            "n": self.n,
            "n_failed": self.n_failed,
            "failed": self.failed,
            "critic_fallback": self.critic_fallback,
            "critic_reply": self.critic_reply,
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
        }


def _rank(candidate: Candidate) -> tuple[bool, int, float, int]:
    logprob = candidate.best_logprob if candidate.best_logprob is not None else -math.inf
    return (candidate.valid is False, -candidate.votes, -logprob, candidate.samples[0])


def _best_logprob(completions: Sequence[Completion], indices: list[int]) -> float | None:
    known = [lp for i in indices if (lp := completions[i].sum_logprob) is not None and not math.isnan(lp)]
    return max(known) if known else None


def majority_vote(completions: Sequence[Completion],
                  valid: Callable[[tuple[ToolCall, ...]], bool] | None = None, method: str = "majority") -> Vote:
    """Most votes wins. Ties: the highest summed sequence log-probability (the max over the
    candidate's samples; unknown counts as -inf), then the earliest sample index. With ``valid``,
    every candidate it accepts ranks before every candidate it rejects.

    ``candidates`` are sorted by that same order (the malformed one included); ``chosen`` is the
    first candidate that is not malformed, or the malformed one when every sample failed.
    """
    if not completions:
        raise ValueError("majority_vote needs at least one completion")
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, completion in enumerate(completions):
        key = MALFORMED_KEY if completion.parse_error is not None else canonical_call_set(completion.tool_calls)
        groups.setdefault(key, []).append(index)
    candidates = sorted(
        (
            Candidate(
                calls=() if key == MALFORMED_KEY else tuple(completions[indices[0]].tool_calls),
                key=key,
                votes=len(indices),
                samples=tuple(indices),
                best_logprob=_best_logprob(completions, indices),
                malformed=key == MALFORMED_KEY,
                valid=None if valid is None or key == MALFORMED_KEY else valid(completions[indices[0]].tool_calls),
            )
            for key, indices in groups.items()
        ),
        key=_rank,
    )
    choosable = [c for c in candidates if not c.malformed]
    n = len(completions)
    n_failed = len(groups.get(MALFORMED_KEY, []))
    if not choosable:
        return Vote(candidates[0], tuple(candidates), 0.0, n, n_failed, method, failed=True)
    runner_up = choosable[1].votes if len(choosable) > 1 else 0
    return Vote(choosable[0], tuple(candidates), (choosable[0].votes - runner_up) / n, n, n_failed, method)


def schema_valid(tools: list[ToolSchema]) -> Callable[[tuple[ToolCall, ...]], bool]:
    """Whether a candidate's calls fit ``tools``."""
    schemas = schemas_by_name(tools)
    return lambda calls: calls_expressible([call.to_dict() for call in calls], schemas)


def render_candidate(candidate: Candidate) -> str:
    """A candidate as the critic sees it: its calls as JSON, or ``no call: answer directly``."""
    if not candidate.calls:
        return NO_CALL_TEXT
    return json.dumps([call.to_dict() for call in candidate.calls], ensure_ascii=False)


def parse_choice(text: str, k: int) -> int | None:
    """The first integer in ``text`` when it is in ``1..k``, else None (no guessing)."""
    match = re.search(r"-?\d+(?:\.\d+)?", text or "")
    if match is None or "." in match.group(0):
        return None
    value = int(match.group(0))
    return value if 1 <= value <= k else None


def critic_vote(
    model: ChatModel,
    messages: list[Message],
    tools: list[ToolSchema] | None,
    completions: Sequence[Completion],
    *,
    max_tokens: int = 16,
    seed: int | None = None,
) -> Vote:
    """The model itself picks among the de-duplicated candidates (temperature 0, one sample).

    With one choosable candidate (or none) no request is made. Candidates are listed in majority
    order. An unreadable reply keeps the majority choice with ``critic_fallback=True``. ``margin``
    stays the majority margin: it describes how much the samples agreed.
    """
    base = replace(majority_vote(completions), method="critic")
    choosable = [c for c in base.candidates if not c.malformed]
    if len(choosable) <= 1:
        return base
    listing = "\n".join(f"{i}. {render_candidate(c)}" for i, c in enumerate(choosable, start=1))
    prompt = CRITIC_PROMPT.format(candidates=listing, k=len(choosable))
    replies = model.chat(
        [*messages, {"role": "user", "content": prompt}], tools,
        n=1, temperature=0.0, max_tokens=max_tokens, seed=seed,
    )
    reply = replies[0] if replies else Completion(text="")
    pick = parse_choice(reply.text, len(choosable))
    if pick is None:
        return replace(base, critic_fallback=True, critic_reply=reply.text, usage=reply.usage)
    return replace(base, chosen=choosable[pick - 1], critic_reply=reply.text, usage=reply.usage)


def _majority(
    model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None,
    completions: Sequence[Completion], **_: Any,
) -> Vote:
    return majority_vote(completions)


Aggregator = Callable[..., Vote]
"""``(model, messages, tools, completions, *, max_tokens, seed) -> Vote``."""

def _valid_majority(
    model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None,
    completions: Sequence[Completion], **_: Any,
) -> Vote:
    """Majority among the candidates that fit the tools (with no tools given, nothing to check)."""
    return majority_vote(completions, schema_valid(tools) if tools else None, method="valid_majority")


def _filled_majority(
    model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None,
    completions: Sequence[Completion], **_: Any,
) -> Vote:
    """``valid_majority`` where a call that carries a copied placeholder also counts as not valid."""
    fits = schema_valid(tools) if tools else (lambda calls: True)
    filled = lambda calls: fits(calls) and not carries_placeholder(calls)  # noqa: E731
    return majority_vote(completions, filled, method="filled_majority")


AGGREGATORS: dict[str, Aggregator] = {"majority": _majority, "valid_majority": _valid_majority,
                                      "filled_majority": _filled_majority, "critic": critic_vote}  # fmt: skip
