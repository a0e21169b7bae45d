"""When does the width vote answer without a call? Read from an arm's stored records (no model): per category,
the voted steps, those where the vote chose no call, and those where it chose no call although the samples
with calls that fit the tools, taken together, outnumbered the no-call samples.

A vote candidate is a whole answer (``kate/sampling/vote.py``): every no-call sample is one candidate whatever
its text, while samples with calls split into as many candidates as distinct argument sets. So three no-call
samples beat five call samples spread over four argument sets. The third column counts the steps where that
pooling decided between acting and answering. For single-turn entries the official verdict of each such entry
is counted too (``right`` = the no-call answer was right: an irrelevance category).

    .venv/bin/python bench/vote_choices.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --arm st_calls_w8v
    # -> bench/results/models/<model>/vote_choices_<arm>.json (the default model: bench/results/)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.eval.model_folders import model_folder  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.eval.vote_choices import count  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402

RUNS, RESULTS = ROOT / "bench" / "runs", ROOT / "bench" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="another model's runs (bench/runs/models/<name>/)")
    parser.add_argument("--arm", default="st_calls_w8v", help="a width arm's run folder name")
    parser.add_argument("--compare", default="direct", help="a greedy arm: its turns without a call, for reference")
    args = parser.parse_args()
    runs = model_folder(RUNS, args.model)
    _, records = load_run(runs / args.arm / "seed_0")
    out = {"model": args.model, "arm": args.arm, "records": str((runs / args.arm / "seed_0").relative_to(ROOT)),
           "categories": count(records)}
    if (runs / args.compare / "seed_0" / "records.jsonl").exists():
        _, greedy = load_run(runs / args.compare / "seed_0")
        out[f"{args.compare}_turns_without_call"] = {
            cat: {"turns": row["turns"], "turns_without_call": row["turns_without_call"]}
            for cat, row in count(greedy).items() if row["turns"]}
    path = model_folder(RESULTS, args.model) / f"vote_choices_{args.arm}.json"
    atomic_write_json(path, out)
    totals = {k: sum(row[k] for row in out["categories"].values()) for k in ("steps", "no_call", "pooled")}
    print(json.dumps({"wrote": str(path.relative_to(ROOT)), **totals}))


if __name__ == "__main__":
    main()
