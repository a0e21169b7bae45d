"""kate's side of the AppWorld process boundary: start the worker, send ops, turn errors into
exceptions that say what to do.

    with AppWorldClient() as client:
        client.ping()          # {"appworld": "0.1.3.post1", "root": ..., "data": False, ...}
        world = client.open("82e2fac_1", "kate_direct")

``python``: AppWorld's interpreter (default ``.venv-appworld/bin/python``, made by
``scripts/setup_appworld.sh``); ``root``: APPWORLD_ROOT, where ``data/`` must be (default
``~/.cache/kate/appworld``).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from kate.appworld.world import RemoteAppWorld

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
DEFAULT_PYTHON = REPO / ".venv-appworld" / "bin" / "python"
DEFAULT_ROOT = Path.home() / ".cache" / "kate" / "appworld"
SETUP_HINT = "bash scripts/setup_appworld.sh"


class AppWorldError(RuntimeError):
    """The worker reported an error (``kind``: error | bad_request)."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


class AppWorldNotInstalled(AppWorldError):
    def __init__(self, message: str) -> None:
        super().__init__(message, "not_installed")


class AppWorldDataMissing(AppWorldError):
    """AppWorld's task data is not under APPWORLD_ROOT; the message says where it goes."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "data_missing")


class AppWorldClient:
    def __init__(self, python: str | os.PathLike[str] | None = None, root: str | os.PathLike[str] | None = None,
                 timeout_s: float = 300.0) -> None:  # fmt: skip
        self.python = Path(python) if python else DEFAULT_PYTHON
        self.root = Path(root).expanduser() if root else DEFAULT_ROOT
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[str] | None = None

    # -- process ----------------------------------------------------------------------------
    def start(self) -> "AppWorldClient":
        if self._process is not None:
            return self
        if not self.python.exists():
            raise AppWorldNotInstalled(
                f"AppWorld's interpreter {self.python} does not exist. AppWorld needs its own environment "
                f"(it pins pydantic < 2); create it with `{SETUP_HINT}`, or point appworld.python at one "
                "where `pip install appworld && appworld install` has run."
            )
        self.root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "APPWORLD_ROOT": str(self.root), "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            [str(self.python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=env, cwd=self.root,
        )  # fmt: skip
        return self

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()  # the worker closes its open world and exits at end of input
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    def __enter__(self) -> "AppWorldClient":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------------
    def request(self, op: str, **arguments: Any) -> Any:
        process = self.start()._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
            process.stdin.flush()
        except BrokenPipeError:
            raise AppWorldError(f"the AppWorld worker ({self.python}) exited; rerun `{SETUP_HINT}`") from None
        line = _read_line(process, self.timeout_s)
        if line is None:
            self.close()
            raise AppWorldError(f"the AppWorld worker gave no answer to {op!r} within {self.timeout_s:.0f} s")
        if not line:
            self.close()
            raise AppWorldError(f"the AppWorld worker exited during {op!r} (is appworld installed? `{SETUP_HINT}`)")
        reply = json.loads(line)
        if reply.get("ok"):
            return reply.get("result")
        if reply.get("kind") == "data_missing":
            raise AppWorldDataMissing(reply["error"])
        raise AppWorldError(f"AppWorld {op}: {reply.get('error')}", reply.get("kind", "error"))

    def ping(self) -> dict[str, Any]:
        return self.request("ping")

    def task_ids(self, dataset: str) -> list[str]:
        return self.request("task_ids", dataset=dataset)

    def api_docs(self, apps: list[str]) -> dict[str, list[dict[str, Any]]]:
        return self.request("api_docs", apps=list(apps))

    def ground_truth(self, task_id: str) -> dict[str, Any]:
        return self.request("ground_truth", task_id=task_id)

    def evaluate_tasks(self, task_ids: list[str], experiment_name: str) -> dict[str, Any]:
        return self.request("evaluate_tasks", task_ids=list(task_ids), experiment_name=experiment_name)

    def open(self, task_id: str, experiment_name: str, max_interactions: int = 50) -> RemoteAppWorld:
        task = self.request("open", task_id=task_id, experiment_name=experiment_name, max_interactions=max_interactions)
        return RemoteAppWorld(self, task)


def _read_line(process: subprocess.Popen[str], timeout_s: float) -> str | None:
    """One reply line, "" when the worker exited, None on timeout."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if reader.is_alive():
        process.kill()
        return None
    return box[0]
