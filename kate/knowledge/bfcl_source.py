"""BFCL categories as trajectories, in KATE's split (even index -> train, odd -> test).

Multi-turn: one trajectory per dialogue, each turn with its ground-truth calls (positional
arguments named by the docs) and, when ``execute`` is set, their results from BFCL's own Python
backends. The call strings handed to BFCL's executor are built by ``kate.toolcall.to_python_call``
from parsed ToolCalls, never taken from text. Single-turn: one one-turn trajectory per entry; the
correct call of BFCL's possible-answer form is the first allowed value of each argument (an
argument whose first allowed value is ``""``, or with no allowed value, is left out); irrelevance entries have
no call; ``live_relevance`` (no ground truth shipped) is skipped.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from kate.bfcl import backends
from kate.bfcl.data import (
    CATEGORIES,
    MULTI_TURN,
    BFCLEntry,
    functions_to_tools,
    ground_truth_calls,
    load_entries,
    prepare_environment,
)
from kate.knowledge.trajectory import Trajectory, TrajectoryTurn
from kate.toolcall import ToolCall, to_python_call

NO_GROUND_TRUTH = ("live_relevance",)
NO_CALL = ("irrelevance", "live_irrelevance")


def user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The user's words of one turn (several user messages joined); "" for a turn without any."""
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user").strip()


def single_turn_calls(ground_truth: Any) -> tuple[ToolCall, ...]:
    """BFCL possible answers ``[{fn: {arg: [allowed, ...]}}]`` -> one correct call per function."""
    calls = []
    for item in ground_truth or []:
        for name, arguments in item.items():
            chosen = {}
            for arg, allowed in arguments.items():
                if not isinstance(allowed, list):
                    raise ValueError(f"{name}.{arg}: expected a list of allowed values, got {allowed!r}")
                if not allowed or allowed[0] == "":
                    continue  # optional (or nothing accepted): the first listed answer is to leave it out
                chosen[arg] = allowed[0]
            calls.append(ToolCall(name, chosen))
    return tuple(calls)


@lru_cache(maxsize=None)
def _backend_methods(class_name: str) -> tuple[str, ...]:
    prepare_environment()
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
    return tuple(n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_"))


def function_classes(classes: Iterable[str]) -> dict[str, str]:
    """Function name -> the BFCL backend class that implements it."""
    return {name: cls for cls in classes for name in _backend_methods(cls)}


def execute_ground_truth(entry: BFCLEntry, turns: Sequence[Sequence[ToolCall]]) -> list[list[str]]:
    """Run each turn's calls, in order, on fresh instances of BFCL's backends; results per turn."""
    model_name = backends.private_model_name("kate_kb")
    results = []
    try:
        for calls in turns:
            out, _ = backends.execute(model_name, entry, [to_python_call(call) for call in calls])
            results.append([str(r) for r in out])
    finally:
        backends.forget(model_name)
    return results


def _truncate(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f" ...[{len(text) - limit} more characters]"


def multi_turn_trajectory(entry: BFCLEntry, split: str, *, execute: bool = True,
                          result_chars: int | None = 2000) -> Trajectory:
    gt = ground_truth_calls(entry)
    results = execute_ground_truth(entry, gt) if execute else None
    missed = entry.missed_functions
    turns = []
    for number, messages in enumerate(entry.turns):
        calls = tuple(gt[number]) if number < len(gt) else ()
        turns.append(
            TrajectoryTurn(
                user=user_text(messages),
                calls=calls,
                results=tuple(_truncate(r, result_chars) for r in results[number]) if results else None,
                tools_added=tuple(functions_to_tools(missed[number])) if number in missed else (),
            )
        )
    docs = list(entry.functions) + [f for fs in missed.values() for f in fs]
    return Trajectory(
        id=entry.id,
        tools=tuple(entry.tools),
        turns=tuple(turns),
        source=entry.category,
        split=split,
        api_classes=entry.involved_classes,
        tool_classes={n: c for n, c in function_classes(entry.involved_classes).items() if n in {d["name"] for d in docs}},
    )


def single_turn_trajectory(entry: BFCLEntry, split: str) -> Trajectory:
    calls = () if entry.category in NO_CALL else single_turn_calls(entry.ground_truth)
    return Trajectory(
        id=entry.id,
        tools=tuple(entry.tools),
        turns=(TrajectoryTurn(user=user_text(entry.turns[0]), calls=calls),),
        source=entry.category,
        split=split,
    )


def bfcl_trajectories(categories: Iterable[str] = CATEGORIES, split: str = "train", *, execute: bool = True,
                      limit: int | None = None, result_chars: int | None = 2000) -> list[Trajectory]:
    """Trajectories of ``categories`` in KATE's ``split``; multi-turn results run on BFCL's backends."""
    out = []
    for category in categories:
        if category in NO_GROUND_TRUTH:
            continue
        for entry in load_entries(category, split, limit=limit):
            if category in MULTI_TURN:
                out.append(multi_turn_trajectory(entry, split, execute=execute, result_chars=result_chars))
            else:
                out.append(single_turn_trajectory(entry, split))
    return out
