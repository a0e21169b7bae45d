"""Every analysis of stored records, in one command: each reads committed runs (no generation, except
the embedder of call_count_cv) and rewrites its results file under bench/results/.

    .venv/bin/python bench/analyses.py             # all of them
    .venv/bin/python bench/analyses.py --list      # what runs, in order
    .venv/bin/python bench/analyses.py --only vote_choices,copied_count

Each is also its own script (the command column below), so one can be rerun with other arguments.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (name, script arguments) -> the results file each writes (see that script's docstring)
ANALYSES: list[tuple[str, list[str]]] = [
    ("vote_choices", ["--arm", "st_w8v"]),  # which candidate the vote chose, and how often no call won
    ("vote_choices", ["--arm", "st_calls_w8v"]),
    ("vote_choices", ["--model", "qwen2.5-coder-1.5b-instruct-q4_k_m", "--arm", "st_calls_w8v"]),
    ("copied_count", ["--arm", "st_calls"]),  # calls whose count was copied from the example shown
    ("copied_count", ["--arm", "st_counts"]),
    ("call_count_cv", []),  # can surface features predict the number of calls (cross-validated)
    ("strict_vs_keyword", []),  # the official checker against a lenient keyword harness
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated analysis names (default: all)")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    args = parser.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    unknown = only - {name for name, _ in ANALYSES}
    if unknown:
        parser.error(f"unknown analyses {sorted(unknown)}; known: {sorted({n for n, _ in ANALYSES})}")
    chosen = [(n, a) for n, a in ANALYSES if not only or n in only]
    failed = []
    for i, (name, arguments) in enumerate(chosen, 1):
        command = [sys.executable, str(ROOT / "bench" / f"{name}.py"), *arguments]
        shown = " ".join(["python", f"bench/{name}.py", *arguments])
        if args.list:
            print(shown)
            continue
        print(f"[{i}/{len(chosen)}] {shown}", flush=True)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT)
        print(f"[{i}/{len(chosen)}] {'ok' if done.returncode == 0 else f'FAILED ({done.returncode})'} "
              f"in {time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
        if done.returncode:
            failed.append(shown)
    if failed:
        print("failed:\n  " + "\n  ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
