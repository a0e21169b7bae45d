"""Training steps from solved dialogues: one per assistant step, prompts made by kate's own loop.

A BFCL entry is solved by its real task (``kate.tasks.bfcl.BFCLTask``) with a ``Policy`` whose
model is a ``TeacherModel`` replying with the ground truth, so every prompt is what inference sends
(the system prompt, knowledge injected by ``Policy.prepare``, calls and real tool results from
BFCL's own backends in the loop's format). The steps of a turn are its ground-truth calls, one per
step (multi-turn runs take one call per step, ``one_call``), then a final answer to the user written
by an ``AnswerWriter``; a single-turn entry is one step holding all its calls; an entry whose
ground truth is no call is one step whose target is a plain answer. Trajectory files in kate's
format (``kate.knowledge.trajectory``) are replayed the same way, their recorded results returned
in order by a ``ReplayEnvironment``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kate.agent.knowledge import Knowledge, KnowledgeContext, Retrieved
from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.bfcl.data import BFCLEntry, ground_truth_calls
from kate.envs.base import Observation
from kate.knowledge.bfcl_source import NO_CALL, single_turn_calls, user_text
from kate.knowledge.trajectory import Trajectory
from kate.llm.base import Message
from kate.tasks.bfcl import BFCLTask, knowledge_context
from kate.tasks.own_tools import OwnToolsTask
from kate.tasks.step import step_trace
from kate.toolcall import ToolCall
from kate.train.teacher import RecordedStep, ScriptExhausted, Target, TeacherModel

_MULTI_TURN_ID = re.compile(r"^multi_turn_(base|miss_func|miss_param|long_context)_(\d+)$")


def sibling_ids(entry_id: str) -> tuple[str, ...]:
    """The ids of the same BFCL dialogue in every multi-turn category (they share questions and ground
    truth): a training step must not see knowledge made from any of them, as a test item never does."""
    match = _MULTI_TURN_ID.match(entry_id)
    if not match:
        return (entry_id,)
    index = match.group(2)
    return tuple(f"multi_turn_{c}_{index}" for c in ("base", "miss_func", "miss_param", "long_context"))


AnswerFn = Callable[[list[Message], str], tuple[str, str]]  # (prompt, question) -> (text, writer label)


@dataclass
class SolvedStep:
    """One training step: the prompt as sent, the tools, the target, and where it came from."""

    id: str
    source_id: str
    category: str
    turn: int
    index: int
    prompt: list[Message]
    tools: list[dict[str, Any]] | None
    target: Target
    answer_label: str | None = None
    hits: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Skipped:
    """An item left out of the dataset, and why."""

    source_id: str
    reason: str


def dialogue_targets(turn_calls: Sequence[Sequence[ToolCall]], questions: Sequence[str],
                     answers: Sequence[str | None] | None = None) -> list[Target]:
    """A turn's calls one per step, then its answer (given, or to be written); no calls: an answer."""
    out = []
    for t, calls in enumerate(turn_calls):
        out += [Target((c,), None, "call", questions[t]) for c in calls]
        given = answers[t] if answers is not None else None
        out.append(Target((), given, "answer" if calls else "no_call", questions[t]))
    return out


class ReplayEnvironment:
    """Returns a trajectory's recorded results in order (or a bare acknowledgement when none)."""

    def __init__(self, tools: Sequence[dict[str, Any]], results: Sequence[str | None]) -> None:
        self._tools, self._results = [dict(t) for t in tools], list(results)

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    def add_tools(self, tools: Sequence[dict[str, Any]]) -> None:
        self._tools += [dict(t) for t in tools]

    def execute(self, call: ToolCall) -> Observation:
        result = self._results.pop(0) if self._results else None
        return Observation.success(result if result is not None else "OK")

    def state(self) -> dict[str, Any]:
        return {}


@dataclass
class RecordingKnowledge:
    """Passes through to ``inner`` and keeps what each turn got (one retrieval per turn, in order)."""

    inner: Knowledge | None
    exclude: tuple[str, ...] = ()
    turns: list[list[dict[str, Any]]] = field(default_factory=list)

    def __call__(self, user_text: str, history: list[Message], context: KnowledgeContext) -> Retrieved | None:
        if self.exclude:
            context = replace(context, exclude_ids=tuple(dict.fromkeys((*context.exclude_ids, *self.exclude))))
        retrieved = self.inner(user_text, history, context) if self.inner is not None else None
        self.turns.append(list(retrieved.hits) if retrieved is not None else [])
        return retrieved

    def describe(self) -> Any:
        describe = getattr(self.inner, "describe", None)
        return describe() if callable(describe) else None


def _steps(recorded: Sequence[RecordedStep], source_id: str, category: str, labels: dict[int, str],
           hits: Sequence[list[dict[str, Any]]]) -> list[SolvedStep]:
    out, turn, index = [], 0, 0
    for k, step in enumerate(recorded):
        out.append(SolvedStep(f"{source_id}/t{turn}/s{index}", source_id, category, turn, index, step.prompt,
                              step.tools, step.target, labels.get(k), list(hits[turn]) if turn < len(hits) else []))
        index += 1
        if not step.target.calls:
            turn, index = turn + 1, 0
    return out


@dataclass
class StepBuilder:
    """Builds the steps of BFCL entries and trajectories under one knowledge and loop settings."""

    knowledge: Knowledge | None
    write_answer: AnswerFn
    no_call_answer: str
    system_prompt: str | None = "kate"

    def settings(self) -> LoopSettings:
        """The arms' loop (system prompt, one call per step), except that a ground-truth call repeated
        within a turn runs again (``repeat_policy="off"``) and no step cap cuts a ground-truth turn."""
        return LoopSettings(max_steps=64, repeat_policy="off", system_prompt=self.system_prompt, one_call=True)

    def _policy(self, teacher: TeacherModel, source_id: str) -> tuple[Policy, RecordingKnowledge]:
        settings = self.settings()
        recorder = RecordingKnowledge(self.knowledge, sibling_ids(source_id))
        return Policy(teacher, knowledge=recorder if self.knowledge is not None else None, settings=settings), recorder

    def _teacher(self, targets: list[Target]) -> tuple[TeacherModel, dict[int, str]]:
        labels: dict[int, str] = {}
        teacher = TeacherModel(targets)

        def write(prompt: list[Message], target: Target) -> str:
            text, label = self.write_answer(prompt, target.question)
            labels[len(teacher.steps)] = label
            return text

        teacher.write_answer = write
        return teacher, labels

    def _solved(self, solve: Callable[[Policy], dict[str, Any]], source_id: str, category: str,
                targets: list[Target]) -> list[SolvedStep] | Skipped:
        """Run ``solve(policy)`` (a task's own solving) with a teacher replying ``targets``; the steps it
        recorded, or why the item was left out (a model error, or a step count that does not match)."""
        teacher, labels = self._teacher(targets)
        policy, recorder = self._policy(teacher, source_id)
        try:
            trace = solve(policy)
        except ScriptExhausted as error:
            return Skipped(source_id, str(error))
        if trace.get("error_type") or len(teacher.steps) != len(teacher.targets):
            return Skipped(source_id, str(trace.get("error") or f"{len(teacher.steps)} of {len(teacher.targets)} steps"))
        return _steps(teacher.steps, source_id, category, labels, recorder.turns)

    def bfcl_entry(self, entry: BFCLEntry) -> list[SolvedStep] | Skipped:
        if not entry.is_multi_turn:
            no_call = entry.category in NO_CALL
            calls = () if no_call else single_turn_calls(entry.ground_truth)
            target = Target((), self.no_call_answer, "no_call") if no_call else Target(tuple(calls), None, "call")
            solve = lambda policy: step_trace(policy, entry.turns[0], entry.tools, seed=0,  # noqa: E731
                                              context=knowledge_context(entry))
            return self._solved(solve, entry.id, entry.category, [target])
        targets = dialogue_targets(ground_truth_calls(entry), [user_text(m) for m in entry.turns])
        task = BFCLTask([entry], split="train")
        return self._solved(lambda policy: task.solve(entry, policy, 0), entry.id, entry.category, targets)

    def own_tools_item(self, item: Any) -> list[SolvedStep] | Skipped:
        """A question of the own-tools task (``kate.tasks.own_tools``), solved by its own task: the
        expected calls one per step, run on the task's Python functions, then the written answer."""
        calls = item.expected_calls()
        targets = dialogue_targets([calls], [item.question]) if calls else [Target((), None, "no_call", item.question)]
        task = OwnToolsTask(split=item.split)
        return self._solved(lambda policy: task.solve(item, policy, 0), item.id, item.category, targets)

    def trajectory(self, trajectory: Trajectory) -> list[SolvedStep] | Skipped:
        questions = [t.user for t in trajectory.turns]
        targets = dialogue_targets([t.calls for t in trajectory.turns], questions, [t.answer for t in trajectory.turns])
        results = [r for t in trajectory.turns for r in (t.results or [None] * len(t.calls))]
        env = ReplayEnvironment(trajectory.tools, results)
        context = KnowledgeContext("multi_turn" if trajectory.is_multi_turn else "single_turn",
                                   api_classes=tuple(trajectory.api_classes) or None,
                                   tools=tuple(trajectory.tools), exclude_ids=(trajectory.id,))

        def solve(policy: Policy) -> dict[str, Any]:
            arrive = lambda t: env.add_tools(trajectory.turns[t].tools_added)  # noqa: E731
            result = policy.run_dialogue(env, questions, context=context, before_turn=arrive)
            return {"error_type": "dialogue", "error": result.error} if result.error else {}

        return self._solved(solve, trajectory.id, trajectory.source or "trajectory", targets)


def iterate(builder: StepBuilder, entries: Sequence[BFCLEntry], trajectories: Sequence[Trajectory],
            own_tools: Sequence[Any] = ()) -> Iterator[tuple[str, list[SolvedStep] | Skipped]]:
    """``(item id, its steps or why it was left out)`` for every item, in order."""
    for entry in entries:
        yield entry.id, builder.bfcl_entry(entry)
    for item in own_tools:
        yield item.id, builder.own_tools_item(item)
    for trajectory in trajectories:
        yield trajectory.id, builder.trajectory(trajectory)
