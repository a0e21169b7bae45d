"""`kate eval`: one arm (model + sampler + knowledge) on BFCL-V3, one folder per seed, then a summary.

    kate eval arm=st_w8v limit=8 categories=[simple_python,multi_turn_base]   # a benchmark arm by name
    kate eval categories=[own_tools] split=train      # kate.tasks.own_tools, in <out_dir>/own_tools/

Every result folder's ``meta.json`` carries the arm's config, the policy (model name, backend, file
hash; sampler; knowledge base manifest; loop settings), the task (BFCL version, split, scoring
model), the seed, the data hashes and the engine's runtime; records are written entry by entry,
and a rerun of the same command resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from kate.eval.arm import arm_config, build_policy, check_arm, loop_settings, run_arm
from kate.eval.config import check_target, plain
from kate.eval.report import markdown_table, seed_spread, summarize
from kate.eval.report_plots import plot_categories
from kate.io import atomic_write_json, atomic_write_text
from kate.tasks.bfcl import BFCLTask, select_entries
from kate.tasks.own_tools import NAME as OWN_TOOLS
from kate.tasks.own_tools import OwnToolsTask


def write_arm_summary(name: str, per_seed: dict[int, list[dict]], out_dir: str | Path) -> dict[str, Any]:
    out_dir = Path(out_dir)
    first = per_seed[min(per_seed)]
    summary = {"arm": name, "seeds": sorted(per_seed), "per_category": summarize(first), "across_seeds": seed_spread(per_seed)}
    atomic_write_json(out_dir / "summary.json", summary)
    atomic_write_text(out_dir / "report.md", markdown_table({name: summary["per_category"]}) + "\n")
    plot_categories({name: summary["per_category"]}, out_dir / "categories.png")
    return summary


def run_eval(cfg: DictConfig) -> dict[str, Any]:
    c = plain(cfg)
    settings = loop_settings(c)
    check_target(c["llm"], "llm")
    check_arm(c["sampling"], c["knowledge"], "arm")
    bfcl = [category for category in c["categories"] if category != OWN_TOOLS]
    tasks = [(BFCLTask(select_entries(bfcl, c["split"], c["limit"]), c["split"]), Path(c["out_dir"]))]
    tasks = tasks if bfcl or OWN_TOOLS not in c["categories"] else []
    if OWN_TOOLS in c["categories"]:  # its own task and result folder beside BFCL's, the same runner
        tasks.append((OwnToolsTask(c["split"], c["limit"]), Path(c["out_dir"]) / OWN_TOOLS))
    model = instantiate(c["llm"])
    policy = build_policy(model, c["sampling"], c["knowledge"], settings)
    per_seed: dict[int, list[dict]] = {}
    for task, out_dir in tasks:
        runs = run_arm(c["name"], task, policy, out_dir, seeds=c["seeds"],
                       config=arm_config(c["llm"], c["sampling"], c["knowledge"], settings), workers=c["workers"])  # fmt: skip
        for seed, records in runs.items():
            per_seed.setdefault(seed, []).extend(records)
    summary = write_arm_summary(c["name"], per_seed, c["out_dir"])
    print(markdown_table({c["name"]: summary["per_category"]}))
    return summary
