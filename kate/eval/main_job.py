"""`kate main`: KATE against direct use on a fixed BFCL slice, then the comparison report.

Writes ``<out_dir>/<arm>/seed_<s>/`` result folders (resumable), ``<out_dir>/report.md`` (table with
95% intervals, per-entry paired differences) and ``<out_dir>/categories.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from kate.bfcl.data import load_entries
from kate.eval.knowledge_arm import build_retrieve_factory
from kate.eval.prompts import resolve_system_prompt
from kate.eval.report import markdown_table, paired_difference, plot_categories, summarize
from kate.eval.run_eval import run_arm
from kate.io import atomic_write_json, atomic_write_text


def comparison_report(runs: dict[str, list[dict]], title: str, notes: list[str]) -> str:
    names = list(runs)
    summaries = {name: summarize(records) for name, records in runs.items()}
    lines = [f"# {title}", "", *notes, "", markdown_table(summaries), ""]
    if len(names) >= 2:
        base = names[0]
        for other in names[1:]:
            diff = paired_difference(runs[base], runs[other])
            lines.append(f"**{other} vs {base}** on {diff['n_common']} common entries: "
                         f"{len(diff['fixed'])} fixed, {len(diff['broken'])} broken.")  # fmt: skip
            lines += [f"- {c}: +{row['fixed']} / -{row['broken']} of {row['n']}" for c, row in sorted(diff["per_category"].items())]
            if diff["broken"]:
                lines.append(f"- broken: {', '.join(diff['broken'])}")
            for category, row in diff["turns"].items():
                low, high = row["ci95"]
                lines.append(f"- {category} turns passed: better in {row['better']}, worse in {row['worse']} of "
                             f"{row['n']} dialogues; mean paired difference {100 * row['mean_diff']:+.1f} points "
                             f"[{100 * low:+.1f}, {100 * high:+.1f}]")  # fmt: skip
            lines.append("")
    return "\n".join(lines)


def run_main(cfg: DictConfig) -> dict[str, Any]:
    model = instantiate(cfg.llm)
    entries = [e for category, k in cfg.slice.categories.items() for e in load_entries(category, cfg.slice.split, k)]
    out_dir = Path(cfg.out_dir)
    config = OmegaConf.to_container(cfg, resolve=True)
    runs: dict[str, list[dict]] = {}
    for name, arm in cfg.arms.items():
        sampler = instantiate(arm.sampling)
        factory, described = (None, None)
        if arm.get("knowledge"):
            factory, described = build_retrieve_factory(arm.knowledge, intent_model=model)
        per_seed = run_arm(
            name, model, sampler, entries, out_dir / name, seeds=[cfg.seed], config=config,
            retrieve_factory=factory, knowledge_manifest=described, max_steps=cfg.max_steps,
            repeat_policy=cfg.repeat_policy, system_prompt=resolve_system_prompt(cfg.system_prompt),
            one_call=cfg.one_call,
        )  # fmt: skip
        runs[name] = per_seed[cfg.seed]
    notes = [
        f"Model: {model.name}. BFCL test half (odd indices), {len(entries)} entries; seed {cfg.seed}; "
        f"max {cfg.max_steps} steps per turn; repeat policy `{cfg.repeat_policy}` for every arm.",
        "Accuracy % [95% Wilson interval]; multi-turn adds the mean fraction of turns passed before the "
        "first failure. Group rows are unweighted means of the categories run (their count shown); "
        "this is a slice, not a BFCL overall score.",
    ]
    report = comparison_report(runs, "kate main job: KATE vs direct", notes)
    atomic_write_text(out_dir / "report.md", report + "\n")
    atomic_write_json(out_dir / "summary.json", {name: summarize(records) for name, records in runs.items()})
    plot_categories({name: summarize(records) for name, records in runs.items()}, out_dir / "categories.png")
    print(report)
    print(f"\nreport: {out_dir / 'report.md'}  plot: {out_dir / 'categories.png'}")
    return {name: summarize(records) for name, records in runs.items()}
