"""Arms compared on a benchmark slice, from their records only: per category the pass rate over the
entries the arms that ran it share (multi-turn: also the turns passed before the first failure, pooled),
each arm against a base arm dialogue by dialogue, and the single-turn entries it fixed and broke
(bench/bench_train_report.py's tables of the training benchmark)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kate.eval.report import paired_turns, plot_categories, wilson

MULTI_TURN = "multi_turn_base"
# an arm holding fewer entries of a category than this (a run stopped early) does not shrink the others'
# common set: its cell is over its own entries, marked so (the slice has 8 of every single-turn category)
MIN_COMMON = 8


def rate(k: int, n: int) -> dict[str, Any]:
    """k of n as a share in percent with its 95% Wilson interval (none for n = 0)."""
    low, high = wilson(k, n) if n else (None, None)
    return {"k": k, "n": n, "pct": round(100 * k / n, 1) if n else None,
            "interval": [round(100 * low, 1), round(100 * high, 1)] if n else None}  # fmt: skip


def bfcl_table(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Per category, over the entries every arm that ran the category finished (an arm with none of
    it gets no cell; one with fewer than MIN_COMMON, where others have more, a cell over its own
    entries, ``own: true``): pass rate; multi-turn: also the share of turns passed before the first
    failure, pooled over the dialogues."""
    by_arm = {arm: {r["id"]: r for r in rows} for arm, rows in records.items()}
    categories = sorted({r["category"] for rows in by_arm.values() for r in rows.values()})
    out: dict[str, Any] = {}
    for category in categories:
        held = {arm: {i for i, r in rows.items() if r["category"] == category} for arm, rows in by_arm.items()}
        held = {arm: ids for arm, ids in held.items() if ids}
        floor = min(MIN_COMMON, max(len(ids) for ids in held.values()))
        ids = sorted(set.intersection(*(ids for ids in held.values() if len(ids) >= floor)))
        row: dict[str, Any] = {}
        for arm, mine in held.items():
            own = len(mine) < floor
            picked = [by_arm[arm][i] for i in (sorted(mine) if own else ids)]
            cell = {**rate(sum(bool(r.get("valid")) for r in picked), len(picked)), **({"own": True} if own else {})}
            if category.startswith("multi_turn"):
                passed = sum(int(r.get("turns_passed", 0)) for r in picked)
                total = sum(int(r.get("turns_total", 0)) for r in picked)
                cell["turns_passed"] = rate(passed, total)
            row[arm] = cell
        out[category] = row
    return out


def multi_turn_pairs(records: Mapping[str, Sequence[Mapping[str, Any]]], base: str = "untrained_direct") -> dict[str, Any]:
    """Each arm against ``base`` dialogue by dialogue on the multi_turn_base dialogues both finished:
    the mean paired difference of turns passed before the first failure (per-dialogue fraction, the
    issue's target measure), with its 95% interval."""
    ref = {r["id"]: r for r in records.get(base, []) if r["category"] == MULTI_TURN}
    out = {}
    for arm, rows in records.items():
        mine = {r["id"]: r for r in rows if r["category"] == MULTI_TURN}
        common = sorted(set(mine) & set(ref))
        if arm == base or not common:
            continue
        turns = paired_turns([(ref[i], mine[i]) for i in common]).get(MULTI_TURN)
        if turns:
            out[arm] = turns
    return out


def plot_slice(bfcl: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """The BFCL slice as grouped bars per category and arm (multi-turn: turns passed, pooled)."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for category, row in bfcl.items():
        for arm, cell in row.items():
            c = cell.get("turns_passed", cell)
            if c["n"]:
                name = f"{category} (turns)" if "turns_passed" in cell else category
                runs.setdefault(arm, {})[name] = {"accuracy": c["k"] / c["n"],
                                                  "ci95": [c["interval"][0] / 100, c["interval"][1] / 100]}
    return plot_categories(runs, path)


def single_turn_changes(records: Mapping[str, Sequence[Mapping[str, Any]]], base: str = "untrained_direct") -> dict[str, Any]:
    """Each other arm against ``base`` on the single-turn entries both hold: right, fixed, broken, and
    outputs with more than one call."""
    def by_id(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
        return {r["id"]: r for r in rows if not r["category"].startswith("multi_turn")}

    ref = by_id(records.get(base, []))
    out = {}
    for arm, rows in records.items():
        mine = by_id(rows)
        common = [k for k in mine if k in ref]
        if arm == base or not common:
            continue
        out[arm] = {"n": len(common), "right": sum(bool(mine[k]["valid"]) for k in common),
                    f"right_{base}": sum(bool(ref[k]["valid"]) for k in common),
                    "fixed": sum(bool(mine[k]["valid"]) and not ref[k]["valid"] for k in common),
                    "broken": sum(bool(ref[k]["valid"]) and not mine[k]["valid"] for k in common),
                    "multi_call_outputs": sum(len(mine[k].get("calls") or []) > 1 for k in common),
                    f"multi_call_outputs_{base}": sum(len(ref[k].get("calls") or []) > 1 for k in common)}
    return out
