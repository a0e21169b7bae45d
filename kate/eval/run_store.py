"""A run's results on disk: ``meta.json`` (written atomically) and ``records.jsonl`` (one record per
item, appended and fsynced as each item finishes).

A killed run resumes where it stopped: items already in ``records.jsonl`` are skipped, a record cut
short by the crash is dropped and redone, and no record is ever written twice. The fingerprint
covers exactly what determines the records (``FINGERPRINTED``: the arm's config, the policy, the
task's identity, the seed), so a folder holding another configuration is refused, naming the
file, while a rerun asking for more items of the same arm extends the folder (``items`` grows).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from kate.io import append_jsonl, atomic_write_json, read_jsonl

FINGERPRINTED = ("config", "policy", "task", "seed")


class RunMismatch(RuntimeError):
    """The folder holds a run with another configuration."""


def fingerprint(meta: dict[str, Any]) -> str:
    """Hash of what determines the records (not of how fast, where or for how many items)."""
    relevant = {k: meta.get(k) for k in FINGERPRINTED}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unique(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    unique: dict[str, dict[str, Any]] = {}
    for record in records:
        unique.setdefault(record["id"], record)
    return list(unique.values())


class RunStore:
    def __init__(self, folder: str | Path, meta: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.meta_path = self.folder / "meta.json"
        self.records_path = self.folder / "records.jsonl"
        self.meta = {**meta, "fingerprint": fingerprint(meta)}
        self._lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.meta_path.exists():
            try:
                existing = json.loads(self.meta_path.read_text())
            except json.JSONDecodeError as error:
                raise RunMismatch(f"{self.meta_path} is not valid JSON ({error}); delete the folder or fix the file") from None
            if existing.get("fingerprint") != self.meta["fingerprint"]:
                raise RunMismatch(
                    f"{self.meta_path} belongs to a run with another configuration "
                    f"(fingerprint {existing.get('fingerprint')} != {self.meta['fingerprint']}); "
                    "choose another output folder or delete it"
                )
            planned = list(dict.fromkeys([*existing.get("items", []), *self.meta.get("items", [])]))
            if planned != existing.get("items", []):
                existing = {**existing, "items": planned}
                atomic_write_json(self.meta_path, existing)
            self.meta = existing
        else:
            atomic_write_json(self.meta_path, self.meta)

    def records(self) -> list[dict[str, Any]]:
        return _unique(read_jsonl(self.records_path)) if self.records_path.exists() else []

    def done_ids(self) -> set[str]:
        return {r["id"] for r in self.records()}

    def append(self, record: Any) -> None:
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
    return json.loads(meta_path.read_text()), _unique(records)


def meta_summary(meta: dict[str, Any]) -> dict[str, Any]:
    """The fields reports show, from a run's meta: model, sampler, knowledge, task identity, the
    items planned (and, for metas written before the one runner, the same from their flat layout)."""
    if "policy" not in meta:
        return {"model": meta.get("model"), "sampler": meta.get("sampler"), "knowledge": meta.get("knowledge"),
                "bfcl_eval": meta.get("bfcl_eval"), "data_sha256": meta.get("data_sha256"),
                "scoring_model": meta.get("scoring_model"), "items": meta.get("entries", [])}  # fmt: skip
    policy, task = meta["policy"], meta.get("task", {})
    return {"model": policy.get("model"), "sampler": policy.get("sampler"), "knowledge": policy.get("knowledge"),
            "bfcl_eval": task.get("bfcl_eval"), "data_sha256": meta.get("data"),
            "scoring_model": task.get("scoring_model"), "items": meta.get("items", [])}  # fmt: skip
