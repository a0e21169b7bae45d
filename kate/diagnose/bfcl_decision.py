"""BFCL's relevance / irrelevance entries as call decisions: whether a call is needed is known from
the data (irrelevance, live_irrelevance: none of the offered functions fits, so no call;
live_relevance: a call is due), so no necessity sampling is needed.

``BFCLDecisionTask`` solves each entry as ``kate.tasks.bfcl.BFCLTask`` solves a single-turn entry
(one policy step, the same knowledge filter, the same trace fields) and scores it with bfcl-eval's
official checker (``kate.bfcl.checkers``), adding what the diagnostics read: ``called`` (the step's
parsed calls) and ``necessary`` (from the category). Other single-turn categories may be added;
every one of them expects a call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kate.agent.policy import Policy
from kate.bfcl.checkers import RELEVANCE, SCORING_MODEL
from kate.bfcl.data import BFCL_VERSION, MULTI_TURN, BFCLEntry, data_sha256, load_entries
from kate.llm.base import Message, ToolSchema
from kate.tasks.bfcl import BFCLTask
from kate.tasks.step import MODEL_ERROR


DECISION_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")


def call_needed(category: str) -> bool:
    """Whether an entry of this single-turn category expects a call."""
    if category in MULTI_TURN:
        raise ValueError(f"{category} is multi-turn; call decisions are read from single-turn categories")
    return RELEVANCE.get(category, True)


def decision_entries(categories: Sequence[str] = DECISION_CATEGORIES, split: str = "test",
                     limit: int | None = None) -> list[BFCLEntry]:  # fmt: skip
    """The entries of the categories in KATE's split (test: odd indices), ``limit`` per category."""
    for category in categories:
        call_needed(category)
    return [e for category in categories for e in load_entries(category, split, limit)]


@dataclass
class BFCLDecisionTask:
    """Single-turn BFCL entries whose need for a call the data gives."""

    entries: Sequence[BFCLEntry]
    split: str = "test"
    name: str = "bfcl_decision"

    def __post_init__(self) -> None:
        for entry in self.entries:
            call_needed(entry.category)

    def items(self) -> Sequence[BFCLEntry]:
        return self.entries

    def describe(self) -> dict[str, Any]:
        return {"benchmark": "bfcl", "bfcl_eval": BFCL_VERSION, "split": self.split, "scoring_model": SCORING_MODEL,
                "diagnostic": "action", "categories": sorted({e.category for e in self.entries})}  # fmt: skip

    def data(self) -> dict[str, Any]:
        return {c: data_sha256((c,)) for c in sorted({e.category for e in self.entries})}

    def prompt(self, entry: BFCLEntry) -> tuple[list[Message], list[ToolSchema]]:
        """The messages and tools at the decision point."""
        return [dict(m) for m in entry.turns[0]], entry.tools

    def necessary(self, entry: BFCLEntry) -> bool:
        return call_needed(entry.category)

    def solve(self, entry: BFCLEntry, policy: Policy, seed: int) -> dict[str, Any]:
        trace = BFCLTask([entry], self.split).solve(entry, policy, seed)
        calls = trace["calls"]
        return {**trace, "called": bool(calls), "attempted": bool(calls) or trace.get("parse_error") is not None,
                "first_step": None if trace.get("error_type") == MODEL_ERROR else
                {"text": (trace["outputs"] or [""])[0], "calls": calls, "parse_error": trace["parse_error"]}}  # fmt: skip

    def score(self, entry: BFCLEntry, trace: Mapping[str, Any]) -> dict[str, Any]:
        extra = {"called": bool(trace.get("called")), "necessary": self.necessary(entry)}
        return {**BFCLTask([entry], self.split).score(entry, trace), **extra}
