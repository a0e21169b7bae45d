"""Choose the adaptive vote's settings on the training half (kate.eval.adaptive_selection): reads the
selection runs bench/full.py makes (``select_st_w8v``, ``select_st_w8a_gate``, ``select_st_w8a_t05``),
pairs every rule with the fixed width-8 vote on the entries all three hold, applies the rule fixed in
advance, and writes bench/results/full/adaptive_selection.json, whose ``overrides`` the benchmark's
adaptive arm (``st_w8a``) then runs with on the test half.

    .venv/bin/python bench/adaptive_select.py      # after: .venv/bin/python bench/full.py --only select_st_w8v:select,...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kate.bfcl.data import load_entries
from kate.eval.adaptive_selection import (
    RULE,
    as_ran,
    choose,
    replay_first_step,
    replay_gate,
    summarize,
    width_records,
)
from kate.eval.run_store import load_run
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs" / "full"
OUT = ROOT / "bench" / "results" / "full" / "adaptive_selection.json"
SOURCES = {"fixed": "select_st_w8v", "gate": "select_st_w8a_gate", "cool": "select_st_w8a_t05"}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tolerance", type=float, default=1.0, help="points below fixed width 8 a rule may be")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    runs = {}
    for kind, name in SOURCES.items():
        folder = RUNS / name / "seed_0"
        if not (folder / "meta.json").exists():
            raise SystemExit(f"{folder}: missing; run .venv/bin/python bench/full.py --only {name}:select")
        meta, records = load_run(folder)
        if meta["task"].get("split") != "train":
            raise SystemExit(f"{folder} is not a training-half run (split {meta['task'].get('split')!r})")
        runs[kind] = {r["id"]: r for r in width_records(records)}
    ids = sorted(set.intersection(*(set(r) for r in runs.values())))
    if not ids:
        raise SystemExit("the selection runs share no finished entry yet")
    categories = {runs["fixed"][i]["category"] for i in ids}
    entries = {e.id: e for c in categories for e in load_entries(c, "train", None)}
    ordered = {kind: [r[i] for i in ids] for kind, r in runs.items()}
    rules = {**replay_first_step(ordered["fixed"], entries), **replay_gate(ordered["gate"], entries),
             "first_temperature0.5": as_ran(ordered["cool"], ["sampling.first_temperature=0.5"])}  # fmt: skip
    summary = summarize(rules)
    chosen = choose(summary, args.tolerance)
    out = {"chosen": chosen, "overrides": summary[chosen]["overrides"], "entries": len(ids),
           "tolerance_points": args.tolerance, "rule": RULE,
           "sources": {k: f"bench/runs/full/{v}/seed_0" for k, v in SOURCES.items()}, "rules": summary,
           "command": "python bench/adaptive_select.py"}  # fmt: skip
    atomic_write_json(args.out, out)
    print(f"chosen {chosen} ({summary[chosen]['samples']} samples, {summary[chosen]['right']}/{len(ids)} right; "
          f"fixed width 8: {summary['fixed_w8']['right']}) -> {args.out}")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
