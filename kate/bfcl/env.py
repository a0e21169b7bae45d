"""BFCL's multi-turn Python backends (GorillaFileSystem, MathAPI, ...) behind kate's Environment.

A call reaches a backend only if its name is one of the functions currently offered (miss_func
adds functions mid-dialogue) and it is a parsed ToolCall: the string bfcl-eval executes is written
by kate from the parsed call (``to_python_call``), never taken from model text.
"""

from __future__ import annotations

import json
from typing import Any

from kate.bfcl import backends
from kate.bfcl.data import BFCLEntry, functions_to_tools
from kate.envs.base import Observation
from kate.toolcall import ToolCall, to_python_call


class BFCLEnvironment:
    """One dialogue's backends, in their initial state from the entry's ``initial_config``."""

    def __init__(self, entry: BFCLEntry) -> None:
        if not entry.is_multi_turn:
            raise ValueError(f"{entry.id} is not a multi-turn entry")
        self.entry = entry
        self.functions = [dict(f) for f in entry.functions]
        self._model_name = backends.private_model_name("kate_env")
        self._run([])  # create the instances now, so state() works before the first call

    def add_functions(self, functions: list[dict[str, Any]]) -> None:
        """miss_func: functions that arrive mid-dialogue."""
        known = {f["name"] for f in self.functions}
        self.functions += [dict(f) for f in functions if f["name"] not in known]

    def tools(self) -> list[dict[str, Any]]:
        return functions_to_tools(self.functions)

    def _run(self, strings: list[str]) -> tuple[list[str], dict[str, Any]]:
        return backends.execute(self._model_name, self.entry, strings)

    def execute(self, call: ToolCall) -> Observation:
        offered = {f["name"] for f in self.functions}
        if call.name not in offered:
            return Observation.failure(f"unknown function {call.name!r}; available: {', '.join(sorted(offered))}")
        try:
            source = to_python_call([call])
        except ValueError as error:
            return Observation.failure(f"cannot express the call: {error}")
        [result], _ = self._run([source])
        if result.startswith("Error during execution"):
            return Observation.failure(result)
        return Observation.success(result)

    def state(self) -> dict[str, Any]:
        _, instances = self._run([])
        return {
            name: json.loads(json.dumps({k: v for k, v in vars(obj).items() if not k.startswith("_")}, default=str))
            for name, obj in instances.items()
        }

    def close(self) -> None:
        """Drop this dialogue's instances from bfcl-eval's module globals."""
        backends.forget(self._model_name)
