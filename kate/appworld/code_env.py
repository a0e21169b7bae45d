"""A code world as an ``Environment``: the one action is ``ToolCall("python", {"code": ...})``, run
in the world's own sandbox (kate never executes model output itself); the output is the
observation; the world says when the task is complete (``finished``)."""

from __future__ import annotations

from typing import Any

from kate.appworld.world import CodeWorld
from kate.envs.actions import CodeActions
from kate.envs.base import Observation
from kate.toolcall import ToolCall
from kate.toolcall.code import CODE_TOOL


class CodeEnvironment:
    def __init__(self, world: CodeWorld, max_output_chars: int = 3000) -> None:
        self.world = world
        self.action_format = CodeActions(max_output_chars)

    def tools(self) -> list[dict[str, Any]]:
        return []  # code actions call ``apis`` inside the code; no tool schemas are offered

    def execute(self, call: ToolCall) -> Observation:
        if call.name != CODE_TOOL or not isinstance(call.arguments.get("code"), str):
            return Observation.failure(f"this environment runs Python code actions, not {call.name!r}")
        return Observation.success(self.world.execute(call.arguments["code"]))

    def finished(self) -> bool:
        return self.world.task_completed()

    def state(self) -> dict[str, Any]:
        return {}
