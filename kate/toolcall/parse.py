"""Strict, total readers: every ``from_*`` turns some model output into a ``Parsed``.

Rules shared by all readers:

* they never raise, whatever they are given; a malformed call becomes ``Parsed.failure(reason)``;
* they never guess: no repair of broken JSON, no eval/exec, no fuzzy keys;
* a call object is ``{"name": str, "arguments": {...}}``; ``parameters`` may stand for
  ``arguments``, arguments may be a JSON *string* (OpenAI style), and ``id`` / ``type`` may ride
  along. Anything else in a call object is a failure.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kate.toolcall.call import NotJSONCompatible, ToolCall, canonical_json, to_json_value
from kate.toolcall.parsed import Parsed

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ARG_KEYS = ("arguments", "parameters")
_HERMES_OPEN = "<tool_call>"
_HERMES_CLOSE = "</tool_call>"
_SPACE = re.compile(r"\s*")
# Where a JSON object/array can begin; a cheap pre-filter so garbage brackets cost nothing.
_JSON_START = re.compile(r'\{\s*["}]|\[\s*[\[\]{"\-0-9tfnNI]')
_MAX_PYTHON_CHARS = 1_000_000
_MAX_REASON_CHARS = 500


class _Reject(Exception):
    """Internal: the input is malformed; the message is the failure reason."""


# --------------------------------------------------------------------------- helpers


def _short(value: Any, limit: int = 60) -> str:
    """A bounded repr for failure reasons; never raises."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not escape
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = ""
    return text or type(exc).__name__


def _total(func: Callable[..., Parsed]) -> Callable[..., Parsed]:
    """Make ``func`` total: any exception inside becomes a failure ``Parsed``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Parsed:
        try:
            return func(*args, **kwargs)
        except _Reject as exc:
            reason = _describe(exc)
        except RecursionError:
            reason = "input nested too deeply"
        except MemoryError:
            reason = "input too large"
        except ValueError as exc:  # includes NotJSONCompatible and JSONDecodeError
            reason = _describe(exc)
        except Exception as exc:  # noqa: BLE001 - totality is the contract
            reason = f"{type(exc).__name__}: {_describe(exc)}"
        return Parsed.failure(reason[:_MAX_REASON_CHARS])

    return wrapper


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Reject(f"duplicate key {_short(key)} in JSON object")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


def _loads(text: str, where: str) -> Any:
    """Strict ``json.loads`` (duplicate keys rejected); failure reasons name ``where``."""
    try:
        value, end = _DECODER.raw_decode(text, _SPACE.match(text).end())
    except json.JSONDecodeError as exc:
        raise _Reject(f"{where}: invalid JSON ({exc.msg} at char {exc.pos})") from None
    if text[end:].strip():
        raise _Reject(f"{where}: extra text after JSON")
    return value


def _decode_arguments(value: Any, where: str) -> Mapping[str, Any]:
    if isinstance(value, str):
        value = _loads(value, f"{where}: arguments string")
    if not isinstance(value, Mapping):
        raise _Reject(f"{where}: arguments must be an object, got {type(value).__name__}")
    return value


def _arguments_of(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    present = [key for key in _ARG_KEYS if key in obj]
    if not present:
        raise _Reject(f"{where}: call has no 'arguments' (or 'parameters') key")
    decoded = [_decode_arguments(obj[key], where) for key in present]
    if len(decoded) == 2:
        first, second = (canonical_json(to_json_value(d)) for d in decoded)
        if first != second:
            raise _Reject(f"{where}: 'arguments' and 'parameters' disagree")
    return decoded[0]


def _call_from_obj(obj: Any, where: str, call_id: Any = None) -> ToolCall:
    """Validate one call object ``{"name", "arguments"|"parameters"[, "id", "type"]}``."""
    if not isinstance(obj, Mapping):
        raise _Reject(f"{where}: a call must be an object, got {type(obj).__name__}")
    extra = sorted(str(key) for key in obj if key not in _CALL_KEYS)
    if extra:
        raise _Reject(f"{where}: unexpected keys {extra[:5]} in call object")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Reject(f"{where}: call name must be a non-empty string, got {_short(name)}")
    arguments = _arguments_of(obj, where)
    call_id = obj.get("id") if call_id is None else call_id
    if call_id is not None and not isinstance(call_id, str):
        raise _Reject(f"{where}: call id must be a string, got {_short(call_id)}")
    return ToolCall(name=name, arguments=arguments, call_id=call_id)


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
        raise _Reject(f"{where}: expected an object, got {type(item).__name__}")
    if item.get("type") not in (None, "function"):
        raise _Reject(f"{where}: unsupported tool call type {_short(item.get('type'))}")
    if "function" not in item:
        raise _Reject(f"{where}: no 'function' field")
    function = _plain(item["function"], ("name", "arguments"))
    return _call_from_obj(function, f"{where}.function", call_id=item.get("id"))


@_total
def from_openai_tool_calls(tool_calls: Any) -> Parsed:
    """OpenAI ``message.tool_calls`` (dicts or SDK objects) -> calls; None or [] -> no calls."""
    if tool_calls is None:
        return Parsed()
    if not isinstance(tool_calls, (list, tuple)):
        raise _Reject(f"tool_calls must be a list, got {type(tool_calls).__name__}")
    return Parsed(calls=tuple(_openai_item(item, i) for i, item in enumerate(tool_calls)))


# --------------------------------------------------------------------------- Hermes


def _hermes_block(text: str, start: int, number: int) -> tuple[ToolCall, int]:
    """Read the block whose content begins at ``start``; return its call and where it ends."""
    where = f"<tool_call> block {number}"
    begin = _SPACE.match(text, start).end()
    try:
        obj, end = _DECODER.raw_decode(text, begin)
    except json.JSONDecodeError as exc:
        raise _Reject(f"{where}: content is not JSON ({exc.msg})") from None
    call = _call_from_obj(obj, where)
    after = _SPACE.match(text, end).end()
    if text.startswith(_HERMES_CLOSE, after):
        return call, after + len(_HERMES_CLOSE)
    if after == len(text):
        return call, after  # final block cut before its closing tag
    raise _Reject(f"{where}: unexpected text after the call object")


@_total
def from_hermes(text: str | None) -> Parsed:
    """Hermes / Qwen ``<tool_call>{...}</tool_call>`` blocks -> calls; no tags -> no calls."""
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise _Reject(f"expected text, got {type(text).__name__}")
    calls: list[ToolCall] = []
    pos = text.find(_HERMES_OPEN)
    while pos != -1:
        call, end = _hermes_block(text, pos + len(_HERMES_OPEN), len(calls))
        calls.append(call)
        pos = text.find(_HERMES_OPEN, end)
    return Parsed(calls=tuple(calls))


# --------------------------------------------------------------------------- bare JSON


def _is_call_shaped(value: Any) -> bool:
    return isinstance(value, dict) and "name" in value


def _calls_in_json(value: Any, number: int) -> list[ToolCall]:
    """Calls carried by one JSON value found in text ([] if it is not call-shaped)."""
    where = f"JSON value {number}"
    if _is_call_shaped(value):
        return [_call_from_obj(value, where)]
    if not isinstance(value, list) or not value:
        return []
    shaped = [_is_call_shaped(item) for item in value]
    if not any(shaped):
        return []
    if not all(shaped):
        raise _Reject(f"{where}: list mixes call objects and other values")
    return [_call_from_obj(item, f"{where}[{i}]") for i, item in enumerate(value)]


_CALL_ATTEMPT = re.compile(r'[{\[]\s*\{?\s*"name"\s*:')


def _json_values(text: str) -> list[Any]:
    """Every JSON object/array in ``text``, left to right, not looking inside found values.

    JSON nested deeper than the interpreter allows raises RecursionError (a failure); an object
    that starts like a call (``{"name": ...``) but is not valid JSON is a malformed call: a failure.
    """
    values, pos = [], 0
    while True:
        match = _JSON_START.search(text, pos)
        if match is None:
            return values
        start = match.start()
        try:
            value, pos = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as error:
            if _CALL_ATTEMPT.match(text, start):
                raise _Reject(f"malformed JSON call at offset {start}: {error.msg}") from None
            pos = start + 1
            continue
        values.append(value)


@_total
def from_json_text(text: str | None) -> Parsed:
    """Call-shaped JSON (object or list of objects, fenced or bare) in text -> calls."""
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise _Reject(f"expected text, got {type(text).__name__}")
    calls: list[ToolCall] = []
    for number, value in enumerate(_json_values(text)):
        calls.extend(_calls_in_json(value, number))
    return Parsed(calls=tuple(calls))


# --------------------------------------------------------------------------- Python syntax


def _dotted_name(node: ast.expr, where: str) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value, where)}.{node.attr}"
    raise _Reject(f"{where}: the function must be a plain or dotted name")


def _literal(node: ast.expr, key: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError):
        raise _Reject(f"value of {key!r} is not a literal") from None


def _python_call(node: ast.expr, where: str, positional: Mapping[str, Sequence[str]] | None = None) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise _Reject(f"{where}: not a call expression")
    name = _dotted_name(node.func, where)
    order = (positional or {}).get(name)
    if node.args and order is None:
        raise _Reject(f"{where}: {name}() has positional arguments; only keywords are allowed")
    if len(node.args) > len(order or ()):
        raise _Reject(f"{where}: {name}() has more positional arguments than parameters")
    arguments: dict[str, Any] = {}
    for param, value in zip(order or (), node.args):
        if isinstance(value, ast.Starred):
            raise _Reject(f"{where}: {name}() uses *args")
        arguments[param] = _literal(value, param)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise _Reject(f"{where}: {name}() uses **kwargs")
        if keyword.arg in arguments:
            raise _Reject(f"{where}: {name}() repeats argument {keyword.arg!r}")
        arguments[keyword.arg] = _literal(keyword.value, keyword.arg)
    return ToolCall(name=name, arguments=arguments)


@_total
def from_python_call(text: str, positional: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """``f(a=1)``, ``m.f(a=1)`` or ``[f(a=1), g(b='x')]`` with literal keyword values -> calls.

    Positional arguments are a failure unless ``positional`` gives the parameter order of that
    function (BFCL's multi-turn ground truth writes ``sort('report.pdf')``).
    """
    if not isinstance(text, str):
        raise _Reject(f"expected text, got {type(text).__name__}")
    if len(text) > _MAX_PYTHON_CHARS:
        raise _Reject("python call text too long")
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError) as exc:
        raise _Reject(f"not a python call expression ({type(exc).__name__})") from None
    if isinstance(body, (ast.List, ast.Tuple)):
        return Parsed(calls=tuple(_python_call(n, f"item {i}", positional) for i, n in enumerate(body.elts)))
    return Parsed(calls=(_python_call(body, "expression", positional),))


# --------------------------------------------------------------------------- BFCL


def _bfcl_item(item: Any, index: int) -> ToolCall:
    where = f"item {index}"
    if not isinstance(item, Mapping) or len(item) != 1:
        raise _Reject(f"{where}: expected an object with exactly one key (the function name)")
    ((name, arguments),) = item.items()
    if not isinstance(name, str) or not name.strip():
        raise _Reject(f"{where}: function name must be a non-empty string, got {_short(name)}")
    if not isinstance(arguments, Mapping):
        raise _Reject(f"{where}: arguments of {name!r} must be an object")
    return ToolCall(name=name, arguments=arguments)


@_total
def from_bfcl(decoded: Any) -> Parsed:
    """BFCL decoded form ``[{"fn": {"arg": value}}, ...]`` -> calls."""
    if not isinstance(decoded, (list, tuple)):
        raise _Reject(f"BFCL decoded output must be a list, got {type(decoded).__name__}")
    return Parsed(calls=tuple(_bfcl_item(item, i) for i, item in enumerate(decoded)))


@_total
def from_bfcl_strings(strings: Any, positional: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """BFCL call strings ``["cd(folder='x')", ...]``, one call each -> calls (see from_python_call)."""
    if isinstance(strings, str) or not isinstance(strings, Sequence):
        raise _Reject(f"expected a list of call strings, got {type(strings).__name__}")
    calls: list[ToolCall] = []
    for index, string in enumerate(strings):
        parsed = from_python_call(string, positional)
        if not parsed.ok:
            raise _Reject(f"string {index}: {parsed.error}")
        if len(parsed.calls) != 1:
            raise _Reject(f"string {index}: expected exactly one call, got {len(parsed.calls)}")
        calls.extend(parsed.calls)
    return Parsed(calls=tuple(calls))


# --------------------------------------------------------------------------- auto


def _python_if_exact(text: str) -> Parsed:
    """In auto mode python syntax only counts when the whole text is a valid call."""
    parsed = from_python_call(text)
    return parsed if parsed.ok else Parsed()


_FORMATS: dict[str, Callable[[str], Parsed]] = {
    "hermes": from_hermes,
    "json": from_json_text,
    "python": _python_if_exact,
}


@_total
def parse_model_output(text: str | None, formats: Sequence[str] = ("hermes", "json")) -> Parsed:
    """Try ``formats`` in order; the first that finds calls or a failure wins; else no call."""
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise _Reject(f"expected text, got {type(text).__name__}")
    if isinstance(formats, str):
        formats = (formats,)
    for fmt in formats:
        reader = _FORMATS.get(fmt) if isinstance(fmt, str) else None
        if reader is None:
            raise _Reject(f"unknown format {_short(fmt)}; known: {sorted(_FORMATS)}")
        parsed = reader(text)
        if parsed.calls or not parsed.ok:
            return parsed
    return Parsed()


def _first_json_call(text: str) -> Parsed:
    for match in _JSON_START.finditer(text):
        start = match.start()
        if not _CALL_ATTEMPT.match(text, start):
            continue
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as error:
            raise _Reject(f"malformed JSON call at offset {start}: {error.msg}") from None
        calls = _calls_in_json(value, 0)
        if calls:
            return Parsed(calls=(calls[0],))
    return Parsed()


@_total
def parse_first_call(text: str | None) -> Parsed:
    """The first call the text makes (Hermes block, else JSON object), ignoring everything after it.

    For one-call-per-step agents: what follows the first call (further calls, or a tail cut by the
    token limit) is not part of the action. A malformed *first* call is still a failure.
    """
    if text is None:
        return Parsed()
    if not isinstance(text, str):
        raise _Reject(f"expected text, got {type(text).__name__}")
    pos = text.find(_HERMES_OPEN)
    if pos != -1 and not _CALL_ATTEMPT.search(text, 0, pos):
        call, _ = _hermes_block(text, pos + len(_HERMES_OPEN), 0)
        return Parsed(calls=(call,))
    return _first_json_call(text)


__all__ = [
    "NotJSONCompatible",
    "parse_first_call",
    "from_bfcl",
    "from_bfcl_strings",
    "from_hermes",
    "from_json_text",
    "from_openai_tool_calls",
    "from_python_call",
    "parse_model_output",
]
