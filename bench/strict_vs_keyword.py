"""Strict vs keyword scoring on the benchmark's stored single-turn outputs (no generation): how much
a lenient keyword harness (``kate.diagnose.keyword``) would have credited the default model, per
category, beside the official checker's verdict, and every output the two disagree on.

    .venv/bin/python bench/strict_vs_keyword.py      # -> bench/results/strict_vs_keyword.{json,md}
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.bfcl.data import load_entries  # noqa: E402
from kate.diagnose.keyword import compare, tool_names  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.io import atomic_write_json, atomic_write_text  # noqa: E402

RUNS, RESULTS = ROOT / "bench" / "runs", ROOT / "bench" / "results"
ARMS = ("direct", "st", "st_w8v")  # the arms with single-turn records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    out: dict = {"source": "bench/runs/<arm>/seed_0/records.jsonl (single-turn)", "command": "bench/strict_vs_keyword.py",
                 "arms": {}}  # fmt: skip
    lines = ["# Strict vs keyword scoring (stored outputs, no generation)", "",
             "Strict: BFCL's official checker on the parsed calls (what kate reports). Keyword: credited when the "
             "output matches a `\"name\": \"<tool>\"` pattern or names an offered tool anywhere (irrelevance: when it "
             "names none), the lenient harness VectraYX criticises. Default model, BFCL test halves, seed 0.", "",
             "| arm | category | n | strict % | keyword % | keyword only | strict only |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for arm in ARMS:
        _, records = load_run(RUNS / arm / "seed_0")
        single = [r for r in records if not r["category"].startswith("multi_turn")]
        entries = {e.id: e for c in sorted({r["category"] for r in single}) for e in load_entries(c, "test")}
        result = compare(single, {i: tool_names(e.tools) for i, e in entries.items()})
        out["arms"][arm] = result
        for category, row in [*result["per_category"].items(), ("**all**", result["all"])]:
            n = row["n"]
            lines.append(f"| {arm} | {category} | {n} | {100 * row['strict'] / n:.1f} | {100 * row['keyword'] / n:.1f} | "
                         f"{row['keyword_only']} | {row['strict_only']} |")  # fmt: skip
    lines += ["", "Disagreements (first 12 per arm; all in strict_vs_keyword.json):", ""]
    for arm, result in out["arms"].items():
        for d in result["disagreements"][:12]:
            text = d["output"].replace("\n", " ").replace("|", "/")[:120]
            lines.append(f"- {arm} `{d['id']}`: strict {d['strict']}, keyword {d['keyword']} ({d['keyword_reason']}; "
                         f"checker: {d['strict_error']}): `{text}`")  # fmt: skip
    atomic_write_json(RESULTS / "strict_vs_keyword.json", out)
    atomic_write_text(RESULTS / "strict_vs_keyword.md", "\n".join(lines) + "\n")
    print("\n".join(lines[:40]))


if __name__ == "__main__":
    main()
