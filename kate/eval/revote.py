"""Vote again on a stored single-turn width record with another rule, without regenerating.

A width record keeps every sample's text and the vote's candidates (calls, votes, sample indices,
best summed log-probability): everything a vote reads. Rebuilding the samples from them and voting
again gives exactly what a live run would have chosen from the same samples (in a single-turn
entry the rule never changes what is sampled); the new choice is scored by the official checker.
Multi-turn records cannot be re-voted: another choice changes every later step.
"""

from __future__ import annotations

from typing import Any

from kate.bfcl.checkers import score_single_turn
from kate.bfcl.data import BFCLEntry
from kate.llm.base import Completion, TokenLogprob
from kate.sampling.vote import AGGREGATORS
from kate.toolcall import ToolCall

# rules that read only the samples (a critic would need the model again)
OFFLINE_RULES = ("majority", "valid_majority", "filled_majority")


def stored_samples(record: dict[str, Any]) -> list[Completion]:
    """The samples of a width record, as its vote saw them."""
    vote, outputs = record.get("vote"), record.get("outputs") or []
    if not vote or not vote.get("candidates"):
        raise ValueError(f"record {record.get('id')!r} has no stored vote: only width records can be re-voted")
    samples: list[Completion | None] = [None] * len(outputs)
    for candidate in vote["candidates"]:
        calls = tuple(ToolCall.from_dict(c) for c in candidate["calls"])
        malformed = candidate["kind"] == "malformed"
        for rank, index in enumerate(candidate["samples"]):
            known = rank == 0 and candidate.get("best_logprob") is not None
            samples[index] = Completion(
                text=outputs[index], tool_calls=calls, parse_error="malformed (stored vote)" if malformed else None,
                logprobs=(TokenLogprob("", candidate["best_logprob"]),) if known else None,
            )  # fmt: skip
    if any(s is None for s in samples):
        raise ValueError(f"record {record.get('id')!r}: its vote does not account for every sample")
    return samples  # type: ignore[return-value]


def revote_record(entry: BFCLEntry, record: dict[str, Any], rule: str) -> dict[str, Any]:
    """``record`` with the calls ``rule`` chooses from its samples, its vote and a fresh score."""
    if rule not in OFFLINE_RULES:
        raise ValueError(f"cannot re-vote offline with {rule!r}; rules that read only the samples: {OFFLINE_RULES}")
    if entry.is_multi_turn:
        raise ValueError(f"{entry.id} is multi-turn: another choice would change every later step")
    samples = stored_samples(record)
    vote = AGGREGATORS[rule](None, [], entry.tools, samples)
    calls = () if vote.failed else vote.chosen.calls
    parse_error = record.get("parse_error") if vote.failed else None  # every sample failed, as in the live vote
    return {
        **record,
        **score_single_turn(entry, list(calls), parse_error),
        "calls": [c.to_dict() for c in calls],
        "parse_error": parse_error,
        "vote": {**vote.to_dict(), "usage": record["vote"].get("usage")},
    }
