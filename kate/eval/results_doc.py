"""``docs/results.md`` and the README's headline table, generated from the committed ``bench/results/``.

``kate results`` (or ``write_results_doc(root)``) reads every report (``*.md``) and results file
(``*.json``, ``*.jsonl``) under ``bench/results/``: the page gives the headline figures (each with
its n and the file it is read from), an index of every results file with the command that
regenerates it, then each report in full under a heading naming its source. New files are picked
up by the glob; nothing is dated, so the same files give the same page. ``check=true`` writes
nothing and fails when the page or the README's table (between ``README_BEGIN`` and ``README_END``)
is out of date (``tests/test_results_doc.py`` does the same).

A file's command: ``kate.eval.results_commands.command_for`` (its ``COMMANDS`` table is importable
from here too).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from kate.eval.config import help_field
from kate.eval.results_commands import COMMANDS, FOLDED, PY, RESULTS, SMALL, _folded, _load, command_for, results_files  # noqa: F401

DOC = Path("docs/results.md")
README = Path("README.md")
README_BEGIN, README_END = "<!-- results:begin -->", "<!-- results:end -->"
REGENERATE = ".venv/bin/kate results"


@dataclass
class ResultsConfig:
    """``kate results``: regenerate docs/results.md and the README's results table."""

    root: str = help_field("the repository root (bench/results/ inside it)", ".")
    out: str = help_field("the page written, relative to root", str(DOC))
    readme: Optional[str] = help_field("the README whose table between the results markers is rewritten; "
                                    "null: leave it", str(README))  # fmt: skip
    check: bool = help_field("write nothing; fail when the page or the README table is out of date", False)


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
             for a, label in (("direct_answer", "turn-end loop settings"), ("grpo_answers_direct", "GRPO adapter"))]
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
    """``both_gated`` replayed on the test half's records: the parallel categories and multiple, paired."""
    cells = _load(root, "tool_prompt_gate_test_replay.json")["per_category"]
    rows = [cells[c]["both_gated"] for c in PARALLEL if c in cells]
    k0, k1, n = (sum(r[f] for r in rows) for f in ("direct", "arm", "n"))
    m = cells["multiple"]["both_gated"]
    return Headline("The same with the call-count gate (`both_gated`), replayed from those records",
                    f"parallel categories {k0}/{n} -> {k1}/{n}; multiple {m['direct']}/{m['n']} -> {m['arm']}/{m['n']} "
                    f"({m['broken']} broken, sign test p = {m['sign_test_p']})", str(n + m["n"]),
                    ("tool_prompt_gate_test_replay.json",), readme=False)


def _main_job(root: Path) -> Headline:
    d = _load(root, "main_job_time.json")
    return Headline("`kate main` on 2 CPU cores after set-up: wall time",
                    f"{float(d['wall_s']) / 60:.1f} min, {float(d['max_rss_gib']):.1f} GiB resident",
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


# ---- files and commands -----------------------------------------------------------------------


# ---- the page ---------------------------------------------------------------------------------


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")


def _embed(text: str, rel: str) -> str:
    """A report as a section of docs/results.md: headings two levels down, relative links re-rooted."""
    folder = (Path("..") / RESULTS / rel).parent.as_posix()

    def link(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z]+:|^#|^/", target):
            return m.group(0)
        return f"{m.group(1)}{folder}/{target}{m.group(3)}"

    out, fenced = [], False
    for line in text.rstrip("\n").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            line = "##" + line
        out.append(line if fenced else _LINK.sub(link, line))
    return "\n".join(out)


def render_results_doc(root: Path) -> str:
    """docs/results.md's text for the repository at ``root``."""
    root = Path(root)
    files = results_files(root)
    reports = [f for f in files if f.endswith(".md")]
    texts = {f: (root / RESULTS / f).read_text() for f in reports}
    parts = [
        "# Results",
        "",
        (f"<!-- generated by `{REGENERATE}` from bench/results/; edit the reports or kate/eval/results_doc.py, "
         "not this page -->"),
        "",
        (f"Every figure on this page is read from a committed file under `bench/results/`, named beside it. "
         f"Regenerate the page (no model; a test fails when it is out of date): `{REGENERATE}`. Each results "
         "file's own command reruns or re-reports what it measured."),
        "",
        "## Headline figures",
        "",
        headline_table(root, "../", readme_only=False),
        "",
        "## Reports",
        "",
    ]
    for rel in reports:
        title = f"bench/results/{rel}"
        parts.append(f"- [`{title}`](#{_anchor(title)}): `{command_for(root, rel, texts[rel])}`")
    parts += ["", "## Results files", "", "| file | regenerated by |", "|---|---|"]
    seen_folders: set[str] = set()
    for rel in files:
        if rel.endswith(".md"):
            continue
        folder = _folded(rel)
        if folder is not None:
            if folder in seen_folders:
                continue
            seen_folders.add(folder)
            count = sum(1 for f in files if f.startswith(folder))
            parts.append(f"| [`{folder}`](../{RESULTS.as_posix()}/{folder}) ({count} files) | "
                         f"`{command_for(root, rel)}` |")  # fmt: skip
            continue
        parts.append(f"| [`{rel}`](../{RESULTS.as_posix()}/{rel}) | `{command_for(root, rel)}` |")
    for rel in reports:
        title = f"bench/results/{rel}"
        parts += ["", f"## `{title}`", "",
                  f"Source: [`{title}`](../{title}). Regenerate: `{command_for(root, rel, texts[rel])}`.", "",
                  _embed(texts[rel], rel)]  # fmt: skip
    return "\n".join(parts) + "\n"


def render_readme(readme: str, root: Path) -> str:
    """The README with its headline table (between the markers) regenerated; unchanged without markers."""
    begin, end = readme.find(README_BEGIN), readme.find(README_END)
    if begin < 0 or end < begin:
        return readme
    table = headline_table(Path(root), "", readme_only=True)
    return readme[: begin + len(README_BEGIN)] + "\n" + table + "\n" + readme[end:]


def write_results_doc(root: Path, out: Path | str = DOC, readme: Path | str | None = README,
                      check: bool = False) -> str:  # fmt: skip
    """Write docs/results.md (and the README's table); with ``check``, write nothing and raise
    ``SystemExit`` naming the files that are out of date. Returns the page's text."""
    root = Path(root)
    wanted = {root / out: render_results_doc(root)}
    if readme is not None and (root / readme).is_file():
        wanted[root / readme] = render_readme((root / readme).read_text(), root)
    stale = [p for p, text in wanted.items() if not p.is_file() or p.read_text() != text]
    if check:
        if stale:
            names = ", ".join(p.relative_to(root).as_posix() for p in stale)
            raise SystemExit(f"out of date: {names}; run `{REGENERATE}`")
    else:
        for path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(wanted[path])
    return wanted[root / out]


def run_results(cfg: Any) -> str:
    """``kate results``' plain function (the one tests call)."""
    text = write_results_doc(Path(cfg.root), cfg.out, cfg.readme, check=bool(cfg.check))
    print(f"{'up to date' if cfg.check else 'wrote'}: {cfg.out}" + (f", {cfg.readme}" if cfg.readme else ""))
    return text
