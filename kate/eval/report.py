"""Reports from result folders: per-category accuracy with 95% confidence intervals, BFCL-V3
summary groups (formula stated), paired per-entry differences between two runs; the plots are in
kate.eval.report_plots (re-exported here).

Group scores are the unweighted mean of the accuracies of the group's categories *present in the
run*, and the group is labelled with how many of its categories it covers. No "overall" is printed
unless every group is complete: bfcl-eval's own overall weights V4 agentic categories that cannot
run offline, so a partial set must never pass for one.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from kate.bfcl.data import MULTI_TURN
from kate.eval.report_plots import plot_accuracy_vs_n, plot_categories

__all__ = [
    "V3_GROUPS", "comparison_report", "group_scores", "markdown_table", "mean_ci", "paired_difference",
    "paired_lines", "paired_turns", "plot_accuracy_vs_n", "plot_categories", "seed_spread", "seed_table",
    "summarize", "wilson",
]  # plot_* live in kate.eval.report_plots

V3_GROUPS: dict[str, tuple[str, ...]] = {
    "non-live AST": ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple"),
    "live": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
    "multi-turn": MULTI_TURN,
    "relevance/irrelevance": ("irrelevance", "live_irrelevance", "live_relevance"),
}


def sign_test(fixed: int, broken: int) -> float:
    """Exact two-sided sign test (McNemar's exact form) of entries fixed against entries broken."""
    n, k = fixed + broken, min(fixed, broken)
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (sound at 0/n and n/n, unlike the normal one)."""
    if n == 0:
        return (0.0, 0.0)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # exact at the ends: float rounding must not put the bound on the wrong side of 0/n or n/n
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    high = 1.0 if correct == n else min(1.0, centre + half)
    return (low, high)


def mean_ci(values: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """(mean, low, high) with a normal-approximation interval."""
    if not values:
        return (0.0, 0.0, 0.0)
    mean = statistics.fmean(values)
    if len(values) < 2:
        return (mean, mean, mean)
    half = z * statistics.stdev(values) / math.sqrt(len(values))
    return (mean, max(0.0, mean - half), min(1.0, mean + half))


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per category: n, correct, accuracy and its CI; multi-turn also the turns-passed fraction."""
    by_category: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_category[record["category"]].append(record)
    summary = {}
    for category, rows in sorted(by_category.items()):
        correct = sum(bool(r["valid"]) for r in rows)
        low, high = wilson(correct, len(rows))
        item = {"n": len(rows), "correct": correct, "accuracy": correct / len(rows), "ci95": [low, high]}
        if category in MULTI_TURN:
            fraction, f_low, f_high = mean_ci([r.get("turn_fraction", 0.0) for r in rows])
            item.update(turn_fraction=fraction, turn_fraction_ci95=[f_low, f_high])
            item["end_reasons"] = _count(reason for r in rows for reason in r.get("end_reasons", []))
        summary[category] = item
    return summary


def _count(items) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[item] += 1
    return dict(counts)


def group_scores(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups = {}
    for group, categories in V3_GROUPS.items():
        present = [c for c in categories if c in summary]
        if present:
            groups[group] = {
                "accuracy": statistics.fmean(summary[c]["accuracy"] for c in present),
                "categories": f"{len(present)}/{len(categories)}",
                "complete": len(present) == len(categories),
            }
    if len(groups) == len(V3_GROUPS) and all(g["complete"] for g in groups.values()):
        groups["V3 overall (unweighted mean of the 4 groups)"] = {
            "accuracy": statistics.fmean(g["accuracy"] for g in groups.values()), "categories": "all", "complete": True,
        }  # fmt: skip
    return groups


def paired_difference(a: list[dict], b: list[dict]) -> dict[str, Any]:
    """Entries both runs scored: which B fixed (A wrong, B right) and which it broke."""
    by_id_a = {r["id"]: r for r in a}
    common = [r for r in b if r["id"] in by_id_a]
    fixed = sorted(r["id"] for r in common if r["valid"] and not by_id_a[r["id"]]["valid"])
    broken = sorted(r["id"] for r in common if not r["valid"] and by_id_a[r["id"]]["valid"])
    per_category: dict[str, dict[str, int]] = defaultdict(lambda: {"fixed": 0, "broken": 0, "n": 0})
    for r in common:
        row = per_category[r["category"]]
        row["n"] += 1
        row["fixed"] += r["id"] in fixed
        row["broken"] += r["id"] in broken
    turns = paired_turns([(by_id_a[r["id"]], r) for r in common])
    return {"n_common": len(common), "fixed": fixed, "broken": broken, "per_category": dict(per_category),
            "turns": turns}


def paired_turns(pairs: list[tuple[dict, dict]], z: float = 1.96) -> dict[str, dict[str, Any]]:
    """Per multi-turn category, the turns-passed fraction of B minus A dialogue by dialogue: how many
    dialogues went better / worse, the mean difference and its 95% interval (normal approximation
    over the paired differences). A 0.5B model passes few whole dialogues, so this is where a
    difference shows first."""
    by_category: dict[str, list[float]] = defaultdict(list)
    for a, b in pairs:
        if "turn_fraction" in a and "turn_fraction" in b:
            by_category[b["category"]].append(b["turn_fraction"] - a["turn_fraction"])
    out = {}
    for category, diffs in sorted(by_category.items()):
        mean = statistics.fmean(diffs)
        half = z * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
        out[category] = {"n": len(diffs), "better": sum(d > 0 for d in diffs), "worse": sum(d < 0 for d in diffs),
                         "mean_diff": mean, "ci95": [mean - half, mean + half]}  # fmt: skip
    return out


def seed_spread(per_seed: dict[int, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per category, over the entries every seed has finished (so a partial seed compares like
    with like): each seed's accuracy, their mean and standard deviation, and the same for the
    turns-passed fraction of multi-turn categories."""
    if not per_seed:
        return {}
    common = set.intersection(*({r["id"] for r in records} for records in per_seed.values()))
    summaries = {seed: summarize([r for r in records if r["id"] in common]) for seed, records in per_seed.items()}
    spread: dict[str, dict[str, Any]] = {}
    for category in sorted({c for s in summaries.values() for c in s}):
        present = {seed: s[category] for seed, s in summaries.items() if category in s}
        item = {"n": max(v["n"] for v in present.values()), **_across({s: v["accuracy"] for s, v in present.items()})}
        if category in MULTI_TURN:
            item["turn_fraction"] = _across({s: v["turn_fraction"] for s, v in present.items()})
        spread[category] = item
    return spread


def _across(values: dict[int, float]) -> dict[str, Any]:
    series = list(values.values())
    return {"mean": statistics.fmean(series), "std": statistics.stdev(series) if len(series) > 1 else 0.0,
            "seeds": len(series), "per_seed": dict(sorted(values.items()))}  # fmt: skip


def seed_table(spreads: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Markdown: for every run with two or more seeds, per category each seed's accuracy (and
    turns-passed fraction) on the entries all its seeds finished, then mean +- sd."""
    lines = ["| run | category | n | accuracy per seed | mean +- sd | turns per seed | mean +- sd |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, spread in spreads.items():
        for category, item in spread.items():
            if item["seeds"] < 2:
                continue
            cells = [_seeds_cell(item)]
            turns = item.get("turn_fraction")
            cells.append(_seeds_cell(turns) if turns else "- | -")
            lines.append(f"| {name} | {category} | {item['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def _seeds_cell(item: dict[str, Any]) -> str:
    per_seed = ", ".join(f"{_pct(v)} (s{s})" for s, v in item["per_seed"].items())
    return f"{per_seed} | {_pct(item['mean'])} +- {_pct(item['std'])}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown_table(runs: dict[str, dict[str, dict[str, Any]]]) -> str:
    """``runs``: run name -> summarize() output. One row per category, one column per run.

    Each cell's figures are over that run's own entries. Where every run of a row has the same n,
    the ``n`` column gives it; where runs ran different numbers of entries of the category, the
    ``n`` column says ``per cell`` and every cell ends with its own ``(n=k)``."""
    names = list(runs)
    categories = sorted({c for s in runs.values() for c in s}, key=lambda c: (c in MULTI_TURN, c))
    lines = ["| category | n | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for category in categories:
        ns = {s[category]["n"] for s in runs.values() if category in s}
        mixed = len(ns) > 1
        cells = []
        for name in names:
            item = runs[name].get(category)
            if item is None:
                cells.append("-")
                continue
            low, high = item["ci95"]
            cell = f"{_pct(item['accuracy'])} [{_pct(low)}, {_pct(high)}]"
            if "turn_fraction" in item:
                cell += f"; turns {_pct(item['turn_fraction'])}"
            if mixed:
                cell += f" (n={item['n']})"
            cells.append(cell)
        lines.append(f"| {category} | {'per cell' if mixed else ns.pop()} | " + " | ".join(cells) + " |")
    for group in V3_GROUPS:
        cells = []
        for name in names:
            g = group_scores(runs[name]).get(group)
            cells.append(f"{_pct(g['accuracy'])} ({g['categories']})" if g else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| **{group}** (mean of categories run) | | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_lines(base: str, other: str, diff: dict[str, Any], n_base: int, n_other: int) -> list[str]:
    """Markdown lines of one paired_difference(): every count says on how many common entries
    (or dialogues) it is computed, next to how many each run has."""
    lines = [f"**{other} vs {base}** on {diff['n_common']} common entries: {len(diff['fixed'])} fixed, "
             f"{len(diff['broken'])} broken. ({other} ran {n_other} entries, {base} {n_base}.)"]  # fmt: skip
    lines += [f"- {c}: +{row['fixed']} / -{row['broken']} of {row['n']} common"
              for c, row in sorted(diff["per_category"].items())]  # fmt: skip
    if diff["broken"]:
        lines.append(f"- broken: {', '.join(diff['broken'])}")
    for category, row in diff["turns"].items():
        low, high = row["ci95"]
        lines.append(f"- {category} turns passed: better in {row['better']}, worse in {row['worse']} of "
                     f"{row['n']} common dialogues; mean paired difference {100 * row['mean_diff']:+.1f} points "
                     f"[{100 * low:+.1f}, {100 * high:+.1f}]")  # fmt: skip
    return lines


def comparison_report(runs: dict[str, list[dict]], title: str, notes: list[str]) -> str:
    """Markdown: ``title``, ``notes``, the per-category table (each cell over that run's own
    entries, see markdown_table) and every other run paired with the first one on the entries both
    finished."""
    names = list(runs)
    summaries = {name: summarize(records) for name, records in runs.items()}
    lines = [f"# {title}", "", *notes, "", markdown_table(summaries), ""]
    if len(names) >= 2:
        base = names[0]
        for other in names[1:]:
            diff = paired_difference(runs[base], runs[other])
            lines += paired_lines(base, other, diff, len(runs[base]), len(runs[other]))
            lines.append("")
    return "\n".join(lines)
