"""Scoring with BFCL's official checkers, fed from parsed ToolCalls (never from raw model text).

* single-turn AST categories: ``ast_checker`` on the decoded form ``[{name: {arg: value}}]``;
* irrelevance / live_irrelevance: correct iff the model made no call; live_relevance: iff it made
  one (BFCL's own relevance rule);
* multi-turn: ``multi_turn_checker`` on the executed calls of every step, as BFCL call strings.

Scores are computed under one registered function-calling model entry, ``SCORING_MODEL``, named in
every result: it decides how the checker treats dotted names (kate keeps names as BFCL wrote them).
"""

from __future__ import annotations

from typing import Any

from kate.bfcl import backends
from kate.bfcl.data import BFCLEntry, prepare_environment
from kate.toolcall import ToolCall, to_bfcl, to_bfcl_strings

SCORING_MODEL = "Qwen/Qwen3-0.6B-FC"  # registered in bfcl-eval, is_fc_model=True, underscore_to_dot=False
_CHECKER_NAME = SCORING_MODEL.replace("/", "_")  # bfcl-eval's own escaping of model names
RELEVANCE = {"irrelevance": False, "live_irrelevance": False, "live_relevance": True}


def _language(category: str):
    from bfcl_eval.constants.enums import Language

    if category == "simple_java":
        return Language.JAVA
    if category == "simple_javascript":
        return Language.JAVASCRIPT
    return Language.PYTHON


def score_single_turn(entry: BFCLEntry, calls: list[ToolCall], parse_error: str | None = None) -> dict[str, Any]:
    """``{"valid": bool, "error_type": ..., "error": ...}`` for one single-turn answer."""
    prepare_environment()
    if entry.category in RELEVANCE:
        made_call = bool(calls)
        valid = made_call == RELEVANCE[entry.category]
        kind = "relevance_error:no_call" if RELEVANCE[entry.category] else "irrelevance_error:call_made"
        return {"valid": valid, "error_type": None if valid else kind, "error": None}
    if parse_error is not None:
        return {"valid": False, "error_type": "kate:malformed_call", "error": parse_error}
    if not calls:
        return {"valid": False, "error_type": "kate:no_call", "error": "the model answered without calling a tool"}
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    result = ast_checker(entry.checker_functions, to_bfcl(calls), entry.ground_truth, _language(entry.category),
                         entry.category, _CHECKER_NAME)  # fmt: skip
    return {"valid": bool(result["valid"]), "error_type": result.get("error_type"), "error": _short(result.get("error"))}


def _short(error: Any, limit: int = 500) -> Any:
    text = error if isinstance(error, str) else repr(error)
    return text[:limit] if error is not None else None


def _check_turns(entry: BFCLEntry, decoded: list[list[list[str]]], turns: int) -> dict[str, Any]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    backends.forget(_CHECKER_NAME, entry.id)  # a second scoring of the entry starts from the initial state
    try:
        return multi_turn_checker(decoded[:turns], entry.ground_truth[:turns], dict(entry.raw), entry.category, _CHECKER_NAME)
    finally:
        backends.forget(_CHECKER_NAME, entry.id)


def _checker_strings(calls: list[ToolCall]) -> list[str]:
    """The calls as BFCL call strings, for the checker (which executes them with ``eval``). A call
    whose name is no Python identifier path (a model once wrote a table as a function name) names
    no BFCL function and could only have failed; it is left out rather than handed to ``eval``."""
    out = []
    for call in calls:
        try:
            out += to_bfcl_strings([call])
        except ValueError:
            continue
    return out


def score_multi_turn(entry: BFCLEntry, steps_per_turn: list[list[list[ToolCall]]]) -> dict[str, Any]:
    """Official multi-turn accuracy of a dialogue, and the turns passed before the first failure.

    ``steps_per_turn[t][s]`` is the list of calls executed at step ``s`` of turn ``t``.
    """
    prepare_environment()
    total = len(entry.ground_truth)
    if len(steps_per_turn) != total:
        return {"valid": False, "turns_passed": 0, "turns_total": total, "error_type": "multi_turn:force_terminated",
                "error": f"{len(steps_per_turn)} turns answered of {total}"}  # fmt: skip
    decoded = [[strings for step in turn if (strings := _checker_strings(step))] for turn in steps_per_turn]
    result = _check_turns(entry, decoded, total)
    if result["valid"]:
        return {"valid": True, "turns_passed": total, "turns_total": total, "error_type": None, "error": None}
    passed = 0
    for turns in range(1, total):
        if not _check_turns(entry, decoded, turns)["valid"]:
            break
        passed = turns
    return {"valid": False, "turns_passed": passed, "turns_total": total,
            "error_type": result.get("error_type"), "error": _short(result.get("error_message"))}  # fmt: skip
