"""The acting task's greedy runs, recorded once and read back.

The breakdown runs every item greedily with the tools offered (the acting task's own solve). Plan vs
execute's execution and the gate's ungated run are that same solve, with the same model and seed:
given the breakdown's records they read them instead of generating them again. A record becomes a
run (``acted_run``: its trace and score, without the runner's own keys), and what a diagnostic
read is part of its fingerprint (``acted_sha256``), so a sweep over other runs is another folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

RECORD_KEYS = ("id", "category", "seed", "seconds")  # the runner's, not the solve's


def acted_run(record: Mapping[str, Any]) -> dict[str, Any]:
    """A runner record of the acting task as a run: its trace and score; one that does not say whether
    it called and is valid is an error naming the item."""
    if "called" not in record or "valid" not in record:
        raise ValueError(f"{record.get('id')}: an acted record must say whether it called and is valid, "
                         f"got keys {sorted(record)}")  # fmt: skip
    return {k: v for k, v in record.items() if k not in RECORD_KEYS}


def acted_runs(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """item id -> run, for every record."""
    return {item_id: acted_run(record) for item_id, record in records.items()}


def acted_sha256(runs: Mapping[str, Mapping[str, Any]], ids: Iterable[str]) -> str:
    """The hash of the runs read for these items (None for an item without one)."""
    chosen = {i: runs.get(i) for i in ids}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True, default=str).encode()).hexdigest()
