"""Depth activation (KATE's baseline): an extra final user message asking the model to reason
first about the environment state, about its previous calls, or about the user's intent.

The prompt is added only to the request; the agent loop never keeps it in the history.
"""

from __future__ import annotations

from collections.abc import Sequence

from kate.llm.base import Message

DEPTH_PROMPTS: dict[str, str] = {
    "state": (
        "Think about the current state of the environment: what the tool results so far tell you "
        "(for example where you are, what exists, what has changed) and what must hold before the "
        "next call can succeed."
    ),
    "reflection": (
        "Check your previous tool calls: were the right functions called with the right arguments, "
        "and did any result report an error you should correct? Do not repeat a call that already "
        "succeeded."
    ),
    "intent": (
        "Break the user's request into the steps it needs, note which steps are already done, and "
        "pick the single next one. If nothing is left to do, answer the user without calling a tool."
    ),
}
DEPTH_HEADER = "Before you act, reason briefly:"
DEPTH_FOOTER = "Then give your next action: a tool call, or your answer to the user."
ALL_KINDS: tuple[str, ...] = ("state", "reflection", "intent")


def normalize_kinds(kinds: str | Sequence[str]) -> tuple[str, ...]:
    """``kinds`` as a tuple without duplicates; ValueError when empty or unknown."""
    chosen = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    unknown = [k for k in chosen if k not in DEPTH_PROMPTS]
    if unknown or not chosen:
        raise ValueError(f"depth prompt kinds must be a non-empty subset of {list(DEPTH_PROMPTS)}, got {kinds!r}")
    return tuple(dict.fromkeys(chosen))


def depth_prompt(kinds: str | Sequence[str] = ALL_KINDS) -> str:
    """The depth-activation text for one kind or a combination (in the order given)."""
    parts = [f"- {DEPTH_PROMPTS[k]}" for k in normalize_kinds(kinds)]
    return "\n".join([DEPTH_HEADER, *parts, DEPTH_FOOTER])


def with_depth_prompt(messages: list[Message], kinds: str | Sequence[str] = ALL_KINDS) -> list[Message]:
    """A new list: copies of ``messages`` plus the depth prompt as a final user message."""
    return [dict(m) for m in messages] + [{"role": "user", "content": depth_prompt(kinds)}]
