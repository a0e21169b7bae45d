"""The verifier (issue #41 part 2, docs/verifier.md) trained and measured on the training half: ``kate train
verifier`` on the width-8 records of the selection run (``bench/runs/full/select_st_w8v``: the first 20
training-half entries of each single-turn category, 8 samples each at temperature 1.0, ST knowledge), into
``bench/runs/verifier/`` (resumable: the same command continues from the last save). Its held-out fold (a
seeded 20% of the entries, never trained on) is measured at the end; the measures are copied to
``bench/results/verifier/`` (``held_out.json`` less the per-candidate scores, ``calibration.png``,
``summary.json``). Nothing here reads a test half: the test half's best-of-8 needs width-8 test-half
records, which no run has yet.

    .venv/bin/python bench/verifier.py                  # what ran: 60 steps of 4 pairs, 2 threads
    .venv/bin/python bench/verifier.py --report-only    # copy the measures again
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from kate.eval.report import sign_test
from kate.train.verifier_metrics import selection
from kate_job import run_kate, stop_on_sigterm  # bench/kate_job.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
RECORDS = "bench/runs/full/select_st_w8v/seed_0/records.jsonl"
RUN, RESULTS = ROOT / "bench" / "runs" / "verifier", ROOT / "bench" / "results" / "verifier"
# set before the run: 60 steps of 4 pairs (about an hour at ~65 s a step on 2 cores), a save every 10
SETTINGS = ["max_steps=60", "save_steps=10", "save_total_limit=1", "threads=2"]


def train() -> None:
    run_kate(["train", "verifier", f"records=[{RECORDS}]", f"output_dir={RUN}", *SETTINGS], RUN / ".hydra")


def paired_selection(scores: list[dict]) -> dict:
    """``selection`` (kate.train.verifier_metrics) on the stored held-out scores, grouped as the job
    groups them (each entry's candidates from its first records file), with the exact sign test."""
    groups: dict[str, list[dict]] = {}
    for s in scores:
        groups.setdefault(s["id"], []).append(s)
    chosen = selection([[c for c in g if c["source"] == g[0]["source"]] for g in groups.values()])
    fixed, broken = chosen.get("fixed", 0), chosen.get("broken", 0)
    return {"fixed": fixed, "broken": broken, "sign_test_p": float(f"{sign_test(fixed, broken):.3g}")}


def report() -> dict:
    held_out = json.loads((RUN / "held_out.json").read_text())
    RESULTS.mkdir(parents=True, exist_ok=True)
    shown = {k: v for k, v in held_out.items() if k != "scores"}
    shown["selection_paired"] = paired_selection(held_out["scores"])
    shown["command"] = ".venv/bin/python bench/verifier.py"
    (RESULTS / "held_out.json").write_text(json.dumps(shown, indent=2, sort_keys=True) + "\n")
    for name in ("calibration.png", "summary.json"):
        shutil.copyfile(RUN / name, RESULTS / name)
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    stop_on_sigterm()
    if not args.report_only:
        train()
    print(json.dumps({k: v for k, v in report().items() if k != "calibration"}, indent=1))


if __name__ == "__main__":
    main()
