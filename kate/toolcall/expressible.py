"""Whether calls are calls the current tools can make: the knowledge base's single-turn tool
filter (an example must be expressible) and the schema-valid vote (a sampled call must be).

Single-turn entries each bring their own tools, and two BFCL entries may offer functions of the
same name with different signatures (``solarFarm.potential`` takes ``panelArea`` as a float in one
entry, an integer in another). Calls are expressible when every call names a current tool,
uses only that tool's parameters, gives every required one, and gives each a value of the declared
JSON / BFCL type. Tools given by name only are checked by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# BFCL and JSON-schema type names -> the Python values a call may carry for them
_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,), "float": (int, float), "number": (int, float), "string": (str,), "boolean": (bool,),
    "array": (list, tuple), "tuple": (list, tuple), "dict": (dict,), "object": (dict,),
}  # fmt: skip


def function_of(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """The function part of an OpenAI (``{"type": "function", "function": {...}}``) or BFCL schema."""
    return tool.get("function", tool)


def schemas_by_name(tools: Iterable[str | Mapping[str, Any]]) -> dict[str, Mapping[str, Any] | None]:
    """name -> parameters schema (None for a bare name or a schema without properties: names only)."""
    out: dict[str, Mapping[str, Any] | None] = {}
    for tool in tools:
        if isinstance(tool, str):
            out[tool] = None
        else:
            function = function_of(tool)
            parameters = function.get("parameters")
            out[function["name"]] = parameters if isinstance(parameters, Mapping) and "properties" in parameters else None
    return out


def value_fits(value: Any, schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _TYPES:
        return True  # "any", unions, unknown names: nothing to hold against the example
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, _TYPES[kind])


def call_expressible(name: str, arguments: Mapping[str, Any], tools: Mapping[str, Mapping[str, Any] | None]) -> bool:
    if name not in tools:
        return False
    parameters = tools[name]
    if parameters is None:
        return True
    properties = parameters.get("properties") or {}
    if any(key not in properties for key in arguments):
        return False
    if any(key not in arguments for key in parameters.get("required") or []):
        return False
    return all(value_fits(value, properties[key]) for key, value in arguments.items())


def calls_expressible(calls: Iterable[Mapping[str, Any]], tools: Mapping[str, Mapping[str, Any] | None]) -> bool:
    return all(call_expressible(c["name"], c.get("arguments") or {}, tools) for c in calls)
