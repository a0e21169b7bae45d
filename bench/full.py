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
first paired comparisons at full n come early; then seeds 1 and 2 of the sampled arms. The ``adopt``
arm (the adapter ``bench/train_cpu.py --stages adopt_choose`` chose into bench/runs/train/adopt.json)
runs right after direct once that file names one, its dialogues at the end; until then it is skipped. Before the
adaptive arm, three selection runs on 20 training-half entries per single-turn category (``select``):
``bench/adaptive_select.py`` chooses the adaptive vote's settings from them by a rule fixed in advance
(kate.eval.adaptive_selection) into ``adaptive_selection.json``; ``st_w8a`` waits for that file.
After st_w8a's single-turn part, 30 training-half dialogues greedy and with the adaptive vote
(``select_multi``): the vote must not lose turns there before it runs on the test half's dialogues.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

from hydra import compose, initialize_config_dir

from kate.bfcl.data import SINGLE_TURN, load_entries
from kate.cli import CONF_DIR
from kate.eval.config import IN_FLIGHT
from kate.eval.report_cmd import run_report
from kate.eval.results_doc import write_results_doc
from kate.eval.run_eval import run_eval
from kate.eval.run_store import load_run
from kate.io import atomic_write_json, atomic_write_text

from full_tables import (  # bench/, beside it
    RESULTS, ROOT, RUNS, against_sequential, cache_table, dialogue_check, dialogue_turns, published_table)
WORKERS = IN_FLIGHT  # entries in flight (bench/results/inflight.json)
BASE = ["llm.max_parallel=8"]  # max_parallel as every committed arm ran with
ADAPTERS = {"grpo_answers": "bench/runs/train/grpo_answers/final/adapter.gguf",
            "sft_answers": "bench/runs/train/sft_answers/final/adapter.gguf"}  # fmt: skip
# part -> (categories, split, entries per category): the test half at full n, and the selection set on
# the training half where the adaptive vote's settings are chosen (never on the test half)
PARTS = {"single": (list(SINGLE_TURN), "test", None), "multi": (["multi_turn_base"], "test", None),
         "select": (list(SINGLE_TURN), "train", 20),
         "select_multi": (["multi_turn_base"], "train", 30)}  # fmt: skip
# arms whose single-turn entries run some categories first (the same entries, in another order): where the tool
# forms differ, the parallel categories (and multiple, which the gate is there to protect)
PARALLEL = ("parallel", "parallel_multiple", "live_parallel", "live_parallel_multiple")
FIRST = {"both": PARALLEL, "both_gated": (*PARALLEL, "multiple"), "grpo_answers": ("irrelevance", "live_irrelevance"),
         "grpo_gated": ("irrelevance", "live_irrelevance"), "grpo_gated_forms": (*PARALLEL, "multiple"),
         "default_model": ("irrelevance", "live_irrelevance")}
ADOPTED = ROOT / "bench" / "runs" / "train" / "adopt.json"  # the adapter a user adopts (train_cpu.py adopt_choose)
SELECTION = RESULTS / "adaptive_selection.json"  # the adaptive vote's chosen overrides (bench/adaptive_select.py)
# arms that run with SELECTION's overrides, and wait until it exists; the selection set is single-turn, and
# st_w8a's multi-turn part inherits the single-turn choice, checked first on 30 training-half dialogues
# against greedy (select_multi: the adaptive vote must not lose turns there) before the test half's
CHOSEN = ("st_w8a", "select_st_w8a_multi")
DIALOGUE_CHECK = ("select_direct_multi", "select_st_w8a_multi")  # greedy, then the adaptive vote (select_multi)
# (arm name in bench/runs/full, conf/arm name, part, seeds, extra overrides)
SCHEDULE: list[tuple[str, str, str, list[int], list[str]]] = [
    ("direct", "direct", "single", [0], []),
    ("direct", "direct", "multi", [0], []),
    # the adopted adapter (its LoRA from ADOPTED) as soon as it exists: paired with direct per category
    ("adopt", "direct", "single", [0], []),
    # both tool forms, the Python reply where it makes several calls (llm.tool_prompt=both), chosen on the
    # training half (bench/tool_prompt.py); its parallel categories first, where the native form scores 0
    ("both", "both", "single", [0], []),
    # both with the call-count gate on the Python reply (chosen on the training half over both; its test-half
    # replay from both's and direct's records: bench/results/tool_prompt_gate_test_replay.json)
    ("both_gated", "both_gated", "single", [0], []),
    # the selection runs: fixed width 8 (replays every first/step rule), the greedy gate that never
    # commits (each step keeps its greedy confidence: every threshold replays), a cooler first draw
    ("select_st_w8v", "st_w8v", "select", [0], []),
    ("select_st_w8a_gate", "st_w8a", "select", [0], ["sampling.gate_logprob=1.0"]),
    ("select_st_w8a_t05", "st_w8a", "select", [0], ["sampling.first_temperature=0.5"]),
    ("st_w8a", "st_w8a", "single", [0], []),
    ("select_direct_multi", "direct", "select_multi", [0], []),
    ("select_st_w8a_multi", "st_w8a", "select_multi", [0], []),
    ("st_w8v", "st_w8v", "single", [0], []),
    ("st_w8a", "st_w8a", "multi", [0], []),
    ("grpo_answers", "direct", "single", [0], [f"llm.lora={ADAPTERS['grpo_answers']}"]),
    # that adapter with the base model's decision not to call kept (conf/arm/grpo_gated.yaml; checked on the
    # training half: bench/base_gate_replay.py); its irrelevance categories first, where the adapter lost
    ("grpo_gated", "grpo_gated", "single", [0], []),
    # grpo_gated with the base also asked in the Python form where
    # several calls are expected (chosen on the training half: bench/base_gate_replay.py); parallel categories first
    ("grpo_gated_forms", "grpo_gated_forms", "single", [0], []),
    # kate's default model (conf/llm/default.yaml): grpo_gated_forms with the tool-relevance gate
    # (bench/tool_relevance.py); the irrelevance categories first, where the gate offers no tool on some entries
    ("default_model", "default_model", "single", [0], []),
    ("sft_answers", "direct", "single", [0], [f"llm.lora={ADAPTERS['sft_answers']}"]),
    ("st_w8a", "st_w8a", "single", [1, 2], []),
    ("st_w8v", "st_w8v", "single", [1, 2], []),
    ("grpo_answers_st_w8v", "st_w8v", "single", [0], [f"llm.lora={ADAPTERS['grpo_answers']}"]),
    ("adopt", "direct", "multi", [0], []),
]


def overrides(name: str, arm: str, part: str, seeds: list[int], extra: list[str]) -> list[str]:
    categories, split, limit = PARTS[part]
    if name in FIRST:  # the same entries, FIRST's categories first
        categories = sorted(categories, key=lambda c: c not in FIRST[name])
    where = [f"categories=[{','.join(categories)}]", f"split={split}", f"limit={'null' if limit is None else limit}"]
    return [f"arm={arm}", *BASE, *where, f"seeds=[{','.join(map(str, seeds))}]", f"workers={WORKERS}",
            f"name={name}", f"out_dir={RUNS / name}", *chosen(name), *adopted(name), *extra]  # fmt: skip


def adopted(name: str) -> list[str]:
    """The ``adopt`` arm's LoRA: ADOPTED's chosen adapter (none chosen, or no file yet: it waits)."""
    if name != "adopt":
        return []
    adapter = json.loads(ADOPTED.read_text())["adapter"] if ADOPTED.exists() else None
    if adapter is None:
        raise FileNotFoundError(f"{ADOPTED}: no adapter chosen yet (bench/train_cpu.py --stages adopt_choose)")
    if not (ROOT / adapter).exists():
        raise FileNotFoundError(f"{ROOT / adapter}: the adapter {ADOPTED} names is missing")
    return [f"llm.lora={adapter}"]  # relative to the repository (full.py runs there), as ADAPTERS


def chosen(name: str) -> list[str]:
    """The overrides chosen on the training half for an arm of CHOSEN (SELECTION's ``overrides``)."""
    if name not in CHOSEN:
        return []
    if not SELECTION.exists():
        raise FileNotFoundError(f"{SELECTION}: {name} runs with the settings chosen on the training half; "
                                "run the select_* parts, then bench/adaptive_select.py")  # fmt: skip
    return list(json.loads(SELECTION.read_text())["overrides"])


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
    categories, split, limit = PARTS[part]
    return {e.id for c in categories for e in load_entries(c, split, limit)}


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


def write_report() -> None:
    rows = progress()
    versus = against_sequential()
    if versus is not None:
        atomic_write_json(RESULTS / "in_flight_vs_sequential.json", versus)
    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_json(RESULTS / "progress.json", rows)
    # the test-half arms (the selection runs are training-half records: never in this report)
    test_half = dict.fromkeys(name for name, _, part, *_ in SCHEDULE if not part.startswith("select"))
    arms = [n for n in test_half if (RUNS / n).exists()]
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
    lines += ["", *cache_table(list(dict.fromkeys(n for n, _, part, *_ in SCHEDULE if part == "multi")))]
    lines += ["", *dialogue_check(*DIALOGUE_CHECK)]
    lines += ["", *published_table()]
    atomic_write_text(RESULTS / "progress.md", "\n".join(lines) + "\n")
    write_results_doc(ROOT, readme=None)  # docs/results.md embeds these reports (its headline rows do not)


def choose_when_selected() -> None:
    """Once every selection run is complete, apply the rule fixed in advance (bench/adaptive_select.py)."""
    selection = [(name, seeds) for name, _, part, seeds, _ in SCHEDULE if part == "select"]
    if SELECTION.exists() or any(done_count(name, "select", seeds) < len(planned("select")) for name, seeds in selection):
        return
    subprocess.run([sys.executable, str(ROOT / "bench" / "adaptive_select.py")], cwd=ROOT, check=True)


def dialogues_checked() -> bool:
    """The adaptive vote's test-half dialogues wait for its training-half check against greedy
    (select_multi complete) and run only if that interval does not lie below zero."""
    if any(done_count(n, "select_multi", [0]) < len(planned("select_multi")) for n in DIALOGUE_CHECK):
        print("skipped st_w8a:multi: it waits for the training-half dialogue check (select_multi)")
        return False
    turns = dialogue_turns(*DIALOGUE_CHECK)
    if turns["ci95"][1] < 0:
        print(f"skipped st_w8a:multi: the adaptive vote lost turns against greedy on the training half ({turns})")
        return False
    return True


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
            if name in CHOSEN and not SELECTION.exists():
                print(f"skipped {name}:{part}: it waits for {SELECTION.name} (its settings, chosen on the training half)")
                continue
            if (name, part) == ("st_w8a", "multi") and not dialogues_checked():
                continue
            if name == "adopt" and not (ADOPTED.exists() and json.loads(ADOPTED.read_text())["adapter"]):
                print(f"skipped adopt:{part}: it waits for an adapter chosen in {ADOPTED} (bench/train_cpu.py)")
                continue
            run_part(name, arm, part, seeds, extra)
            if part == "select":
                choose_when_selected()
            write_report()
    write_report()


if __name__ == "__main__":
    main()
