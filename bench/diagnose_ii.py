"""Diagnostics II (issue 14) for the default 0.5B model: the ladder's rungs, strict vs keyword scoring,
the checkpoint trajectory and the tool-knowledge probes, into bench/results/diagnose/ladder/ (the
runner's records, summaries, report.md and its PNGs, committed). Resumable: rerun the same command, in
a later session too; each rung continues where it stopped, finished ones are read back.

    .venv/bin/python bench/diagnose_ii.py                    # every rung in RUNGS' order, then the report
    .venv/bin/python bench/diagnose_ii.py --only replay      # one rung (and what it needs)

Settings (chosen before any result; the cheap rungs first, so a partial run is already a report):
- replay: BFCL's single-turn test halves with ground-truth calls (simple_python, multiple, parallel,
  parallel_multiple; all 500 entries), greedy, strict and keyword verdicts;
- near_miss: one generated near-miss prompt per tool set of the simple_python and multiple test halves
  (300) plus BFCL's irrelevance and live_irrelevance test halves (562);
- keyword: strict vs keyword on the stored records of bench/runs/direct (BFCL single-turn slice) and on
  this folder's replay and near-miss records (no model);
- first_token: the hf client's first-token mass of the call openings on 200 replay + 200 near-miss
  prompts;
- trajectory: the same probe set over the SFT run's checkpoints (bench/runs/train/sft_checkpoints/checkpoint-*;
  made by `bench/train_cpu.py --stages data,sft_checkpoints`, a save every 5 steps of which the trainer keeps
  the last 3 (save_total_limit=3): steps 20, 25, 30), with the first_token rung's untrained model as step 0;
  the checkpoints are not committed: on another machine that command makes them again; skipped, saying so,
  where they are not on disk, so it comes last;
- toolsense: a catalogue of BFCL's functions, 100 queries per ambiguity tier, 300 MCQ, 300 QA, with
  the embedding baseline; the 0.5B model writes and judges its own queries (toolsense.writer for a
  stronger one), 4 seeds at a time (toolsense.workers); the probes are answered 4 at a time (workers=4:
  the llama.cpp client decodes them in one batch; the rungs before toolsense ran one at a time). The MCQ
  and QA probes are built from the catalogue (toolsense.probes_from=catalogue: a tool's own description
  against its farthest pool neighbours'), because in a smoke run (2 per tier, 2 MCQ, 2 QA) the 0.5B could not write them: its
  judge named several letters on all 315 MCQs it was shown ("A, B, C" 151 times, "A, C" 114), so it
  kept none in two hours, the "wrong" options it wrote were often true of the tool, and none of its
  11 QA answers was a yes/no question ("What does `X` do?").
Diagnostics I's rungs (issue 13: bench/diagnose_i.py) are skipped here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.diagnose.campaigns import RUNGS, diagnostics_ii_calls, has_checkpoints  # noqa: E402
from kate_job import run_kate, stop_on_sigterm  # noqa: E402  (bench/kate_job.py)

OUT = ROOT / "bench" / "results" / "diagnose" / "ladder"
CHECKPOINTS = ROOT / "bench" / "runs" / "train" / "sft_checkpoints"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None, help=f"one rung of {', '.join(RUNGS)} (default: each, then the report)")
    args = parser.parse_args()
    stop_on_sigterm()
    calls = diagnostics_ii_calls(args.only, OUT, CHECKPOINTS, ROOT / "bench" / "runs" / "direct" / "seed_0")
    if not has_checkpoints(CHECKPOINTS):
        print(f"trajectory: no {CHECKPOINTS}/checkpoint-* on this machine (bench/train_cpu.py --stages "
              "data,sft_checkpoints makes them; they are not committed); skipped")
    for call, hydra_dir in calls:
        run_kate(call, hydra_dir)


if __name__ == "__main__":
    main()
