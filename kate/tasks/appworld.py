"""AppWorld as a task: each task id is one code-action turn of the policy in its world (AppWorld
itself through the worker process, or the stand-in world), scored by the world's own tests.

The task message is the instruction and the allowed apps; knowledge is retrieved for the
instruction among entries of the task's apps, never from the task itself. A record keeps every
step (reply, code, output, vote), the end reason, the knowledge and AppWorld's test results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.appworld.client import AppWorldClient
from kate.appworld.code_env import CodeEnvironment
from kate.appworld.stand_in import STAND_IN_TASKS, StandInWorld
from kate.appworld.world import CodeWorld

WORLDS = ("stand_in", "appworld")
SYSTEM_PROMPT = """\
You are an AI assistant working for your supervisor {first_name} {last_name} ({email}). You do tasks \
with the supervisor's apps by writing Python in a shell, one step at a time.

Rules:
- Each reply is ONE ```python code block. The shell runs it and shows you what it printed.
- Call APIs as apis.<app>.<api>(name=value), keyword arguments only. Look an app's APIs up with \
print(apis.api_docs.show_api_descriptions(app_name='<app>')) and one API with \
print(apis.api_docs.show_api_doc(app_name='<app>', api_name='<api>')).
- Passwords are in apis.supervisor.show_account_passwords(); most apps need a login for an access_token.
- print() what you need to see. Variables persist between steps.
- When the task is done, call apis.supervisor.complete_task(answer=<answer>) if the task asks a question, \
else apis.supervisor.complete_task()."""
TASK_PROMPT = "Task: {instruction}\nApps you may use: {apps}"


def task_messages(task: Mapping[str, Any], system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, Any]]:
    supervisor = {"first_name": "", "last_name": "", "email": "", **task.get("supervisor", {})}
    user = TASK_PROMPT.format(instruction=task["instruction"], apps=", ".join(task.get("allowed_apps", [])) or "any")
    return [{"role": "system", "content": system_prompt.format(**supervisor)}, {"role": "user", "content": user}]


def scenario_of(task_id: str) -> str:
    """AppWorld task ids are ``<scenario>_<n>`` (e.g. ``82e2fac_1``)."""
    return task_id.rsplit("_", 1)[0]


class Worlds:
    """Opens tasks of the configured world: stand-in tasks in process, AppWorld through its worker."""

    def __init__(self, kind: str = "stand_in", python: str | None = None, root: str | None = None,
                 max_interactions: int = 50) -> None:  # fmt: skip
        if kind not in WORLDS:
            raise ValueError(f"world must be one of {WORLDS}, got {kind!r}")
        self.kind, self.max_interactions = kind, max_interactions
        self.client = AppWorldClient(python, root) if kind == "appworld" else None

    def task_ids(self, dataset: str, limit: int | None = None, explicit: list[str] | None = None) -> list[str]:
        ids = list(explicit or [])
        if not ids:
            ids = list(STAND_IN_TASKS) if self.client is None else self.client.task_ids(dataset)
        return ids[:limit] if limit else ids

    def open(self, task_id: str, experiment_name: str) -> CodeWorld:
        if self.client is None:
            return StandInWorld(task_id)
        return self.client.open(task_id, experiment_name, max_interactions=self.max_interactions)

    def official(self, task_ids: list[str], experiment_name: str) -> dict[str, Any] | None:
        return self.client.evaluate_tasks(task_ids, experiment_name) if self.client and task_ids else None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def __enter__(self) -> "Worlds":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class AppWorldItem:
    id: str
    category: str = "appworld"


@dataclass
class AppWorldTask:
    worlds: Worlds
    task_ids: list[str]
    experiment_name: str = "kate"
    max_output_chars: int = 3000
    name: str = "appworld"

    def items(self) -> list[AppWorldItem]:
        return [AppWorldItem(t) for t in self.task_ids]

    def describe(self) -> dict[str, Any]:
        return {"world": self.worlds.kind, "max_output_chars": self.max_output_chars, "scorer": "world tests"}

    def solve(self, item: AppWorldItem, policy: Policy, seed: int) -> dict[str, Any]:
        world = self.worlds.open(item.id, self.experiment_name)
        try:
            task = world.task
            context = KnowledgeContext("code", api_classes=tuple(task.get("allowed_apps", ())),
                                       exclude_ids=(item.id,), query=task["instruction"])  # fmt: skip
            turn = policy.run_turn(CodeEnvironment(world, self.max_output_chars), task_messages(task), seed=seed,
                                   context=context)  # fmt: skip
            evaluation = world.evaluate()
        finally:
            world.close()
        steps = []
        for step in turn.steps:
            code = step.calls[0].arguments.get("code") if step.calls else None
            row = {"reply": step.text, "code": code, "error": step.parse_error, "vote": step.vote}
            if step.executed:
                row["output"] = step.observations[0].content
            elif step.repeat_of is not None:
                row["repeat_of"] = step.repeat_of
            steps.append(row)
        usage = turn.usage
        return {"instruction": task["instruction"], "end": turn.end_reason, "steps": steps, "n_steps": len(steps),
                "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
                "knowledge": turn.knowledge, "retrieval": turn.retrieved.to_dict() if turn.retrieved else None,
                "evaluation": evaluation}  # fmt: skip

    def score(self, item: AppWorldItem, trace: Mapping[str, Any]) -> dict[str, Any]:
        evaluation = trace["evaluation"]
        return {"valid": bool(evaluation["success"]), "pass_count": evaluation.get("pass_count"),
                "num_tests": evaluation.get("num_tests")}  # fmt: skip
