"""Run trajectories as JSONL, one dialogue per line, safe against a crash mid-write.

``append_jsonl`` writes one line and fsyncs it; a final line cut short by a crash is dropped
(with a warning) by both ``read_jsonl`` and the next ``append_jsonl``. A corrupt line anywhere
else is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _to_record(record: Any) -> Any:
    to_dict = getattr(record, "to_dict", None)
    return to_dict() if callable(to_dict) else record


def _drop_truncated_tail(path: Path) -> None:
    """If the file does not end with a newline, its last line was cut short: drop it (or, if it
    is in fact complete JSON, just end it with a newline)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        try:
            json.loads(data[cut:])
        except ValueError:
            warnings.warn(f"{path}: dropping a truncated last line before appending", stacklevel=3)
            f.truncate(cut)
        else:
            f.write(b"\n")
        f.flush()
        os.fsync(f.fileno())


def append_jsonl(path: str | os.PathLike[str], record: Mapping[str, Any] | Any) -> None:
    """Append ``record`` (a JSON-able mapping, or anything with ``to_dict()``) as one line."""
    path = Path(path)
    line = json.dumps(_to_record(record), ensure_ascii=False, allow_nan=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    _drop_truncated_tail(path)
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Every record in ``path``. A truncated final line (no newline, not JSON) is skipped with a
    warning; any other unreadable line raises ValueError with ``file:line``. Blank lines are skipped."""
    path = Path(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line.decode("utf-8")))
        except ValueError as exc:  # includes UnicodeDecodeError (a multi-byte character cut short)
            if number == len(lines):  # no newline after it: the write was cut short
                warnings.warn(f"{path}:{number}: skipping a truncated last line", stacklevel=2)
                break
            raise ValueError(f"{path}:{number}: corrupt JSON line ({exc})") from None
    return records
