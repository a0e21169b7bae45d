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

from pathlib import Path

from kate.diagnose.report_format import load_result
from kate.diagnose.report_knowing_doing import knowing_doing_sections
from kate.diagnose.report_ladder import ladder_sections
from kate.diagnose.report_plots import (  # noqa: F401  (importable from here, as before)
    plot_alluvial,
    plot_density,
    plot_heatmaps,
    plot_mismatch,
    plot_sweep,
)
from kate.io import atomic_write_text


KNOWING_DOING = ("necessity", "breakdown", "probes", "pcall", "plan")  # and gate_*: Diagnostics I
LADDER = ("replay", "near_miss", "keyword", "first_token", "trajectory", "toolsense")  # Diagnostics II


def write_report(out_dir: str | Path, title: str | None = None) -> Path:
    """``report.md`` (and its PNGs) in ``out_dir`` from the result folders there: the sections of
    Diagnostics I and of the ladder (Diagnostics II), the part no folder was written for left out
    (both when there is none)."""
    out = Path(out_dir)
    breakdown = load_result(out / "breakdown" / "summary.json")
    found = [breakdown, load_result(out / "replay" / "summary.json"), load_result(out / "near_miss" / "summary.json")]
    model = next((f["model"]["name"] for f in found if f and f.get("model")), "?")
    lines = [f"# {title or f'Diagnostics: {out.name}'}", "", f"Model: `{model}`.", ""]
    knowing_doing = any((out / n).is_dir() for n in KNOWING_DOING) or any(out.glob("gate_*"))
    ladder = any((out / n).is_dir() for n in LADDER)
    if knowing_doing or not ladder:
        lines += knowing_doing_sections(out, breakdown)
    if ladder or not knowing_doing:
        lines += ladder_sections(out)
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path

