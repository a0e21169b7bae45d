"""The headline figures of ``docs/results.md`` and the README's results table: one function per row,
each reading committed files under ``bench/results/`` (``headlines``: a missing or reshaped file drops its
row, never the page)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kate.eval.results_commands import RESULTS, SMALL, _load


# ---- reading ----------------------------------------------------------------------------------


def _single_turn(summary: dict) -> tuple[int, int]:
    """(correct, n) over an arm summary's single-turn categories."""
    cells = [v for k, v in summary["per_category"].items() if not k.startswith("multi_turn")]
    return sum(int(c["correct"]) for c in cells), sum(int(c["n"]) for c in cells)


def _pct(k: float, n: float) -> str:
    return f"{100 * k / n:.1f}%" if n else "-"


def _link(rel: str, prefix: str) -> str:
    return f"[{Path(rel).name}]({prefix}{RESULTS.as_posix()}/{rel})"


@dataclass(frozen=True)
class Headline:
    what: str
    result: str
    n: str
    sources: tuple[str, ...]  # relative to bench/results/
    readme: bool = True


def _bfcl_single(root: Path, folder: str, model: str, base: str, arm: str, label: str) -> Headline:
    (k0, n0), (k1, n1) = (_single_turn(_load(root, f"{folder}bfcl_{a}.json")) for a in (base, arm))
    n = str(n0) if n0 == n1 else f"{n0} / {n1}"
    return Headline(f"BFCL-V3 single-turn, test halves, {model}: right calls",
                    f"{base} {_pct(k0, n0)} -> {label} (`{arm}`) {_pct(k1, n1)}", n,
                    (f"{folder}bfcl_{base}.json", f"{folder}bfcl_{arm}.json"))  # fmt: skip


def _bfcl_multi(root: Path) -> Headline:
    cells = {a: _load(root, f"bfcl_{a}.json")["per_category"]["multi_turn_base"] for a in ("direct", "st_w8")}
    d, k = cells["direct"], cells["st_w8"]
    n = str(d["n"]) if d["n"] == k["n"] else f"{d['n']} / {k['n']}"
    return Headline("BFCL-V3 multi_turn_base, 0.5B: turns passed before the first failure",
                    f"direct {100 * d['turn_fraction']:.1f}% -> KATE (`st_w8`) {100 * k['turn_fraction']:.1f}% "
                    f"(dialogues solved: {d['correct']} and {k['correct']})", n,
                    ("bfcl_direct.json", "bfcl_st_w8.json"))  # fmt: skip


def _own_tools(root: Path) -> Headline:
    arms = _load(root, "own_tools_test.json")["arms"]
    parts = [f"{label} {round(arms[a]['answer_ok_share'] * arms[a]['n'])}/{arms[a]['n']}"
             for a, label in (("direct_answer", "turn-end loop settings"), ("grpo_answers_direct", "GRPO adapter"),
                              ("default_answer", "the default model")) if a in arms]
    return Headline("Own tools (5 plain Python functions), test half, 0.5B: right final answers",
                    ", ".join(parts), str(arms["direct_answer"]["n"]), ("own_tools_test.json",))


def _strict_keyword(root: Path) -> Headline:
    cell = _load(root, "strict_vs_keyword.json")["arms"]["direct"]["all"]
    return Headline("Strict (BFCL checker) vs keyword scoring of the same 0.5B outputs",
                    f"strict {_pct(cell['strict'], cell['n'])}, keyword {_pct(cell['keyword'], cell['n'])}",
                    str(cell["n"]), ("strict_vs_keyword.json",), readme=False)


PARALLEL = ("parallel", "parallel_multiple", "live_parallel", "live_parallel_multiple")


def _tool_prompt(root: Path) -> Headline:
    """The full test half's parallel categories: direct (native tool prompt) against ``both``."""
    summary = _load(root, "full/summary.json")
    cells = {arm: [summary[arm]["per_category"][c] for c in PARALLEL if c in summary[arm]["per_category"]]
             for arm in ("direct", "both")}  # fmt: skip
    (k0, n0), (k1, n1) = ((sum(c["correct"] for c in v), sum(c["n"] for c in v)) for v in cells.values())
    multiple = [summary[arm]["per_category"].get("multiple") for arm in ("direct", "both")]
    cost = (f"; its cost, multiple: {_pct(multiple[0]['correct'], multiple[0]['n'])} -> "
            f"{_pct(multiple[1]['correct'], multiple[1]['n'])} (n = {multiple[1]['n']})") if all(multiple) else ""
    return Headline("BFCL-V3 parallel categories, full test half, 0.5B: right calls",
                    f"native tool prompt (`direct`) {k0}/{n0} -> both tool forms (`both`) {k1}/{n1}"
                    + (f" ({n1} of {n0} run so far)" if n1 < n0 else "") + cost,
                    f"{n0} / {n1}", ("full/summary.json", "full/report.md"))


def _tool_prompt_gate(root: Path) -> Headline:
    """``both_gated`` on the full test half once its run has reached multiple and the parallel categories;
    before that, its replay from ``both``'s and ``direct``'s records (paired counts)."""
    try:
        return _tool_prompt_gate_run(root)
    except (FileNotFoundError, KeyError):
        pass
    cells = _load(root, "tool_prompt_gate_test_replay.json")["per_category"]
    rows = [cells[c]["both_gated"] for c in PARALLEL if c in cells]
    k0, k1, n = (sum(r[f] for r in rows) for f in ("direct", "arm", "n"))
    m = cells["multiple"]["both_gated"]
    return Headline("The same with the call-count gate (`both_gated`), replayed from those records",
                    f"parallel categories {k0}/{n} -> {k1}/{n}; multiple {m['direct']}/{m['n']} -> {m['arm']}/{m['n']} "
                    f"({m['broken']} broken, sign test p = {m['sign_test_p']})", str(n + m["n"]),
                    ("tool_prompt_gate_test_replay.json",), readme=False)


def _tool_prompt_gate_run(root: Path) -> Headline:
    per = _load(root, "full/summary.json")["both_gated"]["per_category"]
    ran = [per[c] for c in PARALLEL if c in per]
    if not ran or "multiple" not in per:
        raise KeyError("both_gated has not reached multiple and the parallel categories")
    direct = _load(root, "full/summary.json")["direct"]["per_category"]
    k0 = sum(direct[c]["correct"] for c in PARALLEL if c in per)
    k1, n = sum(c["correct"] for c in ran), sum(c["n"] for c in ran)
    m0, m1 = direct["multiple"], per["multiple"]
    return Headline("The same with the call-count gate (`both_gated`), full test half",
                    f"parallel categories {k0}/{n} -> {k1}/{n}; multiple {m0['correct']}/{m0['n']} -> "
                    f"{m1['correct']}/{m1['n']}", str(n + m1["n"]), ("full/summary.json", "full/report.md"),
                    readme=False)


def _main_job(root: Path) -> Headline:
    d = _load(root, "main_job_time.json")
    return Headline("`kate main` on 2 CPU cores after set-up: wall time",
                    f"{float(d['wall_s']) / 60:.1f} min, {float(d['max_rss_gib']):.1f} GiB resident"
                    + (f" ({d['cpu']})" if d.get("cpu") else ""),
                    f"{d['entries']} entries", ("main_job_time.json",))


HEADLINES: list[Callable[[Path], Headline]] = [
    lambda r: _bfcl_single(r, "", "0.5B", "direct", "st_calls_w8f", "KATE"),
    lambda r: _bfcl_single(r, f"models/{SMALL}/", "1.5B", "direct", "st_calls_w8v", "KATE"),
    _bfcl_multi,
    _own_tools,
    _tool_prompt,
    _tool_prompt_gate,
    _strict_keyword,
    _main_job,
]


def headlines(root: Path) -> list[Headline]:
    """Every headline whose files are there (a missing or reshaped file drops its row, never the page)."""
    rows = []
    for make in HEADLINES:
        try:
            rows.append(make(root))
        except (FileNotFoundError, KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
    return rows


def headline_table(root: Path, prefix: str, readme_only: bool = False) -> str:
    """The headline rows as a markdown table; links start with ``prefix`` (the way to the root)."""
    rows = ["| result | figure | n | from |", "|---|---|---|---|"]
    for h in headlines(root):
        if h.readme or not readme_only:
            rows.append(f"| {h.what} | {h.result} | {h.n} | {', '.join(_link(s, prefix) for s in h.sources)} |")
    return "\n".join(rows)
