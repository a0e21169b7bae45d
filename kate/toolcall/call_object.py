"""The call object every reader validates, ``{"name": str, "arguments": {...}}``, and the strict
JSON it is read with: duplicate keys rejected, no repair. ``parameters`` may stand for
``arguments``, arguments may be a JSON *string* (OpenAI style), ``id`` / ``type`` may ride along;
any other key is a failure."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kate.toolcall.call import ToolCall, canonical_json, to_json_value
from kate.toolcall.total import Reject, short_repr

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ARG_KEYS = ("arguments", "parameters")
SPACE = re.compile(r"\s*")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise Reject(f"duplicate key {short_repr(key)} in JSON object")
        out[key] = value
    return out


DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


def _loads(text: str, where: str) -> Any:
    """Strict ``json.loads`` (duplicate keys rejected); failure reasons name ``where``."""
    try:
        value, end = DECODER.raw_decode(text, SPACE.match(text).end())
    except json.JSONDecodeError as exc:
        raise Reject(f"{where}: invalid JSON ({exc.msg} at char {exc.pos})") from None
    if text[end:].strip():
        raise Reject(f"{where}: extra text after JSON")
    return value


def _decode_arguments(value: Any, where: str) -> Mapping[str, Any]:
    if isinstance(value, str):
        value = _loads(value, f"{where}: arguments string")
    if not isinstance(value, Mapping):
        raise Reject(f"{where}: arguments must be an object, got {type(value).__name__}")
    return value


def _arguments_of(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    present = [key for key in _ARG_KEYS if key in obj]
    if not present:
        raise Reject(f"{where}: call has no 'arguments' (or 'parameters') key")
    decoded = [_decode_arguments(obj[key], where) for key in present]
    if len(decoded) == 2:
        first, second = (canonical_json(to_json_value(d)) for d in decoded)
        if first != second:
            raise Reject(f"{where}: 'arguments' and 'parameters' disagree")
    return decoded[0]


def call_from_obj(obj: Any, where: str, call_id: Any = None) -> ToolCall:
    """Validate one call object ``{"name", "arguments"|"parameters"[, "id", "type"]}``."""
    if not isinstance(obj, Mapping):
        raise Reject(f"{where}: a call must be an object, got {type(obj).__name__}")
    extra = sorted(str(key) for key in obj if key not in _CALL_KEYS)
    if extra:
        raise Reject(f"{where}: unexpected keys {extra[:5]} in call object")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise Reject(f"{where}: call name must be a non-empty string, got {short_repr(name)}")
    arguments = _arguments_of(obj, where)
    call_id = obj.get("id") if call_id is None else call_id
    if call_id is not None and not isinstance(call_id, str):
        raise Reject(f"{where}: call id must be a string, got {short_repr(call_id)}")
    return ToolCall(name=name, arguments=arguments, call_id=call_id)
