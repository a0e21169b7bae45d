"""The value every converter returns: the calls it found, or the reason it found none."""

from __future__ import annotations

from dataclasses import dataclass

from kate.toolcall.call import ToolCall


@dataclass(frozen=True)
class Parsed:
    """Outcome of reading tool calls out of some model output.

    ``error is None`` and ``calls == ()`` means the output held no call (a plain answer);
    ``error`` set means it tried to call and the attempt was malformed: a recorded failure.
    """

    calls: tuple[ToolCall, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failure(cls, reason: str) -> "Parsed":
        return cls(calls=(), error=reason)
