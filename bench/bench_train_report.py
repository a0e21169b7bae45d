"""The report stage of bench/train_cpu.py: bench/results/train_cpu.json and .md, and the checkpoint
probe curves copied beside them, from the committed records only (no model)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kate.eval.run_store import load_run
from kate.eval.slice_tables import MULTI_TURN, bfcl_table, multi_turn_pairs, plot_slice, rate, single_turn_changes
from kate.io import atomic_write_json, atomic_write_text
from kate.tasks.own_tools import summarize as own_tools_summary

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs" / "train"
RESULTS = ROOT / "bench" / "results"
BFCL_FOLDERS = {"untrained_direct": ROOT / "bench/runs/direct/seed_0", "untrained_kate": ROOT / "bench/runs/st_w8v/seed_0",
                "trained_direct": RUNS / "trained_direct/bfcl/seed_0", "trained_kate": RUNS / "trained_kate/bfcl/seed_0",
                # bench/train_cpu.py --stages eval --arms trained_direct --adapter sft_answers
                "trained_direct_sft_answers": RUNS / "trained_direct_sft_answers/bfcl/seed_0",
                "trained_direct_grpo_answers": RUNS / "trained_direct_grpo_answers/bfcl/seed_0",
                "trained_kate_grpo_answers": RUNS / "trained_kate_grpo_answers/bfcl/seed_0"}
ARMS = tuple(BFCL_FOLDERS)
# the first SFT adapter (targets in the template's <tool_call> form, bench/runs/train/sft_template/): its
# own-tools records, made when it lay in bench/runs/train/sft/, are kept beside the current ones
STAGES = ("sft_template", "sft", "grpo", "sft_answers", "grpo_answers")
EARLIER_OWN_TOOLS = {"trained_direct (sft, template targets)": RUNS / "sft_template_direct/own_tools/seed_0"}
# bench/own_tools.py's test-half arms: each adapter alone and with the turn-end options (kate/agent/turn_end.py)
OWN = ROOT / "bench" / "runs" / "own_tools" / "test"
OWN_TOOLS_ARMS = {"untrained + turn-end options": OWN / "direct_answer/seed_0",
                  "sft (json) alone": OWN / "sft_direct/seed_0", "sft (json) + turn-end options": OWN / "sft_answer/seed_0",
                  "grpo + turn-end options": OWN / "grpo_answer/seed_0",
                  "sft_answers alone": OWN / "sft_answers_direct/seed_0",
                  "sft_answers + turn-end options": OWN / "sft_answers_answer/seed_0",
                  "grpo_answers alone": OWN / "grpo_answers_direct/seed_0"}  # fmt: skip


def _records(folder: Path) -> list[dict[str, Any]]:
    return load_run(folder)[1] if (folder / "meta.json").exists() else []


def _probe(stage: str) -> list[dict[str, Any]]:
    path = RUNS / stage / "probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _summary(stage: str) -> dict[str, Any] | None:
    path = RUNS / stage / "summary.json"
    return json.loads(path.read_text()) if path.exists() else None


def markdown(result: Mapping[str, Any]) -> str:
    lines = ["# Training benchmark (CPU): 0.5B + LoRA, SFT then GRPO", "",
             "Regenerate: `.venv/bin/python bench/train_cpu.py --stages report` (from committed records). "
             "Every cell: pass rate % [95% Wilson interval] (k/n); arms compared on the entries all of them finished.", ""]  # fmt: skip
    for stage in STAGES:
        s = result["training"].get(stage)
        lines.append(f"- **{stage}**: " + (f"{s['global_step']} steps, loss {s['train_loss']:.3f}, examples {s.get('examples') or s.get('prompts')}, "
                                            f"{s['seconds_this_run']:.0f} s (last run)" if s else
                                            f"in progress: probe rows at steps {[r['step'] for r in result['probe'][stage]]}"
                                            if result["probe"].get(stage) else "not run yet"))  # fmt: skip
    for where, a in result.get("adapters", {}).items():
        lines.append(f"- {where}: the {a['stage']} adapter `{a['adapter']}` (sha256 {str(a['sha256'])[:12]})")
    lines += ["", "## Own-tools task (test half): right call / right final answer", "",
              "| arm | n | right call | right answer | both | turn ends |", "|---|---|---|---|---|---|"]
    for arm, s in result["own_tools"].items():
        if s:
            k = round(s["answer_ok_share"] * s["n"])
            r = rate(k, s["n"])
            lines.append(f"| {arm} | {s['n']} | {s['call_ok_share']:.2f} | {s['answer_ok_share']:.2f} "
                         f"({k}/{s['n']}; [{r['interval'][0]}, {r['interval'][1]}] %) | {s['valid_share']:.2f} | "
                         f"{s['turn_ends']} |")
    lines += ["", "## BFCL test-half slice", "", "| category | " + " | ".join(ARMS) + " |",
              "|---|" + "---|" * len(ARMS)]
    for category, row in result["bfcl"].items():
        cells = []
        for arm in ARMS:
            c = row.get(arm)
            text = f"{c['pct']} [{c['interval'][0]}, {c['interval'][1]}] ({c['k']}/{c['n']})" if c and c["n"] else "-"
            if c and "turns_passed" in c:
                t = c["turns_passed"]
                text += f"; turns {t['pct']} ({t['k']}/{t['n']})"
            if c and c.get("own"):
                text += " (its own entries: a partial run)"
            cells.append(text)
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    pairs = result.get("multi_turn_pairs", {})
    if pairs:
        lines += ["", f"{MULTI_TURN} against untrained_direct, dialogue by dialogue (turns passed before the first "
                  "failure, per-dialogue fraction; mean paired difference [95% interval]):", ""]
        for arm, t in pairs.items():
            lines.append(f"- {arm}: {100 * t['mean_diff']:+.1f} points [{100 * t['ci95'][0]:+.1f}, "
                         f"{100 * t['ci95'][1]:+.1f}] over {t['n']} dialogues (better in {t['better']}, worse in {t['worse']})")
    lines += ["", "Single-turn entries against untrained_direct (the entries both hold):", ""]
    for arm, c in result.get("single_turn_changes", {}).items():
        lines.append(f"- {arm}: {c['right']} right vs {c['right_untrained_direct']} of {c['n']}; {c['fixed']} fixed, "
                     f"{c['broken']} broken; outputs with several calls {c['multi_call_outputs']} "
                     f"(untrained {c['multi_call_outputs_untrained_direct']})")
    lines += ["", "The slice as a picture: `train_cpu_bfcl.png`.", "Probe curves (at the start and every save): `train_cpu_probe_<stage>.png` (sft_template: the first SFT, targets as the template writes calls; sft: call_format=json)."]
    return "\n".join(lines) + "\n"


def _adapters_by_sha256() -> dict[str, Path]:
    """Every trained adapter.gguf under bench/runs/train, by its sha256."""
    import hashlib

    return {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in sorted(RUNS.glob("*/final/adapter.gguf"))}


def adapters_used() -> dict[str, Any]:
    """Which adapter (path, sha256) each trained arm's records were made with: the sha256 their meta
    recorded, found among the run folders (a folder renamed since keeps its adapter's hash)."""
    known = _adapters_by_sha256()
    out = {}
    for arm in (*(a for a in ARMS if a.startswith("trained")), "sft_template_direct"):
        for part in ("own_tools", "bfcl"):
            meta_path = RUNS / arm / part / "seed_0" / "meta.json"
            if meta_path.exists():
                digest = json.loads(meta_path.read_text()).get("policy", {}).get("model", {}).get("lora_sha256")
                path = known.get(digest)
                out[f"{arm}/{part}"] = {"adapter": str(path.relative_to(ROOT)) if path else None,
                                        "stage": path.parent.parent.name if path else None, "sha256": digest}
    return out


def write_report() -> dict[str, Any]:
    own = {}
    for arm in ARMS:
        rows = _records(RUNS / arm / "own_tools" / "seed_0")
        own[arm] = own_tools_summary(rows).get("all") if rows else None
    for label, folder in {**EARLIER_OWN_TOOLS, **OWN_TOOLS_ARMS}.items():
        rows = _records(folder)
        own[label] = own_tools_summary(rows).get("all") if rows else None
    bfcl_records = {arm: _records(folder) for arm, folder in BFCL_FOLDERS.items()}
    bfcl_records = {arm: rows for arm, rows in bfcl_records.items() if rows}
    result = {"model": "qwen2.5-coder-0.5b-instruct-q4_k_m", "training": {s: _summary(s) for s in STAGES},
              "probe": {s: _probe(s) for s in STAGES}, "own_tools": own,
              "bfcl": bfcl_table(bfcl_records) if len(bfcl_records) > 1 else {},
              "single_turn_changes": single_turn_changes(bfcl_records),
              "multi_turn_pairs": multi_turn_pairs(bfcl_records),
              "bfcl_arms": sorted(bfcl_records), "adapters": adapters_used()}  # fmt: skip
    atomic_write_json(RESULTS / "train_cpu.json", result)
    atomic_write_text(RESULTS / "train_cpu.md", markdown(result))
    if result["bfcl"]:
        plot_slice(result["bfcl"], RESULTS / "train_cpu_bfcl.png")
    for stage in STAGES:
        if (RUNS / stage / "probe.png").exists():
            shutil.copyfile(RUNS / stage / "probe.png", RESULTS / f"train_cpu_probe_{stage}.png")
    return result
