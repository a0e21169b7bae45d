"""The placeholder that a shown example writes where a value is hidden (``<unit>``, ``<unit 2>``),
and the check that a call still carries one.

Knowledge shows a solved request with its values masked so that the model copies the call pattern,
not the other user's values; a model that copies the masks themselves writes a call such as
``{"controller": "<controller 1>"}``, which no request asked for. The writer
(``kate.retrieval.inject`` / ``kate.retrieval.pattern``) and the check (``kate.sampling.vote``'s
``filled_majority``) share this one form, so that what is written is what is recognised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kate.toolcall.call import ToolCall

PLACEHOLDER = re.compile(r"<[A-Za-z_][\w.\-]*(?: \d+)?>")


def placeholder(parameter: str, index: int | None = None) -> str:
    """``<parameter>``, or ``<parameter index>`` for the index-th call to the same function."""
    return f"<{parameter}>" if index is None else f"<{parameter} {index}>"


def is_placeholder(value: Any) -> bool:
    """Whether ``value`` is a placeholder string and nothing else (surrounding spaces aside)."""
    return isinstance(value, str) and PLACEHOLDER.fullmatch(value.strip()) is not None


def _carries(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_carries(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_carries(v) for v in value)
    return is_placeholder(value)


def carries_placeholder(calls: Iterable[ToolCall]) -> bool:
    """Whether some argument of some call (nested values included) is a copied placeholder."""
    return any(_carries(call.arguments) for call in calls)
