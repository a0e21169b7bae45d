"""A user's own verifiable set, one JSON object per line::

    {"id": "q1", "question": "What is 17 * 23?", "answer": 391,
     "checker": {"kind": "number"}, "tools": ["calculator"],
     "system": "Answer in \\\\boxed{}.", "necessary": true, "category": "mult"}

``question`` and ``answer`` are required (``answer`` may be omitted for a ``regex`` checker).
``checker`` is a spec of ``kate.diagnose.answers.AnswerChecker`` or a kind name (default
``number`` for a numeric answer, ``exact`` otherwise). ``tools`` lists built-in diagnostic tools by
name (``calculator``) or OpenAI tool schemas (offered, not run: a call to one is told it cannot run
here); default none. ``system`` is an optional system prompt, ``necessary`` an optional known need
for a tool (else measured per model), ``category`` a group for reports (default ``user``), ``id``
defaults to the line number. Bad lines are errors naming the file, line and field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kate.diagnose.answers import AnswerChecker, expected_number
from kate.diagnose.items import VerifiableItem
from kate.diagnose.tasks import TOOL_FUNCTIONS
from kate.envs.python_functions import PythonFunctionsEnv

FIELDS = ("id", "question", "answer", "checker", "tools", "system", "necessary", "category")


def _tool_schema(tool: Any, functions: Mapping[str, Callable[..., Any]], where: str) -> dict[str, Any]:
    if isinstance(tool, str):
        if tool not in functions:
            raise ValueError(f"{where}: unknown built-in tool {tool!r}; known: {sorted(functions)}")
        return PythonFunctionsEnv([functions[tool]]).tools()[0]
    if isinstance(tool, Mapping):
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) or not function["name"]:
            raise ValueError(f"{where}: a tool schema needs a function name")
        return {"type": "function", "function": dict(function)}
    raise ValueError(f"{where}: a tool is a built-in name or an OpenAI tool schema, got {type(tool).__name__}")


def item_from_json(obj: Any, where: str, default_id: str,
                   functions: Mapping[str, Callable[..., Any]] = TOOL_FUNCTIONS) -> VerifiableItem:  # fmt: skip
    """One line's object as an item; ValueError naming ``where`` and the field for anything wrong."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; known: {list(FIELDS)}")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: field 'question' must be a non-empty string")
    answer = obj.get("answer")
    spec = obj.get("checker")
    if spec is None:
        spec = "number" if isinstance(answer, (int, float)) and not isinstance(answer, bool) else "exact"
    try:
        checker = AnswerChecker.from_spec(spec)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: field 'checker': {exc}") from None
    if answer is None and checker.kind != "regex":
        raise ValueError(f"{where}: field 'answer' is required (only a regex checker may omit it)")
    if checker.kind == "number":
        try:
            expected_number(answer)
        except ValueError:
            raise ValueError(f"{where}: field 'answer': a number checker needs a numeric answer, "
                             f"got {answer!r}") from None
    tools = obj.get("tools") or []
    if not isinstance(tools, list):
        raise ValueError(f"{where}: field 'tools' must be a list")
    schemas = tuple(_tool_schema(t, functions, f"{where}: field 'tools'[{i}]") for i, t in enumerate(tools))
    necessary = obj.get("necessary")
    if necessary is not None and not isinstance(necessary, bool):
        raise ValueError(f"{where}: field 'necessary' must be true, false or absent")
    system = obj.get("system")
    if system is not None and not isinstance(system, str):
        raise ValueError(f"{where}: field 'system' must be a string")
    messages = ({"role": "system", "content": system},) if system else ()
    item_id, category = obj.get("id", default_id), obj.get("category", "user")
    if not isinstance(item_id, (str, int)) or not isinstance(category, str):
        raise ValueError(f"{where}: fields 'id' (string or number) and 'category' (string) have the wrong type")
    return VerifiableItem(id=str(item_id), category=category,
                          messages=(*messages, {"role": "user", "content": question}), answer=answer,
                          checker=checker, tools=schemas, necessary=necessary)  # fmt: skip


def load_user_set(path: str | Path,
                  functions: Mapping[str, Callable[..., Any]] = TOOL_FUNCTIONS) -> list[VerifiableItem]:  # fmt: skip
    """Every item of a JSONL file (blank lines skipped; ids must be unique)."""
    path = Path(path)
    items: list[VerifiableItem] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc})") from None
        items.append(item_from_json(obj, f"{path}:{number}", f"line-{number}", functions))
    ids = [item.id for item in items]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate item ids {duplicates[:5]}")
    if not items:
        raise ValueError(f"{path}: no items")
    return items
