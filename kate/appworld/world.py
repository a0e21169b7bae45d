"""The code-action environment seam: a task, ``execute(code) -> output``, completion, evaluation.

``RemoteAppWorld`` is AppWorld itself (through the worker process, whatever sends its requests:
``AppWorldClient`` in ``kate/appworld/client.py``); ``StandInWorld``
(``kate/appworld/stand_in.py``) is a small world with the same surface for tests and demos
without AppWorld's data. The code loop sees only this protocol.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class CodeWorld(Protocol):
    """``task``: ``task_id``, ``instruction``, ``supervisor`` (name, email, ...), ``allowed_apps``."""

    task: dict[str, Any]

    def execute(self, code: str) -> str: ...

    def task_completed(self) -> bool: ...

    def evaluate(self) -> dict[str, Any]:
        """The task's tests: at least ``success`` (bool), ``pass_count``, ``num_tests``."""
        ...

    def close(self) -> None: ...


class Requester(Protocol):
    """Sends one op to the AppWorld worker and returns its result (``AppWorldClient`` is one)."""

    def request(self, op: str, **arguments: Any) -> Any: ...


class RemoteAppWorld:
    """One open AppWorld task in the worker process (see ``AppWorldClient.open``)."""

    def __init__(self, client: Requester, task: dict[str, Any]) -> None:
        self.client, self.task = client, task
        self._open = True

    def execute(self, code: str) -> str:
        return self.client.request("execute", code=code)

    def task_completed(self) -> bool:
        return bool(self.client.request("task_completed"))

    def evaluate(self) -> dict[str, Any]:
        result = self.client.request("evaluate")
        self._open = False
        return result

    def close(self) -> None:
        if self._open:
            self.client.request("close")
            self._open = False
