"""The environment seam: tools to offer, ``execute(call) -> Observation``, a JSON-able state.

BFCL backends, AppWorld and a user's own Python functions all look the same to the agent loop.
Two optional members (``kate/envs/actions.py``): ``action_format`` (how steps are written into the
history: OpenAI tool calls by default, or code blocks) and ``finished()`` (the environment ended
the task itself, e.g. AppWorld's ``complete_task``). A code-action environment offers no tools and
receives ``ToolCall("python", {"code": ...})``.
Contract: ``execute`` never raises for anything the model can send. An unknown function, missing,
unknown or ill-typed arguments, or an exception inside the tool all come back as an
``Observation`` with ``ok=False`` and a message the model can read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kate.toolcall import ToolCall


@dataclass(frozen=True)
class Observation:
    """What the environment says back about one call: ``content`` is shown to the model."""

    content: str
    ok: bool = True
    error: str | None = None

    @classmethod
    def success(cls, content: str) -> "Observation":
        return cls(content=content, ok=True, error=None)

    @classmethod
    def failure(cls, error: str) -> "Observation":
        """A failed call; the model reads ``Error: <error>``."""
        return cls(content=f"Error: {error}", ok=False, error=error)

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "ok": self.ok, "error": self.error}


@runtime_checkable
class Environment(Protocol):
    """Offers tools (OpenAI schemas), executes calls to them, and reports its state."""

    def tools(self) -> list[dict[str, Any]]: ...

    def execute(self, call: ToolCall) -> Observation: ...

    def state(self) -> dict[str, Any]: ...
