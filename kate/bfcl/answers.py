"""Ground-truth answers of single-turn BFCL entries as ToolCalls (for replay tests, ST knowledge)."""

from __future__ import annotations

import json
from typing import Any

from kate.bfcl.data import BFCLEntry
from kate.toolcall import ToolCall

_OMITTED = ""  # BFCL's possible-answer marker for "this argument may be left out"


def _pick(options: list[Any], required: bool = False) -> tuple[bool, Any]:
    """The first allowed value; (False, None) when the first option is "may be omitted" (for a
    required argument, the first option that is a value)."""
    values = [o for o in options if not (isinstance(o, str) and o == _OMITTED)]
    if not values or (not required and options[0] == _OMITTED):
        return False, None
    value = values[0]
    if isinstance(value, dict):  # a nested object: its fields are option lists too
        return True, _pick_fields(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return True, [_pick_fields(v) for v in value]
    return True, value


def _pick_fields(fields: dict[str, list[Any]], required: frozenset[str] = frozenset()) -> dict[str, Any]:
    out = {}
    for name, options in fields.items():
        keep, value = _pick(options if isinstance(options, list) else [options], name in required)
        if keep:
            out[name] = value
    return out


def _as_source_literal(value: Any) -> str:
    """Java/JavaScript parameters are passed as strings of source code."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def first_possible_answer(entry: BFCLEntry) -> list[ToolCall]:
    """One correct answer: for each argument the first allowed value, recursively; an argument whose
    first allowed value is "" (BFCL's "may be omitted") is left out."""
    if entry.is_multi_turn:
        raise ValueError(f"{entry.id}: use kate.bfcl.data.ground_truth_calls for multi-turn entries")
    source_strings = entry.category in {"simple_java", "simple_javascript"}
    required = {f["name"]: frozenset((f.get("parameters") or {}).get("required", [])) for f in entry.checker_functions}
    calls = []
    for item in entry.ground_truth or []:
        ((name, options),) = item.items()
        arguments = _pick_fields(options, required.get(name, frozenset()))
        if source_strings:
            arguments = {k: _as_source_literal(v) for k, v in arguments.items()}
        calls.append(ToolCall(name, arguments))
    return calls
