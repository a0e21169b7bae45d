"""BFCL-V3 as a task: single-turn entries are one policy step, multi-turn entries a dialogue on
BFCL's own backends; both scored by bfcl-eval's official checkers.

Knowledge filters per entry (``KnowledgeContext``): a multi-turn entry shows entries of its own
API classes (KATE) that its tools (those arriving later included) can express; a single-turn entry
shows entries without API classes that its tools can express. No entry sees knowledge built from
itself. miss_func: the held-out functions arrive at their turn with BFCL's own message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.bfcl.checkers import SCORING_MODEL, score_multi_turn, score_single_turn
from kate.bfcl.data import BFCL_VERSION, BFCLEntry, data_sha256, load_entries
from kate.bfcl.env import BFCLEnvironment
from kate.tasks.step import MODEL_ERROR, step_trace
from kate.toolcall import ToolCall

# BFCL's own message for the turn at which miss_func's held-out functions arrive.
ADDITIONAL_FUNCTIONS_MESSAGE = "I have updated some more functions you can choose from. What about now?"


def _calls(items: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    return [ToolCall.from_dict(c) for c in items]


def knowledge_context(entry: BFCLEntry) -> KnowledgeContext:
    if entry.is_multi_turn:
        later = [{"name": f["name"]} for fs in entry.missed_functions.values() for f in fs]
        return KnowledgeContext("multi_turn", api_classes=tuple(entry.involved_classes),
                                tools=(*entry.tools, *later), exclude_ids=entry.variant_ids)  # fmt: skip
    return KnowledgeContext("single_turn", api_classes=(), tools=tuple(entry.tools), exclude_ids=(entry.id,))


def select_entries(categories: Mapping[str, int | None] | Sequence[str], split: str,
                   limit: int | None = None) -> list[BFCLEntry]:
    """``{category: limit}`` (0 leaves a category out) or a list of categories sharing ``limit``;
    KATE's split, index order."""
    chosen = categories.items() if isinstance(categories, Mapping) else ((c, limit) for c in categories)
    return [e for category, k in chosen if k != 0 for e in load_entries(category, split, k)]


@dataclass
class BFCLTask:
    entries: Sequence[BFCLEntry]
    split: str = "test"
    name: str = "bfcl"

    def items(self) -> Sequence[BFCLEntry]:
        return self.entries

    def describe(self) -> dict[str, Any]:
        return {"benchmark": "bfcl", "bfcl_eval": BFCL_VERSION, "split": self.split, "scoring_model": SCORING_MODEL}

    def data(self) -> dict[str, Any]:
        """The hash of each category's data files (recorded, not part of a run's fingerprint)."""
        return {c: data_sha256((c,)) for c in sorted({e.category for e in self.entries})}

    # ------------------------------------------------------------------ solving
    def solve(self, entry: BFCLEntry, policy: Policy, seed: int) -> dict[str, Any]:
        return self._dialogue(entry, policy, seed) if entry.is_multi_turn else self._one_step(entry, policy, seed)

    def _one_step(self, entry: BFCLEntry, policy: Policy, seed: int) -> dict[str, Any]:
        return step_trace(policy, entry.turns[0], entry.tools, seed=seed, context=knowledge_context(entry))

    def _dialogue(self, entry: BFCLEntry, policy: Policy, seed: int) -> dict[str, Any]:
        env = BFCLEnvironment(entry)
        missed = entry.missed_functions
        turns = [[{"role": "user", "content": ADDITIONAL_FUNCTIONS_MESSAGE}] if t in missed else messages
                 for t, messages in enumerate(entry.turns)]  # fmt: skip

        def arrive(t: int) -> None:
            if t in missed:
                env.add_functions(missed[t])

        try:
            result = policy.run_dialogue(env, turns, seed=seed, context=knowledge_context(entry), before_turn=arrive)
        finally:
            env.close()
        trace: dict[str, Any] = {"error_type": MODEL_ERROR, "error": result.error} if result.error else {}
        records = []
        for turn in result.turns:
            record = turn.to_dict(full_history=False)
            record.pop("state", None)
            records.append(record)
        steps = [turn.executed_steps for turn in result.turns]
        return {**trace, "end_reasons": [t.end_reason for t in result.turns],
                "steps_per_turn": [[[c.to_dict() for c in step] for step in turn] for turn in steps], "turns": records}  # fmt: skip

    # ------------------------------------------------------------------ scoring
    def score(self, entry: BFCLEntry, trace: Mapping[str, Any]) -> dict[str, Any]:
        model_error = trace.get("error_type") == MODEL_ERROR
        if not entry.is_multi_turn:
            if model_error:
                return {"valid": False, "error_type": MODEL_ERROR, "error": trace["error"]}
            return score_single_turn(entry, _calls(trace["calls"]), trace.get("parse_error"))
        score = score_multi_turn(entry, [[_calls(step) for step in turn] for turn in trace["steps_per_turn"]])
        if model_error:
            score = {**score, "error_type": MODEL_ERROR, "error": trace["error"]}
        return {**score, "turn_fraction": score["turns_passed"] / max(score["turns_total"], 1)}


def task_for_records(records: Sequence[Mapping[str, Any]]) -> BFCLTask:
    """A task holding every entry of the records' categories (both halves), for re-scoring."""
    return BFCLTask(select_entries(sorted({r["category"] for r in records}), "all"), split="all")
