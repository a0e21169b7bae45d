"""Plots of result folders: accuracy per category per run with 95% CI whiskers, and accuracy with
relative cost against the number of samples N. Written as image files on matplotlib's file-only
backend (no screen needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kate.bfcl.data import MULTI_TURN


def _pyplot():
    """matplotlib's pyplot on the file-only backend (no screen needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def plot_categories(runs: dict[str, dict[str, dict[str, Any]]], path: str | Path) -> Path:
    """Grouped bars: accuracy per category per run, with 95% CI whiskers."""
    plt = _pyplot()

    names = list(runs)
    categories = sorted({c for s in runs.values() for c in s}, key=lambda c: (c in MULTI_TURN, c))
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(categories) + 2), 4.2))
    for k, name in enumerate(names):
        xs, ys, errs = [], [], [[], []]
        for i, category in enumerate(categories):
            item = runs[name].get(category)
            if item is None:
                continue
            xs.append(i + (k - (len(names) - 1) / 2) * width)
            ys.append(100 * item["accuracy"])
            errs[0].append(100 * (item["accuracy"] - item["ci95"][0]))
            errs[1].append(100 * (item["ci95"][1] - item["accuracy"]))
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=name)
    ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right")
    ax.set_ylabel("accuracy (%) with 95% CI")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, never over them
    fig.tight_layout()
    saved = _save(fig, path)
    plt.close(fig)
    return saved


def plot_accuracy_vs_n(points: dict[int, float], costs: dict[int, float], path: str | Path, title: str = "",
                       cost_label: str = "wall time per step (s)") -> Path:
    """Accuracy (left axis) and relative cost (right axis) against the number of samples N."""
    plt = _pyplot()

    ns = sorted(points)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(ns, [100 * points[n] for n in ns], "o-", label="accuracy")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("samples per step N")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    twin = ax.twinx()
    twin.plot(ns, [costs[n] for n in ns], "s--", color="tab:red", label=cost_label)
    twin.set_ylabel(cost_label)
    ax.set_title(title)
    fig.legend(loc="lower left", bbox_to_anchor=(0.15, 0.2))
    fig.tight_layout()
    saved = _save(fig, path)
    plt.close(fig)
    return saved
