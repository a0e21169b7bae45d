"""The tool prompt chosen on training halves: ``direct`` (the chat template's native tool block) against
``python`` (BFCL's prompt-mode system prompt, calls as a Python list; kate.llm.tool_prompt) on the first
``--limit`` training-half entries (even indices) of every single-turn category, the default 0.5B model,
greedy. Each arm is ``kate eval`` into ``bench/runs/tool_prompt/<arm>/`` (resumable: the same command
continues), then ``kate report`` over both into ``bench/results/tool_prompt_train/`` (per category,
paired fixed / broken) and the headline figures into ``bench/results/tool_prompt_train.json``, with the
rules of ``tool_prompt=both`` (which reply to keep) replayed on the two arms' records (``RULES``).

    .venv/bin/python bench/tool_prompt.py              # what ran (--limit 12)
    .venv/bin/python bench/tool_prompt.py --report-only
    .venv/bin/python bench/tool_prompt.py --test-replay   # arm both_gated replayed on the test half's records
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
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
from kate.retrieval.call_count import CallCountModel, base_entries, request_text
from kate.toolcall.parse_python import starts_python_call

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
# (kate.llm.tool_prompt.choose_forms: the Python reply where it makes 2+ calls). The gated rule (arm both_gated)
# came later: it ties with both on the mean and, unlike both, leaves no category below the native form, which is
# what issue #41's target asks of an arm (see GATE_CHOICE).
RULES: dict[str, Callable[[dict, dict], dict]] = {
    "native": lambda n, p: n,
    "python": lambda n, p: p,
    "python_if_2plus_calls (shipped as both)": lambda n, p: p if several_calls(p) else n,
    "python_if_2plus_or_prose": lambda n, p: p if len(p["calls"]) >= 2 or not (p["calls"] or p["parse_error"]) else n,
    "python_if_2plus_or_no_call": lambda n, p: p if len(p["calls"]) >= 2 or not p["calls"] else n,
}
GATED = "python_if_2plus_calls_and_gate (shipped as both_gated)"
GATE_CHOICE = ("both_gated over both: equal mean category accuracy on these records, and no category below the "
               "native form (both: multiple and simple_python below it). The tie-break was set after the test "
               "half's both run had shown multiple broken (17 of 100), which these training records showed too "
               "(11 -> 8 of 12).")
KB = ROOT / "knowledge_bases" / "bfcl_train"  # the gate's base (conf/arm/both_gated.yaml)


def several_calls(reply: dict) -> bool:
    return len(reply["calls"] or []) >= 2 and not reply["parse_error"]


def question(record: dict) -> str:
    return request_text(record["prompt"])


def cross_fitted_gate(held_out: set[str]) -> CallCountModel:
    """The gate's predictor fitted on the base less the replayed entries (they are training-half entries
    of the base itself: the gate must not have seen the entries it is judged on)."""
    return CallCountModel.from_entries([e for e in base_entries(KB) if not set(e.source_ids) & held_out])


def replay_rules() -> dict:
    native, python = ({r["id"]: r for r in load_run(RUNS / arm / "seed_0")[1]} for arm in ARMS)
    ids = [i for i in native if i in python]
    gate = cross_fitted_gate(set(ids))
    rules = {**RULES, GATED: lambda n, p: p if several_calls(p) and gate.several(question(n)) else n}
    out = {}
    for name, rule in rules.items():
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
        "gate_choice": GATE_CHOICE,
        "report": "bench/results/tool_prompt_train/report.md",
    }  # fmt: skip
    atomic_write_json(RESULTS / "tool_prompt_train.json", headline)
    return headline


def paired_row(rows: list[tuple[bool, bool]]) -> dict:
    """Counts, the paired difference with its 95% (Wald) interval, and the sign test, of (direct, arm) pairs."""
    n = len(rows)
    fixed, broken = sum(a and not d for d, a in rows), sum(d and not a for d, a in rows)
    diff = (fixed - broken) / n
    half = 1.96 * math.sqrt(max(fixed + broken - (fixed - broken) ** 2 / n, 0.0)) / n
    return {"n": n, "direct": sum(d for d, _ in rows), "arm": sum(a for _, a in rows), "fixed": fixed,
            "broken": broken, "diff_points": round(100 * diff, 1),
            "diff_interval": [round(100 * (diff - half), 1), round(100 * (diff + half), 1)],
            "sign_test_p": float(f"{sign_test(fixed, broken):.3g}")}  # fmt: skip


def replay_test_half() -> dict:
    """The gated rule replayed on the test half's records: where the both arm kept a Python reply that the
    gate (fitted on the whole training-half base, as the arm runs) would have closed, direct's native reply
    stands in for both's own native one (the same greedy prompt, decoded in another batch). Written to
    bench/results/tool_prompt_gate_test_replay.json; a real run of the arm (bench/full.py) replaces it."""
    full = ROOT / "bench" / "runs" / "full"
    direct, both = ({r["id"]: r for r in load_run(full / arm / "seed_0")[1]} for arm in ("direct", "both"))
    gate = cross_fitted_gate(set())
    pairs: dict[str, dict[str, list[tuple[bool, bool]]]] = {}
    closed = 0
    for i, b in both.items():
        d = direct[i]
        python_kept = several_calls(b) and starts_python_call((b["outputs"] or [""])[0])
        gated = b if not python_kept or gate.several(question(b)) else d
        closed += gated is d
        cell = pairs.setdefault(b["category"], {"both": [], "both_gated": []})
        cell["both"].append((bool(d["valid"]), bool(b["valid"])))
        cell["both_gated"].append((bool(d["valid"]), bool(gated["valid"])))
    out = {
        "command": ".venv/bin/python bench/tool_prompt.py --test-replay",
        "what": ("arm both_gated replayed from the test half's both and direct records (bench/runs/full), paired "
                 "with direct per category; the rule was chosen on the training half (tool_prompt_train.json)"),
        "entries": len(both), "python_replies_closed_by_the_gate": closed,
        "per_category": {c: {arm: paired_row(rows) for arm, rows in cell.items()} for c, cell in sorted(pairs.items())},
    }  # fmt: skip
    atomic_write_json(RESULTS / "tool_prompt_gate_test_replay.json", out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=12, help="training-half entries per category")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--test-replay", action="store_true", help="only the gated rule replayed on the test half")
    args = parser.parse_args()
    if args.test_replay:
        print(json.dumps(replay_test_half()["per_category"], indent=1))
        return
    if not args.report_only:
        for arm in ARMS:
            run_arm(arm, args.limit)
    report(args.limit)


if __name__ == "__main__":
    main()
