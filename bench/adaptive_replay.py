"""Accuracy against samples drawn for adaptive-vote rules, replayed on stored width-8 samples.

A committed width-8 single-turn record keeps its 8 samples; ``AdaptiveWidthSampler.replay`` takes
them in order, as the live sampler would have drawn them (first ``first``, then ``step`` at a time),
and stops where it would have stopped; the chosen calls are scored by BFCL's official checker. The
fixed width-8 schema-valid vote over the same 8 samples is the baseline (paired, entry by entry).
The greedy confidence gate and a first draw at a lower temperature need new samples, so they are
not replayed here. These records are TEST-half records: this is a report of what the rules do, not
where their settings were chosen.

    .venv/bin/python bench/adaptive_replay.py      # -> bench/results/adaptive_replay.json
"""

from __future__ import annotations

from pathlib import Path

from kate.bfcl.data import load_entries
from kate.eval.adaptive_selection import FIRST_STEP, replay_first_step, summarize, width_records
from kate.eval.run_store import load_run
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs"
SOURCES = {
    "0.5B st_w8v": RUNS / "st_w8v" / "seed_0",
    "0.5B st_calls_w8v": RUNS / "st_calls_w8v" / "seed_0",
    "1.5B st_calls_w8v": RUNS / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m" / "st_calls_w8v" / "seed_0",
}
RULES = FIRST_STEP  # first 2, 3 or 4 samples, then 2 at a time; with and without act-first


def entries_by_id(records: list[dict]) -> dict:
    categories = {r["category"] for r in records}
    return {e.id: e for c in categories for e in load_entries(c, "test", None)}


def replay_source(folder: Path) -> dict:
    records = [r for r in width_records(load_run(folder)[1]) if len(r["outputs"]) == 8]
    summary = summarize(replay_first_step(records, entries_by_id(records)))
    out = {"records": len(records), "fixed_w8": {"right": summary["fixed_w8"]["right"], "samples": 8.0}}
    for name in RULES:
        out[name] = {k: summary[name][k] for k in ("right", "samples", "against_fixed_w8")}
    return out


def main() -> None:
    results = {"note": __doc__.split("\n\n")[1].replace("\n", " "),
               "sources": {name: str(folder.relative_to(ROOT)) for name, folder in SOURCES.items()},
               "results": {name: replay_source(folder) for name, folder in SOURCES.items()
                           if folder.exists()}}  # fmt: skip
    path = ROOT / "bench" / "results" / "adaptive_replay.json"
    atomic_write_json(path, results)
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
