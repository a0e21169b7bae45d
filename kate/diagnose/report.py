"""The diagnostics report: the result folders of one `kate diagnose` output folder turned into
``report.md`` with its PNG pictures beside it, every figure with its n.

It reads only what the diagnostics wrote (``necessity/summary.json``, ``breakdown/summary.json``,
``probes/results.json`` + ``items.jsonl``, ``pcall/results.json``, ``plan/summary.json``,
``gate_<mode>/sweep.json``); a diagnostic not run is said to be missing, never guessed. Pictures:
MCC heatmaps per (layer, position) for w_c and w_a, the cosine(w_c, w_a) heatmap, the mismatch
beside the paper's range, the alluvial necessity -> probe belief -> action with its flows counted,
the density of probe belief against P(call), and the gate's tau sweep.

Diagnostics II (``replay/``, ``near_miss/``, ``keyword/``, ``first_token/`` and ``trajectory/``
summaries, ``toolsense/summary.json``) get a section each: the ladder's tables, the checkpoint
trajectory's log-scale PNG, and the tool-knowledge probes (``toolsense_score.toolsense_markdown``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kate.diagnose.breakdown import CLASSES, PAPER_ARITHMETIC_MISMATCH
from kate.diagnose.gate import sweep_markdown
from kate.diagnose.toolsense_score import toolsense_markdown
from kate.io import atomic_open, atomic_write_text, read_jsonl


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=120, bbox_inches="tight")
    _pyplot().close(fig)
    with atomic_open(path, "wb") as fh:
        fh.write(buffer.getvalue())
    return path.name


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


# --------------------------------------------------------------------------- pictures


def plot_heatmaps(grids: Mapping[str, Any], layers: Sequence[int], positions: Sequence[int], path: Path,
                  title: str, vmin: float = -1.0, vmax: float = 1.0) -> str:  # fmt: skip
    """One heatmap per named ``[layers, positions]`` grid, side by side."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(grids), figsize=(5.5 * len(grids), 0.22 * len(layers) + 2.5), squeeze=False)
    for ax, (name, grid) in zip(axes[0], grids.items()):
        image = ax.imshow(
            np.asarray(grid, dtype=float), aspect="auto", origin="lower", cmap="RdBu_r", vmin=vmin, vmax=vmax
        )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("position (from the prompt's end)")
        ax.set_ylabel("hidden-state layer (0 = embeddings)")
        ax.set_xticks(range(0, len(positions), max(1, len(positions) // 5)))
        ax.set_xticklabels([positions[i] for i in range(0, len(positions), max(1, len(positions) // 5))])
        ax.set_yticks(range(0, len(layers), max(1, len(layers) // 8)))
        ax.set_yticklabels([layers[i] for i in range(0, len(layers), max(1, len(layers) // 8))])
        fig.colorbar(image, ax=ax)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def plot_mismatch(tables: Mapping[str, Mapping[str, Any]], path: Path) -> str:
    """Underuse + overuse (stacked) per table, the paper's arithmetic mismatch range shaded."""
    plt = _pyplot()
    names = list(tables)
    fig, ax = plt.subplots(figsize=(6.5, 0.6 * len(names) + 1.8))
    under = [100 * (tables[k]["underuse"] or 0) for k in names]
    over = [100 * (tables[k]["overuse"] or 0) for k in names]
    ax.barh(names, under, color="#d62728", label="underuse (N-NC)")
    ax.barh(names, over, left=under, color="#1f77b4", label="overuse (UN-C)")
    low, high = (100 * v for v in PAPER_ARITHMETIC_MISMATCH)
    ax.axvspan(low, high, color="grey", alpha=0.2, label="paper, arithmetic, 4 models 3-8B")
    for y, k in enumerate(names):
        ax.text(
            under[y] + over[y] + 0.5, y, f"{_pct(tables[k]['mismatch'])} (n={tables[k]['n']})", va="center", fontsize=8
        )
    ax.set_xlabel("share of items (%)")
    ax.set_xlim(0, 100)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("mismatch: underuse + overuse", fontsize=10)
    return _save(fig, path)


def _band(ax: Any, x0: float, x1: float, y0: tuple[float, float], y1: tuple[float, float], color: str) -> None:
    xs = np.linspace(x0, x1, 50)
    s = (1 - np.cos(np.pi * (xs - x0) / (x1 - x0))) / 2  # a smooth step
    ax.fill_between(xs, y0[0] + (y1[0] - y0[0]) * s, y0[1] + (y1[1] - y0[1]) * s, color=color, alpha=0.45, lw=0)


def plot_alluvial(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> str:
    """Necessity -> probe belief (> 0.5: a tool is needed) -> action, one band per path, the four
    necessity x action flows counted (the four classes)."""
    plt = _pyplot()
    n = len(rows)
    stages = [("necessary", "unnecessary"), ("belief: needed", "belief: not needed"), ("called", "not called")]
    keys = [(bool(r["necessary"]), r["belief"] > 0.5, bool(r["called"])) for r in rows]
    paths = sorted(set(keys), key=lambda k: tuple(not v for v in k))
    fig, ax = plt.subplots(figsize=(9, 5))
    gap = 0.04 * n
    slot: dict[tuple[int, tuple[bool, ...]], float] = {}  # (stage, path) -> the top of the path's slot
    for s, names in enumerate(stages):
        others = [i for i in range(3) if i != s]
        for value, label in zip((True, False), names):
            size = sum(k[s] == value for k in keys)
            top = n + gap if value else n - sum(k[s] for k in keys)
            ax.add_patch(plt.Rectangle((s - 0.04, top - size), 0.08, size, color="black"))
            ax.text(s + (0.07 if s < 2 else -0.07), top - size / 2, f"{label}\n{size}", va="center",
                    ha="left" if s < 2 else "right", fontsize=8)  # fmt: skip
            for p in sorted((p for p in paths if p[s] == value), key=lambda p: tuple(not p[i] for i in others)):
                slot[(s, p)] = top
                top -= keys.count(p)
    colors = {(True, True): "#2ca02c", (True, False): "#d62728", (False, True): "#1f77b4", (False, False): "#7f7f7f"}
    for p in paths:
        count = keys.count(p)
        for s in range(2):
            a, b = slot[(s, p)], slot[(s + 1, p)]
            _band(ax, s + 0.04, s + 0.96, (a - count, a), (b - count, b), colors[(p[0], p[2])])
    flows = {c: sum(1 for k in keys if (k[0], k[2]) == pair) for c, pair in zip(CLASSES, colors)}
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[p], alpha=0.45) for p in colors]
    ax.legend(handles, [f"{c}: {flows[c]}" for c in CLASSES], fontsize=8, loc="upper center", ncol=4,
              bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    ax.set_xlim(-0.3, 2.3)
    ax.set_ylim(-gap, n + 2 * gap)
    ax.axis("off")
    ax.set_title(f"{title} (n={n})", fontsize=10)
    return _save(fig, path)


def plot_density(beliefs: Sequence[float], p_calls: Sequence[float], called: Sequence[bool], path: Path) -> str:
    """The joint density of probe belief and P(call) (2-D histogram), the greedy calls marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.8))
    b, p, c = np.asarray(beliefs, float), np.asarray(p_calls, float), np.asarray(called, bool)
    counts = ax.hist2d(b, p, bins=20, range=[[0, 1], [0, 1]], cmap="Blues", cmin=1)[3]
    fig.colorbar(counts, ax=ax, label="items")
    ax.scatter(b[c], p[c], s=6, color="#d62728", label=f"greedy called ({int(c.sum())})")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.axvline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("probe belief that a tool is needed (When2Tool, T = 2)")
    ax.set_ylabel("P(call) at the decision point")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"belief vs P(call) (n={len(b)})", fontsize=10)
    return _save(fig, path)


def plot_sweep(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> str:
    """Calls (share of items), mismatch and accuracy against tau; the ungated run dashed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    taus = [r["tau"] for r in rows]
    n = rows[0]["n"]
    for key, color, label in (("calls", "#1f77b4", "calls made"), ("mismatch", "#d62728", "mismatch"),
                              ("accuracy", "#2ca02c", "accuracy")):  # fmt: skip
        values = [100 * (r[key] / n if key == "calls" else (r[key] or 0)) for r in rows]
        base = rows[0][f"{key}_base"]
        ax.plot(taus, values, marker="o", color=color, label=label)
        ax.axhline(100 * (base / n if key == "calls" else (base or 0)), color=color, ls="--", lw=0.9)
    ax.set_xlabel("tau")
    ax.set_ylabel("% of items")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(f"{title} (n={n}; dashed: ungated)", fontsize=10)
    return _save(fig, path)


# --------------------------------------------------------------------------- the markdown


def _four_way_section(breakdown: Mapping[str, Any], out: Path) -> list[str]:
    tables = breakdown["four_way"]
    lines = ["## Four-way breakdown", "",
             f"Greedy, tools offered, \"called\" = a parsed call; n = {breakdown['n']}, "
             f"answer accuracy {_pct(breakdown.get('accuracy'))}.", "",
             "| labels | n | N-C | N-NC | UN-C | UN-NC | mismatch | underuse (N-NC) | overuse (UN-C) |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, t in tables.items():
        lines.append(f"| {name} | {t['n']} | {t['N-C']} | {t['N-NC']} | {t['UN-C']} | {t['UN-NC']} | "
                     f"{_pct(t['mismatch'])} | {_pct(t['underuse'])} | {_pct(t['overuse'])} |")  # fmt: skip
    low, high = breakdown.get("paper_arithmetic_mismatch", PAPER_ARITHMETIC_MISMATCH)
    lines.append(f"| paper (arXiv 2605.14038), arithmetic, Qwen3-4B/8B, Llama-3.1-8B, Llama-3.2-3B | 2,085-4,000 | "
                 f"| | | | {_pct(low)}-{_pct(high)} | | |")  # fmt: skip
    lines += ["", f"![mismatch]({plot_mismatch(tables, out / 'mismatch.png')})", "",
              "By category (first labels):", "", "| category | n | N-C | N-NC | UN-C | UN-NC | mismatch |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, t in breakdown.get("by_category", {}).items():
        lines.append(
            f"| {name} | {t['n']} | {t['N-C']} | {t['N-NC']} | {t['UN-C']} | {t['UN-NC']} | {_pct(t['mismatch'])} |"
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
                         f"{_pct(r.get('accuracy'))} (n_train={r.get('n_train')}, n_test={r.get('n_test')})")  # fmt: skip
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
        lines.append(f"P(call) > 0.5 agrees with greedy calling on {_pct(a['agree'])} of n = {a['n']} items "
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
            f"({_pct(plan['plan_parse_rate'])}); plans that say call: {plan.get('plan_says_call', '-')}.", "",
            "| plan accuracy | execution accuracy | gap (plan - execution) | execution follows the plan |",
            "|---|---|---|---|",
            f"| {_pct(plan['plan_accuracy'])} | {_pct(plan['execution_accuracy'])} | {_pct(plan['gap'])} | "
            f"{_pct(plan['follow_rate'])} of {plan['plans_parsed']} |", "",
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
    return [f"Plans that say call: {first['plan_says_call']} of {first['plans_parsed']} ({_pct(share[0])}) when the "
            f"call form is shown first, {control['plan_says_call']} of {control['plans_parsed']} ({_pct(share[1])}) "
            f"when the no-call form is: the order alone moves {_pct(abs(share[1] - share[0]))} of the plans.", ""]


def _gate_section(folder: Path, sweep: Mapping[str, Any], out: Path) -> list[str]:
    rows = sweep["rows"]
    held = "held-out items only" if sweep.get("held_out_only") else "all items"
    title = f"gate ({sweep['mode']} mode), {held}"
    return [f"## Gate: {sweep['mode']} mode", "",
            f"When2Tool's probe belief, {held}; below tau the no-tool text is prefilled, above it the "
            f"{'tool text' if sweep['mode'] == 'soft' else 'call opening'}. When2Tool reports 48% fewer calls for "
            "1.7% lower accuracy.", "", sweep_markdown(rows),
            f"![sweep]({plot_sweep(rows, out / f'{folder.name}.png', title)})", ""]  # fmt: skip


def _replay_section(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## Verbatim replay", "", "Greedy, one step per row with a known answer. Format: the answer's shape "
             "(a call where one is due, prose where none is); valid: format and content (BFCL's official checker "
             "on BFCL rows); keyword: what the lenient keyword harness would credit.", "",
             "| category | n | format right | valid | keyword | formats |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, b in [("all", summary["all"]), *summary["per_category"].items()]:
        formats = ", ".join(f"{k} {v}" for k, v in b["formats"].items())
        lines.append(f"| {name} | {b['n']} | {_pct(b['format_valid'])} | {_pct(b['valid'])} | {_pct(b['keyword'])} | "
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
        lines.append(f"| {name} | {b['n']} | {_pct(b['no_call'])} | {_pct(b['called'])} | {_pct(b['attempted'])} | "
                     f"{_pct(b['keyword'])} |")  # fmt: skip
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
            lines.append(f"| {source} | {name} | {r['n']} | {_pct(r['strict'] / n)} | {_pct(r['keyword'] / n)} | "
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
                             f"{b['min']:.3g} | {_pct(b['calls'])} |")  # fmt: skip
        a = result.get("agreement")
        if a:
            lines += ["", f"P(call) > 0.5 agrees with the greedy runs' parsed calls on {_pct(a['agree'])} of "
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


def _ladder_sections(out: Path) -> list[str]:
    """Diagnostics II: replay, near-miss, strict vs keyword, the first-token rungs, ToolSense."""
    lines: list[str] = []
    for name, section in (("replay", _replay_section), ("near_miss", _near_miss_section),
                          ("keyword", _keyword_section)):  # fmt: skip
        found = _load(out / name / "summary.json")
        title = {"replay": "Verbatim replay", "near_miss": "Near-miss negatives", "keyword": "Strict vs keyword scoring"}
        lines += section(found) if found else [f"## {title[name]}", "", "Not run.", ""]
    trajectory = out / "trajectory" / "first_token_trajectory.jsonl"
    lines += _first_token_section(_load(out / "first_token" / "results.json"),
                                  read_jsonl(trajectory) if trajectory.exists() else [], out)  # fmt: skip
    toolsense = _load(out / "toolsense" / "summary.json")
    lines += toolsense_markdown(toolsense) if toolsense else ["## Tool knowledge (ToolSense probes)", "", "Not run.", ""]
    return lines


KNOWING_DOING = ("necessity", "breakdown", "probes", "pcall", "plan")  # and gate_*: Diagnostics I
LADDER = ("replay", "near_miss", "keyword", "first_token", "trajectory", "toolsense")  # Diagnostics II


def write_report(out_dir: str | Path, title: str | None = None) -> Path:
    """``report.md`` (and its PNGs) in ``out_dir`` from the result folders there: the sections of
    Diagnostics I and of the ladder (Diagnostics II), the part no folder was written for left out
    (both when there is none)."""
    out = Path(out_dir)
    breakdown = _load(out / "breakdown" / "summary.json")
    found = [breakdown, _load(out / "replay" / "summary.json"), _load(out / "near_miss" / "summary.json")]
    model = next((f["model"]["name"] for f in found if f and f.get("model")), "?")
    lines = [f"# {title or f'Diagnostics: {out.name}'}", "", f"Model: `{model}`.", ""]
    knowing_doing = any((out / n).is_dir() for n in KNOWING_DOING) or any(out.glob("gate_*"))
    ladder = any((out / n).is_dir() for n in LADDER)
    if knowing_doing or not ladder:
        lines += _knowing_doing_sections(out, breakdown)
    if ladder or not knowing_doing:
        lines += _ladder_sections(out)
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path


def _knowing_doing_sections(out: Path, breakdown: Mapping[str, Any] | None) -> list[str]:
    """Diagnostics I's sections (each "Not run." when its folder is missing)."""
    lines: list[str] = []
    necessity = _load(out / "necessity" / "summary.json")
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
    probes = _load(out / "probes" / "results.json")
    rows = read_jsonl(out / "probes" / "items.jsonl") if (out / "probes" / "items.jsonl").exists() else []
    lines += _probe_section(probes, rows, out) if probes else ["## Probes", "", "Not run (they need an hf client).", ""]
    pcall = _load(out / "pcall" / "results.json")
    lines += _pcall_section(pcall, rows, out) if pcall else ["## P(call)", "", "Not run.", ""]
    plans = [p for p in (_load(out / "plan" / "summary.json"), _load(out / "plan_no_call_first" / "summary.json")) if p]
    for plan in plans:
        lines += _plan_section(plan)
    lines += _plan_order_note(plans)
    if not plans:
        lines += ["## Plan vs execute", "", "Not run.", ""]
    gates = sorted(p for p in out.glob("gate_*") if (p / "sweep.json").exists())
    for folder in gates:
        lines += _gate_section(folder, _load(folder / "sweep.json"), out)
    untrained = ((probes or {}).get("when2tool", {}).get("necessity") or {}).get("error")
    if not gates and untrained:
        lines += ["## Gate", "", f"Not run: When2Tool's necessity probe could not train ({untrained}), so there is "
                  "no belief to gate on.", ""]  # fmt: skip
    elif not gates:
        lines += ["## Gate", "", "Not run (it needs probe beliefs and a client that takes prefill).", ""]
    return lines
