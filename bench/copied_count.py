"""Does the model copy the example's number of calls? Read from an arm's stored single-turn records (no model):
for every entry that received a several-call example (the ```json list of ``Template.call_block=fenced_list``),
whether the reply made as many calls as the example shows, and whether it was right, per category; and
whether the example showed as many calls as the entry's ground truth holds (would an example of the right
count have been there to show).

    .venv/bin/python bench/copied_count.py --arm st_calls     # -> bench/results/copied_count_st_calls.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.bfcl.data import SINGLE_TURN, load_entries  # noqa: E402
from kate.eval.copied_count import tally  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", default="st_calls")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = ROOT / "bench" / "runs" / args.arm / f"seed_{args.seed}"
    _, records = load_run(folder)
    categories = sorted({r["category"] for r in records} & set(SINGLE_TURN))
    needed = {e.id: len(e.ground_truth or []) for c in categories for e in load_entries(c, "test")}
    out = {"arm": args.arm, "seed": args.seed, "records": str(folder.relative_to(ROOT)), **tally(records, needed)}
    path = ROOT / "bench" / "results" / f"copied_count_{args.arm}.json"
    atomic_write_json(path, out)
    print(json.dumps({k: out[k] for k in ("reached", "copied", "copied_any", "total")}), "->", path.relative_to(ROOT))


if __name__ == "__main__":
    main()
