"""Solved dialogues, the raw material of knowledge: a JSONL format users can bring their own data in.

One dialogue per line::

    {"format": "kate-trajectory/1",
     "id": "my_task_17",                  # unique
     "source": "my_dataset",              # optional: dataset / category name
     "split": "train",                    # optional
     "api_classes": ["FileSystem"],       # optional: the API classes the dialogue involves
     "tool_classes": {"ls": "FileSystem"},# optional: function name -> API class
     "tools": [<OpenAI tool schema>, ...],
     "turns": [
        {"user": "List my files",                                  # "" for a turn with no user text
         "calls": [{"name": "ls", "arguments": {}}],               # the correct calls, in order
         "results": ["a.txt b.txt"],                               # optional, one per call
         "answer": "You have a.txt and b.txt.",                    # optional final answer
         "tools_added": [<OpenAI tool schema>, ...]},              # optional: tools that arrive now
        ...],
     "metadata": {...}}                   # optional, free-form

A turn whose correct behaviour is *not* to call (an irrelevant request, a missing parameter to ask
for) has ``"calls": []``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kate.io import atomic_open
from kate.toolcall import ToolCall

FORMAT = "kate-trajectory/1"


class TrajectoryFormatError(ValueError):
    """A trajectory line that does not follow the format; the message names file and line."""


@dataclass(frozen=True)
class TrajectoryTurn:
    user: str
    calls: tuple[ToolCall, ...] = ()
    results: tuple[str, ...] | None = None
    answer: str | None = None
    tools_added: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", tuple(self.calls))
        if self.results is not None:
            object.__setattr__(self, "results", tuple(self.results))
            if len(self.results) != len(self.calls):
                raise ValueError(f"{len(self.results)} results for {len(self.calls)} calls")
        object.__setattr__(self, "tools_added", tuple(self.tools_added))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"user": self.user, "calls": [c.to_dict() for c in self.calls]}
        if self.results is not None:
            out["results"] = list(self.results)
        if self.answer is not None:
            out["answer"] = self.answer
        if self.tools_added:
            out["tools_added"] = [dict(t) for t in self.tools_added]
        return out


@dataclass(frozen=True)
class Trajectory:
    id: str
    tools: tuple[Mapping[str, Any], ...]
    turns: tuple[TrajectoryTurn, ...]
    source: str = ""
    split: str = ""
    api_classes: tuple[str, ...] = ()
    tool_classes: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("a trajectory needs a non-empty string id")
        for name in ("tools", "turns", "api_classes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def is_multi_turn(self) -> bool:
        return len(self.turns) > 1

    def tool_names(self) -> tuple[str, ...]:
        """Every function this dialogue offers at some point, tools_added included."""
        names = [_tool_name(t) for t in self.tools]
        names += [_tool_name(t) for turn in self.turns for t in turn.tools_added]
        return tuple(dict.fromkeys(names))

    def classes_of(self, calls: Iterable[ToolCall]) -> tuple[str, ...]:
        """The API classes ``calls`` use (by ``tool_classes``); the dialogue's classes when unknown."""
        calls = list(calls)
        if self.tool_classes and calls and all(c.name in self.tool_classes for c in calls):
            return tuple(sorted({self.tool_classes[c.name] for c in calls}))
        return tuple(self.api_classes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "id": self.id,
            "source": self.source,
            "split": self.split,
            "api_classes": list(self.api_classes),
            "tool_classes": dict(self.tool_classes),
            "tools": [dict(t) for t in self.tools],
            "turns": [t.to_dict() for t in self.turns],
            "metadata": dict(self.metadata),
        }


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function", tool)
    return function["name"]


def _calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list):
        raise TrajectoryFormatError(f"{where}: 'calls' must be a list of {{name, arguments}} objects")
    out = []
    for i, call in enumerate(raw):
        if not isinstance(call, Mapping) or "name" not in call:
            raise TrajectoryFormatError(f"{where}: call {i} must be an object with a 'name'")
        try:
            out.append(ToolCall.from_dict(call))
        except ValueError as exc:
            raise TrajectoryFormatError(f"{where}: call {i}: {exc}") from None
    return tuple(out)


def trajectory_from_dict(data: Mapping[str, Any], where: str = "trajectory") -> Trajectory:
    """Read one dialogue; a malformed one raises TrajectoryFormatError naming ``where``."""
    if not isinstance(data, Mapping):
        raise TrajectoryFormatError(f"{where}: expected a JSON object")
    if data.get("format", FORMAT) != FORMAT:
        raise TrajectoryFormatError(f"{where}: format {data.get('format')!r}, expected {FORMAT!r}")
    for key in ("id", "tools", "turns"):
        if key not in data:
            raise TrajectoryFormatError(f"{where}: missing {key!r}")
    turns = []
    for number, turn in enumerate(data["turns"]):
        here = f"{where} turn {number}"
        if not isinstance(turn, Mapping) or not isinstance(turn.get("user", None), str):
            raise TrajectoryFormatError(f"{here}: a turn needs a string 'user' (may be empty)")
        try:
            turns.append(
                TrajectoryTurn(
                    user=turn["user"],
                    calls=_calls(turn.get("calls", []), here),
                    results=turn.get("results"),
                    answer=turn.get("answer"),
                    tools_added=tuple(turn.get("tools_added", ())),
                )
            )
        except ValueError as exc:
            raise TrajectoryFormatError(f"{here}: {exc}") from None
    try:
        return Trajectory(
            id=data["id"],
            tools=tuple(data["tools"]),
            turns=tuple(turns),
            source=data.get("source", ""),
            split=data.get("split", ""),
            api_classes=tuple(data.get("api_classes", ())),
            tool_classes=dict(data.get("tool_classes", {})),
            metadata=dict(data.get("metadata", {})),
        )
    except ValueError as exc:
        raise TrajectoryFormatError(f"{where}: {exc}") from None


def read_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Every dialogue of a trajectory JSONL file; errors name ``file:line``; ids must be unique."""
    path = Path(path)
    out: list[Trajectory] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise TrajectoryFormatError(f"{where}: not JSON ({exc})") from None
            trajectory = trajectory_from_dict(data, where)
            if trajectory.id in seen:
                raise TrajectoryFormatError(f"{where}: duplicate id {trajectory.id!r}")
            seen.add(trajectory.id)
            out.append(trajectory)
    return out


def write_trajectories(path: str | os.PathLike[str], trajectories: Iterable[Trajectory]) -> int:
    """Write dialogues as JSONL, atomically; returns how many."""
    count = 0
    with atomic_open(path, "w") as fh:
        for trajectory in trajectories:
            fh.write(json.dumps(trajectory.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    return count
