"""Arms chosen on the training half: each arm named (``conf/arm/<arm>.yaml``, e.g. ``brief32``,
``distilled``) on the same training-half entries as ``bench/tool_prompt.py``'s ``direct`` run (the first
``--limit`` entries, even indices, of every single-turn category; the default 0.5B model, greedy), paired
with that run entry by entry. Each arm is ``kate eval`` into ``bench/runs/train_half/<arm>/`` (resumable:
the same command continues); ``kate report`` over direct and the arms writes
``bench/results/train_half/`` (per category, paired fixed / broken), and the headline figures go to
``bench/results/train_half_arms.json``: per arm and category the right counts, fixed / broken against
direct with the sign test, and the mean category accuracy (what an arm is chosen by, with no category
below direct: issue #41's target for an arm).

What ran (each arm's own ``command`` in the results file):

    .venv/bin/python bench/train_half_arms.py --arms brief32                  # --limit 12, every category
    .venv/bin/python bench/train_half_arms.py --arms distilled,st
    .venv/bin/python bench/train_half_arms.py --arms brief_route32,brief_route16,brief_fits32 \
        --categories simple_python,multiple,irrelevance --limit 8
    .venv/bin/python bench/train_half_arms.py --arms grpo_answers        # direct on the GRPO-answers adapter
    .venv/bin/python bench/train_half_arms.py --arms grpo_gated_tuned    # the base gate (its first rule)

An invocation adds its arms to the results file and keeps the others there; ``--report-only`` renews
the named arms' figures from their records.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kate.bfcl.data import SINGLE_TURN
from kate.cli import CONF_DIR
from kate.eval.config import IN_FLIGHT
from kate.eval.report_cmd import run_report
from kate.eval.run_eval import run_eval
from kate.eval.report import sign_test
from kate.eval.run_store import load_run
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RUNS, RESULTS = ROOT / "bench" / "runs" / "train_half", ROOT / "bench" / "results"
DIRECT = ROOT / "bench" / "runs" / "tool_prompt" / "direct"  # bench/tool_prompt.py's direct run: the baseline
# arms made of an arm of conf/arm/ and overrides: a committed LoRA adapter (llama.cpp) as bench/full.py runs
# them; the base gate with the base's malformed call left to the adapter (the rule first run)
EXTRA_ARMS = {"grpo_answers": ("direct", ["llm.lora=bench/runs/train/grpo_answers/final/adapter.gguf"]),
              "grpo_gated_tuned": ("grpo_gated", ["llm.base_malformed=tuned"])}  # fmt: skip


def run_arm(arm: str, limit: int, categories: list[str]) -> None:
    conf_arm, extra = EXTRA_ARMS.get(arm, (arm, []))
    overrides = [f"arm={conf_arm}", *extra, "llm.max_parallel=8", f"categories=[{','.join(categories)}]", "split=train",
                 f"limit={limit}", "seeds=[0]", f"workers={IN_FLIGHT}", f"name={arm}",
                 f"out_dir={RUNS / arm}"]  # fmt: skip
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        run_eval(compose("eval", overrides=overrides))


def paired_cells(direct: dict[str, dict], arm: dict[str, dict]) -> dict[str, dict]:
    """Per category of the entries both ran: n, right counts, fixed / broken against direct, sign test p."""
    unpaired = sorted(set(arm) - set(direct))
    if unpaired:
        raise ValueError(f"{len(unpaired)} entries the direct run ({DIRECT}) lacks, e.g. {unpaired[0]}: "
                         "run the arm on direct's entries (--limit <= 12)")
    cells: dict[str, dict] = {}
    for i, record in arm.items():
        d, a = bool(direct[i]["valid"]), bool(record["valid"])
        cell = cells.setdefault(record["category"], {"n": 0, "direct": 0, "arm": 0, "fixed": 0, "broken": 0})
        cell["n"] += 1
        cell["direct"] += d
        cell["arm"] += a
        cell["fixed"] += a and not d
        cell["broken"] += d and not a
    for cell in cells.values():
        cell["sign_test_p"] = float(f"{sign_test(cell['fixed'], cell['broken']):.3g}")
    return dict(sorted(cells.items()))


def mean_accuracy(cells: dict[str, dict], key: str) -> float:
    return round(100 * sum(c[key] / c["n"] for c in cells.values()) / len(cells), 1) if cells else 0.0


def arm_summary(arm: str, direct: dict[str, dict], command: str) -> dict:
    cells = paired_cells(direct, {r["id"]: r for r in load_run(RUNS / arm / "seed_0")[1]})
    return {
        "command": command, "n": sum(c["n"] for c in cells.values()),
        "fixed": sum(c["fixed"] for c in cells.values()), "broken": sum(c["broken"] for c in cells.values()),
        "mean_category_accuracy": {"direct": mean_accuracy(cells, "direct"), "arm": mean_accuracy(cells, "arm")},
        "categories_below_direct": [c for c, cell in cells.items() if cell["arm"] < cell["direct"]],
        "per_category": cells,
    }  # fmt: skip


def report(arms: list[str], limit: int, categories: list[str], notes: dict[str, str], report_only: bool) -> dict:
    """Adds (or renews) ``arms`` in bench/results/train_half_arms.json, keeping the arms other invocations
    wrote there, and renews ``kate report`` over direct and every arm of the file."""
    path = RESULTS / "train_half_arms.json"
    out = json.loads(path.read_text()) if path.exists() else {"arms": {}}
    out.update({"what": ("training-half entries (even indices), the 0.5B model; each arm paired entry by entry with "
                         "bench/tool_prompt.py's direct run on the same entries (its first 12 of each category)"),
                "split": "train", "report": "bench/results/train_half/report.md"})  # fmt: skip
    direct = {r["id"]: r for r in load_run(DIRECT / "seed_0")[1]}
    command = (f".venv/bin/python bench/train_half_arms.py --arms {{arm}} --limit {limit}"
               + ("" if categories == list(SINGLE_TURN) else f" --categories {','.join(categories)}"))
    for arm in arms:
        kept = out["arms"].get(arm, {}).get("command") if report_only else None  # the command that ran it
        out["arms"][arm] = arm_summary(arm, direct, kept or command.format(arm=arm))
        if arm in notes:
            out["arms"][arm]["note"] = notes[arm]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("report", overrides=[f"out_dir={RESULTS / 'train_half'}",
                                           "title='Arms on the training half (even indices), 0.5B'"])
    runs = {"direct": str(DIRECT), **{arm: str(RUNS / arm) for arm in out["arms"]}}
    run_report(OmegaConf.merge(cfg, {"runs": runs}))
    atomic_write_json(path, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="brief32",
                        help=f"comma-separated arms of conf/arm/ or of EXTRA_ARMS ({', '.join(EXTRA_ARMS)})")
    parser.add_argument("--limit", type=int, default=12, help="training-half entries per category (direct's: 12)")
    parser.add_argument("--categories", default=",".join(SINGLE_TURN),
                        help="comma-separated categories (default: every single-turn one)")
    parser.add_argument("--note", action="append", default=[], metavar="ARM=TEXT", help="a note kept beside an arm")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    arms, categories = [a for a in args.arms.split(",") if a], args.categories.split(",")
    if not args.report_only:
        for arm in arms:
            run_arm(arm, args.limit, categories)
    notes = dict(n.split("=", 1) for n in args.note)
    summary = report(arms, args.limit, categories, notes, args.report_only)
    print(json.dumps({a: {k: v for k, v in s.items() if k != "per_category"} for a, s in summary["arms"].items()},
                     indent=1))


if __name__ == "__main__":
    main()
