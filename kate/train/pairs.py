"""Preference pairs for DPO from the step dataset: the prompt as inference renders it, ``chosen`` =
the row's target completion, ``rejected`` = the mistake that step invites, rendered by the same
renderer (``kate.train.render``), so both completions are in the model's own format:

- a ``no_call`` row (no offered function fits): a call to one of the offered tools, its arguments
  filled from the schema (``call_where_none_due``);
- a ``call`` row: a wrong call: another offered function (``other_function``), a required argument
  changed (``changed_argument``) or left out (``missing_argument``), whichever the seeded hash of the
  row picks first among those the step allows;
- an ``answer`` row (after a tool result): another call instead of the answer, the history's last
  call made again, or a call to an offered tool when the history has none (``call_instead_of_answer``).

    pairs, counts = build_pairs(rows, StepRenderer(tokenizer), seed=0)

Deterministic given the seed. A row with nothing to reject (no tool offered, no argument to change)
gives no pair and is counted.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kate.toolcall import ToolCall
from kate.train.examples import with_call_format
from kate.train.render import StepRenderer, assistant_message

KINDS = ("call", "no_call", "answer")
WRONG_CALLS = ("other_function", "changed_argument", "missing_argument")


def _draw(seed: int, key: str, what: str, n: int) -> int:
    digest = hashlib.sha256(f"pairs|{seed}|{key}|{what}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n


def _functions(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t.get("function", t) if isinstance(t.get("function"), Mapping) else t for t in tools]


def placeholder(schema: Mapping[str, Any]) -> Any:
    """A value a parameter's schema allows: its first enum value, its default, or one of its type."""
    if schema.get("enum"):
        return schema["enum"][0]
    if schema.get("default") not in (None, "", [], {}):
        return schema["default"]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    values = {"integer": 1, "number": 1.0, "float": 1.0, "boolean": True, "array": [], "object": {}, "dict": {}}
    return values.get(str(kind), "example")


def filled_call(function: Mapping[str, Any]) -> ToolCall:
    """A call to ``function`` with its required arguments (or its first one, none being required) filled."""
    properties = (function.get("parameters") or {}).get("properties") or {}
    names = [p for p in (function.get("parameters") or {}).get("required") or [] if p in properties]
    names = names or list(properties)[:1]
    return ToolCall(str(function["name"]), {p: placeholder(properties[p]) for p in names})


def changed(value: Any) -> Any:
    """Another value of the same kind (a number moved, a string altered, a boolean flipped)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1 if value != -1 else 2
    if isinstance(value, str):
        return value[::-1] if len(set(value)) > 1 else value + " other"
    if isinstance(value, list):
        return value[:-1] if value else ["other"]
    if isinstance(value, dict):
        return {} if value else {"other": 1}
    return "other"


def _required(call: ToolCall, functions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The call's arguments its function requires (all of its arguments when the schema says none)."""
    function = next((f for f in functions if f.get("name") == call.name), {})
    required = [p for p in (function.get("parameters") or {}).get("required") or [] if p in call.arguments]
    return required or list(call.arguments)


def wrong_call(calls: Sequence[ToolCall], tools: Sequence[Mapping[str, Any]], seed: int,
               key: str) -> tuple[list[ToolCall], str] | None:  # fmt: skip
    """The target's first call made wrong (the others kept), by the first way the step allows."""
    first, functions = calls[0], _functions(tools)
    start, required = _draw(seed, key, "wrong", len(WRONG_CALLS)), _required(first, functions)
    for way in (WRONG_CALLS[(start + k) % len(WRONG_CALLS)] for k in range(len(WRONG_CALLS))):
        if way == "other_function":
            others = [f for f in functions if f.get("name") != first.name and f.get("name")]
            if not others:
                continue
            wrong = filled_call(others[_draw(seed, key, "other", len(others))])
        elif not required:
            continue
        else:
            name = required[_draw(seed, key, "argument", len(required))]
            arguments = dict(first.arguments)
            if way == "changed_argument":
                arguments[name] = changed(arguments[name])
            else:
                del arguments[name]
            wrong = ToolCall(first.name, arguments)
        if wrong != first:
            return [wrong, *calls[1:]], way
    return None


def _last_call(prompt: Sequence[Mapping[str, Any]]) -> ToolCall | None:
    for message in reversed(prompt):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            return ToolCall.from_dict(message["tool_calls"][-1])
    return None


def rejected_calls(row: Mapping[str, Any], seed: int) -> tuple[list[ToolCall], str] | None:
    """The rejected completion's calls for one row, and which mistake they are; None: no pair."""
    tools = json.loads(row["tools"] or "[]")
    functions = [f for f in _functions(tools) if f.get("name")]
    if row["kind"] == "call":
        calls = [ToolCall.from_dict(c) for c in json.loads(row["target_calls"])]
        return wrong_call(calls, tools, seed, row["id"]) if calls else None
    if row["kind"] == "answer":
        last = _last_call(json.loads(row["prompt"]))
        if last is not None:
            return [last], "call_instead_of_answer"
    if not functions:
        return None
    call = filled_call(functions[_draw(seed, row["id"], "offered", len(functions))])
    return [call], "call_where_none_due" if row["kind"] == "no_call" else "call_instead_of_answer"


def pair(row: Mapping[str, Any], renderer: StepRenderer, seed: int,
         call_format: str = "template") -> dict[str, Any] | None:  # fmt: skip
    """One pair: the prompt text, the target completion (chosen) and the rendered mistake (rejected),
    their calls written in ``call_format`` (``kate.train.examples.with_call_format``, as SFT writes them)."""
    made = rejected_calls(row, seed)
    if made is None:
        return None
    calls, why = made
    prompt, tools = json.loads(row["prompt"]), json.loads(row["tools"] or "[]") or None
    rejected = renderer.completion_text(prompt, tools, assistant_message(calls, None))
    chosen = with_call_format(row, call_format)["completion_text"]
    rejected_row = {"id": row["id"], "kind": "call", "completion_text": rejected,
                    "target_calls": json.dumps([c.to_dict() for c in calls], ensure_ascii=False)}  # fmt: skip
    rejected = with_call_format(rejected_row, call_format)["completion_text"]
    if rejected == chosen:
        return None
    return {"id": row["id"], "source_id": row["source_id"], "category": row["category"], "kind": row["kind"],
            "rejected_kind": why, "prompt": row["prompt_text"], "chosen": chosen,
            "rejected": rejected, "rejected_calls": json.dumps([c.to_dict() for c in calls], ensure_ascii=False),
            "prompt_tokens": row["prompt_tokens"]}  # fmt: skip


def build_pairs(rows: Iterable[Mapping[str, Any]], renderer: StepRenderer, *, seed: int = 0, kinds: Sequence[str] = KINDS,
                call_format: str = "template") -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """The pairs of the rows whose kind is in ``kinds``, and counts (by mistake, rows with no pair)."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"pair kinds must be among {KINDS}, got {unknown}")
    pairs, no_pair = [], Counter()
    for row in rows:
        if row["kind"] not in kinds:
            continue
        made = pair(row, renderer, seed, call_format)
        if made is None:
            no_pair[row["kind"]] += 1
        else:
            pairs.append(made)
    counts = {"pairs": len(pairs), "rejected_kind": dict(sorted(Counter(p["rejected_kind"] for p in pairs).items())),
              "no_pair": dict(sorted(no_pair.items()))}  # fmt: skip
    return pairs, counts
