"""The tool prompt chosen on training halves: ``direct`` (the chat template's native tool block) against
``python`` (BFCL's prompt-mode system prompt, calls as a Python list; kate.llm.tool_prompt) on the first
``--limit`` training-half entries (even indices) of every single-turn category, the default 0.5B model,
greedy. Each arm is ``kate eval`` into ``bench/runs/tool_prompt/<arm>/`` (resumable: the same command
continues), then ``kate report`` over both into ``bench/results/tool_prompt_train/`` (per category,
paired fixed / broken) and the headline figures into ``bench/results/tool_prompt_train.json``, with the
rules of ``tool_prompt=both`` (which reply to keep) replayed on the two arms' records (``RULES``).

    .venv/bin/python bench/tool_prompt.py              # what ran (--limit 12)
    .venv/bin/python bench/tool_prompt.py --report-only
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kate.bfcl.data import SINGLE_TURN
from kate.cli import CONF_DIR
from kate.eval.config import IN_FLIGHT
from kate.eval.report_cmd import run_report
from kate.eval.run_eval import run_eval
from kate.eval.run_store import load_run
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RUNS, RESULTS = ROOT / "bench" / "runs" / "tool_prompt", ROOT / "bench" / "results"
ARMS = ("direct", "python")


def run_arm(arm: str, limit: int) -> None:
    overrides = [f"arm={arm}", "llm.max_parallel=8", f"categories=[{','.join(SINGLE_TURN)}]", "split=train",
                 f"limit={limit}", "seeds=[0]", f"workers={IN_FLIGHT}", f"name={arm}", f"out_dir={RUNS / arm}"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        run_eval(compose("eval", overrides=overrides))


# How ``tool_prompt=both`` picks between the two forms' replies, replayed from the two arms' records (greedy
# replies are each form's own); the rule with the highest mean category accuracy is the one kate ships
# (kate.llm.tool_prompt.choose_forms: the Python reply where it makes 2+ calls)
RULES: dict[str, Callable[[dict, dict], dict]] = {
    "native": lambda n, p: n,
    "python": lambda n, p: p,
    "python_if_2plus_calls (shipped as both)": lambda n, p: p if len(p["calls"]) >= 2 and not p["parse_error"] else n,
    "python_if_2plus_or_prose": lambda n, p: p if len(p["calls"]) >= 2 or not (p["calls"] or p["parse_error"]) else n,
    "python_if_2plus_or_no_call": lambda n, p: p if len(p["calls"]) >= 2 or not p["calls"] else n,
}


def replay_rules() -> dict:
    native, python = ({r["id"]: r for r in load_run(RUNS / arm / "seed_0")[1]} for arm in ARMS)
    ids = [i for i in native if i in python]
    out = {}
    for name, rule in RULES.items():
        cells: dict[str, list[int]] = {}
        for i in ids:
            chosen = rule(native[i], python[i])
            cell = cells.setdefault(chosen["category"], [0, 0])
            cell[0], cell[1] = cell[0] + bool(chosen["valid"]), cell[1] + 1
        out[name] = {"mean_category_accuracy": round(sum(k / n for k, n in cells.values()) / len(cells), 4),
                     "correct": sum(k for k, _ in cells.values()), "n": len(ids),
                     "per_category": {c: f"{k}/{n}" for c, (k, n) in sorted(cells.items())}}  # fmt: skip
    return out


def report(limit: int) -> dict:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("report", overrides=[f"out_dir={RESULTS / 'tool_prompt_train'}",
                                           "title='Tool prompts, training half (even indices), 0.5B, greedy'"])
    cfg = OmegaConf.merge(cfg, {"runs": {arm: str(RUNS / arm) for arm in ARMS}})
    summary = run_report(cfg)
    per = {arm: summary[arm]["per_category"] for arm in ARMS}
    headline = {
        "command": f".venv/bin/python bench/tool_prompt.py --limit {limit}",
        "what": "first `limit` training-half entries of each single-turn category; the 0.5B model, greedy",
        "split": "train", "limit": limit,
        "per_category": {c: {arm: per[arm].get(c) for arm in ARMS} for c in sorted(per["direct"])},
        "rules": replay_rules(),
        "report": "bench/results/tool_prompt_train/report.md",
    }  # fmt: skip
    atomic_write_json(RESULTS / "tool_prompt_train.json", headline)
    return headline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=12, help="training-half entries per category")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    if not args.report_only:
        for arm in ARMS:
            run_arm(arm, args.limit)
    report(args.limit)


if __name__ == "__main__":
    main()
