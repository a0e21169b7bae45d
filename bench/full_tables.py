"""The tables of bench/full.py's progress report that read more than its own schedule: the multi-turn
pace and cache share, the full run against the earlier sequential direct records, and other models'
published figures (bench/results/full/published.json). Imported by bench/full.py (its sibling)."""

from __future__ import annotations

import json
from pathlib import Path

from kate.eval.run_store import load_run

ROOT = Path(__file__).resolve().parents[1]
RUNS, RESULTS = ROOT / "bench" / "runs" / "full", ROOT / "bench" / "results" / "full"


def cache_table(multi_arms: list[str]) -> list[str]:
    """Multi-turn pace per invocation and the engine's cache size, and the share of prompt tokens the
    prefix cache held in the dialogues that record it (Usage.cached_tokens)."""
    path = RESULTS / "wall_times.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    lines = ["## The cache (multi_turn_base)", "", "| arm | invocation started | kv_cells | wall (s) | dialogues "
             "added | s per dialogue |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in (r for r in rows if r["part"] == "multi" and r.get("records_at_end", 0) > r.get("records_at_start", 0)):
        added = r["records_at_end"] - r["records_at_start"]
        cells = r.get("kv_cells") or "32768 (n_ctx; before kv_cells)"
        lines.append(f"| {r['arm']} | {r['started']} | {cells} | {r['seconds']} | {added} | {r['seconds'] / added:.0f} |")
    for name in multi_arms:
        folder = RUNS / name / "seed_0"
        records = [r for r in load_run(folder)[1] if r["category"] == "multi_turn_base"] if folder.exists() else []
        usages = [t["usage"] for r in records for t in r.get("turns", []) if "cached_tokens" in t["usage"]]
        dialogues = sum(all("cached_tokens" in t["usage"] for t in r.get("turns", [])) for r in records)
        if usages:
            cached, prompt = sum(u["cached_tokens"] for u in usages), sum(u["prompt_tokens"] for u in usages)
            lines += ["", f"`{name}`: the prefix cache held {cached:,} of {prompt:,} prompt tokens "
                      f"({100 * cached / prompt:.1f}%) in the {dialogues} dialogues that record it."]  # fmt: skip
    return lines


def dialogue_turns(base: str, other: str) -> dict | None:
    """Two arms' dialogues (seed 0) paired dialogue by dialogue: the turns-passed difference (other
    minus base), or None before both have a dialogue."""
    from kate.eval.report import paired_turns  # noqa: PLC0415

    folders = [RUNS / name / "seed_0" for name in (base, other)]
    if not all((f / "meta.json").exists() for f in folders):
        return None
    a, b = ({r["id"]: r for r in load_run(f)[1]} for f in folders)
    return paired_turns([(a[i], b[i]) for i in sorted(set(a) & set(b))]).get("multi_turn_base")


def dialogue_check(base: str, other: str) -> list[str]:
    """The check that the adaptive vote loses no turns against greedy on training-half dialogues
    before it runs on the test half's (bench/full.py runs st_w8a:multi only if it holds)."""
    turns = dialogue_turns(base, other)
    if not turns:
        return []
    lo, hi = (100 * x for x in turns["ci95"])
    return ["## Dialogues of the training half: the adaptive vote against greedy", "",
            f"`{other}` minus `{base}`, turns-passed fraction dialogue by dialogue over {turns['n']} training-half "
            f"dialogues: {100 * turns['mean_diff']:+.1f} points [{lo:+.1f}, {hi:+.1f}] (better in {turns['better']}, "
            f"worse in {turns['worse']}). The adaptive vote runs on the test half's dialogues only if this interval "
            "does not lie below zero."]  # fmt: skip


SEQUENTIAL = ROOT / "bench" / "runs" / "direct" / "seed_0"  # the committed direct arm, one entry at a time


def step_texts(record: dict) -> list:
    if "outputs" in record:
        return list(record["outputs"] or [])
    return [s.get("text") for t in record.get("turns", []) for s in t.get("steps", [])]


def against_sequential() -> dict | None:
    """The full run's direct records (entries in flight) against the committed sequential direct
    records of the same entries and config: outputs that differ, entries fixed and broken."""
    folder = RUNS / "direct" / "seed_0"
    if not (folder / "meta.json").exists() or not (SEQUENTIAL / "meta.json").exists():
        return None
    meta, records = load_run(folder)
    old_meta, old = load_run(SEQUENTIAL)
    by_id = {r["id"]: r for r in old}
    pairs = [(by_id[r["id"]], r) for r in records if r["id"] in by_id]
    return {
        "same_fingerprint": meta.get("fingerprint") == old_meta.get("fingerprint"),
        "entries": len(pairs),
        "outputs_differ": sum(step_texts(a) != step_texts(b) for a, b in pairs),
        "right_sequential": sum(bool(a["valid"]) for a, _ in pairs),
        "right_in_flight": sum(bool(b["valid"]) for _, b in pairs),
        "fixed": sorted(b["id"] for a, b in pairs if b["valid"] and not a["valid"]),
        "broken": sorted(b["id"] for a, b in pairs if a["valid"] and not b["valid"]),
        "runtime_sequential": old_meta.get("runtime"), "runtime_in_flight": meta.get("runtime"),
        "note": "the sequential records were made in an earlier session, possibly on another build of llama.cpp; "
                "bench/results/inflight.json compares the two on one machine and one build",
    }  # fmt: skip


# BFCL-V3 leaderboard column -> the categories kate measures it by (their unweighted mean, as BFCL's
# own summary computes it)
PUBLISHED_COLUMNS = {
    "non_live_simple_ast": ["simple_python", "simple_java", "simple_javascript"],
    "non_live_multiple_ast": ["multiple"], "non_live_parallel_ast": ["parallel"],
    "non_live_parallel_multiple_ast": ["parallel_multiple"], "live_simple_ast": ["live_simple"],
    "live_multiple_ast": ["live_multiple"], "live_parallel_ast": ["live_parallel"],
    "live_parallel_multiple_ast": ["live_parallel_multiple"], "irrelevance_non_live": ["irrelevance"],
    "live_irrelevance": ["live_irrelevance"], "relevance_live": ["live_relevance"],
    "multi_turn_base": ["multi_turn_base"],
}  # fmt: skip
PUBLISHED_CHECKPOINT = "2025/04/25"  # one leaderboard checkpoint, so the columns compare


def published_table(arm: str = "direct") -> list[str]:
    """kate's ``arm`` per leaderboard column, beside other models' published figures of one checkpoint."""
    published = json.loads((RESULTS / "published.json").read_text())
    models = [m for m in published["models"] if PUBLISHED_CHECKPOINT in m.get("source_date", "")]
    summary = RESULTS / "summary.json"
    ours = json.loads(summary.read_text()).get(arm, {}).get("per_category", {}) if summary.exists() else {}
    head = ["BFCL-V3 column", f"kate `{arm}` here (test half, n)"] + [m["leaderboard_name"] for m in models]
    lines = [f"## Other models' published figures (BFCL-V3 leaderboard {PUBLISHED_CHECKPOINT}; not measured by kate)",
             "", f"Source and quotes: `bench/results/full/published.json`. kate's column is this benchmark's "
             "default model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, prompted by kate) on KATE's test half, not "
             "the leaderboard's full categories; a cell is the unweighted mean of the categories named, with "
             "their summed n. multi_turn_base counts dialogues solved.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for column, categories in PUBLISHED_COLUMNS.items():
        got = [ours[c] for c in categories if c in ours]
        mine = "-"
        if len(got) == len(categories):
            mean = 100 * sum(g["accuracy"] for g in got) / len(got)
            mine = f"{mean:.1f} (n={sum(g['n'] for g in got)}; {'+'.join(categories)})"
        cells = [f"{m['figures'][column]:.2f}" if column in m["figures"] else "-" for m in models]
        lines.append(f"| {column} | {mine} | " + " | ".join(cells) + " |")
    return lines
