"""Diagnostics I (knowing vs doing) in the report: necessity, the four-way breakdown, the probes,
P(call), plan vs execute and the gate, each section from its result folder ("Not run." when the
folder is missing)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kate.diagnose.breakdown import PAPER_ARITHMETIC_MISMATCH
from kate.diagnose.gate import sweep_markdown
from kate.diagnose.report_format import load_result, pct
from kate.diagnose.report_plots import plot_alluvial, plot_density, plot_heatmaps, plot_mismatch, plot_sweep
from kate.io import read_jsonl


def _four_way_section(breakdown: Mapping[str, Any], out: Path) -> list[str]:
    tables = breakdown["four_way"]
    lines = ["## Four-way breakdown", "",
             f"Greedy, tools offered, \"called\" = a parsed call; n = {breakdown['n']}, "
             f"answer accuracy {pct(breakdown.get('accuracy'))}.", "",
             "| labels | n | N-C | N-NC | UN-C | UN-NC | mismatch | underuse (N-NC) | overuse (UN-C) |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, t in tables.items():
        lines.append(f"| {name} | {t['n']} | {t['N-C']} | {t['N-NC']} | {t['UN-C']} | {t['UN-NC']} | "
                     f"{pct(t['mismatch'])} | {pct(t['underuse'])} | {pct(t['overuse'])} |")  # fmt: skip
    low, high = breakdown.get("paper_arithmetic_mismatch", PAPER_ARITHMETIC_MISMATCH)
    lines.append(f"| paper (arXiv 2605.14038), arithmetic, Qwen3-4B/8B, Llama-3.1-8B, Llama-3.2-3B | 2,085-4,000 | "
                 f"| | | | {pct(low)}-{pct(high)} | | |")  # fmt: skip
    lines += ["", f"![mismatch]({plot_mismatch(tables, out / 'mismatch.png')})", "",
              "By category (first labels):", "", "| category | n | N-C | N-NC | UN-C | UN-NC | mismatch |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, t in breakdown.get("by_category", {}).items():
        lines.append(
            f"| {name} | {t['n']} | {t['N-C']} | {t['N-NC']} | {t['UN-C']} | {t['UN-NC']} | {pct(t['mismatch'])} |"
        )
    return lines + [""]


def _probe_section(results: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    lines = ["## Probes", ""]
    axes = (results["layers"], results["positions"])
    grids = {f"MCC, {label} (w_{key}), n_test={results[label].get('n_test')}": results[label]["mcc"]
             for label, key in (("necessity", "c"), ("action", "a")) if "mcc" in results[label]}  # fmt: skip
    for label in ("necessity", "action"):
        if "error" in results[label]:
            lines.append(f"- the paper's probe on the {label} label could not train: {results[label]['error']}")
        held = {bool(r["necessary" if label == "necessity" else "called"]) for r in rows if r.get("split") == "test"}
        if "mcc" in results[label] and len(held) == 1:
            lines.append(f"- the held-out split holds one {label} class only, so its MCC is 0 by definition")
    if grids:
        best = {
            label: float(np.max(results[label]["mcc"])) for label in ("necessity", "action") if "mcc" in results[label]
        }
        lines += [f"Best held-out MCC: " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()) + ".", "",
                  f"![mcc]({plot_heatmaps(grids, *axes, out / 'mcc.png', 'held-out MCC per (layer, position)')})", ""]  # fmt: skip
    if results.get("cosine") is not None:
        cos = np.asarray(results["cosine"])
        title = f"cosine(w_c, w_a) per (layer, position), n_train={results['necessity'].get('n_train')}"
        lines += [f"cosine(w_c, w_a): last position, last layer {cos[-1, -1]:.3f}; max {cos.max():.3f}, "
                  f"min {cos.min():.3f}.", "",
                  f"![cosine]({plot_heatmaps({'cosine(w_c, w_a)': cos}, *axes, out / 'cosine.png', title)})", ""]  # fmt: skip
    w2t = results.get("when2tool", {})
    for label in ("necessity", "action"):
        r = w2t.get(label) or {}
        if "error" in r:
            lines.append(f"- When2Tool's probe on {label}: could not train ({r['error']})")
        elif r:
            auroc = "-" if r.get("auroc") is None else f"{r['auroc']:.3f}"
            lines.append(f"- When2Tool's all-layers probe on {label}: held-out AUROC {auroc}, accuracy "
                         f"{pct(r.get('accuracy'))} (n_train={r.get('n_train')}, n_test={r.get('n_test')})")  # fmt: skip
    held = [r for r in rows if r["split"] == "test" and r.get("belief") is not None]
    if held:
        lines += [
            "",
            f"![alluvial]({plot_alluvial(held, out / 'alluvial.png', 'necessity -> belief -> action, held-out')})",
        ]
    return lines + [""]


def _pcall_section(pcall: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    lines = ["## P(call)", "", f"Openings: `{json.dumps(pcall.get('opening'))[:400]}`", ""]
    a = pcall.get("agreement")
    if a:
        lines.append(f"P(call) > 0.5 agrees with greedy calling on {pct(a['agree'])} of n = {a['n']} items "
                     f"(high & called {a['p_high_called']}, high & not {a['p_high_not_called']}, low & called "
                     f"{a['p_low_called']}, low & not {a['p_low_not_called']}).")  # fmt: skip
    both = [r for r in rows if r.get("belief") is not None and r.get("p_call") is not None]
    if both:
        png = plot_density([r["belief"] for r in both], [r["p_call"] for r in both], [r["called"] for r in both],
                           out / "belief_vs_pcall.png")  # fmt: skip
        lines += ["", f"![belief vs P(call)]({png})"]
    return lines + [""]


def _plan_section(plan: Mapping[str, Any]) -> list[str]:
    order = plan.get("order", "call_first")
    shown = "the call form first" if order == "call_first" else "the no-call form first"
    return [f"## Plan vs execute ({order})", "",
            f"n = {plan['n']}; the plan instruction shows {shown}; plans parsed {plan['plans_parsed']} "
            f"({pct(plan['plan_parse_rate'])}); plans that say call: {plan.get('plan_says_call', '-')}.", "",
            "| plan accuracy | execution accuracy | gap (plan - execution) | execution follows the plan |",
            "|---|---|---|---|",
            f"| {pct(plan['plan_accuracy'])} | {pct(plan['execution_accuracy'])} | {pct(plan['gap'])} | "
            f"{pct(plan['follow_rate'])} of {plan['plans_parsed']} |", "",
            f"Said it would call but did not: {plan['said_call_did_not']}; said it would not but called: "
            f"{plan['said_no_call_called']}.", ""]  # fmt: skip


def _plan_order_note(plans: list[Mapping[str, Any]]) -> list[str]:
    """Both orders ran: how far the share of plans that say "call" moves with the order of the forms the
    instruction shows (a model that plans would say the same whichever form comes first)."""
    by_order = {p.get("order", "call_first"): p for p in plans}
    if set(by_order) != {"call_first", "no_call_first"}:
        return []
    first, control = by_order["call_first"], by_order["no_call_first"]
    share = [p["plan_says_call"] / p["plans_parsed"] if p["plans_parsed"] else 0.0 for p in (first, control)]
    return [f"Plans that say call: {first['plan_says_call']} of {first['plans_parsed']} ({pct(share[0])}) when the "
            f"call form is shown first, {control['plan_says_call']} of {control['plans_parsed']} ({pct(share[1])}) "
            f"when the no-call form is: the order alone moves {pct(abs(share[1] - share[0]))} of the plans.", ""]


def _gate_section(folder: Path, sweep: Mapping[str, Any], out: Path) -> list[str]:
    rows = sweep["rows"]
    held = "held-out items only" if sweep.get("held_out_only") else "all items"
    title = f"gate ({sweep['mode']} mode), {held}"
    return [f"## Gate: {sweep['mode']} mode", "",
            f"When2Tool's probe belief, {held}; below tau the no-tool text is prefilled, above it the "
            f"{'tool text' if sweep['mode'] == 'soft' else 'call opening'}. When2Tool reports 48% fewer calls for "
            "1.7% lower accuracy.", "", sweep_markdown(rows),
            f"![sweep]({plot_sweep(rows, out / f'{folder.name}.png', title)})", ""]  # fmt: skip



def knowing_doing_sections(out: Path, breakdown: Mapping[str, Any] | None) -> list[str]:
    """Diagnostics I's sections (each "Not run." when its folder is missing)."""
    lines: list[str] = []
    necessity = load_result(out / "necessity" / "summary.json")
    if necessity:
        c = necessity["config"]
        lines += ["## Necessity", "", f"n = {necessity['n']} items, N = {c['samples']} samples at T = {c['temperature']} "
                  "without tools; unnecessary when right >= r of N.", "",
                  "| r | necessary | unnecessary |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {k} | {v['necessary']} | {v['unnecessary']} |" for k, v in necessity["labels"].items()]
        lines += [
            "",
            "Items right k of N times: " + ", ".join(f"{k}: {v}" for k, v in necessity["histogram"].items())
            + (f" (sampling stopped at {necessity['stop_after_wrong']} wrong answers, when the labels were "
               "decided: a stopped item's k is a lower bound)" if necessity.get("stop_after_wrong") else ""),
            "",
        ]
    else:
        lines += ["## Necessity", "", "From the data (no sampling), or not run.", ""]
    lines += _four_way_section(breakdown, out) if breakdown else ["## Four-way breakdown", "", "Not run.", ""]
    probes = load_result(out / "probes" / "results.json")
    rows = read_jsonl(out / "probes" / "items.jsonl") if (out / "probes" / "items.jsonl").exists() else []
    lines += _probe_section(probes, rows, out) if probes else ["## Probes", "", "Not run (they need an hf client).", ""]
    pcall = load_result(out / "pcall" / "results.json")
    lines += _pcall_section(pcall, rows, out) if pcall else ["## P(call)", "", "Not run.", ""]
    found = (load_result(out / "plan" / "summary.json"), load_result(out / "plan_no_call_first" / "summary.json"))
    plans = [p for p in found if p]
    for plan in plans:
        lines += _plan_section(plan)
    lines += _plan_order_note(plans)
    if not plans:
        lines += ["## Plan vs execute", "", "Not run.", ""]
    gates = sorted(p for p in out.glob("gate_*") if (p / "sweep.json").exists())
    for folder in gates:
        lines += _gate_section(folder, load_result(folder / "sweep.json"), out)
    untrained = ((probes or {}).get("when2tool", {}).get("necessity") or {}).get("error")
    if not gates and untrained:
        lines += ["## Gate", "", f"Not run: When2Tool's necessity probe could not train ({untrained}), so there is "
                  "no belief to gate on.", ""]  # fmt: skip
    elif not gates:
        lines += ["## Gate", "", "Not run (it needs probe beliefs and a client that takes prefill).", ""]
    return lines
