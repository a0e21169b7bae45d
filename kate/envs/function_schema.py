"""JSON schemas from Python type hints, and parameter descriptions from Google-style docstrings.

``str``/``int``/``float``/``bool``/``list``/``dict`` (and ``list[X]``, ``tuple[X, ...]``,
``dict[str, X]``), ``Optional[X]`` (shown as ``X``), unions, ``Literal[...]`` (an enum) and ``Any``
or no hint (any value). The description is the docstring's first paragraph; ``Args:`` entries
describe the parameters.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any, Literal, Union

_NONE = type(None)
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", tuple: "array",
           dict: "object"}
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
                      r"Notes?|Attributes|See Also|Warnings?|Todo)\s*:\s*$")
_ARG_LINE = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                     (list, "array"), (dict, "object")):
        if isinstance(value, py):
            return name
    return type(value).__name__


def schema_for(annotation: Any) -> dict[str, Any]:
    """The JSON schema of one type hint; TypeError for a hint JSON cannot express."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation is _NONE or annotation is None:
        return {"type": "null"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        kinds = {_json_type_of(v) for v in args}
        return {"type": kinds.pop(), "enum": list(args)} if len(kinds) == 1 else {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not _NONE]
        return schema_for(options[0]) if len(options) == 1 else {"anyOf": [schema_for(a) for a in options]}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if origin in (list, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "prefixItems": [schema_for(a) for a in args], "minItems": len(args),
                    "maxItems": len(args)}
        return {"type": "array", "items": schema_for(args[0])} if args else {"type": "array"}
    if origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"dict keys must be str in a tool signature, got {annotation!r}")
        return {"type": "object", "additionalProperties": schema_for(args[1])} if args else {"type": "object"}
    raise TypeError(f"type hint {annotation!r} cannot be expressed as a JSON schema")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(first paragraph, {param: text})`` from a (Google-style) docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    header = next((i for i, l in enumerate(lines) if l.strip() in ("Args:", "Arguments:", "Parameters:")), None)
    if header is not None:
        base = len(lines[header]) - len(lines[header].lstrip())
        item_indent, current = None, None
        for line in lines[header + 1:]:
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip())
            if indent <= base:
                break
            item_indent = indent if item_indent is None else item_indent
            match = _ARG_LINE.match(line.strip())
            if indent == item_indent and match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary), params
