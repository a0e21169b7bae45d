"""Diagnostics II (the ladder) in the report: verbatim replay, near-miss negatives, strict vs
keyword scoring, the first-token probe with its checkpoint trajectory, and the tool-knowledge
probes (``toolsense_score.toolsense_markdown``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kate.diagnose.report_format import load_result, pct
from kate.diagnose.toolsense_score import toolsense_markdown
from kate.io import read_jsonl


def _replay_section(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## Verbatim replay", "", "Greedy, one step per row with a known answer. Format: the answer's shape "
             "(a call where one is due, prose where none is); valid: format and content (BFCL's official checker "
             "on BFCL rows); keyword: what the lenient keyword harness would credit.", "",
             "| category | n | format right | valid | keyword | formats |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, b in [("all", summary["all"]), *summary["per_category"].items()]:
        formats = ", ".join(f"{k} {v}" for k, v in b["formats"].items())
        lines.append(f"| {name} | {b['n']} | {pct(b['format_valid'])} | {pct(b['valid'])} | {pct(b['keyword'])} | "
                     f"{formats} |")  # fmt: skip
    return lines + [""]


def _near_miss_section(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## Near-miss negatives", "", "Prompts that name tools, parameters or identifiers but need no call "
             "(kate's templates over BFCL tool sets, and BFCL's irrelevance entries). No call: neither a call nor a "
             "call attempt (VectraYX: 9-17% for its models).", "",
             "| group | n | no call | called | attempted | keyword |", "|---|---|---|---|---|---|"]  # fmt: skip
    groups = [("all", summary["all"]), *(("category " + k, v) for k, v in summary["per_category"].items()),
              *(("kind " + k, v) for k, v in summary["per_kind"].items())]  # fmt: skip
    for name, b in groups:
        lines.append(f"| {name} | {b['n']} | {pct(b['no_call'])} | {pct(b['called'])} | {pct(b['attempted'])} | "
                     f"{pct(b['keyword'])} |")  # fmt: skip
    return lines + [""]


def _keyword_section(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## Strict vs keyword scoring", "", "The same stored outputs scored strictly (a parsed call that passes "
             "the checker; no call where none is due) and by the keyword harness VectraYX criticises (a "
             "`\"name\": \"...\"` pattern or any offered tool's name in the text).", "",
             "| records | category | n | strict | keyword | keyword only | strict only |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for source, block in summary.items():
        for name, r in [("all", block["all"]), *block["per_category"].items()]:
            n = r["n"] or 1
            lines.append(f"| {source} | {name} | {r['n']} | {pct(r['strict'] / n)} | {pct(r['keyword'] / n)} | "
                         f"{r['keyword_only']} | {r['strict_only']} |")  # fmt: skip
    for source, block in summary.items():
        shown = block["disagreements"][:5]
        if shown:
            lines += ["", f"Disagreements ({source}: {len(block['disagreements'])}; first {len(shown)}):", ""]
            lines += [f"- `{d['id']}` strict {d['strict']}, keyword {d['keyword']}: "
                      f"{json.dumps(d['output'][:160])}" for d in shown]  # fmt: skip
    return lines + [""]


def _first_token_section(result: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    lines = ["## First-token probe", ""]
    if result:
        lines += [f"P(call opening) at the decision point, openings `{json.dumps(result['openings'])}`, model "
                  f"`{result['model']['name']}`.", "", "| prompts | n | mean | geometric mean | median | min | "
                  "P(call) > 0.5 |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for key, label in (("call_due", "call due"), ("no_call_due", "no call due")):
            b = result["summary"].get(key)
            if b:
                lines.append(f"| {label} | {b['n']} | {b['mean']:.3g} | {b['geomean']:.3g} | {b['median']:.3g} | "
                             f"{b['min']:.3g} | {pct(b['calls'])} |")  # fmt: skip
        a = result.get("agreement")
        if a:
            lines += ["", f"P(call) > 0.5 agrees with the greedy runs' parsed calls on {pct(a['agree'])} of "
                      f"n = {a['n']} prompts (high & not called: {a['p_high_not_called']})."]  # fmt: skip
    else:
        lines.append("Not run (it needs an hf client).")
    lines += ["", "## Checkpoint trajectory", ""]
    if rows:
        lines += ["| checkpoint | step | call due: geomean | call due: min | no call due: geomean |",
                  "|---|---|---|---|---|"]  # fmt: skip
        g = lambda r, b, k: "-" if not r["summary"].get(b) else f"{r['summary'][b][k]:.3g}"  # noqa: E731
        for r in rows:
            lines.append(f"| {r['checkpoint']} | {r['step']} | {g(r, 'call_due', 'geomean')} | "
                         f"{g(r, 'call_due', 'min')} | {g(r, 'no_call_due', 'geomean')} |")  # fmt: skip
        if (out / "trajectory" / "first_token_trajectory.png").exists():
            lines += ["", "![trajectory](trajectory/first_token_trajectory.png)"]
    else:
        lines.append("Not run (it needs trajectory.folder=<a folder of checkpoints>).")
    return lines + [""]


def ladder_sections(out: Path) -> list[str]:
    """Diagnostics II: replay, near-miss, strict vs keyword, the first-token rungs, ToolSense."""
    lines: list[str] = []
    for name, section in (("replay", _replay_section), ("near_miss", _near_miss_section),
                          ("keyword", _keyword_section)):  # fmt: skip
        found = load_result(out / name / "summary.json")
        title = {"replay": "Verbatim replay", "near_miss": "Near-miss negatives", "keyword": "Strict vs keyword scoring"}
        lines += section(found) if found else [f"## {title[name]}", "", "Not run.", ""]
    trajectory = out / "trajectory" / "first_token_trajectory.jsonl"
    lines += _first_token_section(load_result(out / "first_token" / "results.json"),
                                  read_jsonl(trajectory) if trajectory.exists() else [], out)  # fmt: skip
    toolsense = load_result(out / "toolsense" / "summary.json")
    lines += toolsense_markdown(toolsense) if toolsense else ["## Tool knowledge (ToolSense probes)", "", "Not run.", ""]
    return lines

