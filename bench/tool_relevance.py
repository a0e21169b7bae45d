"""The tool-relevance gate's threshold, chosen on BFCL's training halves (kate.retrieval.relevance).

For every single-turn entry of both halves (every category, all of it): the best cosine similarity
between the request (``request_text`` of the entry's first turn) and the offered tools'
``"<name>: <description>"`` texts, with the gate's own embedder. The threshold ``tau`` is fixed on the
training half by a rule set before any result of the gate existed: the largest on a 0.01 grid from 0
to 0.30 at which every call-due category with 20 or more training entries keeps at least 95% of them
at or above it (a gate that abstains on at most 1 in 20 requests that need a call, category by
category). The test half's similarities are written beside, for bench/base_gate_replay.py, which
replays the gate on the models' stored replies.

On the training half, what the gate does to the base model's decision to call is read off
bench/first_token_gate.py's records (the first 40 training entries of each category, the greedy
reply's first token: does it open a call?): per category, how many decisions are right (a call where
one is due, none where none is), without and with the gate (``decisions``).

    .venv/bin/python bench/tool_relevance.py                 # writes bench/results/tool_relevance.json and .png
    .venv/bin/python bench/tool_relevance.py --report-only   # the decisions again from the stored similarities
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kate.bfcl.data import SINGLE_TURN, functions_to_tools, load_entries
from kate.io import atomic_write_json
from kate.knowledge.embedder import Embedder
from kate.retrieval.call_count import request_text
from kate.retrieval.relevance import ToolRelevanceGate

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "tool_relevance.json"
PLOT = OUT.with_suffix(".png")
NO_CALL = ("irrelevance", "live_irrelevance")  # the categories whose right reply makes no call
GRID = [k / 100 for k in range(31)]
KEEP = 0.95  # each call-due training category keeps this share at or above tau
MIN_N = 20  # categories smaller than this do not bind the rule (8 entries: one is 12.5%)
DECISIONS = ROOT / "bench" / "runs" / "first_token_gate" / "train.jsonl"  # the base's greedy first token, per entry


def similarities(gate: ToolRelevanceGate, split: str) -> dict[str, dict[str, float]]:
    """category -> entry id -> the best request-to-tool similarity, as ``gate.similarity`` computes it, with
    a category's requests embedded in one batch (the gate embeds one request at a time)."""
    out = {}
    for category in SINGLE_TURN:
        entries = load_entries(category, split)
        queries = gate.embedder.embed([request_text(e.turns[0]) for e in entries])
        out[category] = {e.id: round(gate.similarity_to(query, functions_to_tools(e.functions)), 4)
                         for e, query in zip(entries, queries)}  # fmt: skip
        print(f"{split} {category}: {len(entries)} entries", flush=True)
    return out


def below(sims: dict[str, dict[str, float]], tau: float) -> dict[str, float]:
    return {c: round(sum(v < tau for v in rows.values()) / len(rows), 4) for c, rows in sims.items() if rows}


def choose_tau(train: dict[str, dict[str, float]]) -> float:
    """The rule (module docstring): the largest grid value that keeps KEEP of each binding category."""
    binding = [c for c, rows in train.items() if c not in NO_CALL and len(rows) >= MIN_N]
    return max(t for t in GRID if all(below(train, t)[c] <= 1 - KEEP for c in binding))


def plot(shares: dict[str, dict[str, float]], tau: float) -> None:
    """Per category, the share of entries below tau (where the gate offers no tool), both halves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    categories = list(shares["train"])
    fig, ax = plt.subplots(figsize=(10, 4))
    for k, split in enumerate(shares):
        xs = [i + (k - 0.5) * 0.4 for i in range(len(categories))]
        ax.bar(xs, [100 * shares[split][c] for c in categories], 0.4, label=f"{split} half")
    ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right")
    ax.set_ylabel(f"% of entries below tau = {tau}")
    ax.set_title("Where the tool-relevance gate offers no tool (right on irrelevance and live_irrelevance)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)


def grid_table(train: dict[str, dict[str, float]]) -> dict[str, dict]:
    """For every tau on the grid (training half): the share below it per category, and pooled over the
    call-due entries: what a higher threshold would close."""
    due = [v for c, rows in train.items() if c not in NO_CALL for v in rows.values()]
    return {f"{t:.2f}": {**below(train, t), "call_due_pooled": round(sum(v < t for v in due) / len(due), 4)}
            for t in GRID}  # fmt: skip


def decisions(train: dict[str, dict[str, float]], tau: float) -> dict:
    """Per category (and in all): n, the base's right call / no-call decisions, the same with the gate (no
    call where the best similarity is below tau), fixed and broken, and the entries the gate closed."""
    cells: dict[str, dict] = {}
    for line in DECISIONS.read_text().splitlines():
        row = json.loads(line)
        due, fits = row["category"] not in NO_CALL, train[row["category"]][row["id"]] >= tau
        base, gated = row["would_call"] == due, (row["would_call"] and fits) == due
        cell = cells.setdefault(row["category"], {"n": 0, "base": 0, "gated": 0, "fixed": 0, "broken": 0, "closed": 0})
        for key, add in (("n", 1), ("base", base), ("gated", gated), ("fixed", gated and not base),
                         ("broken", base and not gated), ("closed", not fits)):  # fmt: skip
            cell[key] += add
    total = {k: sum(c[k] for c in cells.values()) for k in ("n", "base", "gated", "fixed", "broken", "closed")}
    return {"source": str(DECISIONS.relative_to(ROOT)), "total": total, "per_category": cells}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-only", action="store_true", help="reuse the stored similarities")
    if parser.parse_args().report_only:
        out = json.loads(OUT.read_text())
        out["decisions"] = decisions(out["similarity"]["train"], out["gate"]["tau"])
        out["below_grid_train"] = grid_table(out["similarity"]["train"])
        atomic_write_json(OUT, out)
        plot(out["below_tau"], out["gate"]["tau"])
        print(json.dumps(out["decisions"]["total"]))
        return
    gate = ToolRelevanceGate(embedder=Embedder(threads=1))  # one thread: a benchmark may run beside it
    sims = {split: similarities(gate, split) for split in ("train", "test")}
    tau = choose_tau(sims["train"])
    out = {"what": __doc__.split("\n\n")[0], "command": ".venv/bin/python bench/tool_relevance.py",
           "gate": {**gate.describe(), "tau": tau}, "rule": {"grid": [GRID[0], GRID[-1], 0.01], "keep": KEEP,
                                                           "min_n": MIN_N},
           "below_tau": {split: below(s, tau) for split, s in sims.items()},
           "n": {split: {c: len(rows) for c, rows in s.items()} for split, s in sims.items()},
           "decisions": decisions(sims["train"], tau),
           "below_grid_train": grid_table(sims["train"]),
           "similarity": sims}  # fmt: skip
    atomic_write_json(OUT, out)
    plot(out["below_tau"], tau)
    print(json.dumps({"tau": tau, "below_tau": out["below_tau"]}, indent=1))


if __name__ == "__main__":
    main()
