"""How good a verifier is on the held-out fold (entries it never trained on).

* ``pairwise_accuracy``: over (right, wrong) candidate pairs of one entry, the share where the right
  one scores higher (ties count half): what the reward loss optimizes; 0.5 is chance.
* ``calibration``: candidates binned by score (equal-count bins, a bin never splits equal scores);
  per bin the mean score, the mean ``sigmoid(score)`` and the share right. A useful verifier's share
  right rises with the score; a calibrated one's ``sigmoid`` mean is near the share right.
* ``selection``: per entry with at least one right candidate among several, whether the top-scored
  candidate is right (best-of-N), beside the share where the most-voted one is (the plain vote).
* ``plot_calibration``: the bins as a PNG (mean sigmoid(score) against share right).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def pairwise_accuracy(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Share of ``(right_score, wrong_score)`` pairs ordered right above wrong (ties: half)."""
    if not pairs:
        return None
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs)


def calibration(scores: Sequence[float], labels: Sequence[bool], bins: int = 10) -> list[dict[str, Any]]:
    """Equal-count bins of the candidates by score: ``n``, score range, mean score, mean sigmoid, share right."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    if bins < 1:
        raise ValueError(f"bins must be positive, got {bins}")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    size = max(1, math.ceil(len(order) / bins))
    out, start = [], 0
    while start < len(order):
        end = min(len(order), start + size)
        while end < len(order) and scores[order[end]] == scores[order[end - 1]]:
            end += 1  # equal scores stay in one bin
        chunk = order[start:end]
        values = [scores[i] for i in chunk]
        out.append({"n": len(chunk), "score_min": min(values), "score_max": max(values),
                    "mean_score": sum(values) / len(values),
                    "mean_sigmoid": sum(sigmoid(v) for v in values) / len(values),
                    "share_right": sum(bool(labels[i]) for i in chunk) / len(chunk)})  # fmt: skip
        start = end
    return out


def selection(groups: Sequence[Sequence[dict[str, Any]]]) -> dict[str, Any]:
    """Groups of one entry's candidates (``score``, ``votes``, ``label``), in the vote's order: how often
    the top score and the top votes pick a right one, over entries with a choice that matters; ``fixed`` /
    ``broken``: entries where only the top score's / only the top votes' pick is right."""
    counted = [g for g in groups if len(g) > 1 and any(c["label"] for c in g)]
    if not counted:
        return {"entries": 0, "verifier_right": None, "vote_right": None}
    picks = [(max(g, key=lambda c: c["score"])["label"], max(g, key=lambda c: c["votes"])["label"])
             for g in counted]  # max keeps the first of ties
    return {"entries": len(counted), "verifier_right": sum(s for s, _ in picks) / len(counted),
            "vote_right": sum(v for _, v in picks) / len(counted),
            "fixed": sum(s and not v for s, v in picks), "broken": sum(v and not s for s, v in picks)}  # fmt: skip


def plot_calibration(bins: Sequence[dict[str, Any]], path: str | Path, title: str = "verifier calibration") -> Path:
    """A reliability picture: one point per bin (size ~ n), the diagonal for reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="calibrated")
    if bins:
        xs = [b["mean_sigmoid"] for b in bins]
        ys = [b["share_right"] for b in bins]
        ax.plot(xs, ys, color="tab:blue", linewidth=1)
        ax.scatter(xs, ys, s=[12 + 4 * b["n"] for b in bins], color="tab:blue", label="bins (size ~ candidates)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean sigmoid(score)")
    ax.set_ylabel("share right (official checker)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
