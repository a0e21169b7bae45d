"""Writers, inverse to ``kate.toolcall.parse``: ``from_X(to_X(calls))`` gives the calls back."""

from __future__ import annotations

import json
import keyword
import unicodedata
from collections.abc import Iterable
from typing import Any

from kate.toolcall.call import ToolCall, to_json_value

Calls = Iterable[ToolCall]


def _as_list(calls: Calls | ToolCall) -> list[ToolCall]:
    items = [calls] if isinstance(calls, ToolCall) else list(calls)
    for item in items:
        if not isinstance(item, ToolCall):
            raise TypeError(f"expected ToolCall, got {type(item).__name__}")
    return items


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def to_openai_tool_calls(calls: Calls | ToolCall) -> list[dict[str, Any]]:
    """OpenAI ``tool_calls`` dicts; arguments as a JSON string, ids ``call_<i>`` when missing."""
    return [
        {
            "id": call.call_id if call.call_id is not None else f"call_{i}",
            "type": "function",
            "function": {"name": call.name, "arguments": _dumps(to_json_value(call.arguments))},
        }
        for i, call in enumerate(_as_list(calls))
    ]


# How a hermes call (Qwen's chat template) opens, and how it starts up to the function's name: a prefill that
# makes the model write a call (the opening alone is not enough: the default model ends its turn there).
HERMES_OPENING = "<tool_call>\n"
HERMES_CALL_START = HERMES_OPENING + '{"name": "'


def to_hermes(calls: Calls | ToolCall) -> str:
    """One ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` block per call."""
    return "\n".join(
        f"<tool_call>\n{_dumps(call.to_dict())}\n</tool_call>" for call in _as_list(calls)
    )


def to_json_text(calls: Calls | ToolCall) -> str:
    """A JSON object for one call, a JSON list of objects otherwise."""
    items = [call.to_dict() for call in _as_list(calls)]
    return _dumps(items[0] if len(items) == 1 else items)


def _identifier(text: str, what: str) -> str:
    """``text`` if Python reads it back unchanged as an identifier, else ValueError."""
    if (
        not text.isidentifier()
        or keyword.iskeyword(text)
        or unicodedata.normalize("NFKC", text) != text
    ):
        raise ValueError(f"{what} {text!r} cannot be written in python call syntax")
    return text


def _python_one(call: ToolCall) -> str:
    for part in call.name.split("."):
        _identifier(part, "function name part")
    arguments = to_json_value(call.arguments)
    written = ", ".join(
        f"{_identifier(key, 'argument name')}={value!r}" for key, value in arguments.items()
    )
    return f"{call.name}({written})"


def to_python_call(calls: Calls | ToolCall) -> str:
    """``f(a=1, b='x')`` for one call, ``[f(...), g(...)]`` otherwise (values via repr)."""
    items = [_python_one(call) for call in _as_list(calls)]
    return items[0] if len(items) == 1 else f"[{', '.join(items)}]"


def to_bfcl(calls: Calls | ToolCall) -> list[dict[str, Any]]:
    """BFCL decoded form ``[{"fn": {"arg": value}}, ...]``."""
    return [{call.name: to_json_value(call.arguments)} for call in _as_list(calls)]


def to_bfcl_strings(calls: Calls | ToolCall) -> list[str]:
    """BFCL call strings, one ``fn(arg=value)`` per call."""
    return [_python_one(call) for call in _as_list(calls)]


__all__ = [
    "to_bfcl",
    "to_bfcl_strings",
    "to_hermes",
    "to_json_text",
    "to_openai_tool_calls",
    "to_python_call",
]
