"""Teacher forcing through kate's own loop: a chat model that answers every request with the
ground truth's next step and records the prompt it was sent.

Training prompts must be what inference sends. Rather than rebuild prompts, the data builder runs
the real task (``BFCLTask.solve``, ``step_trace``) with a ``Policy`` whose model is a
``TeacherModel``: the policy injects knowledge (``Policy.prepare``), the loop writes calls and tool
results into the history in the environment's format, and the teacher sees each prompt exactly as a
model would, keeps it, and replies with the target (a call, or the final answer). The tool results
are real: the loop executes the ground-truth calls on the task's own environment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.llm.base import Completion, Message, ToolSchema, Usage, check_sampling_args
from kate.toolcall import ToolCall, to_hermes


@dataclass(frozen=True)
class Target:
    """One assistant step to teach: calls, or a plain answer (``answer`` may be filled in at request
    time by ``write_answer`` from the prompt, e.g. a final answer drawn from the tool results)."""

    calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    kind: str = "call"  # call | answer | no_call
    question: str = ""  # the user's request of the turn (for a written answer)


@dataclass
class RecordedStep:
    prompt: list[Message]
    tools: list[ToolSchema] | None
    target: Target


class ScriptExhausted(RuntimeError):
    """The loop asked for more steps than the ground truth holds (e.g. a repeat it would not run)."""


@dataclass
class TeacherModel:
    """A ``ChatModel`` replying with ``targets`` in order; ``write_answer(prompt, target) -> text``
    fills an answer target that has no text yet. Every request is kept in ``steps``."""

    targets: Sequence[Target]
    write_answer: Callable[[list[Message], Target], str] | None = None
    name: str = "teacher"
    formats: tuple[str, ...] = ("hermes", "json")
    steps: list[RecordedStep] = field(default_factory=list)

    def chat(self, messages: list[Message], tools: list[ToolSchema] | None = None, *, n: int = 1,
             temperature: float = 0.0, max_tokens: int = 256, seed: int | None = None,
             stop: list[str] | None = None, logprobs: bool = False, **_: Any) -> list[Completion]:
        check_sampling_args(n, temperature, max_tokens)
        index = len(self.steps)
        if index >= len(self.targets):
            raise ScriptExhausted(f"step {index + 1} asked, the ground truth holds {len(self.targets)}")
        target = self.targets[index]
        prompt = [dict(m) for m in messages]
        if target.calls:
            completion = Completion(text=to_hermes(target.calls), tool_calls=target.calls, finish_reason="stop")
        else:
            answer = target.answer
            if answer is None:
                if self.write_answer is None:
                    raise ValueError("an answer target without text needs write_answer")
                answer = self.write_answer(prompt, target)
            target = Target((), answer, target.kind, target.question)
            completion = Completion(text=answer, finish_reason="stop", usage=Usage())
        self.steps.append(RecordedStep(prompt, list(tools) if tools else None, target))
        return [completion] * n
