"""A verifiable set as a task: the model acts with the tools offered; did it call, and was it right?

``VerifiableTask`` runs each item through the policy (greedy, the policy's own sampler) with the
item's tools offered, in one of two modes:

* ``act="turn"`` (default): a whole user turn; calls to the built-in diagnostic tools
  (``TOOL_FUNCTIONS``: the safe calculator) really run, so the final answer can be checked;
* ``act="step"``: the first decision only (a call, or an answer that is checked).

"Called" is the first step's *parsed* calls (kate's strict parsers), never a substring; a
malformed call attempt is recorded (``attempted``) and counts as not called. The records are what
the four-way breakdown, the probes' action labels and P(call)'s opening detection read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.agent.policy import Policy
from kate.diagnose.calculator import calculator
from kate.diagnose.items import VerifiableItem, task_set_sha256
from kate.envs.base import Observation
from kate.envs.python_functions import PythonFunctionsEnv
from kate.llm.base import Message, ToolSchema
from kate.toolcall import ToolCall

ACT_MODES = ("turn", "step")
MODEL_ERROR = "kate:model_error"
TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {"calculator": calculator}


def tool_name(tool: Mapping[str, Any]) -> str:
    return str(tool.get("function", tool).get("name"))


class OfferedTools:
    """The environment of one item: the offered tools that are built-in functions run (through
    ``PythonFunctionsEnv``'s checks); an offered tool without a function answers that it cannot run
    here; anything else is an unknown function."""

    def __init__(self, tools: Sequence[ToolSchema], functions: Mapping[str, Callable[..., Any]]) -> None:
        self._tools = [dict(t) for t in tools]
        names = [tool_name(t) for t in tools]
        self._env = PythonFunctionsEnv([functions[n] for n in names if n in functions])
        self._runnable = {n for n in names if n in functions}
        self._offered = set(names)

    def tools(self) -> list[ToolSchema]:
        return [dict(t) for t in self._tools]

    def execute(self, call: ToolCall) -> Observation:
        if call.name in self._offered and call.name not in self._runnable:
            return Observation.failure(f"{call.name} cannot be run in this diagnostic; answer without it")
        return self._env.execute(call)

    def state(self) -> dict[str, Any]:
        return {}


def _first_step(text: str, calls: Sequence[ToolCall], parse_error: str | None) -> dict[str, Any]:
    return {"text": text, "calls": [c.to_dict() for c in calls], "parse_error": parse_error}


@dataclass
class VerifiableTask:
    """Items of a verifiable set, acted on with their tools offered; scored by each item's checker."""

    item_list: Sequence[VerifiableItem]
    name: str = "verifiable"
    act: str = "turn"
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=lambda: dict(TOOL_FUNCTIONS))
    origin: Mapping[str, Any] = field(default_factory=dict)  # what made the items: {"set": "arithmetic", "seed": 0}

    def __post_init__(self) -> None:
        if self.act not in ACT_MODES:
            raise ValueError(f"act must be one of {ACT_MODES}, got {self.act!r}")
        ids = [item.id for item in self.item_list]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: item ids must be unique")

    def items(self) -> Sequence[VerifiableItem]:
        return self.item_list

    def describe(self) -> dict[str, Any]:
        return {"diagnostic": "action", "act": self.act, "items_sha256": task_set_sha256(self.item_list),
                **dict(self.origin)}  # fmt: skip

    def prompt(self, item: VerifiableItem) -> tuple[list[Message], list[ToolSchema]]:
        """The messages and tools at the decision point (what the hidden states are read from)."""
        return item.prompt(), list(item.tools)

    def necessary(self, item: VerifiableItem) -> bool | None:
        return item.necessary

    def solve(self, item: VerifiableItem, policy: Policy, seed: int) -> dict[str, Any]:
        messages, tools = self.prompt(item)
        try:
            if self.act == "step":
                step = policy.step(messages, tools or None, seed=seed).step
                first = _first_step(step.text, step.calls, step.parse_error)
                answer = None if step.calls or step.parse_error else step.text
                return {"called": bool(step.calls), "attempted": bool(step.calls) or step.parse_error is not None,
                        "first_step": first, "answer": answer,
                        "end_reason": "answer" if answer is not None else "step"}  # fmt: skip
            turn = policy.run_turn(OfferedTools(tools, self.functions), messages, seed=seed, tools=tools or None)
        except ValueError as error:  # e.g. the prompt does not fit the context: a recorded failure
            return {"called": False, "attempted": False, "first_step": None, "answer": None,
                    "error_type": MODEL_ERROR, "error": str(error)}  # fmt: skip
        head = turn.steps[0] if turn.steps else None
        first = _first_step(head.text, head.calls, head.parse_error) if head else None
        called = bool(head and head.calls)
        return {"called": called, "attempted": called or bool(head and head.parse_error is not None),
                "first_step": first, "answer": turn.answer, "end_reason": turn.end_reason,
                "steps": [s.to_dict() for s in turn.steps]}  # fmt: skip

    def score(self, item: VerifiableItem, trace: Mapping[str, Any]) -> dict[str, Any]:
        answer = trace.get("answer")
        correct = answer is not None and item.check(answer)
        score: dict[str, Any] = {"valid": correct, "correct": correct, "called": bool(trace.get("called"))}
        if trace.get("error_type"):
            score.update(error_type=trace["error_type"], error=trace.get("error"))
        return score
