"""BFCL-V3 at full n: KATE's whole test half (odd indices) of every single-turn category and
multi_turn_base's 100 test dialogues, per arm, on the default 0.5B model, with several entries in
flight on the one local engine (``workers``). Each arm is ``kate eval`` composed with the overrides
below into ``bench/runs/full/<arm>/seed_<s>/``; a stopped run continues with the same command and
keeps every finished record. The report is ``kate report`` over the folders, plus a progress table
(how far each arm got, its wall time, samples drawn per step) and other models' published figures
(``bench/results/full/published.json``, marked as such), in ``bench/results/full/``.

    .venv/bin/python bench/full.py                      # the whole schedule, in order (resumes)
    .venv/bin/python bench/full.py --only direct:single # one part of it
    .venv/bin/python bench/full.py --report-only

Schedule (``SCHEDULE``, in order): direct single-turn, direct multi-turn, then seed 0 of each KATE
arm (the adaptive vote, fixed width 8, the adaptive vote on multi-turn) and of the adapters, so the
first paired comparisons at full n come early; then seeds 1 and 2 of the sampled arms.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from kate.bfcl.data import SINGLE_TURN, load_entries
from kate.cli import CONF_DIR
from kate.eval.config import IN_FLIGHT, plain
from kate.eval.report_cmd import run_report
from kate.eval.results_doc import write_results_doc
from kate.eval.run_eval import run_eval
from kate.eval.run_store import load_run
from kate.io import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RUNS, RESULTS = ROOT / "bench" / "runs" / "full", ROOT / "bench" / "results" / "full"
WORKERS = IN_FLIGHT  # entries in flight (bench/results/inflight.json)
BASE = ["llm.max_parallel=8", "split=test", "limit=null"]  # max_parallel as every committed arm ran with
ADAPTERS = {"grpo_answers": "bench/runs/train/grpo_answers/final/adapter.gguf",
            "sft_answers": "bench/runs/train/sft_answers/final/adapter.gguf"}  # fmt: skip
PARTS = {"single": list(SINGLE_TURN), "multi": ["multi_turn_base"]}
# (arm name in bench/runs/full, conf/arm name, part, seeds, extra overrides)
SCHEDULE: list[tuple[str, str, str, list[int], list[str]]] = [
    ("direct", "direct", "single", [0], []),
    ("direct", "direct", "multi", [0], []),
    ("st_w8a", "st_w8a", "single", [0], []),
    ("st_w8v", "st_w8v", "single", [0], []),
    ("st_w8a", "st_w8a", "multi", [0], []),
    ("grpo_answers", "direct", "single", [0], [f"llm.lora={ADAPTERS['grpo_answers']}"]),
    ("sft_answers", "direct", "single", [0], [f"llm.lora={ADAPTERS['sft_answers']}"]),
    ("st_w8a", "st_w8a", "single", [1, 2], []),
    ("st_w8v", "st_w8v", "single", [1, 2], []),
    ("grpo_answers_st_w8v", "st_w8v", "single", [0], [f"llm.lora={ADAPTERS['grpo_answers']}"]),
]


def overrides(name: str, arm: str, part: str, seeds: list[int], extra: list[str]) -> list[str]:
    categories = ",".join(PARTS[part])
    return [f"arm={arm}", *BASE, f"categories=[{categories}]", f"seeds=[{','.join(map(str, seeds))}]",
            f"workers={WORKERS}", f"name={name}", f"out_dir={RUNS / name}", *extra]  # fmt: skip


def run_part(name: str, arm: str, part: str, seeds: list[int], extra: list[str]) -> None:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("eval", overrides=overrides(name, arm, part, seeds, extra))
    clock = WallClock(name, part, seeds)
    clock.row["kv_cells"] = cfg.llm.get("kv_cells")
    try:
        run_eval(cfg)
    finally:
        clock.stop()


def done_count(name: str, part: str, seeds: list[int]) -> int:
    want = planned(part)
    folders = [RUNS / name / f"seed_{s}" for s in seeds]
    return sum(sum(r["id"] in want for r in load_run(f)[1]) for f in folders if (f / "meta.json").exists())


class WallClock:
    """One invocation's wall time and the records it added, rewritten every ``EVERY`` seconds into
    ``wall_times.jsonl`` (one line per invocation, keyed by its start), so a run that is killed keeps
    the time it ran up to its last beat; the report sums invocations and gives records per minute."""

    EVERY = 60.0

    def __init__(self, name: str, part: str, seeds: list[int]):
        self.row = {"arm": name, "part": part, "seeds": seeds, "workers": WORKERS,
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), "seconds": 0.0,
                    "records_at_start": done_count(name, part, seeds)}  # fmt: skip
        self.row["records_at_end"] = self.row["records_at_start"]
        self.start, self.stopped = time.perf_counter(), threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.EVERY):
            self.write()

    def stop(self) -> None:
        self.stopped.set()
        self.write()

    def write(self) -> None:
        self.row["seconds"] = round(time.perf_counter() - self.start, 1)
        self.row["records_at_end"] = done_count(self.row["arm"], self.row["part"], self.row["seeds"])
        path = RESULTS / "wall_times.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        rows = [r for r in rows if r.get("started") != self.row["started"]] + [self.row]
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def planned(part: str) -> set[str]:
    return {e.id for c in PARTS[part] for e in load_entries(c, "test", None)}


def samples_drawn(records: list[dict]) -> float | None:
    """Mean samples per step: the vote's ``adaptive.drawn`` or ``n``; 1 for greedy steps."""
    counts = []
    for r in records:
        steps = [s for t in r.get("turns", []) for s in t.get("steps", [])] if "turns" in r else [r]
        for s in steps:
            vote = s.get("vote") or {}
            counts.append((vote.get("adaptive") or {}).get("drawn") or vote.get("n") or 1)
    return round(sum(counts) / len(counts), 2) if counts else None


def progress() -> list[dict]:
    rows, times = [], _times()
    for name, arm, part, seeds, extra in SCHEDULE:
        want = planned(part)
        for seed in seeds:
            folder = RUNS / name / f"seed_{seed}"
            records = [r for r in load_run(folder)[1] if r["id"] in want] if (folder / "meta.json").exists() else []
            rows.append({"arm": name, "part": part, "seed": seed, "done": len(records), "planned": len(want),
                         "samples_per_step": samples_drawn(records), **_timing(times.get((name, part, tuple(seeds)))),
                         "command": f".venv/bin/python bench/full.py --only {name}:{part}"})  # fmt: skip
    return rows


def _times() -> dict[tuple, dict]:
    """Per (arm, part, seeds) of SCHEDULE: seconds summed over invocations, records they added, records
    per minute (a row of several seeds runs them in one invocation: its time covers them all)."""
    path, out = RESULTS / "wall_times.jsonl", {}
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        t = out.setdefault((row["arm"], row["part"], tuple(row["seeds"])), {"seconds": 0.0, "records": 0})
        t["seconds"] = round(t["seconds"] + row["seconds"], 1)
        t["records"] += row.get("records_at_end", 0) - row.get("records_at_start", 0)
    for t in out.values():
        t["records_per_min"] = round(60 * t["records"] / t["seconds"], 2) if t["seconds"] and t["records"] else None
    return out


def _timing(t: dict | None) -> dict:
    t = t or {}
    return {"wall_s": t.get("seconds"), "timed_records": t.get("records"), "records_per_min": t.get("records_per_min")}


def cache_table() -> list[str]:
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
    for name in dict.fromkeys(n for n, _, part, *_ in SCHEDULE if part == "multi"):
        folder = RUNS / name / "seed_0"
        records = [r for r in load_run(folder)[1] if r["category"] == "multi_turn_base"] if folder.exists() else []
        usages = [t["usage"] for r in records for t in r.get("turns", []) if "cached_tokens" in t["usage"]]
        dialogues = sum(all("cached_tokens" in t["usage"] for t in r.get("turns", [])) for r in records)
        if usages:
            cached, prompt = sum(u["cached_tokens"] for u in usages), sum(u["prompt_tokens"] for u in usages)
            lines += ["", f"`{name}`: the prefix cache held {cached:,} of {prompt:,} prompt tokens "
                      f"({100 * cached / prompt:.1f}%) in the {dialogues} dialogues that record it."]  # fmt: skip
    return lines


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


def write_report() -> None:
    rows = progress()
    versus = against_sequential()
    if versus is not None:
        atomic_write_json(RESULTS / "in_flight_vs_sequential.json", versus)
    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_json(RESULTS / "progress.json", rows)
    arms = [n for n in dict.fromkeys(name for name, *_ in SCHEDULE) if (RUNS / n).exists()]
    if arms:
        runs = "{" + ", ".join(f"{n}: {RUNS / n}" for n in arms) + "}"
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("report", overrides=[f"runs={runs}", "title='BFCL-V3 test half at full n (0.5B)'",
                                               f"out_dir={RESULTS}"])  # fmt: skip
        run_report(cfg)
    lines = ["# Progress of the full-n benchmark", "",
             "| arm | part | seed | done / planned | samples per step | wall (s, timed invocations) | records they added | per min | continue with |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['arm']} | {r['part']} | {r['seed']} | {r['done']} / {r['planned']} | "
                     f"{r['samples_per_step'] or '-'} | {r['wall_s'] or '-'} | {r['timed_records'] or '-'} | "
                     f"{r['records_per_min'] or '-'} | `{r['command']}` |")  # fmt: skip
    lines += ["", f"Entries in flight: workers={WORKERS} on the local engine (bench/results/inflight.json). "
              "Wall times are what `bench/full.py` measured per invocation, beating every minute so a stopped run keeps "
              "its time; invocations from before that clock existed are not timed, so `records they added` says how many "
              "records the seconds cover. Other work may have shared the two cores (see the commit log)."]  # fmt: skip
    lines += ["", *cache_table()]
    lines += ["", *published_table()]
    atomic_write_text(RESULTS / "progress.md", "\n".join(lines) + "\n")
    write_results_doc(ROOT, readme=None)  # docs/results.md embeds these reports (its headline rows do not)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated arm:part pairs of SCHEDULE (default: all)")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    wanted = {tuple(x.split(":")) for x in args.only.split(",") if x}
    if not args.report_only:
        for name, arm, part, seeds, extra in SCHEDULE:
            if wanted and (name, part) not in wanted:
                continue
            run_part(name, arm, part, seeds, extra)
            write_report()
    write_report()


if __name__ == "__main__":
    main()
