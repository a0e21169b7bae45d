"""The BFCL benchmark's report, regenerated from the committed records only (no model, no generation):

    .venv/bin/python bench/bfcl_report.py

Reads bench/runs/<arm>/seed_<s>/{meta.json,records.jsonl} for every arm of ``kate.eval.bfcl_report.ARMS``
and writes bench/results/bfcl_<arm>.json, bfcl_report.md (+ bfcl_categories.png) and bfcl_common.json
(``kate.eval.bfcl_report`` says what each holds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kate.eval.bfcl_report import report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUNS = ROOT / "bench" / "runs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    report(RUNS, RESULTS)


if __name__ == "__main__":
    main()
