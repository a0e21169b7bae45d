"""The probes and P(call) of one set, from one batched hidden-state pass of an ``hf`` client.

``run_internals`` reads every item's decision-point states (``kate.diagnose.hidden``) with P(call)
computed from the same pass's next-token logits (the openings detected from the breakdown's greedy
calls, or given), then trains, on one seeded split:

* the paper's probe at every (layer, position), on the necessity label (w_c) and on the action label
  (w_a), with held-out MCC, and cosine(w_c, w_a) per (layer, position);
* When2Tool's all-layers probe on both labels (held-out AUROC); its necessity probe is saved
  (``probe.npz``) for the gate, and its belief ``sigmoid(logit / T)`` on every item kept.

Written under ``out``: ``probes/results.json``, ``probes/items.jsonl`` (id, split, necessary, called,
belief, P(call)), ``probes/probe.npz`` and ``pcall/results.json``. A results file with the same
fingerprint (model, items, labels, settings) is read back instead of recomputed. A probe that
cannot be trained (one class in the training split) is a recorded error, not a crash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from kate.diagnose.gate import save_probe
from kate.diagnose.hidden import decision_states
from kate.diagnose.pcall import agreement, detect_opening, opening_ids, p_call_from_logits
from kate.diagnose.probes import (ProbeConfig, When2ToolConfig, cosine_grid, evaluate_when2tool, last_token_features,
                                  probe_grid, split_indices)  # fmt: skip
from kate.io import atomic_write_json, atomic_write_text, read_jsonl
from kate.llm.identity import model_identity

PROBE_KEYS = ("epochs", "lr", "weight_decay", "pos_weight", "train_fraction", "seed", "threads")
FLOAT16_ABOVE = 200_000_000  # state arrays larger than this many values are kept as float16


def _openings(model: Any, records: Sequence[Mapping[str, Any]], given: Sequence[str] | None,
              min_calls: int) -> tuple[list[int] | None, dict[str, Any]]:  # fmt: skip
    if given:
        ids = opening_ids(model.tokenizer, list(given))
        return ids, {"given": list(given), "ids": ids}
    steps = [r.get("first_step") or {} for r in records]
    try:
        found = detect_opening(
            model.tokenizer, [s.get("text") or "" for s in steps], [bool(s.get("calls")) for s in steps]
        )
    except ValueError as error:
        return None, {"error": str(error)}
    return found.ids(min_calls), {"detected": found.to_dict(), "ids": found.ids(min_calls)}


def _grid(states: np.ndarray, labels: np.ndarray, config: ProbeConfig, layers: Sequence[int],
          positions: Sequence[int], desc: str, progress: bool) -> Any:  # fmt: skip
    """``probe_grid`` one layer at a time (the same split and probes; a progress bar per layer)."""
    from kate.diagnose.probes import ProbeGrid

    parts = [probe_grid(states[:, [l]], labels, config, layers=[layers[l]], positions=positions)
             for l in tqdm(range(states.shape[1]), desc=desc, unit="layer", disable=not progress)]  # fmt: skip
    return ProbeGrid(np.concatenate([p.mcc for p in parts]), np.concatenate([p.weights for p in parts]),
                     np.concatenate([p.bias for p in parts]), parts[0].train, parts[0].test, tuple(layers),
                     tuple(positions))  # fmt: skip


def _try(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args, **kwargs), None
    except ValueError as error:  # e.g. one class in the training split
        return None, str(error)


def _when2tool(features: np.ndarray, y: np.ndarray, config: When2ToolConfig) -> tuple[Any, dict[str, Any]]:
    found, error = _try(evaluate_when2tool, features, y, config)
    if found is None:
        return None, {"error": error}
    return found["probe"], {k: v for k, v in found.items() if k != "probe"}


def run_internals(model: Any, acting: Any, labels: Mapping[str, bool], records: Sequence[Mapping[str, Any]],
                  out: str | Path, *, probes: Mapping[str, Any], pcall: Mapping[str, Any],
                  temperature: float = 2.0, progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """Compute (or read back) the probes and P(call); returns ``{"probes", "pcall", "beliefs"}``
    with ``beliefs = {id: (belief, "train" | "test")}`` (None when When2Tool's probe could not train)."""
    out = Path(out)
    items = list(acting.items())
    called = {r["id"]: bool(r.get("called")) for r in records}
    ids = [i.id for i in items]
    settings = {"probes": dict(probes), "pcall": dict(pcall), "temperature": temperature}
    key = hashlib.sha256(json.dumps([model_identity(model), ids, [labels[i] for i in ids], [called[i] for i in ids],
                                     settings], sort_keys=True, default=str).encode()).hexdigest()[:16]  # fmt: skip
    results_path, items_path = out / "probes" / "results.json", out / "probes" / "items.jsonl"
    if results_path.exists() and items_path.exists():
        results = json.loads(results_path.read_text(encoding="utf-8"))
        if results.get("fingerprint") == key:
            return _read_back(results, out, items_path)
    opening, opening_info = _openings(model, records, pcall.get("openings"), int(pcall.get("min_calls", 1)))
    n_layers = model.model.config.num_hidden_layers + 1 if probes.get("layers") is None else len(probes["layers"])
    size = len(items) * n_layers * probes["k"] * model.model.config.hidden_size
    found = decision_states(model, [acting.prompt(item) for item in items], k=probes["k"], layers=probes.get("layers"),
                            batch_size=probes["batch_size"], padding_side=probes["padding_side"],
                            dtype=np.float16 if size > FLOAT16_ABOVE else np.float32, progress=progress,
                            next_token=(lambda logits: p_call_from_logits(logits, opening)) if opening else None)  # fmt: skip
    y_c = np.array([int(labels[i]) for i in ids])
    y_a = np.array([int(called[i]) for i in ids])
    config = ProbeConfig(**{k: probes[k] for k in PROBE_KEYS})
    w2t = When2ToolConfig(C=probes["when2tool_C"], max_iter=probes["when2tool_max_iter"],
                          train_fraction=probes["train_fraction"], seed=probes["seed"])  # fmt: skip
    grid_c, error_c = _try(_grid, found.states, y_c, config, found.layers, found.positions, "probes w_c", progress)
    grid_a, error_a = _try(_grid, found.states, y_a, config, found.layers, found.positions, "probes w_a", progress)
    cosines = cosine_grid(grid_c, grid_a) if grid_c is not None and grid_a is not None else None
    features = last_token_features(found.states).astype(np.float32)
    probe_c, w2t_c = _when2tool(features, y_c, w2t)
    _, w2t_a = _when2tool(features, y_a, w2t)
    train, _ = split_indices(len(ids), probes["train_fraction"], probes["seed"])
    split = ["train" if i in set(train.tolist()) else "test" for i in range(len(ids))]
    beliefs = probe_c.probability(features, temperature).tolist() if probe_c is not None else [None] * len(ids)
    if probe_c is not None:
        save_probe(out / "probes" / "probe.npz", probe_c, found.layers,
                   {"label": "necessary", "model": model_identity(model), "n_train": len(train), "set": acting.name})  # fmt: skip
    p_calls = list(found.next_token) if found.next_token is not None else [None] * len(ids)
    rows = [{"id": i, "category": item.category, "split": s, "necessary": bool(labels[i]), "called": called[i],
             "belief": b, "p_call": p} for i, item, s, b, p in zip(ids, items, split, beliefs, p_calls)]  # fmt: skip
    atomic_write_text(items_path, "".join(json.dumps(r) + "\n" for r in rows))
    pcall_result = {"n": len(ids), "opening": opening_info,
                    "agreement": agreement(p_calls, [called[i] for i in ids]) if opening else None,
                    "model": model_identity(model)}  # fmt: skip
    atomic_write_json(out / "pcall" / "results.json", pcall_result)
    results = {"fingerprint": key, "n": len(ids), "model": model_identity(model), "settings": settings,
               "layers": list(found.layers), "positions": list(found.positions),
               "necessity": grid_c.to_dict() if grid_c is not None else {"error": error_c},
               "action": grid_a.to_dict() if grid_a is not None else {"error": error_a},
               "cosine": np.round(cosines, 6).tolist() if cosines is not None else None,
               "when2tool": {"necessity": w2t_c, "action": w2t_a, "temperature": temperature}}  # fmt: skip
    atomic_write_json(results_path, results)
    return {"probes": results, "pcall": pcall_result, "beliefs": _beliefs(rows)}


def _beliefs(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, str]] | None:
    if any(r["belief"] is None for r in rows):
        return None
    return {r["id"]: (float(r["belief"]), r["split"]) for r in rows}


def _read_back(results: dict[str, Any], out: Path, items_path: Path) -> dict[str, Any]:
    pcall_path = out / "pcall" / "results.json"
    pcall_result = json.loads(pcall_path.read_text(encoding="utf-8")) if pcall_path.exists() else None
    return {"probes": results, "pcall": pcall_result, "beliefs": _beliefs(read_jsonl(items_path))}
