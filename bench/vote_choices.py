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
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench_model import model_folder  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402

RUNS, RESULTS = ROOT / "bench" / "runs", ROOT / "bench" / "results"


def pooled_no_call(vote: dict) -> tuple[bool, bool]:
    """(chose no call, chose no call although the valid call samples together outnumbered the no-call ones)."""
    if vote["chosen"]["kind"] != "no_call":
        return False, False
    candidates = vote["candidates"]
    calls = sum(c["votes"] for c in candidates if c["kind"] == "call" and c.get("valid", True))
    no_call = sum(c["votes"] for c in candidates if c["kind"] == "no_call")
    return True, calls > no_call


def voted_steps(record: dict) -> list[dict]:
    """The votes of a record: one for a single-turn entry, one per step of a dialogue."""
    if record["category"].startswith("multi_turn"):
        return [s["vote"] for t in record.get("turns") or [] for s in t.get("steps") or [] if s.get("vote")]
    return [record["vote"]] if record.get("vote") else []


def count(records: list[dict]) -> dict[str, dict]:
    table: dict[str, dict] = defaultdict(lambda: {"records": 0, "steps": 0, "no_call": 0, "pooled": 0,
                                                  "pooled_right": 0, "turns": 0, "turns_without_call": 0})
    for record in records:
        row = table[record["category"]]
        row["records"] += 1
        for vote in voted_steps(record):
            chose, pooled = pooled_no_call(vote)
            row["steps"] += 1
            row["no_call"] += chose
            row["pooled"] += pooled
            row["pooled_right"] += pooled and not record["category"].startswith("multi_turn") and bool(record["valid"])
        for turn in record.get("turns") or []:
            row["turns"] += 1
            row["turns_without_call"] += not turn.get("calls")
    return dict(sorted(table.items()))


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
