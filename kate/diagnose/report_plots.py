"""The diagnostics report's pictures: MCC and cosine heatmaps per (layer, position), the mismatch
beside the paper's range, the alluvial necessity -> probe belief -> action with its flows counted,
the density of probe belief against P(call), and the gate's tau sweep. Each is written as a PNG
beside ``report.md``; each function returns the file's name for the markdown to link."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kate.diagnose.breakdown import CLASSES, PAPER_ARITHMETIC_MISMATCH
from kate.diagnose.report_format import pct
from kate.io import atomic_open


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=120, bbox_inches="tight")
    _pyplot().close(fig)
    with atomic_open(path, "wb") as fh:
        fh.write(buffer.getvalue())
    return path.name



def plot_heatmaps(grids: Mapping[str, Any], layers: Sequence[int], positions: Sequence[int], path: Path,
                  title: str, vmin: float = -1.0, vmax: float = 1.0) -> str:  # fmt: skip
    """One heatmap per named ``[layers, positions]`` grid, side by side."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(grids), figsize=(5.5 * len(grids), 0.22 * len(layers) + 2.5), squeeze=False)
    for ax, (name, grid) in zip(axes[0], grids.items()):
        image = ax.imshow(
            np.asarray(grid, dtype=float), aspect="auto", origin="lower", cmap="RdBu_r", vmin=vmin, vmax=vmax
        )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("position (from the prompt's end)")
        ax.set_ylabel("hidden-state layer (0 = embeddings)")
        ax.set_xticks(range(0, len(positions), max(1, len(positions) // 5)))
        ax.set_xticklabels([positions[i] for i in range(0, len(positions), max(1, len(positions) // 5))])
        ax.set_yticks(range(0, len(layers), max(1, len(layers) // 8)))
        ax.set_yticklabels([layers[i] for i in range(0, len(layers), max(1, len(layers) // 8))])
        fig.colorbar(image, ax=ax)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def plot_mismatch(tables: Mapping[str, Mapping[str, Any]], path: Path) -> str:
    """Underuse + overuse (stacked) per table, the paper's arithmetic mismatch range shaded."""
    plt = _pyplot()
    names = list(tables)
    fig, ax = plt.subplots(figsize=(6.5, 0.6 * len(names) + 1.8))
    under = [100 * (tables[k]["underuse"] or 0) for k in names]
    over = [100 * (tables[k]["overuse"] or 0) for k in names]
    ax.barh(names, under, color="#d62728", label="underuse (N-NC)")
    ax.barh(names, over, left=under, color="#1f77b4", label="overuse (UN-C)")
    low, high = (100 * v for v in PAPER_ARITHMETIC_MISMATCH)
    ax.axvspan(low, high, color="grey", alpha=0.2, label="paper, arithmetic, 4 models 3-8B")
    for y, k in enumerate(names):
        ax.text(
            under[y] + over[y] + 0.5, y, f"{pct(tables[k]['mismatch'])} (n={tables[k]['n']})", va="center", fontsize=8
        )
    ax.set_xlabel("share of items (%)")
    ax.set_xlim(0, 100)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("mismatch: underuse + overuse", fontsize=10)
    return _save(fig, path)


def _band(ax: Any, x0: float, x1: float, y0: tuple[float, float], y1: tuple[float, float], color: str) -> None:
    xs = np.linspace(x0, x1, 50)
    s = (1 - np.cos(np.pi * (xs - x0) / (x1 - x0))) / 2  # a smooth step
    ax.fill_between(xs, y0[0] + (y1[0] - y0[0]) * s, y0[1] + (y1[1] - y0[1]) * s, color=color, alpha=0.45, lw=0)


def plot_alluvial(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> str:
    """Necessity -> probe belief (> 0.5: a tool is needed) -> action, one band per path, the four
    necessity x action flows counted (the four classes)."""
    plt = _pyplot()
    n = len(rows)
    stages = [("necessary", "unnecessary"), ("belief: needed", "belief: not needed"), ("called", "not called")]
    keys = [(bool(r["necessary"]), r["belief"] > 0.5, bool(r["called"])) for r in rows]
    paths = sorted(set(keys), key=lambda k: tuple(not v for v in k))
    fig, ax = plt.subplots(figsize=(9, 5))
    gap = 0.04 * n
    slot: dict[tuple[int, tuple[bool, ...]], float] = {}  # (stage, path) -> the top of the path's slot
    for s, names in enumerate(stages):
        others = [i for i in range(3) if i != s]
        for value, label in zip((True, False), names):
            size = sum(k[s] == value for k in keys)
            top = n + gap if value else n - sum(k[s] for k in keys)
            ax.add_patch(plt.Rectangle((s - 0.04, top - size), 0.08, size, color="black"))
            ax.text(s + (0.07 if s < 2 else -0.07), top - size / 2, f"{label}\n{size}", va="center",
                    ha="left" if s < 2 else "right", fontsize=8)  # fmt: skip
            for p in sorted((p for p in paths if p[s] == value), key=lambda p: tuple(not p[i] for i in others)):
                slot[(s, p)] = top
                top -= keys.count(p)
    colors = {(True, True): "#2ca02c", (True, False): "#d62728", (False, True): "#1f77b4", (False, False): "#7f7f7f"}
    for p in paths:
        count = keys.count(p)
        for s in range(2):
            a, b = slot[(s, p)], slot[(s + 1, p)]
            _band(ax, s + 0.04, s + 0.96, (a - count, a), (b - count, b), colors[(p[0], p[2])])
    flows = {c: sum(1 for k in keys if (k[0], k[2]) == pair) for c, pair in zip(CLASSES, colors)}
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[p], alpha=0.45) for p in colors]
    ax.legend(handles, [f"{c}: {flows[c]}" for c in CLASSES], fontsize=8, loc="upper center", ncol=4,
              bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    ax.set_xlim(-0.3, 2.3)
    ax.set_ylim(-gap, n + 2 * gap)
    ax.axis("off")
    ax.set_title(f"{title} (n={n})", fontsize=10)
    return _save(fig, path)


def plot_density(beliefs: Sequence[float], p_calls: Sequence[float], called: Sequence[bool], path: Path) -> str:
    """The joint density of probe belief and P(call) (2-D histogram), the greedy calls marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.8))
    b, p, c = np.asarray(beliefs, float), np.asarray(p_calls, float), np.asarray(called, bool)
    counts = ax.hist2d(b, p, bins=20, range=[[0, 1], [0, 1]], cmap="Blues", cmin=1)[3]
    fig.colorbar(counts, ax=ax, label="items")
    ax.scatter(b[c], p[c], s=6, color="#d62728", label=f"greedy called ({int(c.sum())})")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.axvline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("probe belief that a tool is needed (When2Tool, T = 2)")
    ax.set_ylabel("P(call) at the decision point")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"belief vs P(call) (n={len(b)})", fontsize=10)
    return _save(fig, path)


def plot_sweep(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> str:
    """Calls (share of items), mismatch and accuracy against tau; the ungated run dashed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    taus = [r["tau"] for r in rows]
    n = rows[0]["n"]
    for key, color, label in (("calls", "#1f77b4", "calls made"), ("mismatch", "#d62728", "mismatch"),
                              ("accuracy", "#2ca02c", "accuracy")):  # fmt: skip
        values = [100 * (r[key] / n if key == "calls" else (r[key] or 0)) for r in rows]
        base = rows[0][f"{key}_base"]
        ax.plot(taus, values, marker="o", color=color, label=label)
        ax.axhline(100 * (base / n if key == "calls" else (base or 0)), color=color, ls="--", lw=0.9)
    ax.set_xlabel("tau")
    ax.set_ylabel("% of items")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(f"{title} (n={n}; dashed: ungated)", fontsize=10)
    return _save(fig, path)

