"""Which trained checkpoint a user adopts, of several runs' chosen ones (each run's ``best/``, picked
by its task probe): the one with the highest task-probe mean, the earlier run on a tie (SFT before the
DPO that starts from it), and none unless it beats the untrained model's mean on the same items (the
first run's step 0). Every run must have probed alike (one task-probe fingerprint), or the means are
not comparable and the choice refuses, naming the run. A rule fixed before any run finished; its
inputs are held-out training-half items only, never a test half.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kate.io import read_jsonl
from kate.train.eval_arms import finished
from kate.train.probe import BEST_DIR, BEST_FILE, PROBE_FILE

RULE = ("the highest task-probe mean among the runs' best/ checkpoints (the earlier run on a tie), "
        "adopted only if it beats the untrained model's mean (the first run's step 0) on the same items")


def _rows(folder: Path) -> list[dict[str, Any]]:
    path = folder / PROBE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: the run has no probe rows")
    return [r for r in read_jsonl(path) if r.get("tasks")]


def _best(folder: Path) -> dict[str, Any]:
    path = folder / BEST_DIR / BEST_FILE
    try:
        best = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise FileNotFoundError(f"{path}: the run has no chosen checkpoint ({error})") from None
    if not finished(folder) or not (folder / BEST_DIR / "adapter.gguf").exists():
        raise FileNotFoundError(f"{folder}: the run has not finished (no summary.json and final/ adapter, "
                                "or no best/adapter.gguf): its best/ may still change")
    return best


def choose_adapter(runs: Mapping[str, str | Path]) -> dict[str, Any]:
    """``runs``: name -> run folder, in order (the first one's step 0 is the untrained model). Returns
    the choice: ``chosen`` (a name or None), its ``adapter`` (best/adapter.gguf), and every mean."""
    if not runs:
        raise ValueError("choose_adapter: no runs")
    folders = {name: Path(folder) for name, folder in runs.items()}
    first = next(iter(folders.values()))
    base = [r for r in _rows(first) if r["step"] == 0]
    if not base:
        raise ValueError(f"{first / PROBE_FILE}: no step-0 row (the untrained model's probe)")
    fingerprint = base[0]["tasks"].get("fingerprint")
    candidates = {}
    for name, folder in folders.items():
        best = _best(folder)
        row = next((r for r in _rows(folder) if r["step"] == best["step"]), None)
        if row is None or row["tasks"].get("fingerprint") != fingerprint:
            raise ValueError(f"{folder / PROBE_FILE}: step {best['step']} was not probed like {first}'s step 0 "
                             f"(fingerprint {fingerprint}); the means are not comparable")
        candidates[name] = {"step": best["step"], "mean": row["tasks"]["mean"],
                            "adapter": str(folder / BEST_DIR / "adapter.gguf")}
    top = max(candidates, key=lambda n: (candidates[n]["mean"], -list(candidates).index(n)))
    beats = candidates[top]["mean"] > base[0]["tasks"]["mean"]
    return {"rule": RULE, "fingerprint": fingerprint, "base_mean": base[0]["tasks"]["mean"],
            "candidates": candidates, "chosen": top if beats else None,
            "adapter": candidates[top]["adapter"] if beats else None}
