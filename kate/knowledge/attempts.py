"""The policy model's own attempts at training dialogues, so that ES can be written from the failures
the model actually makes rather than from the ground truth alone.

An attempt is read from a run folder of kate's runner on the same dialogues (``records.jsonl``: one
record per dialogue, its ``turns`` each holding the ``calls`` the model made, its ``steps`` with their
tool ``observations``, the turn's ``end_reason`` and ``answer``). A turn's attempt is a failure when
its calls differ from the ground truth's as a set (order never matters) or when the loop ended the
turn because the model repeated a call it already had the result of (the repeat loop: a failure to
stop). The ES writer then sees what the model did beside the correct calls.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kate.knowledge.entries import turn_id
from kate.knowledge.trajectory import Trajectory
from kate.toolcall import ToolCall, canonical_call_set, to_python_call

RECORDS = "records.jsonl"
REPEAT = "repeat"


class AttemptsError(ValueError):
    """A records file that cannot be read as a run's dialogue records; the message names the file."""


@dataclass(frozen=True)
class Attempt:
    """What the model did in one turn."""

    calls: tuple[ToolCall, ...] = ()
    errors: tuple[str, ...] = ()  # the error observations of its calls, in order
    end_reason: str | None = None
    answer: str | None = None

    def describe(self, max_error_chars: int = 160) -> str:
        """The attempt as the ES prompt shows it: the calls, the errors they met, how the turn ended."""
        lines = [f"- {to_python_call(c)}" for c in self.calls] or ["- (no call)"]
        lines += [f"  error: {e[:max_error_chars]}" for e in self.errors]
        if self.end_reason == REPEAT:
            lines.append("The turn ended because the assistant repeated a call it already had the result of, "
                         "instead of answering the user.")
        elif self.answer:
            lines.append(f"It then replied: {self.answer.strip()[:max_error_chars]}")
        return "\n".join(lines)


def records_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path / RECORDS if path.is_dir() else path


def _attempt(turn: Mapping[str, Any]) -> Attempt:
    calls = tuple(ToolCall.from_dict(c) for c in turn.get("calls") or [])
    errors = tuple(str(o.get("error") or o.get("content") or "") for step in turn.get("steps") or []
                   for o in step.get("observations") or [] if o.get("ok") is False)  # fmt: skip
    return Attempt(calls=calls, errors=errors, end_reason=turn.get("end_reason"), answer=turn.get("answer"))


def read_attempts(path: str | os.PathLike[str]) -> dict[str, Attempt]:
    """Every turn's attempt in a run folder (or its ``records.jsonl``), by ``turn_id(dialogue, turn)``.
    Records without ``turns`` (single-turn entries) are skipped; a line that is not JSON, or a turn
    that is not a mapping, is an error naming the file and line."""
    file = records_file(path)
    if not file.is_file():
        raise AttemptsError(f"{file}: no run records here (a kate run folder holds {RECORDS})")
    out: dict[str, Attempt] = {}
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            turns = record.get("turns") if isinstance(record, dict) else None
            if turns is None:
                continue
            for index, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    raise TypeError(f"turn {index} is {type(turn).__name__}, not an object")
                out[turn_id(str(record["id"]), index)] = _attempt(turn)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise AttemptsError(f"{file}, line {number}: not a dialogue record ({exc})") from exc
    return out


def is_failure(attempt: Attempt, ground_truth: Iterable[ToolCall]) -> bool:
    return attempt.end_reason == REPEAT or canonical_call_set(list(attempt.calls)) != canonical_call_set(list(ground_truth))


def failed_attempts(trajectories: Iterable[Trajectory], attempts: Mapping[str, Attempt]) -> dict[str, Attempt]:
    """The attempts, among ``trajectories``' user turns, that failed against the turn's ground truth."""
    out = {}
    for trajectory in trajectories:
        for number, turn in enumerate(trajectory.turns):
            key = turn_id(trajectory.id, number)
            if key in attempts and turn.user.strip() and is_failure(attempts[key], turn.calls):
                out[key] = attempts[key]
    return out
