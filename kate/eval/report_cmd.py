"""`kate report`: result folders in, a comparison out: markdown table with 95% intervals, per-entry
paired differences against the first run (entries fixed / broken), spread across seeds, per-category
bars and, when the runs differ in samples per step, accuracy against N.

    kate report 'runs={direct: runs/direct, w8: runs/kate_w8}' out_dir=runs/report

A run is an arm folder holding ``seed_<s>/`` folders (every seed is read; the lowest is compared
entry by entry) or one seed folder. Nothing is regenerated: records are re-read and re-summarized.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from kate.eval.report import comparison_report, seed_spread, seed_table, summarize
from kate.eval.report_plots import plot_accuracy_vs_n, plot_categories
from kate.eval.run_store import load_run, meta_summary
from kate.io import atomic_write_json, atomic_write_text


def load_seeds(folder: str | Path) -> tuple[dict[str, Any], dict[int, list[dict[str, Any]]]]:
    """(meta of the lowest seed, seed -> records) of an arm folder or a single seed folder."""
    folder = Path(folder)
    seeds = sorted(folder.glob("seed_*"), key=lambda p: int(p.name.split("_", 1)[1])) if folder.is_dir() else []
    if not seeds:
        meta, records = load_run(folder)
        return meta, {int(meta.get("seed", 0)): records}
    per_seed = {int(p.name.split("_", 1)[1]): load_run(p)[1] for p in seeds}
    return load_run(seeds[0])[0], per_seed


def samples_per_step(meta: dict[str, Any]) -> int:
    """N of a width run (from the recorded sampler), 1 for greedy and depth."""
    sampler = str(meta_summary(meta)["sampler"] or "")
    match = re.search(r"\bn=(\d+)", sampler)
    return int(match.group(1)) if match and "Width" in sampler else 1


def accuracy_of(records: list[dict[str, Any]]) -> float:
    return sum(bool(r.get("valid")) for r in records) / len(records) if records else 0.0


def run_report(cfg: DictConfig) -> dict[str, Any]:
    if not cfg.runs:
        raise ValueError("nothing to report: pass runs={name: folder, ...}")
    out_dir = Path(cfg.out_dir)
    metas, seeds = {}, {}
    for name, folder in cfg.runs.items():
        metas[name], seeds[name] = load_seeds(folder)
    first = {name: per_seed[min(per_seed)] for name, per_seed in seeds.items()}
    shown = {name: meta_summary(meta) for name, meta in metas.items()}
    notes = [f"- **{name}**: {(shown[name]['model'] or {}).get('name')}, {shown[name]['sampler']}, "
             f"seeds {sorted(seeds[name])}, {len(first[name])} records ({cfg.runs[name]})" for name in seeds]  # fmt: skip
    notes.append("\nAccuracy % [95% Wilson interval] of the lowest seed; spread across seeds below and in summary.json.")
    text = comparison_report(first, cfg.title, notes)
    spreads = {name: seed_spread(per_seed) for name, per_seed in seeds.items()}
    if table := seed_table(spreads):
        text += "\n\nAcross seeds (entries every seed finished):\n\n" + table + "\n"
    summary = {name: {"per_category": summarize(records), "across_seeds": spreads[name],
                      "samples_per_step": samples_per_step(metas[name])} for name, records in first.items()}  # fmt: skip
    plot_categories({name: s["per_category"] for name, s in summary.items()}, out_dir / "categories.png")
    by_n: dict[int, list[str]] = {}
    for name in first:
        by_n.setdefault(samples_per_step(metas[name]), []).append(name)
    if len(by_n) >= 2:  # one point per N: the first run listed with that N
        points = {n: accuracy_of(first[names[0]]) for n, names in by_n.items()}
        costs = {n: sum(r.get("seconds", 0.0) for r in first[names[0]]) / max(len(first[names[0]]), 1)
                 for n, names in by_n.items()}  # fmt: skip
        plot_accuracy_vs_n(points, costs, out_dir / "accuracy_vs_n.png", cfg.title, "wall time per entry (s)")
        text += "\nAccuracy against samples per step N: " + ", ".join(
            f"N={n} {100 * p:.1f}% ({by_n[n][0]})" for n, p in sorted(points.items())) + " (accuracy_vs_n.png)\n"
    atomic_write_text(out_dir / "report.md", text + "\n")
    atomic_write_json(out_dir / "summary.json", summary)
    print(text)
    print(f"\nreport: {out_dir / 'report.md'}")
    return summary
