"""A run's results on disk: ``meta.json`` (written atomically once) and ``records.jsonl`` (one record
per entry, appended and fsynced as each entry finishes).

A killed run resumes where it stopped: entries already in ``records.jsonl`` are skipped, a record
cut short by the crash is dropped and redone, and no record is ever written twice. Resuming with a
different configuration is refused, naming the file, so two runs never mix in one folder.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from kate.agent.trajectory_io import append_jsonl, read_jsonl
from kate.io import atomic_write_json


class RunMismatch(RuntimeError):
    """The folder holds a run with another configuration."""


def fingerprint(meta: dict[str, Any]) -> str:
    """Hash of what determines the records (not of how fast they were produced)."""
    relevant = {k: v for k, v in meta.items() if k not in {"started", "workers", "fingerprint"}}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


class RunStore:
    def __init__(self, folder: str | Path, meta: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.meta_path = self.folder / "meta.json"
        self.records_path = self.folder / "records.jsonl"
        self.meta = {**meta, "fingerprint": fingerprint(meta)}
        self._lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.meta_path.exists():
            existing = json.loads(self.meta_path.read_text())
            if existing.get("fingerprint") != self.meta["fingerprint"]:
                raise RunMismatch(
                    f"{self.meta_path} belongs to a run with another configuration "
                    f"(fingerprint {existing.get('fingerprint')} != {self.meta['fingerprint']}); "
                    "choose another output folder or delete it"
                )
            self.meta = existing
        else:
            atomic_write_json(self.meta_path, self.meta)

    def records(self) -> list[dict[str, Any]]:
        if not self.records_path.exists():
            return []
        unique: dict[str, dict[str, Any]] = {}
        for record in read_jsonl(self.records_path):
            unique.setdefault(record["id"], record)
        return list(unique.values())

    def done_ids(self) -> set[str]:
        return {r["id"] for r in self.records()}

    def append(self, record: dict[str, Any]) -> None:
        with self._lock:
            append_jsonl(self.records_path, record)


def load_run(folder: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(meta, records) of a finished or partial run, for reports and re-scoring."""
    folder = Path(folder)
    meta_path = folder / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path} is missing: {folder} is not a kate run folder")
    records_path = folder / "records.jsonl"
    records = read_jsonl(records_path) if records_path.exists() else []
    unique: dict[str, dict[str, Any]] = {}
    for record in records:
        unique.setdefault(record["id"], record)
    return json.loads(meta_path.read_text()), list(unique.values())
