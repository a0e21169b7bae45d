"""`kate main`: KATE and kate's default model (arm `adapter`) against direct use on a fixed BFCL slice, then
the comparison report. An arm with its own `llm` node gets its own model client.

Writes ``<out_dir>/<arm>/seed_<s>/`` result folders (resumable; each arm's fingerprint is its own,
so changing one arm never refuses another's folder), ``<out_dir>/report.md`` (table with 95%
intervals, per-entry paired differences), ``<out_dir>/categories.png`` and ``<out_dir>/wall_seconds.json``
(each arm's wall seconds in this invocation, its model's loading included; a resumed arm counts only what
ran now).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from kate.eval.arm import arm_config, build_policy, check_arm, loop_settings, run_arm
from kate.eval.config import check_target, plain
from kate.eval.report import comparison_report, summarize
from kate.eval.report_plots import plot_categories
from kate.io import atomic_write_json, atomic_write_text
from kate.tasks.bfcl import BFCLTask, select_entries


def run_main(cfg: DictConfig) -> dict[str, Any]:
    c = plain(cfg)
    settings = loop_settings(c)
    check_target(c["llm"], "llm")
    for name, arm in c["arms"].items():
        check_arm(arm["sampling"], arm.get("knowledge"), f"arms.{name}")
        if arm.get("llm"):
            check_target(arm["llm"], f"arms.{name}.llm")
    task = BFCLTask(select_entries(c["slice"]["categories"], c["slice"]["split"]), c["slice"]["split"])
    out_dir = Path(c["out_dir"])
    runs: dict[str, list[dict]] = {}
    names: dict[str, str] = {}
    wall: dict[str, float] = {}
    loaded: tuple[Any, Any] = (None, None)  # (llm node, its client): arms in a row that share a node share it
    try:
        for name, arm in c["arms"].items():
            started = time.perf_counter()
            llm = arm.get("llm") or c["llm"]
            if loaded[0] != llm:
                _close(loaded[1])  # one model in memory at a time
                loaded = (llm, instantiate(llm))
            model = loaded[1]
            policy = build_policy(model, arm["sampling"], arm.get("knowledge"), settings)
            config = arm_config(llm, arm["sampling"], arm.get("knowledge"), settings)
            runs[name] = run_arm(name, task, policy, out_dir / name, seeds=[c["seed"]], config=config,
                                 workers=c["workers"])[c["seed"]]
            names[name] = model.name
            wall[name] = round(time.perf_counter() - started, 1)
    finally:
        _close(loaded[1])
    shown = ", ".join(f"{model} ({arm})" for arm, model in names.items()) if len(set(names.values())) > 1 \
        else next(iter(names.values()), "-")
    notes = [
        f"Model: {shown}. BFCL {c['slice']['split']} half, {len(task.items())} entries; seed {c['seed']}; "
        f"max {settings.max_steps} steps per turn; repeat policy `{settings.repeat_policy}` for every arm.",
        "Accuracy % [95% Wilson interval]; multi-turn adds the mean fraction of turns passed before the "
        "first failure. Group rows are unweighted means of the categories run (their count shown); "
        "this is a slice, not a BFCL overall score.",
    ]
    report = comparison_report(runs, "kate main job: KATE and the default model against direct", notes)
    summaries = {name: summarize(records) for name, records in runs.items()}
    atomic_write_text(out_dir / "report.md", report + "\n")
    atomic_write_json(out_dir / "summary.json", summaries)
    atomic_write_json(out_dir / "wall_seconds.json", wall)
    plot_categories(summaries, out_dir / "categories.png")
    print(report)
    print("\nwall time: " + ", ".join(f"{name} {seconds / 60:.1f} min" for name, seconds in wall.items()))
    print(f"\nreport: {out_dir / 'report.md'}  plot: {out_dir / 'categories.png'}")
    return summaries


def _close(model: Any) -> None:
    close = getattr(model, "close", None)
    if callable(close):
        close()
