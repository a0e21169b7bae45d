"""AppWorld's side of the process boundary: a JSON-lines worker run by AppWorld's own interpreter.

AppWorld pins pydantic < 2, which bfcl-eval (and so kate's environment) cannot share, so kate
never imports ``appworld``. ``scripts/setup_appworld.sh`` makes ``.venv-appworld``; kate starts
``.venv-appworld/bin/python kate/appworld/worker.py`` and talks to it over stdin/stdout, one JSON
object per line each way. This file imports only the standard library and ``appworld``: it must
run where kate is not installed.

Requests ``{"op": NAME, ...arguments}``; replies ``{"ok": true, "result": ...}`` or
``{"ok": false, "kind": "data_missing" | "bad_request" | "error", "error": "..."}``. The ops:

* ``ping`` -> appworld's version, APPWORLD_ROOT, whether the task data is there
* ``task_ids(dataset)`` -> the dataset's task ids (train, dev, test_normal, test_challenge)
* ``api_docs(apps)`` -> AppWorld's own function-calling docs (OpenAI tool schemas) per app
* ``open(task_id, experiment_name)`` -> the task: instruction, supervisor, allowed apps, datetime
* ``ground_truth(task_id)`` -> instruction, solution code, the APIs it uses (train/dev tasks only)
* ``execute(code)`` -> AppWorld's output for a code action (run by AppWorld's own sandboxed shell)
* ``task_completed`` -> whether the agent called ``apis.supervisor.complete_task``
* ``evaluate`` -> the open task's tests (AppWorld's evaluator), then ``close``
* ``evaluate_tasks(task_ids, experiment_name)`` -> TGC / SGC over finished tasks
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback

DATA_MISSING = (
    "AppWorld's task data is not at {root}/data (looked for {path}). It is downloaded, not "
    "packaged: on a machine with network run `.venv-appworld/bin/appworld download data --root "
    "{root}` (or copy an existing data/ folder there), then rerun. APPWORLD_ROOT picks another root."
)


class DataMissing(Exception):
    pass


def _root() -> str:
    return os.environ.get("APPWORLD_ROOT", os.getcwd())


def _require_data(*parts: str) -> None:
    path = os.path.join(_root(), "data", *parts)
    if not os.path.exists(path):
        raise DataMissing(DATA_MISSING.format(root=_root(), path=path))


class Worker:
    def __init__(self) -> None:
        self.world = None

    # -- ops --------------------------------------------------------------------------------
    def ping(self) -> dict:
        import appworld

        tasks = os.path.join(_root(), "data", "tasks")
        return {"appworld": appworld.__version__, "root": _root(), "data": os.path.isdir(tasks),
                "python": sys.version.split()[0]}  # fmt: skip

    def task_ids(self, dataset: str) -> list[str]:
        _require_data("datasets", f"{dataset}.txt")
        from appworld.task import load_task_ids

        return list(load_task_ids(dataset))

    def api_docs(self, apps: list[str]) -> dict[str, list[dict]]:
        from appworld.api_docs import prepare_api_docs

        return {app: prepare_api_docs(app, format="function_calling") for app in apps}

    def open(self, task_id: str, experiment_name: str, max_interactions: int = 50) -> dict:
        _require_data("tasks", task_id)
        from appworld import AppWorld

        self.close()
        self.world = AppWorld(task_id=task_id, experiment_name=experiment_name, max_interactions=max_interactions)
        task = self.world.task
        return {"task_id": task_id, "instruction": task.instruction, "supervisor": dict(task.supervisor),
                "allowed_apps": list(task.allowed_apps), "datetime": task.datetime.isoformat()}  # fmt: skip

    def ground_truth(self, task_id: str) -> dict:
        _require_data("tasks", task_id, "ground_truth")
        from appworld.task import Task

        task = Task.load(task_id=task_id, load_ground_truth=True, ground_truth_mode="full")
        truth = task.ground_truth
        return {"task_id": task_id, "instruction": task.instruction, "allowed_apps": list(task.allowed_apps),
                "solution_code": truth.solution_code_body, "required_apis": sorted(truth.required_apis)}  # fmt: skip

    def execute(self, code: str) -> str:
        return self._open_world().execute(code)  # AppWorld saves the task's databases after every step

    def task_completed(self) -> bool:
        return bool(self._open_world().task_completed())

    def evaluate(self) -> dict:
        tracker = self._open_world().evaluate()
        result = tracker.to_dict(stats_only=True)
        self.close()
        return result

    def evaluate_tasks(self, task_ids: list[str], experiment_name: str) -> dict:
        from appworld.evaluator import evaluate_tasks

        self.close()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            metrics = evaluate_tasks(task_ids, experiment_name=experiment_name, include_details=False)
        return metrics.get("aggregate", metrics)

    def close(self) -> None:
        if self.world is not None:
            self.world.close()
            self.world = None

    # -- protocol ---------------------------------------------------------------------------
    def _open_world(self):
        if self.world is None:
            raise ValueError("no task is open: send {'op': 'open', 'task_id': ...} first")
        return self.world

    def handle(self, request: dict) -> dict:
        op = request.pop("op", None)
        if op not in OPS:
            return {"ok": False, "kind": "bad_request", "error": f"unknown op {op!r}; known: {sorted(OPS)}"}
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return {"ok": True, "result": getattr(self, op)(**request)}
        except DataMissing as exc:
            return {"ok": False, "kind": "data_missing", "error": str(exc)}
        except TypeError as exc:
            return {"ok": False, "kind": "bad_request", "error": f"{op}: {exc}"}
        except Exception as exc:  # noqa: BLE001 - reported to the caller, the worker stays up
            return {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=5)}  # fmt: skip


OPS = {"ping", "task_ids", "api_docs", "open", "ground_truth", "execute", "task_completed", "evaluate",
       "evaluate_tasks", "close"}  # fmt: skip


def reply_to(worker: Worker, line: str) -> dict:
    try:
        request = json.loads(line)
    except json.JSONDecodeError as exc:
        return {"ok": False, "kind": "bad_request", "error": f"request is not JSON: {exc}"}
    if not isinstance(request, dict):
        return {"ok": False, "kind": "bad_request", "error": "a request is a JSON object with an 'op'"}
    return worker.handle(request)


def main() -> None:
    worker, out = Worker(), sys.stdout
    for line in sys.stdin:
        if line.strip():
            out.write(json.dumps(reply_to(worker, line), default=str) + "\n")
            out.flush()
    worker.close()


if __name__ == "__main__":
    main()
