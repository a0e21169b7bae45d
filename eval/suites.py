"""The evaluation suites users run, as thin entry points over the same plain functions as the
``kate`` CLI (``kate.eval.run_eval.run_eval``, ``kate.eval.main_job.run_main``,
``kate.appworld_cmd.run_appworld``): each suite is only a list of config overrides.

    .venv/bin/python eval/suites.py list
    .venv/bin/python eval/suites.py bfcl_v3_full arm=st_w8v          # any further Hydra override
    .venv/bin/python eval/suites.py kate_test_halves arm=direct limit=8

A suite runs exactly what ``kate <job> <its overrides> <yours>`` runs (same configs, same result
folders, resumable).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kate.bfcl.data import CATEGORIES  # noqa: E402

ALL = "[" + ",".join(CATEGORIES) + "]"
SUITES: dict[str, tuple[str, list[str], str]] = {
    "bfcl_v3_full": ("eval", [f"categories={ALL}", "split=all", "limit=null"],
                     "every offline BFCL-V3 category, every entry (both halves)"),
    "kate_test_halves": ("eval", [f"categories={ALL}", "split=test", "limit=null"],
                         "KATE's test halves (odd indices) of every offline category"),
    "main_slice": ("main", [], "the main job: KATE vs direct on the fixed slice, with report"),
    "appworld_test_normal": ("appworld", ["world=appworld", "appworld.dataset=test_normal"],
                             "AppWorld test_normal, direct vs KATE (needs scripts/setup_appworld.sh and the data)"),
}  # fmt: skip


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in SUITES:
        print("usage: eval/suites.py SUITE [hydra overrides ...]\n")
        for name, (job, overrides, help_) in SUITES.items():
            print(f"  {name:22s} kate {job} {' '.join(o if len(o) < 40 else o[:37] + '...' for o in overrides)}\n"
                  f"  {'':22s} {help_}")  # fmt: skip
        raise SystemExit(0 if argv[:1] == ["list"] else 2)
    from kate.cli import main as kate_main

    job, overrides, _ = SUITES[argv[0]]
    kate_main([job, *overrides, *argv[1:]])


if __name__ == "__main__":
    main(sys.argv[1:])
