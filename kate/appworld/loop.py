"""The code-action loop: the model writes Python against ``apis``, the world runs it and shows the
output, until the task is completed, the step budget is spent, or the model repeats itself.

Knowledge (retrieved for the task instruction) is appended inside the first user turn, as KATE
does. Ends: ``completed`` (the agent called ``complete_task``), ``max_steps``, ``repeat`` (the
same normalized code ``repeat_limit`` times in a row), ``no_code`` (``no_code_limit`` replies in
a row without a code block). Every step keeps the raw reply, the code, the output and the vote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kate.appworld.code_action import normalize_code
from kate.appworld.code_sampling import CodeSampler
from kate.appworld.world import CodeWorld
from kate.llm.base import ChatModel, Message

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
OUTPUT_PROMPT = "Output:\n```\n{output}\n```"
NO_CODE_PROMPT = "Your reply had no code ({error}). Reply with one ```python code block."

Retrieve = Callable[[str, list[Message]], "str | None"]


@dataclass(frozen=True)
class LoopConfig:
    max_steps: int = 20
    repeat_limit: int = 3
    no_code_limit: int = 2
    max_output_chars: int = 3000
    system_prompt: str = SYSTEM_PROMPT


def task_messages(world: CodeWorld, system_prompt: str, knowledge: str | None) -> list[Message]:
    task, supervisor = world.task, {"first_name": "", "last_name": "", "email": "", **world.task.get("supervisor", {})}
    user = TASK_PROMPT.format(instruction=task["instruction"], apps=", ".join(task.get("allowed_apps", [])) or "any")
    if knowledge:
        user = f"{user}\n\n{knowledge}"
    return [{"role": "system", "content": system_prompt.format(**supervisor)}, {"role": "user", "content": user}]


def run_code_task(model: ChatModel, world: CodeWorld, sampler: CodeSampler, *, retrieve: Retrieve | None = None,
                  config: LoopConfig = LoopConfig(), seed: int | None = None) -> dict[str, Any]:  # fmt: skip
    """Run one task to its end; returns the record (steps, end reason, usage, knowledge)."""
    knowledge = retrieve(world.task["instruction"], []) if retrieve is not None else None
    messages = task_messages(world, config.system_prompt, knowledge)
    steps: list[dict[str, Any]] = []
    end, last_key, same, no_code = "max_steps", None, 0, 0
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    for index in range(config.max_steps):
        step = sampler.act(model, messages, seed=None if seed is None else seed + index)
        usage["prompt_tokens"] += step.usage.prompt_tokens
        usage["completion_tokens"] += step.usage.completion_tokens
        record: dict[str, Any] = {"reply": step.text, "code": step.code, "error": step.error, "vote": step.vote}
        steps.append(record)
        if step.code is None:
            no_code += 1
            if no_code >= config.no_code_limit:
                end = "no_code"
                break
            messages += [{"role": "assistant", "content": step.text},
                         {"role": "user", "content": NO_CODE_PROMPT.format(error=step.error)}]  # fmt: skip
            continue
        no_code = 0
        key = normalize_code(step.code)
        same = same + 1 if key == last_key else 1
        last_key = key
        if same >= config.repeat_limit:
            end = "repeat"
            break
        output = world.execute(step.code)
        record["output"] = output
        if len(output) > config.max_output_chars:
            output = output[: config.max_output_chars] + f"\n... [{len(output) - config.max_output_chars} more characters]"
        messages += [{"role": "assistant", "content": f"```python\n{step.code}\n```"},
                     {"role": "user", "content": OUTPUT_PROMPT.format(output=output)}]  # fmt: skip
        if world.task_completed():
            end = "completed"
            break
    return {"task_id": world.task["task_id"], "instruction": world.task["instruction"], "end": end,
            "steps": steps, "n_steps": len(steps), "usage": usage, "knowledge": knowledge}  # fmt: skip
