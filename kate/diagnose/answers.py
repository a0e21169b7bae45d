"""Reading and checking a model's final answer: ``\\boxed{...}``, numbers, and the checker spec of a
verifiable item.

A checker spec is a small JSON object (what a user's own JSONL set writes per line)::

    {"kind": "number", "tolerance": 1e-6}   # the boxed (else the last) number equals the answer
    {"kind": "exact"}                       # the boxed (else the whole) text equals it, case and spaces aside
    {"kind": "contains"}                    # the answer text occurs in the reply (case-insensitive)
    {"kind": "regex", "pattern": "..."}     # the reply matches the pattern (the answer is not used)

``extract`` chooses what is compared for ``number`` and ``exact``: ``boxed`` (the last
``\\boxed{}``; nothing boxed is wrong), ``boxed_or_text`` (the default: the last ``\\boxed{}``, else
the whole reply) or ``text``. A reply that cannot be read is wrong, never an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

CHECKER_KINDS = ("number", "exact", "contains", "regex")
EXTRACTS = ("boxed", "boxed_or_text", "text")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"[-\u2212]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-\u2212]?\.\d+")


def extract_boxed(text: str | None) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces matched), or None when there is none."""
    if not text:
        return None
    found = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found = text[start:i]
                break
    return found


def parse_number(text: str | None) -> Fraction | None:
    """One number written plainly: ``-215``, ``40,127``, ``3.5``, ``1e3``, ``$12``, ``7/2``; else None."""
    if text is None:
        return None
    cleaned = text.strip().replace("\u2212", "-").replace("$", "").replace("\\,", "").replace("\\!", "")
    cleaned = re.sub(r"\\(?:text|mathrm)\{([^{}]*)\}", r"\1", cleaned).strip().rstrip(".").strip()
    fraction = re.fullmatch(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}|(-?\d+)\s*/\s*(\d+)", cleaned)
    if fraction:
        sign, num, den = (fraction[1], fraction[2], fraction[3]) if fraction[2] else ("", fraction[4], fraction[5])
        return None if int(den) == 0 else Fraction(int(sign + num), int(den))
    if not re.fullmatch(r"-?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+", cleaned):
        return None
    number = cleaned.replace(",", "").replace(" ", "")
    try:
        value = float(number) if "e" in number.lower() else None
        if value is not None:
            return Fraction(value) if math.isfinite(value) else None
        return Fraction(number)
    except (ValueError, OverflowError):
        return None


def last_number(text: str | None) -> Fraction | None:
    """The last number written anywhere in the text, or None."""
    for match in reversed(list(_NUMBER.finditer(text or ""))):
        value = parse_number(match.group(0).replace(" ", ""))
        if value is not None:
            return value
    return None


def expected_number(answer: Any) -> Fraction:
    """An item's numeric answer (a number, or text that is one); ValueError otherwise."""
    numeric = isinstance(answer, (int, float)) and not isinstance(answer, bool)
    expected = Fraction(str(answer)) if numeric and math.isfinite(answer) else parse_number(str(answer))
    if expected is None or isinstance(answer, bool):
        raise ValueError(f"a number checker needs a numeric answer, got {answer!r}")
    return expected


def _normalize(text: str) -> str:
    return " ".join(text.strip().lower().split()).rstrip(".")


@dataclass(frozen=True)
class AnswerChecker:
    """How a reply is checked against an item's answer (see the module docstring)."""

    kind: str = field(default="number", metadata={"help": "number | exact | contains | regex"})
    extract: str = field(default="boxed_or_text", metadata={"help": "boxed | boxed_or_text | text"})
    tolerance: float = field(default=1e-6, metadata={"help": "number: allowed relative (and absolute) error"})
    pattern: str | None = field(default=None, metadata={"help": "regex: the pattern the reply must match"})

    def __post_init__(self) -> None:
        if self.kind not in CHECKER_KINDS:
            raise ValueError(f"checker kind must be one of {CHECKER_KINDS}, got {self.kind!r}")
        if self.extract not in EXTRACTS:
            raise ValueError(f"checker extract must be one of {EXTRACTS}, got {self.extract!r}")
        if self.kind == "regex":
            if not self.pattern:
                raise ValueError("a regex checker needs a 'pattern'")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"checker pattern {self.pattern!r} is not a valid regex ({exc})") from None
        if not self.tolerance >= 0:
            raise ValueError(f"checker tolerance must be >= 0, got {self.tolerance!r}")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | str | None) -> "AnswerChecker":
        """From a spec object, a bare kind name, or None (the default number checker)."""
        if spec is None:
            return cls()
        if isinstance(spec, str):
            return cls(kind=spec)
        if not isinstance(spec, Mapping):
            raise ValueError(f"a checker spec must be an object or a kind name, got {type(spec).__name__}")
        unknown = sorted(set(spec) - {"kind", "extract", "tolerance", "pattern"})
        if unknown:
            raise ValueError(f"unknown checker field(s) {unknown}; known: kind, extract, tolerance, pattern")
        return cls(**spec)

    def to_spec(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def _compared(self, reply: str) -> str | None:
        if self.extract == "text":
            return reply
        boxed = extract_boxed(reply)
        return boxed if boxed is not None or self.extract == "boxed" else reply

    def check(self, reply: str | None, answer: Any) -> bool:
        """Whether the reply gives the answer (a reply that cannot be read is wrong)."""
        reply = reply or ""
        if self.kind == "regex":
            return re.search(self.pattern or "", reply) is not None
        if self.kind == "contains":
            return str(answer).strip().lower() in reply.lower()
        compared = self._compared(reply)
        if compared is None:
            return False
        if self.kind == "exact":
            return _normalize(compared) == _normalize(str(answer))
        expected = expected_number(answer)
        got = parse_number(compared)
        if got is None:  # e.g. "90 * 445 + 791 = 40127" inside the box: its last number
            got = last_number(compared)
        if got is None:
            return False
        return abs(got - expected) <= self.tolerance * max(1, abs(expected))
