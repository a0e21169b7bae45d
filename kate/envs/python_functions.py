"""An environment over plain, type-hinted Python functions (an allowlist; never eval/exec).

Schemas come from type hints and docstrings: ``str``/``int``/``float``/``bool``/``list``/``dict``
(and ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``), ``Optional[X]`` (shown as ``X``; ``null``
is accepted), unions, ``Literal[...]`` (an enum) and ``Any`` or no hint (any value). Required =
parameters without defaults. The description is the docstring's first paragraph; Google-style
``Args:`` entries describe the parameters.

Argument checks follow JSON types: an int is accepted (and converted) for a float, an integral
number (``2.0``) for an int, and a bool is never a number. A parameter named ``state`` annotated
``dict`` is not offered to the model: it receives the environment's state dict, so tools can be
stateful. Results become strings: ``json.dumps`` for dict/list/tuple, ``str`` otherwise.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

from kate.envs.base import Observation
from kate.toolcall import ToolCall
from kate.toolcall.call import NotJSONCompatible, to_json_value

STATE_PARAM = "state"
_NONE = type(None)
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", tuple: "array",
           dict: "object"}
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
                      r"Notes?|Attributes|See Also|Warnings?|Todo)\s*:\s*$")
_ARG_LINE = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class _BadArgument(Exception):
    """Internal: an argument does not fit its parameter; the message is shown to the model."""


def _json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                     (list, "array"), (dict, "object")):
        if isinstance(value, py):
            return name
    return type(value).__name__


def _got(value: Any) -> str:
    return f"got {_json_type_of(value)} {json.dumps(value, ensure_ascii=False)[:60]}"


def _is_dict_annotation(annotation: Any) -> bool:
    """``dict``, ``dict[...]``, or either of them ``| None``."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not _NONE]
        annotation = options[0] if len(options) == 1 else annotation
    return annotation is dict or typing.get_origin(annotation) is dict


# --------------------------------------------------------------------------- schemas


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


# --------------------------------------------------------------------------- argument checks


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """``value`` converted to fit ``annotation``; _BadArgument when it does not fit."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return to_json_value(value)  # a fresh copy: the tool cannot mutate the call
    if annotation is _NONE or annotation is None:
        if value is None:
            return None
        raise _BadArgument(f"{where} must be null, {_got(value)}")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        for option in args:
            if _json_type_of(option) == _json_type_of(value) and option == value:
                return option
        raise _BadArgument(f"{where} must be one of {json.dumps(list(args))}, {_got(value)}")
    if origin in (Union, types.UnionType):
        if value is None and _NONE in args:
            return None
        options = [a for a in args if a is not _NONE]
        if len(options) == 1:
            return _coerce(value, options[0], where)
        for option in options:
            try:
                return _coerce(value, option, where)
            except _BadArgument:
                continue
        wanted = " or ".join(json.dumps(schema_for(a)) for a in options)
        raise _BadArgument(f"{where} must be {wanted}, {_got(value)}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _BadArgument(f"{where} must be a boolean, {_got(value)}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _BadArgument(f"{where} must be an integer, {_got(value)}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _BadArgument(f"{where} must be a number, {_got(value)}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _BadArgument(f"{where} must be a string, {_got(value)}")
    if annotation in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, list):
            raise _BadArgument(f"{where} must be an array, {_got(value)}")
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _BadArgument(f"{where} must have exactly {len(args)} items, got {len(value)}")
            return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item = args[0] if args else Any
        items = [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if tuple in (annotation, origin) else items
    if annotation is dict or origin is dict:
        if not isinstance(value, dict):
            raise _BadArgument(f"{where} must be an object, {_got(value)}")
        item = args[1] if args else Any
        return {k: _coerce(v, item, f"{where}.{k}") for k, v in value.items()}
    raise _BadArgument(f"{where} has a type this environment cannot check")


def _result_text(result: Any) -> str:
    if isinstance(result, (dict, list, tuple)):
        return json.dumps(result, ensure_ascii=False, default=str)
    return str(result)


# --------------------------------------------------------------------------- the environment


class _Tool:
    """One allowlisted function: its signature, hints, and OpenAI schema."""

    def __init__(self, function: Callable[..., Any]) -> None:
        name = getattr(function, "__name__", None)
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"tool functions need a plain __name__, got {function!r}")
        self.name, self.function = name, function
        self.signature = inspect.signature(function)
        try:
            hints = typing.get_type_hints(function)
        except Exception as exc:  # noqa: BLE001 - unresolvable hints are a boundary error
            raise ValueError(f"{name}: cannot resolve type hints ({exc})") from exc
        description, docs = parse_docstring(inspect.getdoc(function))
        self.hints: dict[str, Any] = {}
        self.takes_state = False
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in self.signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ValueError(f"{name}: parameter {param.name!r} must be a plain or keyword-only parameter")
            hint = hints.get(param.name, inspect.Parameter.empty)
            if param.name == STATE_PARAM and _is_dict_annotation(hint):
                self.takes_state = True
                continue
            try:
                schema = schema_for(hint)
            except TypeError as exc:
                raise ValueError(f"{name}: parameter {param.name!r}: {exc}") from exc
            if param.name in docs:
                schema["description"] = docs[param.name]
            if param.default is param.empty:
                required.append(param.name)
            else:
                try:
                    schema["default"] = to_json_value(param.default)
                except NotJSONCompatible:
                    pass
            self.hints[param.name] = hint
            properties[param.name] = schema
        self.schema = {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": properties, "required": required},
            },
        }
        self.required = required

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Checked, converted keyword arguments; _BadArgument with a readable reason otherwise."""
        unknown = sorted(k for k in arguments if k not in self.hints)
        missing = [k for k in self.required if k not in arguments]
        expected = ", ".join(self.hints) or "no arguments"
        if unknown:
            raise _BadArgument(f"{self.name} got unexpected argument(s) {', '.join(map(repr, unknown))}; "
                               f"expected: {expected}")
        if missing:
            raise _BadArgument(f"{self.name} is missing required argument(s) {', '.join(map(repr, missing))}")
        try:
            return {k: _coerce(v, self.hints[k], k) for k, v in arguments.items()}
        except _BadArgument as exc:
            raise _BadArgument(f"{self.name}: argument {exc}") from None


class PythonFunctionsEnv:
    """Offers ``functions`` as tools and dispatches calls only to them."""

    def __init__(self, functions: list[Callable[..., Any]], state: dict[str, Any] | None = None) -> None:
        self._tools: dict[str, _Tool] = {}
        for function in functions:
            tool = _Tool(function)
            if tool.name in self._tools:
                raise ValueError(f"two tool functions are named {tool.name!r}")
            self._tools[tool.name] = tool
        self._state: dict[str, Any] = {} if state is None else state

    def tools(self) -> list[dict[str, Any]]:
        return json.loads(json.dumps([tool.schema for tool in self._tools.values()]))

    def execute(self, call: ToolCall) -> Observation:
        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return Observation.failure(f"unknown function {call.name!r}; available functions: {available}")
        try:
            kwargs = tool.bind(dict(call.arguments))
        except _BadArgument as exc:
            return Observation.failure(str(exc))
        if tool.takes_state:
            kwargs[STATE_PARAM] = self._state
        try:
            text = _result_text(tool.function(**kwargs))
        except Exception as exc:  # noqa: BLE001 - a tool's failure is an observation, never a crash
            return Observation.failure(f"{call.name} raised {type(exc).__name__}: {exc}")
        return Observation.success(text)

    def state(self) -> dict[str, Any]:
        """A JSON deep copy of the state dict (TypeError if a tool stored something JSON cannot carry)."""
        return json.loads(json.dumps(self._state))


AllowlistedFunction = _Tool  # public name: one allowlisted function with its schema and argument checks
