"""The cases distilled knowledge is written from: the policy model's judged answers on the training
halves, successes and failures alike, each beside the item's correct calls, grouped.

A run folder of kate's runner (``records.jsonl``: one record per item, ``valid`` and ``error_type``
as BFCL's official checkers judged it) is read against the same items' trajectories (their tools and
ground truth, ``kate.knowledge.bfcl_source``). A single-turn record is one case: the request, the
offered functions, the model's calls, the verdict. A dialogue record is one case too: its first turn
that went wrong (calls that differ from the ground truth's as a set, or a repeat loop;
``kate.knowledge.attempts``), or its first turn when none did.

Grouping: by category and verdict kind (``passed`` or the checker's error kind, e.g.
``wrong_count``, ``value_error:string``, ``call_made``). Why not by function: a training-half
item's functions hardly ever recur in the test half (each BFCL single-turn item brings its own), so a
lesson about one function reaches nothing, which is what limited ST; the category fixes the reply's
shape (one call, one per item asked, several functions, no call) and the error kind the mistake, and
both recur on every half. A group larger than ``cases_per_entry`` is cut into chunks, one entry each.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kate.knowledge.attempts import REPEAT, Attempt, AttemptsError, is_failure, records_file
from kate.knowledge.trajectory import Trajectory
from kate.llm.registry import sha256_of
from kate.toolcall import ToolCall

PASSED = "passed"


@dataclass(frozen=True)
class Case:
    """One judged answer: what was asked, what was on offer, what the model did, what was right."""

    id: str  # the item id (the trajectory's), with #t<turn> for a dialogue's turn
    category: str
    verdict: str  # PASSED or the checker's error kind
    request: str
    offered: tuple[Mapping[str, Any], ...]  # the function schemas on offer
    calls: tuple[ToolCall, ...]  # the model's
    correct: tuple[ToolCall, ...]  # the ground truth's (empty: the right reply makes no call)
    error: str = ""  # the checker's message (failures)
    api_classes: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    @property
    def group(self) -> str:
        return f"{self.category}/{self.verdict}"


def verdict_of(record: Mapping[str, Any]) -> str:
    """``passed``, or the error kind: the checker's ``error_type`` less its checker's name
    (``parallel_function_checker_no_order:wrong_count`` -> ``wrong_count``); value, type and
    multi-turn errors keep their family (``value_error:string``, ``multi_turn:instance_state_mismatch``)."""
    if record.get("valid"):
        return PASSED
    kind = str(record.get("error_type") or "unknown")
    family, _, rest = kind.partition(":")
    if rest and (family.endswith("_checker") or family.endswith("_checker_no_order")):
        return rest
    return kind


def _tools(trajectory: Trajectory) -> tuple[Mapping[str, Any], ...]:
    return tuple(t.get("function", t) for t in trajectory.tools)


def _single_case(record: Mapping[str, Any], trajectory: Trajectory) -> Case:
    turn = trajectory.turns[0]
    return Case(id=trajectory.id, category=trajectory.source, verdict=verdict_of(record), request=turn.user.strip(),
                offered=_tools(trajectory), calls=tuple(ToolCall.from_dict(c) for c in record.get("calls") or []),
                correct=turn.calls, error=str(record.get("error") or "") if not record.get("valid") else "",
                source_ids=(trajectory.id,))


def _dialogue_case(record: Mapping[str, Any], trajectory: Trajectory) -> Case | None:
    turns = record.get("turns") or []
    chosen = None
    for number, (done, truth) in enumerate(zip(turns, trajectory.turns)):
        if not truth.user.strip():
            continue
        calls = tuple(ToolCall.from_dict(c) for c in done.get("calls") or [])
        if _turn_failed(calls, done, truth.calls):
            chosen = (number, calls, done)
            break
        chosen = chosen or (number, calls, done)
    if chosen is None:
        return None
    number, calls, done = chosen
    failed = not record.get("valid") and _turn_failed(calls, done, trajectory.turns[number].calls)
    verdict = verdict_of(record) if failed else PASSED
    error = str(record.get("error") or "") if failed else ""
    if failed and done.get("end_reason") == REPEAT:
        error = "the turn ended because the assistant repeated a call instead of answering. " + error
    tools = _tools(trajectory) + tuple(t.get("function", t) for t in trajectory.turns[number].tools_added)
    return Case(id=f"{trajectory.id}#t{number}", category=trajectory.source, verdict=verdict,
                request=trajectory.turns[number].user.strip(), offered=tools, calls=calls,
                correct=trajectory.turns[number].calls, error=error, api_classes=trajectory.api_classes,
                source_ids=(trajectory.id, f"{trajectory.id}#t{number}"))


def _turn_failed(calls: tuple[ToolCall, ...], done: Mapping[str, Any], truth: Sequence[ToolCall]) -> bool:
    return is_failure(Attempt(calls=calls, end_reason=done.get("end_reason")), truth)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A run folder's (or a records file's) records; a line that is not a JSON object is an error naming it."""
    file = records_file(path)
    if not file.is_file():
        raise AttemptsError(f"{file}: no run records here (a kate run folder holds records.jsonl)")
    out = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AttemptsError(f"{file}, line {number}: not JSON ({exc})") from exc
        if not isinstance(record, dict) or "id" not in record:
            raise AttemptsError(f"{file}, line {number}: not a run record (an object with an id)")
        out.append(record)
    return out


def cases_from(records: Iterable[Mapping[str, Any]], trajectories: Mapping[str, Trajectory]) -> list[Case]:
    """One case per record whose item is among ``trajectories`` (others are not training items: skipped)."""
    out = []
    for record in records:
        trajectory = trajectories.get(str(record["id"]))
        if trajectory is None or not trajectory.turns:
            continue
        case = _dialogue_case(record, trajectory) if "turns" in record else _single_case(record, trajectory)
        if case is not None and case.request:
            out.append(case)
    return out


def read_cases(runs: Sequence[str | os.PathLike[str]], trajectories: Iterable[Trajectory]) -> list[Case]:
    """The cases of every run folder, in order; the same answer judged the same way in two runs is kept once."""
    by_id = {t.id: t for t in trajectories}
    seen, out = set(), []
    for run in runs:
        for case in cases_from(read_records(run), by_id):
            key = (case.id, case.verdict, tuple(c.canonical for c in case.calls))
            if key not in seen:
                seen.add(key)
                out.append(case)
    return out


def group_cases(cases: Iterable[Case], cases_per_entry: int) -> list[tuple[str, list[Case]]]:
    """``(group name, cases)`` chunks: cases grouped by category and verdict (sorted by id within a group),
    each group cut into chunks of at most ``cases_per_entry``; chunks ordered round-robin over the groups,
    largest group first (every group's first chunk, then every second chunk, ...), so a cap on entries keeps
    the most common verdicts of every category first."""
    if cases_per_entry < 1:
        raise ValueError(f"cases_per_entry must be >= 1, got {cases_per_entry}")
    groups: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        groups[case.group].append(case)
    chunked = {name: [sorted(members, key=lambda c: c.id)[i:i + cases_per_entry]
                      for i in range(0, len(members), cases_per_entry)]
               for name, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))}  # fmt: skip
    out = []
    for depth in range(max((len(c) for c in chunked.values()), default=0)):
        out += [(f"{name}/{depth}", chunks[depth]) for name, chunks in chunked.items() if depth < len(chunks)]
    return out


def runs_sha(runs: Sequence[str | os.PathLike[str]]) -> dict[str, str]:
    return {str(run): sha256_of(Path(records_file(run))) for run in runs}
