"""The one record type of a run: an item's id and category, the seed, the task's score, the
policy's trace, and the wall time. Written as one JSON line with the score's keys first::

    {"id", "category", "seed", <score: valid, error_type, ...>, <trace: prompt, calls, turns, ...>, "seconds"}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

HEAD = ("id", "category", "seed")


@dataclass(frozen=True)
class Record:
    id: str
    category: str
    seed: int
    score: Mapping[str, Any]
    trace: Mapping[str, Any] = field(default_factory=dict)
    seconds: float | None = None

    def __post_init__(self) -> None:
        if "valid" not in self.score:
            raise ValueError(f"{self.id}: a score must say whether the item is solved ('valid'), got {dict(self.score)}")

    @property
    def valid(self) -> bool:
        return bool(self.score["valid"])

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "category": self.category, "seed": self.seed, **self.score, **self.trace}
        if self.seconds is not None:
            out["seconds"] = self.seconds
        return out
