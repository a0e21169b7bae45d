"""Which command regenerates each results file under ``bench/results/`` (``command_for``), and the
files listed. First found: the file's own ``"command"`` field (JSON), the first ``code`` after
"Regenerate" in a report, the ``COMMANDS`` table below, ``bench/<stem>.py`` when that script exists."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

RESULTS = Path("bench/results")
PY = ".venv/bin/python"
SMALL = "qwen2.5-coder-1.5b-instruct-q4_k_m"


# results file (glob, relative to bench/results/) -> the command that regenerates it; first match wins
COMMANDS: list[tuple[str, str]] = [
    ("bfcl_*", f"{PY} bench/bfcl_report.py  (records: bench/bfcl.py)"),
    ("models/*/bfcl_*", f"{PY} bench/bfcl_report.py  (records: bench/bfcl.py --model <name>)"),
    ("own_tools_baseline.json", f"{PY} bench/own_tools.py --arms <arms>"),
    ("own_tools_test.json", f"{PY} bench/own_tools.py --split test --arms <arms>"),
    ("models/*/own_tools_*.json", f"{PY} bench/own_tools.py --model <name> --split test --arms direct_answer"),
    ("failure_table.*", f"{PY} bench/failure_table.py --report-only"),
    ("models/*/failure_table.*", f"{PY} bench/failure_table.py --report-only --model <name>"),
    ("train_cpu*", f"{PY} bench/train_cpu.py --stages report"),
    ("strict_vs_keyword.*", f"{PY} bench/strict_vs_keyword.py"),
    ("main_job_time_history.jsonl", f"{PY} bench/main_job_time.py  (appends a row per run)"),
    ("copied_count_*.json", f"{PY} bench/copied_count.py --arm <arm>"),
    ("vote_choices_*.json", f"{PY} bench/vote_choices.py --arm <arm>"),
    ("models/*/vote_choices_*.json", f"{PY} bench/vote_choices.py --model <name> --arm <arm>"),
    ("turn_end_*", f"{PY} bench/turn_end_presentations.py <variants>"),
    ("diagnose/arithmetic/*", f"{PY} bench/diagnose_i.py --sets arithmetic"),
    ("diagnose/bfcl/*", f"{PY} bench/diagnose_i.py --sets bfcl"),
    ("diagnose/ladder/*", f"{PY} bench/diagnose_ii.py"),
    ("diagnose/necessity_cache/*", f"{PY} bench/diagnose_i.py --only necessity  (a cache)"),
    ("tool_prompt_train/*", f"{PY} bench/tool_prompt.py --report-only  (records: bench/tool_prompt.py)"),
    ("train_half/*", f"{PY} bench/train_half_arms.py --report-only --arms <arms>  (records: the same without it)"),
    ("train_half_arms.json", f"{PY} bench/train_half_arms.py --arms <arm>  (each arm's own: its `command`)"),
    ("verifier/*", f"{PY} bench/verifier.py --report-only  (the run: bench/verifier.py)"),
    ("full/published.json", "collected by hand from the published leaderboards (its `source` fields)"),
    ("full/*", f"{PY} bench/full.py"),
]
# Shown in the index but not one row per file (hundreds of per-diagnostic files): one row per folder.
FOLDED = ("diagnose/*/*/*",)


def _load(root: Path, rel: str):
    return json.loads((root / RESULTS / rel).read_text())


def results_files(root: Path) -> list[str]:
    """Every results file under bench/results/, relative to it, sorted (figures: *.png are not listed)."""
    base = root / RESULTS
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*")
                  if p.is_file() and p.suffix in {".md", ".json", ".jsonl"})  # fmt: skip


def _json_command(root: Path, rel: str) -> str | None:
    if not rel.endswith(".json"):
        return None
    try:
        data = _load(root, rel)
    except (OSError, ValueError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    return command if isinstance(command, str) and command.strip() else None


def _report_command(text: str) -> str | None:
    m = re.search(r"Regenerate[^`\n]*`([^`]+)`", text)
    return m.group(1) if m else None


def command_for(root: Path, rel: str, text: str | None = None) -> str:
    """The command that regenerates one results file (see the module docstring for the order)."""
    found = _json_command(root, rel) or (_report_command(text) if text else None)
    if found:
        return found
    for pattern, command in COMMANDS:
        if fnmatch.fnmatch(rel, pattern):
            return command
    stem = Path(rel).stem
    if (root / "bench" / f"{stem}.py").is_file():
        return f"{PY} bench/{stem}.py"
    return "not recorded"


def _folded(rel: str) -> str | None:
    for pattern in FOLDED:
        if fnmatch.fnmatch(rel, pattern):
            return "/".join(rel.split("/")[: pattern.count("/")]) + "/"
    return None


