"""What every section of the diagnostics report shares: a diagnostic's result file read when it
was written (``None`` when it was not, so a section can say "Not run." instead of guessing) and a
share formatted as a percentage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_result(path: Path) -> Any:
    """The JSON at ``path``, or ``None`` when the diagnostic did not write it."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def pct(value: float | None) -> str:
    """A share as ``12.3%``; ``-`` when there is none."""
    return "-" if value is None else f"{100 * value:.1f}%"
