"""BFCL's relevance / irrelevance entries as call decisions: whether a call is needed is known from
the data (irrelevance, live_irrelevance: none of the offered functions fits, so no call;
live_relevance: a call is due), so no necessity sampling is needed.

``BFCLDecisionTask`` solves each entry as ``kate.tasks.bfcl.BFCLTask`` solves a single-turn entry
(one policy step, the same knowledge filter, the same trace fields) and scores it with bfcl-eval's
official checker (``kate.bfcl.checkers``), adding what the diagnostics read: ``called`` (the step's
parsed calls) and ``necessary`` (from the category). Other single-turn categories may be added;
every one of them expects a call. (It cannot reuse ``BFCLTask`` itself: kate.tasks and
kate.diagnose share a rank, and same-rank imports are refused.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.bfcl.checkers import RELEVANCE, SCORING_MODEL, score_single_turn
from kate.bfcl.data import BFCL_VERSION, MULTI_TURN, BFCLEntry, data_sha256, load_entries
from kate.llm.base import Message, ToolSchema
from kate.toolcall import ToolCall

MODEL_ERROR = "kate:model_error"

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
        context = KnowledgeContext("single_turn", api_classes=(), tools=tuple(entry.tools), exclude_ids=(entry.id,))
        messages, tools = self.prompt(entry)
        try:
            done = policy.step(messages, tools, seed=seed, context=context)
        except ValueError as error:  # e.g. the prompt does not fit the context: a recorded failure
            return {"calls": [], "parse_error": None, "error_type": MODEL_ERROR, "error": str(error), "outputs": [],
                    "vote": None, "called": False, "attempted": False, "first_step": None}  # fmt: skip
        step = done.step
        calls = [c.to_dict() for c in step.calls]
        return {"calls": calls, "parse_error": step.parse_error, "prompt": done.prompt, "knowledge": done.knowledge,
                "outputs": [c.text for c in step.completions], "vote": step.vote.to_dict() if step.vote else None,
                "usage": {"prompt_tokens": step.usage.prompt_tokens, "completion_tokens": step.usage.completion_tokens},
                "called": bool(calls), "attempted": bool(calls) or step.parse_error is not None,
                "first_step": {"text": step.text, "calls": calls, "parse_error": step.parse_error}}  # fmt: skip

    def score(self, entry: BFCLEntry, trace: Mapping[str, Any]) -> dict[str, Any]:
        extra = {"called": bool(trace.get("called")), "necessary": self.necessary(entry)}
        if trace.get("error_type") == MODEL_ERROR:
            return {"valid": False, "error_type": MODEL_ERROR, "error": trace.get("error"), **extra}
        calls = [ToolCall.from_dict(c) for c in trace.get("calls", [])]
        return {**score_single_turn(entry, calls, trace.get("parse_error")), **extra}
