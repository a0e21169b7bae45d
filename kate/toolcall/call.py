"""The one canonical tool call every part of kate speaks: parsing, voting, execution, scoring.

A ``ToolCall`` is a function name plus JSON-compatible arguments. Two calls are equal when their
canonical forms are equal:

* key order never matters;
* numbers compare by value, so ``1 == 1.0``;
* booleans are not numbers, so ``true != 1``;
* strings compare exactly as they are (no case folding, no trimming).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSONValue = Any  # None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]


class NotJSONCompatible(ValueError):
    """Raised when arguments hold something JSON cannot carry (a set, NaN, a non-string key...)."""


def to_json_value(value: Any, path: str = "arguments") -> JSONValue:
    """A deep, plain copy of ``value`` (tuples become lists); raise if JSON cannot carry it."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSONCompatible(f"{path}: {value!r} is not a finite number")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotJSONCompatible(f"{path}: key {k!r} is not a string")
            out[k] = to_json_value(v, f"{path}.{k}")
        return out
    raise NotJSONCompatible(f"{path}: {type(value).__name__} is not JSON-compatible")


def _normalize_numbers(value: JSONValue) -> JSONValue:
    """Integral floats become ints (1.0 -> 1, -0.0 -> 0); bools stay bools."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return [_normalize_numbers(v) for v in value]
    return {k: _normalize_numbers(v) for k, v in value.items()}


def canonical_json(value: JSONValue) -> str:
    """A string that is equal for two values exactly when kate considers them equal."""
    return json.dumps(
        _normalize_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@dataclass(frozen=True, eq=False)
class ToolCall:
    """A function name and its JSON-compatible arguments. Immutable; hashable by canonical form.

    ``call_id`` (the id an OpenAI server gives a call) travels along but never takes part in
    equality.
    """

    name: str
    arguments: Mapping[str, JSONValue] = field(default_factory=dict)
    call_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a tool call needs a non-empty string name, got {self.name!r}")
        if not isinstance(self.arguments, Mapping):
            raise NotJSONCompatible(
                f"arguments of {self.name!r} must be an object, got {type(self.arguments).__name__}"
            )
        object.__setattr__(self, "arguments", _FrozenDict(to_json_value(self.arguments)))

    @property
    def canonical(self) -> str:
        """``name(canonical-json-arguments)``: the key used for equality, hashing and voting."""
        return f"{self.name}{canonical_json(dict(self.arguments))}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return self.canonical == other.canonical

    def __hash__(self) -> int:
        return hash(self.canonical)

    def to_dict(self) -> dict[str, JSONValue]:
        """``{"name": ..., "arguments": {...}}`` as plain JSON values."""
        return {"name": self.name, "arguments": to_json_value(self.arguments)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """The inverse of ``to_dict``: ``{"name", "arguments"}``, no ``arguments`` meaning ``{}``.
        Also reads an OpenAI tool call, ``{"id", "type", "function": {"name", "arguments"}}``, whose
        arguments are JSON text (or already an object); its ``id`` becomes ``call_id``.
        Anything else raises ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a tool call must be an object, got {type(data).__name__}")
        call_id = None
        if "name" not in data and "function" in data:
            call_id, data = data.get("id"), data["function"]
            if not isinstance(data, Mapping):
                raise ValueError(f"'function' of a tool call must be an object, got {type(data).__name__}")
            arguments = data.get("arguments")
            if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
                arguments = {}
            elif isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError as exc:
                    raise ValueError(f"arguments of {data.get('name')!r} are not JSON ({exc})") from None
        else:
            arguments = data.get("arguments", {})
        if "name" not in data:
            raise ValueError(f"a tool call needs a 'name', got keys {sorted(map(str, data))}")
        if call_id is not None and not isinstance(call_id, str):
            raise ValueError(f"a tool call id must be a string, got {call_id!r}")
        return cls(data["name"], arguments, call_id=call_id)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"ToolCall({self.name}({args}))"


class _FrozenDict(dict):
    """A dict that refuses mutation, so a ToolCall's arguments cannot change under its hash."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ToolCall arguments are immutable; build a new ToolCall instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(canonical_json(dict(self)))


def canonical_call_set(calls: tuple[ToolCall, ...] | list[ToolCall]) -> tuple[str, ...]:
    """The canonical key of a *set of parallel calls*: a sorted multiset, so order never matters."""
    return tuple(sorted(call.canonical for call in calls))
