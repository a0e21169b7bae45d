"""Crash-safe files: a reader never sees a half-written file, a crash never leaves one.

Whole files are written atomically (``atomic_open`` and friends). JSONL files grow one fsynced line
at a time: ``append_jsonl`` writes one line and fsyncs it; a final line cut short by a crash is
dropped (with a warning) by both ``read_jsonl`` and the next ``append_jsonl``. A corrupt line
anywhere else is an error naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path``, fsync it, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_write_json(path: str | os.PathLike, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


@contextmanager
def atomic_folder(target: str | os.PathLike) -> Iterator[Path]:
    """Build a folder in a temporary sibling; on success it replaces ``target`` (the old one moved
    aside first, then removed), on failure it is removed and ``target`` is left as it was."""
    import shutil
    import time

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        tmp.chmod(0o755)
        if target.exists():
            stale = target.with_name(f".{target.name}.stale-{time.time_ns()}")
            target.rename(stale)
            shutil.rmtree(stale, ignore_errors=True)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_bytes_from(path: str | os.PathLike, sources: Iterable[Path]) -> str:
    """Concatenate ``sources`` into ``path`` atomically; return the sha256 of what was written."""
    digest = hashlib.sha256()
    with atomic_open(path, "wb") as out:
        for source in sources:
            with open(source, "rb") as fh:
                while block := fh.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    return digest.hexdigest()


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
