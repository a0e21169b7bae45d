"""Readers that never raise: ``total_reader`` turns any exception inside a reader into
``Parsed.failure(reason)``, and ``Reject`` is how a reader says its input is malformed (the message
is the failure's reason)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kate.toolcall.parsed import Parsed

_MAX_REASON_CHARS = 500


class Reject(Exception):
    """The input is malformed; the message is the failure reason."""


def short_repr(value: Any, limit: int = 60) -> str:
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


def total_reader(func: Callable[..., Parsed]) -> Callable[..., Parsed]:
    """Make ``func`` total: any exception inside becomes a failure ``Parsed``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Parsed:
        try:
            return func(*args, **kwargs)
        except Reject as exc:
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
