"""Readers of calls written into text: Hermes / Qwen ``<tool_call>`` blocks and call-shaped JSON,
bare or fenced."""

from __future__ import annotations

import json
import re
from typing import Any

from kate.toolcall.call import ToolCall
from kate.toolcall.call_object import DECODER, SPACE, call_from_obj
from kate.toolcall.parsed import Parsed
from kate.toolcall.total import Reject, total_reader

HERMES_OPEN = "<tool_call>"
_HERMES_CLOSE = "</tool_call>"
# Where a JSON object/array can begin; a cheap pre-filter so garbage brackets cost nothing.
JSON_START = re.compile(r'\{\s*["}]|\[\s*[\[\]{"\-0-9tfnNI]')


# --------------------------------------------------------------------------- Hermes


def hermes_block(text: str, start: int, number: int) -> tuple[ToolCall, int]:
    """Read the block whose content begins at ``start``; return its call and where it ends."""
    where = f"<tool_call> block {number}"
    begin = SPACE.match(text, start).end()
    try:
        obj, end = DECODER.raw_decode(text, begin)
    except json.JSONDecodeError as exc:
        raise Reject(f"{where}: content is not JSON ({exc.msg})") from None
    call = call_from_obj(obj, where)
    after = SPACE.match(text, end).end()
    if text.startswith(_HERMES_CLOSE, after):
        return call, after + len(_HERMES_CLOSE)
    if after == len(text):
        return call, after  # final block cut before its closing tag
    raise Reject(f"{where}: unexpected text after the call object")


@total_reader
def from_hermes(text: str | None) -> Parsed:
    """Hermes / Qwen ``<tool_call>{...}</tool_call>`` blocks -> calls; no tags -> no calls."""
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise Reject(f"expected text, got {type(text).__name__}")
    calls: list[ToolCall] = []
    pos = text.find(HERMES_OPEN)
    while pos != -1:
        call, end = hermes_block(text, pos + len(HERMES_OPEN), len(calls))
        calls.append(call)
        pos = text.find(HERMES_OPEN, end)
    return Parsed(calls=tuple(calls))


# --------------------------------------------------------------------------- bare JSON


def _is_call_shaped(value: Any) -> bool:
    return isinstance(value, dict) and "name" in value


def calls_in_json(value: Any, number: int) -> list[ToolCall]:
    """Calls carried by one JSON value found in text ([] if it is not call-shaped)."""
    where = f"JSON value {number}"
    if _is_call_shaped(value):
        return [call_from_obj(value, where)]
    if not isinstance(value, list) or not value:
        return []
    shaped = [_is_call_shaped(item) for item in value]
    if not any(shaped):
        return []
    if not all(shaped):
        raise Reject(f"{where}: list mixes call objects and other values")
    return [call_from_obj(item, f"{where}[{i}]") for i, item in enumerate(value)]


CALL_ATTEMPT = re.compile(r'[{\[]\s*\{?\s*"name"\s*:')


def _json_values(text: str) -> list[Any]:
    """Every JSON object/array in ``text``, left to right, not looking inside found values.

    JSON nested deeper than the interpreter allows raises RecursionError (a failure); an object
    that starts like a call (``{"name": ...``) but is not valid JSON is a malformed call: a failure.
    """
    values, pos = [], 0
    while True:
        match = JSON_START.search(text, pos)
        if match is None:
            return values
        start = match.start()
        try:
            value, pos = DECODER.raw_decode(text, start)
        except json.JSONDecodeError as error:
            if CALL_ATTEMPT.match(text, start):
                raise Reject(f"malformed JSON call at offset {start}: {error.msg}") from None
            pos = start + 1
            continue
        values.append(value)


@total_reader
def from_json_text(text: str | None) -> Parsed:
    """Call-shaped JSON (object or list of objects, fenced or bare) in text -> calls."""
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise Reject(f"expected text, got {type(text).__name__}")
    calls: list[ToolCall] = []
    for number, value in enumerate(_json_values(text)):
        calls.extend(calls_in_json(value, number))
    return Parsed(calls=tuple(calls))
