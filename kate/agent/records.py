"""What the loop records: one step, one user turn, one dialogue (JSON-able with ``to_dict``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kate.agent.knowledge import Retrieved
from kate.envs.base import Observation
from kate.llm.base import Message, Usage
from kate.toolcall import ToolCall

END_REASONS = ("answer", "max_steps", "repeat", "malformed", "finished")


def usage_dict(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens}  # fmt: skip


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(a.prompt_tokens + b.prompt_tokens, a.completion_tokens + b.completion_tokens,
                 a.cached_tokens + b.cached_tokens)  # fmt: skip


@dataclass(frozen=True)
class StepRecord:
    """One step as recorded: what was chosen, the vote, what the environment said."""

    index: int
    calls: tuple[ToolCall, ...]
    text: str
    vote: dict[str, Any] | None
    observations: tuple[Observation, ...]
    usage: Usage
    executed: bool
    parse_error: str | None = None
    repeat_of: int | None = None
    prefill: str | None = None  # an answer the loop asked for began with this text (kate/agent/turn_end.py)
    echo: bool = False  # an empty reply or one repeating a result or an earlier answer, not kept (echo_policy)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "index": self.index,
            "calls": [c.to_dict() for c in self.calls],
            "text": self.text,
            "vote": self.vote,
            "observations": [o.to_dict() for o in self.observations],
            "usage": usage_dict(self.usage),
            "executed": self.executed,
            "parse_error": self.parse_error,
            "repeat_of": self.repeat_of,
        }
        if self.prefill is not None:
            out["prefill"] = self.prefill
        if self.echo:
            out["echo"] = True
        return out


@dataclass(frozen=True)
class TurnResult:
    """One user turn: ``messages`` is the whole history after it; this turn starts at ``start``."""

    user: str
    knowledge: str | None
    steps: tuple[StepRecord, ...]
    answer: str | None
    end_reason: str
    messages: list[Message]
    start: int
    state: dict[str, Any] = field(default_factory=dict)
    retrieved: Retrieved | None = None

    @property
    def calls(self) -> list[ToolCall]:
        """The calls executed in this turn, in order."""
        return [call for step in self.steps if step.executed for call in step.calls]

    @property
    def executed_steps(self) -> list[list[ToolCall]]:
        """The call set of each executed step (what BFCL's multi-turn checker reads)."""
        return [list(step.calls) for step in self.steps if step.executed]

    @property
    def calls_per_turn(self) -> list[list[ToolCall]]:
        return [self.calls]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for step in self.steps:
            total = add_usage(total, step.usage)
        return total

    def to_dict(self, full_history: bool = True) -> dict[str, Any]:
        """JSON-able; ``full_history=False`` keeps only this turn's messages."""
        return {
            "user": self.user,
            "knowledge": self.knowledge,
            "answer": self.answer,
            "end_reason": self.end_reason,
            "calls": [c.to_dict() for c in self.calls],
            "steps": [s.to_dict() for s in self.steps],
            "usage": usage_dict(self.usage),
            "state": self.state,
            "messages": self.messages if full_history else self.messages[self.start:],
        }


@dataclass(frozen=True)
class DialogueResult:
    """All turns of one dialogue; ``messages`` is the final history. ``error``: the turn at which
    the model failed (e.g. the prompt no longer fits its context) and why; later turns did not run."""

    turns: tuple[TurnResult, ...]
    messages: list[Message]
    error: str | None = None

    @property
    def calls_per_turn(self) -> list[list[ToolCall]]:
        return [turn.calls for turn in self.turns]

    @property
    def state(self) -> dict[str, Any]:
        return self.turns[-1].state if self.turns else {}

    def to_dict(self) -> dict[str, Any]:
        usage = Usage()
        for turn in self.turns:
            usage = add_usage(usage, turn.usage)
        out = {
            "messages": self.messages,
            "turns": [t.to_dict(full_history=False) for t in self.turns],
            "calls_per_turn": [[c.to_dict() for c in calls] for calls in self.calls_per_turn],
            "end_reasons": [t.end_reason for t in self.turns],
            "usage": usage_dict(usage),
            "state": self.state,
        }
        if self.error is not None:
            out["error"] = self.error
        return out
