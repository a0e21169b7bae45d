"""Diagnostics I (issue 13) for the default 0.5B model: `kate diagnose name=all` on the arithmetic set
(1,000 items, the paper's 13 families) and on BFCL's relevance / irrelevance test halves, each into
bench/results/diagnose/<set>/ (the runner's records, summaries, report.md and its PNGs, committed).
Resumable: rerun the same command, in a later session too, and each diagnostic continues where it
stopped (the runner's records); finished ones are read back.

    .venv/bin/python bench/diagnose_i.py                      # both sets, arithmetic first
    .venv/bin/python bench/diagnose_i.py --sets bfcl
    .venv/bin/python bench/diagnose_i.py --only necessity     # one diagnostic of each set (and what it needs)
    .venv/bin/python bench/diagnose_i.py --only plan --plan-order no_call_first   # the plan's order control

Settings: necessity N = 10 at T = 0.7 with `stop_early` (an item stops at its 2nd wrong answer: its
labels at r = 10 and r = 9 are those of all 10 samples; the 0.5B model answered 1 of 8 trial items
right more than once, so a full N costs ~46 s an item on 2 cores, ~13 h for 1,000); the tools offered
greedily through kate's loop: on BFCL a whole turn (act=turn), on arithmetic the first decision only
(act=step: a call, or a direct answer that is checked; a call counts as not answered). At act=turn the
0.5B called the calculator on each of the first 6 items, then re-issued the call on its own result
until the repeat policy ended the turn, never answering (the turn-end failure of issue 15), at
42-112 s an item (~6 h for 1,000 on 2 cores); those 6 records are kept in arithmetic/turn_sample/.
Hidden states of the hf client at the last 20 prompt tokens
of every layer; the gate's tau sweep on the probes' held-out items. Diagnostics II's rungs (issue
14) are skipped here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.diagnose.campaigns import SETS, diagnostics_i_calls  # noqa: E402
from kate_job import run_kate, stop_on_sigterm  # noqa: E402  (bench/kate_job.py)

OUT = ROOT / "bench" / "results" / "diagnose"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--only", default="all", help="one diagnostic (it runs what it needs first); all: every one + report")
    parser.add_argument("--plan-order", default="call_first", choices=["call_first", "no_call_first"],
                        help="the plan instruction's reply forms: call first (plan/) or no-call first (plan_no_call_first/)")
    args = parser.parse_args()
    stop_on_sigterm()
    for call, hydra_dir in diagnostics_i_calls(args.sets.split(","), args.only, args.plan_order, OUT):
        run_kate(call, hydra_dir)


if __name__ == "__main__":
    main()
