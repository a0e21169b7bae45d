"""An example's calls as a *pattern* on the current tools: how many calls, of which of the offered
functions, with which of their parameters; never the example's own names or values.

Why: on BFCL's ``parallel`` halves the 0.5B model writes one call where several are due, in every
arm, and an example shown as it was (its function, its values) gets copied. What it did on the
training halves is in ``bench/results/failure_table.md`` (``bench/failure_table.py --arms
pattern``): it did not fix ``parallel`` / ``parallel_multiple`` and broke some ``simple_python``
and ``multiple`` answers. Read from
the records: the nearest example is mostly a one-call request (so the pattern shows one call), its
question still shows its values (copied), and the quoted placeholders (``"<a 1>"``) turn numbers
into strings (BFCL's type errors). Kept as the measured starting point; what came of it (the list
form, the call-count gate, ``fill``) is the guarded_pattern_list preset of the ``st_calls`` arms
(``conf/retrieval/single_turn_multi_call.yaml``; ``bench/failure_table.py`` says each step).
Rules, per example call: the offered function of the same name; else the only offered
function; else the offered function sharing most parameter names with the call (the first on a
tie); else ``<function>``. With ``fill`` (the guarded_pattern_list preset), an example function
that none of these rules places takes the first offered function no other example function took, in
the order offered (an example with as many distinct functions as the request offers then maps one to
one: BFCL's parallel_multiple answers call every offered function in 90 of its 100 training
entries). Its arguments are that function's required parameters (all of them when none is
required) as ``<parameter k>``, ``k`` counting the calls to that function. One JSON object per line,
as the model writes its own calls.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kate.toolcall.placeholder import placeholder

UNKNOWN = "<function>"


def _functions(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out = {}
    for tool in tools:
        function = tool.get("function", tool) if isinstance(tool, Mapping) else {}
        if function.get("name"):
            out[str(function["name"])] = function
    return out


def _parameters(function: Mapping[str, Any]) -> list[str]:
    params = function.get("parameters") or {}
    required = list(params.get("required") or [])
    return required or list((params.get("properties") or {}).keys())


def target_function(call: Mapping[str, Any], functions: Mapping[str, Mapping[str, Any]]) -> str:
    """The offered function an example call stands for (rules in the module docstring)."""
    name = str(call.get("name", ""))
    if name in functions:
        return name
    if len(functions) == 1:
        return next(iter(functions))
    args = set(call.get("arguments") or {})
    best, overlap = UNKNOWN, 0
    for candidate, function in functions.items():
        shared = len(args & set((function.get("parameters") or {}).get("properties") or {}))
        if shared > overlap:
            best, overlap = candidate, shared
    return best


def function_map(calls: Sequence[Mapping[str, Any]], functions: Mapping[str, Mapping[str, Any]],
                 fill: bool = False) -> dict[str, str]:
    """Each distinct example function name -> the offered function it stands for (module docstring)."""
    mapped: dict[str, str] = {}
    for call in calls:
        name = str(call.get("name", ""))
        if name not in mapped:
            mapped[name] = target_function(call, functions)
    if fill:
        free = [f for f in functions if f not in mapped.values()]
        for name, target in mapped.items():
            if target == UNKNOWN and free:
                mapped[name] = free.pop(0)
    return mapped


def pattern_objects(calls: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]],
                    fill: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """The example's calls on the current tools, as call objects (see the module docstring)."""
    functions = _functions(tools)
    targets = function_map(calls, functions, fill)
    seen: Counter[str] = Counter()
    out = []
    for call in calls:
        name = targets[str(call.get("name", ""))]
        seen[name] += 1
        params = _parameters(functions[name]) if name in functions else list(call.get("arguments") or {})
        out.append({"name": name, "arguments": {p: placeholder(p, seen[name]) for p in params}})
    return out


def pattern_calls(calls: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> str:
    """The example's calls on the current tools, one JSON object per line (see the module docstring)."""
    return "\n".join(json.dumps(c) for c in pattern_objects(calls, tools))


def unmapped(calls: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], fill: bool = False) -> bool:
    """Whether some call of the example stands for no offered function (its pattern would show ``<function>``)."""
    return UNKNOWN in function_map(calls, _functions(tools), fill).values()


TYPED = ("integer", "number", "float", "boolean")  # JSON writes these without quotes


def typed_pattern_text(calls: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]],
                       fill: bool = False) -> list[str]:  # fmt: skip
    """``pattern_objects`` as JSON texts, one per call, whose placeholders for numeric and boolean
    parameters stand unquoted (``{"height": <height 1>}``: not JSON, a form to fill), so that the value
    written in their place keeps the declared type (quoted placeholders were copied as strings, "36"
    for 36, which BFCL's checker rejects)."""
    functions = _functions(tools)
    out = []
    for obj in pattern_objects(calls, tools, fill):
        props = (functions.get(obj["name"], {}).get("parameters") or {}).get("properties") or {}
        text = json.dumps(obj, ensure_ascii=False)
        for param, placeholder in obj["arguments"].items():
            if str((props.get(param) or {}).get("type", "")).lower() in TYPED:
                text = text.replace(json.dumps(placeholder), placeholder)
        out.append(text)
    return out
