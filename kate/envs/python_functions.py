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
import types
import typing
from collections.abc import Callable
from typing import Any, Union

from kate.envs.base import Observation
from kate.envs.function_arguments import _BadArgument, _coerce
from kate.envs.function_schema import _NONE, parse_docstring, schema_for
from kate.toolcall import ToolCall
from kate.toolcall.call import NotJSONCompatible, to_json_value

__all__ = ["STATE_PARAM", "AllowlistedFunction", "PythonFunctionsEnv", "parse_docstring", "schema_for"]

STATE_PARAM = "state"


def _is_dict_annotation(annotation: Any) -> bool:
    """``dict``, ``dict[...]``, or either of them ``| None``."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not _NONE]
        annotation = options[0] if len(options) == 1 else annotation
    return annotation is dict or typing.get_origin(annotation) is dict


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
