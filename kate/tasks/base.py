"""The task abstraction (lm-evaluation-harness's ``Task`` is the anchor): a task yields items and
scores what a policy did on one.

    for item in task.items():
        trace = task.solve(item, policy, seed)      # the policy acts in the item's environment
        score = task.score(item, trace)             # the official or strict checker; has "valid"

``solve`` returns what the policy did (JSON-able: prompts, outputs, calls, votes, turns) and
``score`` reads only that, so a stored record can be scored again without regenerating
(``kate.eval.runner.rescore``). BFCL single-turn and multi-turn entries and AppWorld tasks are
tasks; so are the diagnostic sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kate.agent.policy import Policy


@runtime_checkable
class Item(Protocol):
    """One unit of a task: a stable id (records are keyed by it) and a category (reports group by it)."""

    id: str
    category: str


@runtime_checkable
class Task(Protocol):
    name: str

    def items(self) -> Sequence[Item]: ...

    def solve(self, item: Any, policy: Policy, seed: int) -> dict[str, Any]:
        """Run the policy on the item; what it did, JSON-able (never raises for model output)."""
        ...

    def score(self, item: Any, trace: Mapping[str, Any]) -> dict[str, Any]:
        """The checker's verdict on a trace (or a stored record holding one): at least ``valid``."""
        ...

    def describe(self) -> dict[str, Any]:
        """What determines the items and their scoring (data version and hash, checker), for meta."""
        ...
