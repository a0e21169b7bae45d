"""Strict, total readers: every ``from_*`` turns some model output into a ``Parsed``.

Rules shared by all readers:

* they never raise, whatever they are given; a malformed call becomes ``Parsed.failure(reason)``;
* they never guess: no repair of broken JSON, no eval/exec, no fuzzy keys;
* a call object is ``{"name": str, "arguments": {...}}``; ``parameters`` may stand for
  ``arguments``, arguments may be a JSON *string* (OpenAI style), and ``id`` / ``type`` may ride
  along. Anything else in a call object is a failure.

The text readers live in ``parse_text`` (Hermes, JSON), the Python and BFCL ones in
``parse_python``; this module adds OpenAI's ``tool_calls`` and the readers that try several
formats, and is where every reader is imported from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kate.toolcall.call import NotJSONCompatible, ToolCall
from kate.toolcall.call_object import DECODER, call_from_obj
from kate.toolcall.parse_python import from_bfcl, from_bfcl_strings, from_python_call, from_python_list
from kate.toolcall.parse_text import (
    CALL_ATTEMPT,
    HERMES_OPEN,
    JSON_START,
    calls_in_json,
    from_hermes,
    from_json_text,
    hermes_block,
)
from kate.toolcall.parsed import Parsed
from kate.toolcall.total import Reject, short_repr, total_reader

# --------------------------------------------------------------------------- OpenAI


def _plain(obj: Any, fields: tuple[str, ...]) -> Any:
    """A mapping view of an SDK object (``model_dump`` or attributes); mappings pass through."""
    if obj is None or isinstance(obj, (Mapping, str, bytes, int, float, list, tuple)):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    return {f: getattr(obj, f) for f in fields if hasattr(obj, f)}


def _openai_item(item: Any, index: int) -> ToolCall:
    where = f"tool_calls[{index}]"
    item = _plain(item, ("id", "type", "function"))
    if not isinstance(item, Mapping):
        raise Reject(f"{where}: expected an object, got {type(item).__name__}")
    if item.get("type") not in (None, "function"):
        raise Reject(f"{where}: unsupported tool call type {short_repr(item.get('type'))}")
    if "function" not in item:
        raise Reject(f"{where}: no 'function' field")
    function = _plain(item["function"], ("name", "arguments"))
    return call_from_obj(function, f"{where}.function", call_id=item.get("id"))


@total_reader
def from_openai_tool_calls(tool_calls: Any) -> Parsed:
    """OpenAI ``message.tool_calls`` (dicts or SDK objects) -> calls; None or [] -> no calls."""
    if tool_calls is None:
        return Parsed()
    if not isinstance(tool_calls, (list, tuple)):
        raise Reject(f"tool_calls must be a list, got {type(tool_calls).__name__}")
    return Parsed(calls=tuple(_openai_item(item, i) for i, item in enumerate(tool_calls)))


# --------------------------------------------------------------------------- auto


def _python_if_exact(text: str) -> Parsed:
    """In auto mode python syntax only counts when the whole text is a valid call."""
    parsed = from_python_call(text)
    return parsed if parsed.ok else Parsed()


_FORMATS: dict[str, Callable[[str], Parsed]] = {
    "hermes": from_hermes,
    "json": from_json_text,
    "python": _python_if_exact,
    "python_list": from_python_list,  # BFCL's prompt-mode replies (kate.llm.tool_prompt)
}


@total_reader
def parse_model_output(text: str | None, formats: Sequence[str] = ("hermes", "json"),
                       positional: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """Try ``formats`` in order; the first that finds calls or a failure wins; else no call.
    ``positional``: each function's parameter order, for Python calls with positional arguments
    (``python_list``)."""
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise Reject(f"expected text, got {type(text).__name__}")
    if isinstance(formats, str):
        formats = (formats,)
    for fmt in formats:
        reader = _FORMATS.get(fmt) if isinstance(fmt, str) else None
        if reader is None:
            raise Reject(f"unknown format {short_repr(fmt)}; known: {sorted(_FORMATS)}")
        parsed = from_python_list(text, positional) if fmt == "python_list" else reader(text)
        if parsed.calls or not parsed.ok:
            return parsed
    return Parsed()


def _first_json_call(text: str) -> Parsed:
    for match in JSON_START.finditer(text):
        start = match.start()
        if not CALL_ATTEMPT.match(text, start):
            continue
        try:
            value, _ = DECODER.raw_decode(text, start)
        except json.JSONDecodeError as error:
            raise Reject(f"malformed JSON call at offset {start}: {error.msg}") from None
        calls = calls_in_json(value, 0)
        if calls:
            return Parsed(calls=(calls[0],))
    return Parsed()


@total_reader
def parse_first_call(text: str | None) -> Parsed:
    """The first call the text makes (Hermes block, else JSON object), ignoring everything after it.

    For one-call-per-step agents: what follows the first call (further calls, or a tail cut by the
    token limit) is not part of the action. A malformed *first* call is still a failure.
    """
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise Reject(f"expected text, got {type(text).__name__}")
    pos = text.find(HERMES_OPEN)
    if pos != -1 and not CALL_ATTEMPT.search(text, 0, pos):
        call, _ = hermes_block(text, pos + len(HERMES_OPEN), 0)
        return Parsed(calls=(call,))
    return _first_json_call(text)


CALL_CLOSERS = "}>])"  # a call's text can only become whole at one of these characters


def first_call_complete(text: str) -> bool:
    """Whether ``text`` already holds a whole first call that ``parse_first_call`` reads without error:
    what follows it cannot change that call, so a one-call step may stop generating there."""
    parsed = parse_first_call(text)
    return parsed.ok and bool(parsed.calls)


def first_call_end(text: str, start: int = 0) -> int | None:
    """The length of the shortest prefix of ``text`` (longer than ``start``) that holds a whole first call."""
    for end in range(start + 1, len(text) + 1):
        if text[end - 1] in CALL_CLOSERS and first_call_complete(text[:end]):
            return end
    return None


__all__ = [
    "NotJSONCompatible",
    "first_call_complete",
    "first_call_end",
    "parse_first_call",
    "from_bfcl",
    "from_bfcl_strings",
    "from_hermes",
    "from_json_text",
    "from_openai_tool_calls",
    "from_python_call",
    "parse_model_output",
]
