"""Readers of calls in Python call syntax, read with ``ast`` and ``ast.literal_eval`` only (model
output is never evaluated), and of BFCL's decoded and string forms."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kate.toolcall.call import ToolCall
from kate.toolcall.parsed import Parsed
from kate.toolcall.total import Reject, short_repr, total_reader

_MAX_PYTHON_CHARS = 1_000_000


# --------------------------------------------------------------------------- Python syntax


def _dotted_name(node: ast.expr, where: str) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value, where)}.{node.attr}"
    raise Reject(f"{where}: the function must be a plain or dotted name")


def _literal(node: ast.expr, key: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError):
        raise Reject(f"value of {key!r} is not a literal") from None


def _python_call(node: ast.expr, where: str, positional: Mapping[str, Sequence[str]] | None = None) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise Reject(f"{where}: not a call expression")
    name = _dotted_name(node.func, where)
    order = (positional or {}).get(name)
    if node.args and order is None:
        raise Reject(f"{where}: {name}() has positional arguments; only keywords are allowed")
    if len(node.args) > len(order or ()):
        raise Reject(f"{where}: {name}() has more positional arguments than parameters")
    arguments: dict[str, Any] = {}
    for param, value in zip(order or (), node.args):
        if isinstance(value, ast.Starred):
            raise Reject(f"{where}: {name}() uses *args")
        arguments[param] = _literal(value, param)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise Reject(f"{where}: {name}() uses **kwargs")
        if keyword.arg in arguments:
            raise Reject(f"{where}: {name}() repeats argument {keyword.arg!r}")
        arguments[keyword.arg] = _literal(keyword.value, keyword.arg)
    return ToolCall(name=name, arguments=arguments)


@total_reader
def from_python_call(text: str, positional: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """``f(a=1)``, ``m.f(a=1)`` or ``[f(a=1), g(b='x')]`` with literal keyword values -> calls.

    Positional arguments are a failure unless ``positional`` gives the parameter order of that
    function (BFCL's multi-turn ground truth writes ``sort('report.pdf')``).
    """
    if not isinstance(text, str):
        raise Reject(f"expected text, got {type(text).__name__}")
    if len(text) > _MAX_PYTHON_CHARS:
        raise Reject("python call text too long")
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError) as exc:
        raise Reject(f"not a python call expression ({type(exc).__name__})") from None
    if isinstance(body, (ast.List, ast.Tuple)):
        return Parsed(calls=tuple(_python_call(n, f"item {i}", positional) for i, n in enumerate(body.elts)))
    return Parsed(calls=(_python_call(body, "expression", positional),))


_CALL_START = re.compile(r"\[|[A-Za-z_][\w.]*\s*\(")
_PYTHON_CALL_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(|[A-Za-z_][\w.]*\s*\(")


def _strip_fences(text: str) -> str:
    body = text.strip("`\n ")
    if body.startswith(("python\n", "json\n")):
        body = body.split("\n", 1)[1].strip("`\n ")
    return body


def starts_python_call(text: str | None) -> bool:
    """Whether a reply opens with a Python call (``f(`` or ``[f(``, after code fences): the Python form."""
    return bool(text) and bool(_PYTHON_CALL_START.match(_strip_fences(text)))


@total_reader
def from_python_list(text: str, positional: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """A reply in BFCL's prompt-mode form, ``[f(a=1), g(b='x')]``, read as BFCL reads it: code fences and
    their language tag stripped, brackets added where missing. A reply that does not start like a call
    (a bracket or ``name(``) is prose: no call. One that does and does not parse is a failure.
    ``positional``: each function's parameter order, binding positional arguments as Python does."""
    if not isinstance(text, str):
        raise Reject(f"expected text, got {type(text).__name__}")
    body = _strip_fences(text)
    if not _CALL_START.match(body):
        return Parsed()
    body = body if body.startswith("[") else f"[{body}"
    return from_python_call(body if body.endswith("]") else f"{body}]", positional)


# --------------------------------------------------------------------------- BFCL


def _bfcl_item(item: Any, index: int) -> ToolCall:
    where = f"item {index}"
    if not isinstance(item, Mapping) or len(item) != 1:
        raise Reject(f"{where}: expected an object with exactly one key (the function name)")
    ((name, arguments),) = item.items()
    if not isinstance(name, str) or not name.strip():
        raise Reject(f"{where}: function name must be a non-empty string, got {short_repr(name)}")
    if not isinstance(arguments, Mapping):
        raise Reject(f"{where}: arguments of {name!r} must be an object")
    return ToolCall(name=name, arguments=arguments)


@total_reader
def from_bfcl(decoded: Any) -> Parsed:
    """BFCL decoded form ``[{"fn": {"arg": value}}, ...]`` -> calls."""
    if not isinstance(decoded, (list, tuple)):
        raise Reject(f"BFCL decoded output must be a list, got {type(decoded).__name__}")
    return Parsed(calls=tuple(_bfcl_item(item, i) for i, item in enumerate(decoded)))


@total_reader
def from_bfcl_strings(strings: Any, positional: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """BFCL call strings ``["cd(folder='x')", ...]``, one call each -> calls (see from_python_call)."""
    if isinstance(strings, str) or not isinstance(strings, Sequence):
        raise Reject(f"expected a list of call strings, got {type(strings).__name__}")
    calls: list[ToolCall] = []
    for index, string in enumerate(strings):
        parsed = from_python_call(string, positional)
        if not parsed.ok:
            raise Reject(f"string {index}: {parsed.error}")
        if len(parsed.calls) != 1:
            raise Reject(f"string {index}: expected exactly one call, got {len(parsed.calls)}")
        calls.extend(parsed.calls)
    return Parsed(calls=tuple(calls))
