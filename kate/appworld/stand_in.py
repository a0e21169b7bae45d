"""A stand-in for AppWorld with the same surface (``CodeWorld``), for tests and for trying the code
loop without AppWorld's task data: a supervisor, a ``notes`` app behind a login, AppWorld's
``api_docs`` app, and ``complete_task``. Code actions run in the AST interpreter
(``kate/appworld/interpreter.py``), dispatching only to these functions.

Tasks (``STAND_IN_TASKS``) are checked like AppWorld's: the final database state and the answer
given to ``complete_task``, as a list of named tests.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kate.appworld.interpreter import ApiError, Interpreter
from kate.envs.python_functions import AllowlistedFunction

SUPERVISOR = {"first_name": "Ada", "last_name": "Byron", "email": "ada@example.com"}
PASSWORDS = [{"account_name": "notes", "password": "q7-lantern"}]
NOTES = [
    {"note_id": 1, "title": "groceries", "body": "eggs, flour, milk"},
    {"note_id": 2, "title": "books to read", "body": "Middlemarch; The Leopard"},
    {"note_id": 3, "title": "gym plan", "body": "mon: legs; wed: back; fri: chest"},
]


@dataclass(frozen=True)
class StandInTask:
    task_id: str
    instruction: str
    check: Callable[[dict[str, Any]], list[tuple[str, bool]]]  # final state -> [(test, passed)]
    solution_code: str  # a correct solution, for stand-in knowledge bases and tests


def _answer_is(expected: Any) -> Callable[[dict[str, Any]], list[tuple[str, bool]]]:
    def check(state: dict[str, Any]) -> list[tuple[str, bool]]:
        answer = state["answer"]
        if isinstance(expected, int):
            try:
                answer = int(str(answer).strip())
            except ValueError:
                pass
        return [("task completed", state["completed"]), ("answer is correct", answer == expected),
                ("no note changed", state["notes"] == NOTES)]  # fmt: skip

    return check


def _note_created(title: str, body: str) -> Callable[[dict[str, Any]], list[tuple[str, bool]]]:
    def check(state: dict[str, Any]) -> list[tuple[str, bool]]:
        added = state["notes"][len(NOTES):]
        return [("task completed", state["completed"]), ("old notes kept", state["notes"][: len(NOTES)] == NOTES),
                ("one note added", len(added) == 1),
                ("title and body", len(added) == 1 and added[0]["title"] == title and added[0]["body"] == body)]  # fmt: skip

    return check


LOGIN_SIMPLE = (
    "accounts = apis.supervisor.show_account_passwords()\n"
    "token = apis.notes.login(username='ada@example.com', password=accounts[0]['password'])['access_token']\n"
)
STAND_IN_TASKS = {
    task.task_id: task
    for task in [
        StandInTask("notes_count", "How many notes do I have in my notes app?", _answer_is(3),
                    LOGIN_SIMPLE + "notes = apis.notes.show_notes(access_token=token)\n"
                    "apis.supervisor.complete_task(answer=len(notes))"),
        StandInTask("notes_body", "What is written in my note titled 'groceries'?", _answer_is("eggs, flour, milk"),
                    LOGIN_SIMPLE + "for note in apis.notes.show_notes(access_token=token):\n"
                    "    if note['title'] == 'groceries':\n"
                    "        body = apis.notes.show_note(access_token=token, note_id=note['note_id'])['body']\n"
                    "apis.supervisor.complete_task(answer=body)"),
        StandInTask("notes_create", "Create a note titled 'call mom' whose text is 'sunday 6pm'.",
                    _note_created("call mom", "sunday 6pm"),
                    LOGIN_SIMPLE + "apis.notes.create_note(access_token=token, title='call mom', body='sunday 6pm')\n"
                    "apis.supervisor.complete_task()"),
    ]
}  # fmt: skip


class StandInWorld:
    """One stand-in task, open. ``execute`` runs a code action; ``evaluate`` runs its tests."""

    def __init__(self, task_id: str) -> None:
        if task_id not in STAND_IN_TASKS:
            raise KeyError(f"no stand-in task {task_id!r}; tasks: {sorted(STAND_IN_TASKS)}")
        self._task = STAND_IN_TASKS[task_id]
        self.task = {"task_id": task_id, "instruction": self._task.instruction, "supervisor": dict(SUPERVISOR),
                     "allowed_apps": ["supervisor", "notes"], "datetime": "2023-05-18T12:00:00"}  # fmt: skip
        self.state: dict[str, Any] = {"notes": copy.deepcopy(NOTES), "tokens": set(), "completed": False,
                                      "answer": None}  # fmt: skip
        apps = {"supervisor": self._supervisor(), "notes": self._notes()}
        self.docs = {app: {name: AllowlistedFunction(f) for name, f in funcs.items()} for app, funcs in apps.items()}
        checked = {app: {name: self._checked(app, tool) for name, tool in tools.items()} for app, tools in self.docs.items()}
        self.interpreter = Interpreter({**checked, "api_docs": self._api_docs()})

    # -- the CodeWorld surface ---------------------------------------------------------------
    def execute(self, code: str) -> str:
        if self.state["completed"]:
            return "Execution failed. Traceback:\nApiError: the task is already completed"
        return self.interpreter.run(code)

    def task_completed(self) -> bool:
        return bool(self.state["completed"])

    def evaluate(self) -> dict[str, Any]:
        tests = self._task.check(self.state)
        passed = sum(ok for _, ok in tests)
        return {"success": passed == len(tests), "pass_count": passed, "fail_count": len(tests) - passed,
                "num_tests": len(tests), "tests": [{"name": n, "passed": ok} for n, ok in tests]}  # fmt: skip

    def close(self) -> None:
        pass

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The APIs as OpenAI tool schemas named ``app__api`` (AppWorld's function-calling docs form)."""
        out = []
        for app, tools in self.docs.items():
            for name, tool in tools.items():
                schema = json.loads(json.dumps(tool.schema))
                schema["function"]["name"] = f"{app}__{name}"
                out.append(schema)
        return out

    # -- the apps ---------------------------------------------------------------------------
    def _checked(self, app: str, tool: AllowlistedFunction) -> Callable[..., Any]:
        def call(**kwargs: Any) -> Any:
            try:
                bound = tool.bind(kwargs)
            except Exception as exc:  # noqa: BLE001 - argument errors are shown to the model
                raise ApiError(str(exc)) from None
            return tool.function(**bound)

        return call

    def _token(self, access_token: str) -> None:
        if access_token not in self.state["tokens"]:
            raise ApiError("invalid access token: log in with apis.notes.login(username=..., password=...)")

    def _supervisor(self) -> dict[str, Callable[..., Any]]:
        state = self.state

        def show_profile() -> dict:
            """Show the supervisor's (your user's) profile: name and email."""
            return dict(SUPERVISOR)

        def show_account_passwords() -> list:
            """Show the supervisor's app account passwords."""
            return copy.deepcopy(PASSWORDS)

        def complete_task(answer: str | int | None = None) -> None:
            """Mark the task complete; give the answer when the task asks a question.

            Args:
                answer: the answer to the task's question (omit it for tasks that only ask for an action).
            """
            state["completed"], state["answer"] = True, answer

        return {f.__name__: f for f in (show_profile, show_account_passwords, complete_task)}

    def _notes(self) -> dict[str, Callable[..., Any]]:
        state = self.state

        def login(username: str, password: str) -> dict:
            """Log in to the notes app; returns an access_token.

            Args:
                username: the account email.
                password: the notes account password.
            """
            if username != SUPERVISOR["email"] or password != PASSWORDS[0]["password"]:
                raise ApiError("wrong username or password")
            state["tokens"].add("tok-notes-1")
            return {"access_token": "tok-notes-1", "token_type": "Bearer"}

        def show_notes(access_token: str) -> list:
            """List your notes (note_id and title).

            Args:
                access_token: from apis.notes.login.
            """
            self._token(access_token)
            return [{"note_id": n["note_id"], "title": n["title"]} for n in state["notes"]]

        def show_note(access_token: str, note_id: int) -> dict:
            """Show one note with its body.

            Args:
                access_token: from apis.notes.login.
                note_id: the note's id.
            """
            self._token(access_token)
            for note in state["notes"]:
                if note["note_id"] == note_id:
                    return dict(note)
            raise ApiError(f"no note with note_id {note_id}")

        def create_note(access_token: str, title: str, body: str) -> dict:
            """Create a note.

            Args:
                access_token: from apis.notes.login.
                title: the note's title.
                body: the note's text.
            """
            self._token(access_token)
            note_id = max(n["note_id"] for n in state["notes"]) + 1
            state["notes"].append({"note_id": note_id, "title": title, "body": body})
            return {"note_id": note_id, "message": "note created"}

        return {f.__name__: f for f in (login, show_notes, show_note, create_note)}

    def _api_docs(self) -> dict[str, Callable[..., Any]]:
        docs = self.docs

        def show_app_descriptions() -> list:
            return [{"name": "supervisor", "description": "your user's profile, passwords, and complete_task"},
                    {"name": "notes", "description": "a notes app: login, list, read and create notes"}]  # fmt: skip

        def show_api_descriptions(app_name: str) -> list:
            if app_name not in docs:
                raise ApiError(f"no app named {app_name!r}")
            return [{"name": n, "description": t.schema["function"]["description"]} for n, t in docs[app_name].items()]

        def show_api_doc(app_name: str, api_name: str) -> dict:
            if app_name not in docs or api_name not in docs[app_name]:
                raise ApiError(f"no API {app_name}.{api_name}")
            return json.loads(json.dumps(docs[app_name][api_name].schema["function"]))

        return {f.__name__: f for f in (show_app_descriptions, show_api_descriptions, show_api_doc)}
