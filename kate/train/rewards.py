"""Rule rewards for step-level GRPO, as plain functions ``(prompts, completions, **columns) -> list[float]``
(TRL's reward-function signature: the dataset's other columns arrive as keyword lists).

Completions are read by kate's strict parsers (a call is a parsed call, never a substring):
- ``call_correct``: 1 when the step's calls are right. A call step: the parsed call set equals the
  ground truth's (canonical: argument order and key order do not matter); a BFCL single-turn step is
  judged by BFCL's official AST checker (it accepts the ground truth's alternatives). An answer or
  no-call step: 1 for plain text with no call that is not a refusal ("I can't assist with that" after
  the results is the failure training is meant to fix). A multi-turn step is one call (the loop
  takes the first call of a step): extra calls after the right one score 0.
- ``format_valid``: 1 when the output reads cleanly, as calls or as a plain answer (no malformed call).
- ``no_call_penalty``: -1 for a call where none was due, else 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from kate.toolcall import ToolCall, canonical_call_set, parse_model_output
from kate.train.answers import REFUSALS
from kate.toolcall.parsed import Parsed

FORMATS = ("hermes", "json")
SINGLE_TURN_CHECKED = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                       "parallel_multiple", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes strings (standard prompts) or message lists (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    return str(completion)


def parse(completion: Any) -> Parsed:
    return parse_model_output(completion_text(completion), formats=FORMATS)


def _target(calls: Any) -> list[ToolCall]:
    items = json.loads(calls) if isinstance(calls, str) else (calls or [])
    return [ToolCall.from_dict(c) for c in items]


@lru_cache(maxsize=8)
def _entries(category: str) -> dict[str, Any]:
    from kate.bfcl.data import load_entries

    return {e.id: e for e in load_entries(category, "all")}


def _bfcl_checked(category: str, source_id: str, calls: list[ToolCall], error: str | None) -> bool | None:
    """BFCL's AST checker on a single-turn entry; None when it does not apply."""
    if category not in SINGLE_TURN_CHECKED:
        return None
    from kate.bfcl.checkers import score_single_turn

    entry = _entries(category).get(source_id)
    return None if entry is None else bool(score_single_turn(entry, calls, error)["valid"])


def call_correct(prompts: Sequence[Any], completions: Sequence[Any], *, target_calls: Sequence[Any],
                 kind: Sequence[str], category: Sequence[str] | None = None,
                 source_id: Sequence[str] | None = None, **_: Any) -> list[float]:  # fmt: skip
    out = []
    for i, completion in enumerate(completions):
        parsed = parse(completion)
        if kind[i] != "call":
            text = completion_text(completion).strip()
            refused = any(r in text.lower() for r in REFUSALS)
            out.append(1.0 if not parsed.calls and parsed.error is None and text and not refused else 0.0)
            continue
        if category is not None and source_id is not None:
            checked = _bfcl_checked(category[i], source_id[i], list(parsed.calls), parsed.error)
            if checked is not None:
                out.append(float(checked))
                continue
        right = parsed.error is None and canonical_call_set(parsed.calls) == canonical_call_set(_target(target_calls[i]))
        out.append(1.0 if right else 0.0)
    return out


def format_valid(prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
    out = []
    for completion in completions:
        parsed = parse(completion)
        out.append(1.0 if parsed.error is None and (parsed.calls or completion_text(completion).strip()) else 0.0)
    return out


def no_call_penalty(prompts: Sequence[Any], completions: Sequence[Any], *, kind: Sequence[str], **_: Any) -> list[float]:
    return [-1.0 if kind[i] != "call" and parse(c).calls else 0.0 for i, c in enumerate(completions)]


REWARDS = {"call_correct": call_correct, "format_valid": format_valid, "no_call_penalty": no_call_penalty}
